"""Reads of workspaces, conversations, turns and events."""

from dataclasses import dataclass

from django.db.models import Count, OuterRef, QuerySet, Subquery, TextField
from django.db.models.functions import Cast

from core.people import person
from core.prepared import PreparedLookup

from .events import Frame, FrameEncoder
from .models import Conversation, Membership, Turn, TurnEvent, TurnStep, Watcher, Workspace


def workspaces_for_user(*, user) -> QuerySet[Workspace]:
    """The workspaces a person belongs to, each annotated with their ``role``."""
    role = Membership.objects.filter(workspace=OuterRef("pk"), user=user).values("role")[:1]
    return Workspace.objects.filter(memberships__user=user).annotate(role=Subquery(role))


def _with_active_turn(conversations: QuerySet[Conversation]) -> QuerySet[Conversation]:
    active = Turn.objects.filter(
        conversation=OuterRef("pk"), status__in=Turn.ACTIVE_STATUSES
    ).order_by()
    return conversations.annotate(
        active_turn_id=Subquery(active.values("pk")[:1]),
        active_turn_status=Subquery(active.values("status")[:1]),
    )


def conversations_for_user(
    *,
    user,
    workspace_slug: str | None = None,
    search: str = "",
    archived: bool | None = None,
) -> QuerySet[Conversation]:
    """Conversations in the person's workspaces, latest activity first, each with its active
    turn if any and the person's ``role`` in its workspace.

    ``search`` keeps those whose title contains it (case-insensitive); ``archived`` keeps only
    the archived ones (True) or only the others (False); None keeps both.
    """
    role = Membership.objects.filter(workspace=OuterRef("workspace"), user=user).values("role")
    conversations = Conversation.objects.filter(workspace__memberships__user=user)
    if workspace_slug:
        conversations = conversations.filter(workspace__slug=workspace_slug)
    if search:
        conversations = conversations.filter(title__icontains=search)
    if archived is not None:
        conversations = conversations.filter(archived_at__isnull=not archived)
    return _with_active_turn(
        conversations.select_related("workspace", "created_by")
        .annotate(role=Subquery(role[:1]))
        # pk last: a stable order, so that pages neither repeat nor skip a row.
        .order_by("-last_activity_at", "-created_at", "-pk")
    )


# Every request and socket about one conversation starts here (the access rule): compiled once.
_WITH_STATE = PreparedLookup(
    lambda conversation_id: _with_active_turn(
        Conversation.objects.select_related("workspace", "created_by")
    ).filter(pk=conversation_id)
)


def conversation_with_state(*, conversation_id: str) -> Conversation | None:
    """The conversation with its workspace, its creator and its active turn (``active_turn_id``
    and ``active_turn_status``, None if it has none)."""
    return _WITH_STATE.first(conversation_id)


def event_frames_after(*, conversation_id: str, after_seq: int, limit: int) -> list[Frame]:
    """Up to ``limit`` encoded events with ``seq > after_seq``, in order (the replay hot path)."""
    rows = (
        TurnEvent.objects.filter(conversation_id=conversation_id, seq__gt=after_seq)
        .order_by("seq")
        # The data as stored text: no decoding and encoding again on the way out.
        .annotate(data_text=Cast("data", output_field=TextField()))
        .values_list("seq", "type", "turn_id", "created_at", "data_text")[:limit]
    )
    encoder = FrameEncoder(conversation_id)
    return [encoder.frame(*row) for row in rows]


def events_page(*, conversation_id: str, after_seq: int, limit: int) -> list[TurnEvent]:
    return list(
        TurnEvent.objects.filter(conversation_id=conversation_id, seq__gt=after_seq).order_by(
            "seq"
        )[:limit]
    )


def turn_of(*, conversation_id: str, turn_id: str) -> Turn | None:
    return Turn.objects.filter(conversation_id=conversation_id, pk=turn_id).first()


# Events after which a turn's page shows its message in a new entry: their turn keeps its text
# deltas in a history page, so that the page splits the message where it did live.
_MESSAGE_SPLITTERS = (
    TurnEvent.Type.TURN_STEERED,
    TurnEvent.Type.TURN_RESUMED,
    TurnEvent.Type.TURN_NOTICE,
)


@dataclass(frozen=True)
class HistoryPage:
    events: list[TurnEvent]
    latest_seq: int
    first_turn: str | None
    has_earlier: bool


