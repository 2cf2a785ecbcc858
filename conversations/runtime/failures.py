"""What watchers may see of a failure: a short reason a person can read. The detail (the
exception, its SQL, the server's paths) goes to the server log and, for a failed turn, to the
admin only.

An exception meant for people says so by its type (see PUBLIC) and is shown as it is.
Everything else is described by what kind of thing broke, never by its text.
"""

import logging
import traceback

from django.db import DatabaseError

from core.errors import ApplicationError, SaidToPeople

logger = logging.getLogger(__name__)

# Exceptions whose text is written for people: SaidToPeople (an agent's AgentError, a tool's
# refusal), Parley's own ApplicationError, and the ValueError or LookupError of a tool's checks.
PUBLIC = (SaidToPeople, ApplicationError, ValueError, LookupError)


def reason(exc: BaseException) -> str:
    """A short sentence for the people watching: what went wrong, without internals."""
    if isinstance(exc, PUBLIC):
        text = exc.message if isinstance(exc, ApplicationError) else str(exc)
        return text or type(exc).__name__
    if isinstance(exc, DatabaseError):
        return "The database failed while this ran; an admin can see the details."
    if isinstance(exc, OSError):
        # strerror holds no path ("Too many levels of symbolic links"); filename would.
        what = exc.strerror or "it could not be read or written"
        return f"A file operation failed: {what}."
    return "Something went wrong inside Parley; an admin can see the details."


def detail(exc: BaseException) -> str:
    """The whole story, for the server log and the admin: the exception and its traceback."""
    return "".join(traceback.format_exception(exc)).strip()


def told(exc: BaseException, what: str) -> str:
    """The reason for ``exc`` (a tool's, say), logging its detail when the reason hides it."""
    if not isinstance(exc, PUBLIC):
        logger.warning("%s failed", what, exc_info=exc)
    return reason(exc)
