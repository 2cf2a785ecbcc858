"""Full-text search of what was said: the same corpus and queries on each database (this module
runs in both passes of make test), who may see what, bad input, and the REST endpoint."""

import re
import unicodedata
from importlib import import_module

import pytest
from django.apps import apps as django_apps

from conversations import services
from conversations.models import Membership
from core.errors import ApplicationError
from core.people import person
from search.models import SearchEntry
from search.selectors import search_entries
from tests.helpers import started, store, stored_turn

# What people and the agent said, in the order it was stored: (conversation, speaker, type, text).
CORPUS = [
    ("plans", "alice", "turn.started", "Summarize reports/q4-plan.md before the deploy on Friday"),
    ("plans", None, "message.completed", "The Q4 plan says we deploy the new Café crème build."),
    ("plans", "bob", "turn.steered", "Also check the DEPLOYMENT checklist, please"),
    ("plans", None, "selection.requested", "Which database should we deploy to?"),
    ("plans", "bob", "selection.resolved", "PostgreSQL"),
    ("notes", "alice", "turn.started", "Notes on the cafe menu: creme brulee and plan B"),
    ("notes", None, "message.completed", "Friday deploy is risky; plan for Monday. <b>bold</b>"),
    ("notes", None, "message.delta", "deploy deploy deploy (a delta is never searched)"),
]
QUERIES = [
    "deploy",
    "DEPLOY friday",
    "depl*",
    '"q4 plan"',
    '"plan q4"',
    "q4-plan.md",
    "café",
    "CREME",
    '"cafe creme"',
    "postgresql",
    "database deploy",
    "plan*",
    "never",
    "nothing-matches-this",
]


def _words(text: str) -> list[str]:
    # A reference reading of the documented rules, written apart from search.text.
    plain = "".join(
        c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)
    ).casefold()
    return re.findall(r"[^\W_]+", plain)


def _matches(text: str, query: str) -> bool:
    words = _words(text)
    for quoted, bare in re.findall(r'"([^"]*)"|(\S+)', query):
        phrase = _words(quoted or bare)
        if not phrase:
            continue
        prefix = bool(bare) and bare.endswith("*")
        found = any(
            words[at : at + len(phrase) - 1] == phrase[:-1]
            and (
                words[at + len(phrase) - 1].startswith(phrase[-1])
                if prefix
                else words[at + len(phrase) - 1] == phrase[-1]
            )
            for at in range(len(words) - len(phrase) + 1)
        )
        if not found:
            return False
    return True


def _event(kind: str, text: str, speaker) -> tuple[str, dict]:
    if kind == "turn.steered":
        return kind, {"input": text, "by": speaker}
    if kind == "selection.requested":
        return kind, {"id": "s_x", "prompt": text, "options": [{"value": "pg", "label": "Yes"}]}
    if kind == "selection.resolved":
        return kind, {"selection": "s_gone", "answer": text, "answered_by": speaker}
    return kind, {"text": text}


@pytest.fixture
def corpus(people, conversation):
    """The corpus stored through the event log, and what each entry is: (conversation id, seq,
    text), in the order stored."""
    notes = services.conversation_create(
        workspace=people.workspace, user=people.alice.user, title="Cafe notes"
    )
    conversations = {"plans": conversation, "notes": notes}
    turns, stored = {}, []
    for name, speaker, kind, text in CORPUS:
        where = conversations[name]
        user = getattr(people, speaker).user if speaker else people.alice.user
        if kind == "turn.started":
            turns[name] = turn = stored_turn(where, user, text)
            event = started(turn)
        else:
            event = _event(kind, text, person(user) if speaker else None)
        store(turns[name], [event])
        where.refresh_from_db()
        if kind != "message.delta":
            stored.append((where.pk, where.last_seq, text))
    return stored


def _found(user, query, **kwargs) -> list[tuple[str, int]]:
    return [
        (r["conversation"], r["seq"])
        for r in search_entries(user=user, query=query, **kwargs)["results"]
    ]


