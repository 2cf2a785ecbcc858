"""Conversations themselves: creating one, what a person may do to it (rename, archive, delete),
and doing it."""

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from core.errors import ApplicationError, forbidden, not_found

from ..agents import agent_models
from ..models import Conversation, Membership, Turn, Workspace
from ..notices import people_notify

# A conversation's title, as its column holds it.
MAX_TITLE_CHARS = Conversation._meta.get_field("title").max_length


def conversation_create(
    *, workspace: Workspace, user, title: str, agent: str | None = None, model: str = ""
) -> Conversation:
    """Create a conversation. ``model`` picks one of the models its agent offers ('' for the
    agent's default). Raises ApplicationError for a blank title, an unknown agent or a model
    the agent does not offer."""
    title = (title or "").strip()
    if not title:
        raise ApplicationError("invalid", "title: may not be blank.")
    agent = agent or settings.PARLEY_DEFAULT_AGENT
    if agent not in settings.PARLEY_AGENTS:
        known = ", ".join(sorted(settings.PARLEY_AGENTS))
        raise ApplicationError("unknown_agent", f"No agent named '{agent}'; known: {known}.")
    model = (model or "").strip()
    if model:
        offered = agent_models(agent)
        if model not in offered:
            choices = ", ".join(offered) if offered else "none (it has one model)"
            raise ApplicationError(
                "invalid",
                f"model: the agent '{agent}' offers no model '{model}'; it offers {choices}.",
            )
    conversation = Conversation.objects.create(
        workspace=workspace, title=title[:200], agent=agent, model=model, created_by=user
    )
    _tell_people(conversation)
    return conversation


@dataclass(frozen=True)
class ConversationRights:
    """What a person may do to a conversation itself (its turns are another matter)."""

    rename: bool
    archive: bool
    delete: bool


def conversation_rights(
    *, conversation: Conversation, user, role: str | None
) -> ConversationRights:
    """What ``user``, whose role in the conversation's workspace is ``role`` (None: no member),
    may do to it: owners rename, archive and delete any conversation; members rename and
    archive (and unarchive) those they started, and delete none (it takes the team's history
    with it); viewers do none of it."""
    if role not in Membership.ACTING_ROLES:
        return ConversationRights(rename=False, archive=False, delete=False)
    owner = role == Membership.Role.OWNER
    started_it = conversation.created_by_id is not None and conversation.created_by_id == user.pk
    return ConversationRights(rename=owner or started_it, archive=owner or started_it, delete=owner)


def _tell_people(conversation: Conversation) -> None:
    """The workspace's people see it come, change or go in their lists without a reload."""
    people_notify(
        workspace_id=conversation.workspace_id,
        notice={"kind": "conversation", "conversation": conversation.pk},
    )


def _refuse(role: str | None, doing: str, who: str) -> ApplicationError:
    if role not in Membership.ACTING_ROLES:
        return forbidden(f"Viewers may watch but not {doing}.")
    return forbidden(f"Only {who} may {doing}.")


def conversation_update(
    *,
    conversation: Conversation,
    user,
    role: str,
    title: str | None = None,
    archived: bool | None = None,
) -> Conversation:
    """Rename a conversation and/or archive it (``archived`` true; archiving an archived one
    keeps its first date) or bring it back (false), all or nothing. Returns it as stored.

    Raises ApplicationError ``invalid`` (400) when there is nothing to change or the title is
    blank or too long, and ``forbidden`` (403) for a change the person may not make (see
    conversation_rights); then nothing changes.
    """
    if title is None and archived is None:
        raise ApplicationError("invalid", "Nothing to change: give a title, archived, or both.")
    changes = {}
    if title is not None:
        title = title.strip()
        if not title:
            raise ApplicationError("invalid", "title: may not be blank.")
        if len(title) > MAX_TITLE_CHARS:
            raise ApplicationError(
                "invalid", f"title: may be at most {MAX_TITLE_CHARS} characters."
            )
        changes["title"] = title
    if archived is not None:
        changes["archived_at"] = (
            Coalesce("archived_at", Value(timezone.now())) if archived else None
        )
    rights = conversation_rights(conversation=conversation, user=user, role=role)
    started = "the workspace's owners and the person who started a conversation"
    if title is not None and not rights.rename:
        raise _refuse(role, "rename conversations", started)
    if archived is not None and not rights.archive:
        raise _refuse(role, "archive conversations", started)
    # Only these columns: the row's counter and activity belong to append_events.
    Conversation.objects.filter(pk=conversation.pk).update(**changes)
    conversation.refresh_from_db(fields=["title", "archived_at"])
    _tell_people(conversation)
    return conversation


def conversation_delete(*, conversation: Conversation, user, role: str) -> None:
    """Delete a conversation with everything in it: its turns, events, journal and questions.

    Raises ApplicationError ``forbidden`` (403) unless the person is one of the workspace's
    owners, and ``turn_in_progress`` (409, naming the turn) while a turn is active: its agent
    would go on working, and its watchers and whoever waits on its questions with it, in a
    conversation that no longer exists. Stop it first.
    """
    if not conversation_rights(conversation=conversation, user=user, role=role).delete:
        raise _refuse(role, "delete conversations", "the workspace's owners")
    with transaction.atomic():
        # The counter's lock: a turn starting meanwhile has either committed (and is seen
        # below) or waits for this transaction. Taken before the turns' rows, against the
        # module's lock order, but only once no turn is active: nothing then holds one of its
        # turns and waits for the counter.
        locked = Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
        if locked is None:
            raise not_found("Conversation")
        active = (
            Turn.objects.filter(conversation_id=conversation.pk, status__in=Turn.ACTIVE_STATUSES)
            .values_list("id", flat=True)
            .first()
        )
        if active is not None:
            raise ApplicationError(
                "turn_in_progress",
                "A turn is running in this conversation; stop it before deleting the conversation.",
                status=409,
                extra={"turn": active},
            )
        locked.delete()
        _tell_people(conversation)
