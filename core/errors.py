"""The one application error: a stable code, a message for people, an HTTP status; and the
exception whose message is written for people."""

import math


class SaidToPeople(Exception):
    """An exception whose message is written for people: a failure it causes is shown to
    people as it is, where any other is summed up."""


class ApplicationError(Exception):
    """A request the domain refuses: a stable code, a message for people, an HTTP status, and
    for a refusal that passes (429), after how many seconds to try again (``retry_after``, in
    the body and as the Retry-After header)."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int = 400,
        extra: dict | None = None,
        retry_after: int | None = None,
    ):
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.extra = extra or {}
        self.retry_after = retry_after
        if retry_after is not None:
            self.extra["retry_after"] = retry_after

    def as_dict(self) -> dict:
        return {"code": self.code, "message": self.message, **self.extra}


def not_found(what: str) -> ApplicationError:
    return ApplicationError("not_found", f"{what} was not found.", status=404)


def forbidden(message: str) -> ApplicationError:
    return ApplicationError("forbidden", message, status=403)


def too_many(code: str, message: str, *, retry_after: float) -> ApplicationError:
    """429: a limit of the person's was reached; try again after ``retry_after`` seconds."""
    return ApplicationError(code, message, status=429, retry_after=max(1, math.ceil(retry_after)))