def test_each_query_finds_exactly_what_the_rules_say_newest_first(people, corpus):
    for query in QUERIES:
        expected = [(cid, seq) for cid, seq, text in reversed(corpus) if _matches(text, query)]
        assert _found(people.alice.user, query, per_page=50) == expected, query
    # The corpus does test something: a phrase in order only, prefixes, accents, no deltas.
    assert len(_found(people.alice.user, "depl*", per_page=50)) == 5
    assert _found(people.alice.user, '"plan q4"') == []
    assert len(_found(people.alice.user, "café")) == 2


def test_results_page_newest_first_and_snippets_mark_the_words_escaped(people, corpus):
    first = search_entries(user=people.alice.user, query="deploy", per_page=2)
    second = search_entries(user=people.alice.user, query="deploy", page=2, per_page=2)
    everything = _found(people.alice.user, "deploy", per_page=50)
    assert [(r["conversation"], r["seq"]) for r in first["results"] + second["results"]] == (
        everything[:4]
    )
    assert first["has_next"] and second["has_next"] != (len(everything) <= 4)
    newest = first["results"][0]
    assert newest["type"] == "message.completed" and newest["who"] is None
    snippet = newest["snippet"]
    assert snippet["html"] == (
        "Friday <mark>deploy</mark> is risky; plan for Monday. &lt;b&gt;bold&lt;/b&gt;"
    )
    assert [snippet["text"][s:e] for s, e in snippet["highlights"]] == ["deploy"]
    assert newest["url"] == f"/conversations/{newest['conversation']}/?seq={newest['seq']}"
    steered = search_entries(user=people.alice.user, query="checklist")["results"]
    assert [(r["type"], r["who"]) for r in steered] == [("turn.steered", "Bob")]


def test_only_members_find_anything_and_a_removed_member_at_once_nothing(people, corpus):
    assert _found(people.dave.user, "deploy") == []
    assert _found(people.carol.user, "deploy") == _found(people.alice.user, "deploy")
    Membership.objects.filter(user=people.bob.user, workspace=people.workspace).delete()
    assert _found(people.bob.user, "deploy") == []


def test_a_deleted_conversation_leaves_nothing_to_find(people, corpus, conversation):
    services.conversation_delete(conversation=conversation, user=people.alice.user, role="owner")
    assert {cid for cid, _ in _found(people.alice.user, "deploy", per_page=50)} == {
        cid for cid, _, _ in corpus if cid != conversation.pk
    }


def test_the_migration_indexes_events_stored_before_it(people, corpus):
    before = {query: _found(people.alice.user, query, per_page=50) for query in QUERIES}
    SearchEntry.objects.all().delete()
    assert _found(people.alice.user, "deploy") == []
    import_module("search.migrations.0001_search").backfill(django_apps, None)
    assert {query: _found(people.alice.user, query, per_page=50) for query in QUERIES} == before


@pytest.mark.parametrize(
    "query, words",
    [
        ("", "Type what to search for."),
        ("   ", "Type what to search for."),
        ('"" ... --', "Type at least one word (letters or digits) to search for."),
        ("a*", "A prefix needs at least 2 letters: “a*”."),
        ("x" * 201, "A search is at most 200 characters."),
    ],
)
def test_a_query_that_cannot_match_is_refused_in_words(people, query, words):
    with pytest.raises(ApplicationError) as refused:
        search_entries(user=people.alice.user, query=query)
    assert (refused.value.code, refused.value.message, refused.value.status) == (
        "invalid_query",
        words,
        400,
    )


def test_operators_and_quotes_are_only_words(people, corpus):
    # What either database would read as syntax is searched as words (or separates them).
    for query in ["deploy OR nothing", "NOT deploy", "deploy'; --", 'plan:* & "q4', "NEAR(a b)"]:
        expected = [(cid, seq) for cid, seq, text in reversed(corpus) if _matches(text, query)]
        assert _found(people.alice.user, query, per_page=50) == expected, query


