"""The one application error: a stable code, a message for people, an HTTP status; and the
exception whose message is written for people."""


class SaidToPeople(Exception):
    """An exception whose message is written for people: a failure it causes is shown to
    people as it is, where any other is summed up."""


class ApplicationError(Exception):
    """A request the domain refuses: a stable code, a message for people, an HTTP status."""

    def __init__(self, code: str, message: str, *, status: int = 400, extra: dict | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.extra = extra or {}

    def as_dict(self) -> dict:
        return {"code": self.code, "message": self.message, **self.extra}


def not_found(what: str) -> ApplicationError:
    return ApplicationError("not_found", f"{what} was not found.", status=404)


def forbidden(message: str) -> ApplicationError:
    return ApplicationError("forbidden", message, status=403)
