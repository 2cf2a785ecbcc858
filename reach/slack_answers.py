"""A click on a question's button in Slack, answered as the person the clicker is, with their
rights: the same access rule and the same service as every other way in (the first answer wins;
viewers, strangers and members a question is not addressed to are refused). What the clicker is
told (only they see it) is returned; nothing is said when the answer is taken, since the message
itself then says who answered (the outbox updates it once the answer commits)."""

import logging

from core.errors import ApplicationError
from selection.access import selection_access
from selection.links import answer_link_url
from selection.models import Selection, Via
from selection.services import selection_reply

from .news import outcome_line
from .slack_messages import Click, buttons_answer, escape

logger = logging.getLogger(__name__)

UNKNOWN_PERSON = (
    "Parley does not know who you are: nobody in Parley has the email of your Slack account. "
    "Nothing was answered."
)
NOT_YOURS = (
    "You can’t answer this question: you may not see it in Parley (or it no longer exists). "
    "Nothing was answered."
)


def slack_click_answer(*, user, click: Click) -> str | None:
    """Answer the question ``click`` names as ``user`` (or, for a channel's "Answer in Parley",
    give them their own answer link); returns what to tell them, or None when their answer was
    taken. Nothing changes on a refusal."""
    try:
        selection = selection_access(user=user, selection_id=click.selection_id, answering=True)
    except ApplicationError as refused:
        if refused.status == 404:
            return NOT_YOURS
        return f"{escape(refused.message)} Nothing was answered."
    if not selection.is_pending:
        return _settled(selection)
    if click.link:
        url = answer_link_url(selection_id=selection.pk, user=user)
        return f"Your own link to answer it (it is for you only): <{url}|Answer in Parley>"
    answer = _answer(selection, click)
    if answer is None:
        return "That button does not answer this question. Nothing was answered."
    try:
        selection_reply(selection=selection, user=user, answer=answer, via=Via.SLACK)
    except ApplicationError as refused:
        if refused.status in (409, 410):
            selection.refresh_from_db()
            return _settled(selection)
        return f"{escape(refused.message)} Nothing was answered."
    logger.info("Question %s answered in Slack by %s", selection.pk, user.get_username())
    return None


def _answer(selection: Selection, click: Click):
    """The answer a button gives: the option in its place, or yes or no."""
    if not buttons_answer(selection):
        return None
    if selection.kind == Selection.Kind.CONFIRM:
        return click.confirm
    options = selection.options or []
    if click.option is None or not 0 <= click.option < len(options):
        return None
    return options[click.option]["value"]


def _settled(selection: Selection) -> str:
    if selection.status == Selection.Status.EXPIRED:
        return "This question expired before it was answered. Nothing was answered."
    line = outcome_line(selection)  # "Answered by Alice in Parley: Ship it"
    return f"Too late: this question was {escape(line[:1].lower() + line[1:])}."