def history_page(
    *, conversation: Conversation, turns: int, events: int, before_turn: Turn | None
) -> HistoryPage:
    """The latest turns of a conversation (those before ``before_turn``, if given), whole, as
    a page shows them: at most ``turns`` turns, and no more than about ``events`` events (but
    always one turn), every event in seq order except the text deltas of the turns that ended,
    whose ``message.completed`` events carry the whole text (kept for a turn whose message was
    split by steering, a resume or a notice). Only what was stored when the page was read:
    ``latest_seq`` is the conversation's then, to go on from live."""
    latest_seq = (
        Conversation.objects.filter(pk=conversation.pk).values_list("last_seq", flat=True).get()
    )
    earlier = Turn.objects.filter(conversation=conversation)
    if before_turn is not None:
        earlier = earlier.filter(created_at__lt=before_turn.created_at)
    candidates = list(
        earlier.order_by("-created_at", "-pk").values_list("pk", flat=True)[: turns + 1]
    )
    if not candidates:
        return HistoryPage([], latest_seq, None, False)
    # Ended as the stored events tell it: their terminal event is in, so is every message's end.
    ended = set(
        TurnEvent.objects.filter(
            turn_id__in=candidates,
            type__in=TurnEvent.TERMINAL_TYPES,
            seq__lte=latest_seq,
        ).values_list("turn_id", flat=True)
    )
    split = set(
        TurnEvent.objects.filter(turn_id__in=ended, type__in=_MESSAGE_SPLITTERS).values_list(
            "turn_id", flat=True
        )
    )
    compact = ended - split
    shown = (
        TurnEvent.objects.filter(turn_id__in=candidates, seq__lte=latest_seq)
        .exclude(type=TurnEvent.Type.MESSAGE_DELTA, turn_id__in=compact)
        .values("turn_id")
        .annotate(count=Count("pk"))
    )
    sizes = {row["turn_id"]: row["count"] for row in shown}
    ids, total = [], 0
    for pk in candidates[:turns]:
        if ids and total + sizes.get(pk, 0) > events:
            break
        ids.append(pk)
        total += sizes.get(pk, 0)
    page = (
        TurnEvent.objects.filter(turn_id__in=ids, seq__lte=latest_seq)
        .exclude(type=TurnEvent.Type.MESSAGE_DELTA, turn_id__in=compact)
        .order_by("seq")
    )
    return HistoryPage(list(page), latest_seq, ids[-1], len(candidates) > len(ids))


def turn_history(*, turn: Turn, limit: int = 20) -> list[dict]:
    """The conversation's earlier turns for an agent: who asked what, and what was answered."""
    return [
        {
            "input": earlier["input"],
            "by": earlier["by"],
            "reply": "\n\n".join(
                event["data"].get("text", "")
                for event in earlier["events"]
                if event["type"] == TurnEvent.Type.MESSAGE_COMPLETED
            ),
            "status": earlier["status"],
        }
        for earlier in turn_transcripts(
            conversation_id=turn.conversation_id,
            before=turn.created_at,
            exclude_turn_id=turn.pk,
            limit=limit,
            # Only what the reply is made of: a turn of 100,000 tool events would otherwise be
            # read whole, for every later turn.
            types=(TurnEvent.Type.MESSAGE_COMPLETED,),
        )
    ]


# What a model is told of earlier turns: everything but the text deltas (their messages carry the
# whole text) and the turn's own start and end (its input and status say it).
TRANSCRIPT_EVENT_TYPES = (
    TurnEvent.Type.MESSAGE_COMPLETED,
    TurnEvent.Type.TOOL_STARTED,
    TurnEvent.Type.TOOL_COMPLETED,
    TurnEvent.Type.SELECTION_REQUESTED,
    TurnEvent.Type.SELECTION_RESOLVED,
    TurnEvent.Type.TURN_STEERED,
)


def turn_transcripts(
    *,
    conversation_id: str,
    before,
    exclude_turn_id: str,
    limit: int = 50,
    types: tuple[str, ...] = TRANSCRIPT_EVENT_TYPES,
) -> list[dict]:
    """The conversation's turns created before ``before`` (the newest ``limit``), oldest first,
    each with ``input``, ``by``, ``status`` and its ``events`` (``{"type", "data"}``) of
    ``types`` in order."""
    earlier = list(
        Turn.objects.filter(conversation_id=conversation_id, created_at__lt=before)
        .exclude(pk=exclude_turn_id)
        .select_related("started_by")
        .order_by("-created_at")[:limit]
    )
    earlier.reverse()
    events: dict[str, list[dict]] = {t.pk: [] for t in earlier}
    for turn_id, type_, data in (
        TurnEvent.objects.filter(turn__in=earlier, type__in=types)
        .order_by("seq")
        .values_list("turn_id", "type", "data")
    ):
        events[turn_id].append({"type": type_, "data": data})
    return [
        {
            "turn": t.pk,
            "input": t.input,
            "by": t.started_by.get_username() if t.started_by else None,
            "status": t.status,
            "events": events[t.pk],
        }
        for t in earlier
    ]


def in_flight_for_user(*, user) -> QuerySet[Conversation]:
    """Every conversation the person can see that has an active turn."""
    return conversations_for_user(user=user).filter(active_turn_id__isnull=False)