def test_the_rest_endpoint_answers_the_same_and_refuses_bad_input_in_json(server, people, corpus):
    with server.client(people.bob) as bob:
        response = bob.get("/api/search/", params={"q": "deploy", "per_page": 2})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["query"] == "deploy" and body["page"] == 1 and body["has_next"] is True
        assert [(r["conversation"], r["seq"]) for r in body["results"]] == [
            (cid, seq) for cid, seq, text in reversed(corpus) if _matches(text, "deploy")
        ][:2]
        assert body["results"][0]["conversation_title"] == "Cafe notes"
        assert body["results"][0]["workspace"] == "team"
        for params, code in [
            ({}, "invalid_query"),
            ({"q": "  "}, "invalid_query"),
            ({"q": "deploy", "page": "0"}, "invalid_page"),
            ({"q": "deploy", "per_page": "51"}, "invalid_per_page"),
        ]:
            refused = bob.get("/api/search/", params=params)
            assert refused.status_code == 400, params
            assert refused.json()["error"]["code"] == code
    with server.client(people.dave) as dave:
        assert dave.get("/api/search/", params={"q": "deploy"}).json()["results"] == []
    with server.client() as nobody:
        assert nobody.get("/api/search/", params={"q": "deploy"}).status_code == 401


def test_an_answer_is_found_by_its_option_label_as_people_read_it(people, conversation):
    from datetime import timedelta

    from django.utils import timezone

    from selection.models import Selection

    turn = stored_turn(conversation, people.alice.user, "Pick a database")
    question = Selection.objects.create(
        conversation=conversation,
        turn=turn,
        ordinal=1,
        kind=Selection.Kind.CHOICE,
        prompt="Which database?",
        options=[{"value": "pg", "label": "PostgreSQL"}, {"value": "lite", "label": "SQLite"}],
        expires_at=timezone.now() + timedelta(minutes=5),
    )
    answered = {"selection": question.pk, "answer": "pg", "answered_by": person(people.bob.user)}
    store(turn, [("selection.resolved", answered)])
    found = search_entries(user=people.alice.user, query="postgresql")["results"]
    assert [(r["type"], r["who"], r["snippet"]["text"]) for r in found] == [
        ("selection.resolved", "Bob", "PostgreSQL")
    ]
    assert search_entries(user=people.alice.user, query="pg")["results"] == []


def test_pages_hold_only_what_each_person_may_see_newest_first_wherever_it_is(people, conversation):
    # Matches stored turn about in two workspaces: each person's pages skip the other's, and
    # end where their own matches end; a member of both reads them all in the order stored.
    theirs = services.conversation_create(
        workspace=people.other_workspace, user=people.dave.user, title="Theirs"
    )
    turns = {
        conversation.pk: stored_turn(conversation, people.alice.user, "ours"),
        theirs.pk: stored_turn(theirs, people.dave.user, "theirs"),
    }
    stored = []
    for n in range(7):
        for where in (conversation, theirs):
            store(turns[where.pk], [("message.completed", {"text": f"Release {n} is out"})])
            where.refresh_from_db()
            stored.append((where.pk, where.last_seq))
    newest_first = stored[::-1]

    def pages(user):
        read, page = [], 1
        while True:
            found = search_entries(user=user, query="release", page=page, per_page=2)
            read.append([(r["conversation"], r["seq"]) for r in found["results"]])
            if not found["has_next"]:
                return read
            page += 1

    ours = [entry for entry in newest_first if entry[0] == conversation.pk]
    assert pages(people.alice.user) == [ours[0:2], ours[2:4], ours[4:6], ours[6:]]
    assert pages(people.dave.user)[-1] == [e for e in newest_first if e[0] == theirs.pk][6:]
    services.membership_set(
        workspace=people.workspace, user=people.dave.user, role=Membership.Role.VIEWER
    )
    assert [entry for page in pages(people.dave.user) for entry in page] == newest_first
    assert search_entries(user=people.dave.user, query="release", page=8, per_page=2) == {
        "results": [],
        "has_next": False,
    }
