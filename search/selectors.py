"""Searching what was said: the entries a person may see that match a query, newest first, a
page at a time, each with a snippet and a link to its place in its conversation."""

from django.db import connection
from django.urls import reverse

from conversations.events import format_ts
from conversations.models import Conversation, Membership

from .models import SearchEntry
from .query import Term, parse, postgresql_tsquery, sqlite_match
from .snippets import snippet

PER_PAGE = 20
MAX_PER_PAGE = 50

ENTRIES = SearchEntry._meta.db_table
CONVERSATIONS = Conversation._meta.db_table


def _page_sql(workspaces: int) -> str:
    """Each database's query for a page of matching entries' ids, newest (highest id) first.

    Written so that each can stop after the page, rather than sort every match first: SQLite
    walks the FTS5 index's rowids downwards (``ORDER BY rowid DESC`` on the FTS5 table, which
    CROSS JOIN keeps the outer loop) and looks each candidate's workspace up by primary keys
    until the page is full; PostgreSQL's planner chooses between the GIN index (a rare word:
    few matches, then sorted) and reading the primary key backwards, checking each entry's
    words (a common word: the page fills within the first rows)."""
    among = ", ".join(["%s"] * workspaces)
    if connection.vendor == "postgresql":
        return (
            f"SELECT e.id FROM {ENTRIES} e JOIN {CONVERSATIONS} c ON c.id = e.conversation_id "
            f"WHERE e.document @@ CAST(%s AS tsquery) AND c.workspace_id IN ({among}) "
            "ORDER BY e.id DESC LIMIT %s OFFSET %s"
        )
    return (
        f"SELECT f.rowid FROM search_entry_fts f CROSS JOIN {ENTRIES} e ON e.id = f.rowid "
        f"CROSS JOIN {CONVERSATIONS} c ON c.id = e.conversation_id "
        f"WHERE search_entry_fts MATCH %s AND c.workspace_id IN ({among}) "
        "ORDER BY f.rowid DESC LIMIT %s OFFSET %s"
    )


def _page_ids(terms: list[Term], workspaces: list[int], offset: int, limit: int) -> list[int]:
    if not workspaces:
        return []
    match = postgresql_tsquery(terms) if connection.vendor == "postgresql" else sqlite_match(terms)
    with connection.cursor() as cursor:
        cursor.execute(_page_sql(len(workspaces)), [match, *workspaces, limit, offset])
        return [row[0] for row in cursor.fetchall()]


def permalink(conversation_id: str, seq: int) -> str:
    """Where an event is: its conversation's page, opened at that event."""
    return f"{reverse('conversation', args=[conversation_id])}?seq={seq}"


def search_entries(*, user, query: str, page: int = 1, per_page: int = PER_PAGE) -> dict:
    """Page ``page`` (from 1) of what matches ``query`` in the workspaces ``user`` is a member
    of now, newest first: ``{"results": [...], "has_next": bool}``. Newest first is the order
    the entries were stored in (their id, descending), which is their events' order in time
    (events are stored as they happen, and the migration indexed older ones in time order;
    two conversations writing in the same instant may come either way round). Raises
    ApplicationError ``invalid_query`` (400) for a query that cannot match (see search.query)."""
    terms = parse(query)
    workspaces = list(Membership.objects.filter(user=user).values_list("workspace_id", flat=True))
    ids = _page_ids(terms, workspaces, (page - 1) * per_page, per_page + 1)
    entries = (
        SearchEntry.objects.filter(pk__in=ids[:per_page])
        .select_related("conversation__workspace")
        .order_by("-id")
    )
    return {
        "results": [_result(entry, terms) for entry in entries],
        "has_next": len(ids) > per_page,
    }


def _result(entry: SearchEntry, terms: list[Term]) -> dict:
    conversation = entry.conversation
    return {
        "conversation": conversation.pk,
        "conversation_title": conversation.title,
        "workspace": conversation.workspace.slug,
        "seq": entry.seq,
        "type": entry.type,
        "who": entry.who or None,
        "ts": format_ts(entry.created_at),
        "snippet": snippet(entry.text, terms),
        "url": permalink(conversation.pk, entry.seq),
    }