def steering_after(*, turn_id: str, after_seq: int) -> list[tuple[int, str]]:
    """Inputs added to a turn after ``after_seq``: (seq, input), in order."""
    rows = TurnEvent.objects.filter(
        turn_id=turn_id, type=TurnEvent.Type.TURN_STEERED, seq__gt=after_seq
    ).order_by("seq")
    return [(seq, data["input"]) for seq, data in rows.values_list("seq", "data")]


@dataclass(frozen=True)
class ControlNews:
    """What people sent to running turns, as stored: steering and Stop requests."""

    steering: list[tuple[str, int, str]]  # (turn id, seq, input)
    stop_requested: list[str]  # turn ids


def turn_control_news(*, turn_ids: list[str]) -> ControlNews:
    """The steering and Stop requests of these (running) turns, in two queries."""
    steering = (
        TurnEvent.objects.filter(turn_id__in=turn_ids, type=TurnEvent.Type.TURN_STEERED)
        .order_by("seq")
        .values_list("turn_id", "seq", "data")
    )
    stopping = Turn.objects.filter(
        pk__in=turn_ids, status__in=Turn.ACTIVE_STATUSES, cancel_requested_at__isnull=False
    ).values_list("pk", flat=True)
    return ControlNews(
        steering=[(turn_id, seq, data["input"]) for turn_id, seq, data in steering],
        stop_requested=list(stopping),
    )


def acting_member(*, workspace_id: int, username: str):
    """The user called ``username`` if they may act in the workspace (owner or member)."""
    membership = (
        Membership.objects.filter(
            workspace_id=workspace_id,
            user__username=username,
            role__in=Membership.ACTING_ROLES,
        )
        .select_related("user")
        .first()
    )
    return membership.user if membership else None


def latest_seqs(*, conversation_ids: list[str]) -> dict[str, int]:
    """Each conversation's latest seq (those that exist), read in chunks of a thousand."""
    latest = {}
    for start in range(0, len(conversation_ids), 1000):
        chunk = conversation_ids[start : start + 1000]
        latest.update(Conversation.objects.filter(pk__in=chunk).values_list("pk", "last_seq"))
    return latest


def people_watching(*, conversation_id: str) -> list[dict]:
    """Who has the conversation open right now, each once, in the order they came, with their
    role in its workspace."""
    watchers = (
        Watcher.objects.filter(conversation_id=conversation_id)
        .select_related("user")
        .order_by("connected_at", "pk")
    )
    people: dict[int, dict] = {}
    for watcher in watchers:
        people.setdefault(watcher.user_id, person(watcher.user))
    roles = dict(
        Membership.objects.filter(
            workspace__conversations=conversation_id, user_id__in=list(people)
        ).values_list("user_id", "role")
    )
    return [{**entry, "role": roles.get(user_id)} for user_id, entry in people.items()]


@dataclass(frozen=True)
class StoredProgress:
    """What a turn had done, as stored: its journal steps and the events a replay matches."""

    steps: list[dict]  # TurnStep fields, in order
    text: str
    messages: int
    calls: int
    open_calls: list[dict]  # {"id", "name"} of tool calls started and never completed
    steering: list[tuple[int, str]]  # every input sent to the turn: (seq, input)


def turn_progress(*, turn_id: str) -> StoredProgress:
    """Everything a resumed turn is rebuilt from, in two queries."""
    steps = list(
        TurnStep.objects.filter(turn_id=turn_id)
        .order_by("index")
        .values("index", "kind", "name", "digest", "said", "outcome")
    )
    replayed = (
        TurnEvent.Type.MESSAGE_DELTA,
        TurnEvent.Type.MESSAGE_COMPLETED,
        TurnEvent.Type.TOOL_STARTED,
        TurnEvent.Type.TOOL_COMPLETED,
        TurnEvent.Type.TURN_STEERED,
    )
    text, messages, started, steering = [], 0, {}, []
    events = (
        TurnEvent.objects.filter(turn_id=turn_id, type__in=replayed)
        .order_by("seq")
        .values_list("seq", "type", "data")
    )
    for seq, type_, data in events.iterator(chunk_size=2000):
        if type_ == TurnEvent.Type.MESSAGE_DELTA:
            text.append(data["text"])
        elif type_ == TurnEvent.Type.MESSAGE_COMPLETED:
            messages += 1
        elif type_ == TurnEvent.Type.TOOL_STARTED:
            started[data["id"]] = {"id": data["id"], "name": data["name"]}
        elif type_ == TurnEvent.Type.TOOL_COMPLETED:
            started[data["id"]] = None
        else:
            steering.append((seq, data["input"]))
    return StoredProgress(
        steps=steps,
        text="".join(text),
        messages=messages,
        calls=len(started),
        open_calls=[call for call in started.values() if call is not None],
        steering=steering,
    )
