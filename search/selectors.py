"""Searching what was said: the entries a person may see that match a query, newest first, a
page at a time, each with a snippet and a link to its place in its conversation."""

from django.db import connection
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL

from conversations.events import format_ts
from conversations.models import Membership

from .models import SearchEntry
from .query import Term, parse, postgresql_tsquery, sqlite_match
from .snippets import snippet

PER_PAGE = 20
MAX_PER_PAGE = 50


def _matching(terms: list[Term]):
    """The condition that an entry matches, in its database's own full-text search."""
    if connection.vendor == "postgresql":
        return RawSQL(
            f"{SearchEntry._meta.db_table}.document @@ CAST(%s AS tsquery)",
            [postgresql_tsquery(terms)],
            output_field=BooleanField(),
        )
    return RawSQL(
        f"{SearchEntry._meta.db_table}.id IN "
        "(SELECT rowid FROM search_entry_fts WHERE search_entry_fts MATCH %s)",
        [sqlite_match(terms)],
        output_field=BooleanField(),
    )


def permalink(conversation_id: str, seq: int) -> str:
    """Where an event is: its conversation's page, opened at that event."""
    return f"/conversations/{conversation_id}/?seq={seq}"


def search_entries(*, user, query: str, page: int = 1, per_page: int = PER_PAGE) -> dict:
    """Page ``page`` (from 1) of what matches ``query`` in the workspaces ``user`` is a member
    of now, newest first: ``{"results": [...], "has_next": bool}``. Raises ApplicationError
    ``invalid_query`` (400) for a query that cannot match (see search.query)."""
    terms = parse(query)
    visible = Membership.objects.filter(user=user).values("workspace_id")
    start = (page - 1) * per_page
    entries = list(
        SearchEntry.objects.filter(conversation__workspace_id__in=visible)
        .filter(_matching(terms))
        .select_related("conversation__workspace")
        .order_by("-created_at", "-id")[start : start + per_page + 1]
    )
    return {
        "results": [_result(entry, terms) for entry in entries[:per_page]],
        "has_next": len(entries) > per_page,
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
