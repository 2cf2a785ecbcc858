"""The admin answers each kind of question with a form built for it (option buttons, checkboxes,
a path in the question's folder, a text, Confirm / Decline, a schema's fields), through the same
service as every answer: what it refuses is shown on the form and nothing is stored; what it
takes settles the question and the turn goes on (a real Daphne, driven as a browser would)."""

from contextlib import closing

import pytest

from tests.conftest import all_events, wait_for_turn_end
from tests.helpers import (
    admin_of,
    answer_in_admin,
    create_conversation,
    message_after,
    outcomes,
    post_form,
    shown,
    start,
    wait_pending,
)


@pytest.fixture
def admin(server, people):
    with closing(admin_of(server, people)) as client:
        yield client


SCHEMA = {
    "type": "object",
    "title": "Release",
    "properties": {
        "title": {
            "type": "string",
            "title": "Title",
            "description": "What to call it",
            "minLength": 3,
        },
        "owner": {"type": "string", "format": "email", "title": "Owner"},
        "site": {"type": "string", "format": "uri", "title": "Site"},
        "day": {"type": "string", "format": "date", "title": "Day"},
        "at": {"type": "string", "format": "date-time", "title": "At"},
        "budget": {"type": "number", "title": "Budget"},
        "seats": {"type": "integer", "title": "Seats", "minimum": 1, "maximum": 9},
        "public": {"type": "boolean", "title": "Public", "default": True},
        "size": {"type": "string", "enum": ["s", "l"], "enumNames": ["Small", "Large"]},
    },
    "required": ["title", "seats"],
}

# Each kind: the question; what its page shows; answers refused (the fields sent, and what the
# page says); the answer taken; what the agent gets; and how the admin's message reads it.
CASES = [
    pytest.param(
        {
            "kind": "choice",
            "prompt": "Which database?",
            "options": [
                {"label": "PostgreSQL", "value": "pg", "description": "The usual one"},
                {"label": "SQLite", "value": "sqlite"},
            ],
        },
        [
            'type="radio" name="answer-choice" value="pg"',
            "PostgreSQL — The usual one",
            'type="radio" name="answer-choice" value="sqlite"',
        ],
        [({}, "This field is required.")],
        {"choice": "pg"},
        "pg",
        "Question “Which database?” answered: PostgreSQL.",
        id="choice",
    ),
    pytest.param(
        {
            "kind": "choice",
            "prompt": "Colour?",
            "options": ["red", "green"],
            "allow_freeform": True,
        },
        ['type="radio" name="answer-choice" value="red"', 'name="answer-other"'],
        [
            ({}, "answer: one option's value (a string) is required."),
            (
                {"choice": "red", "other": "teal"},
                "Choose an option or write your own answer, not both.",
            ),
        ],
        {"other": " teal "},
        "teal",
        "Question “Colour?” answered: “teal”.",
        id="choice-freeform",
    ),
    pytest.param(
        {
            "kind": "choice",
            "prompt": "Which chores?",
            "options": ["dust", "sweep", "mop"],
            "multiple": True,
            "max_choices": 2,
            "allow_freeform": True,
        },
        [
            'type="checkbox" name="answer-choices" value="dust"',
            'type="checkbox" name="answer-choices" value="mop"',
            "Choose 1 to 2.",
            'name="answer-other"',
        ],
        [
            ({"choices": ["dust", "sweep", "mop"]}, "answer: choose from 1 to 2 options."),
            ({}, "answer: choose from 1 to 2 options."),
        ],
        {"choices": ["mop"], "other": "polish"},
        ["mop", "polish"],
        "Question “Which chores?” answered: mop, “polish”.",
        id="choices",
    ),
    pytest.param(
        {"kind": "path", "prompt": "Which report?", "mode": "file", "root": "reports"},
        [
            'for="id_answer-path" class="required">File in reports/:</label>',
            'type="text" name="answer-path"',
        ],
        [
            ({"path": "nope.md"}, "answer: there is no 'nope.md' in the question's folder."),
            ({"path": "../README.md"}, "answer: The path may not contain '..'."),
        ],
        {"path": "q4-plan.md"},
        "q4-plan.md",
        "Question “Which report?” answered: q4-plan.md.",
        id="path",
    ),
    pytest.param(
        {"kind": "path", "prompt": "Where?", "mode": "folder"},
        ["Folder in the workspace's files:"],
        [
            (
                {"path": "README.md"},
                "answer: 'README.md' is a file; this question asks for a folder.",
            )
        ],
        {"path": "notes"},
        "notes",
        "Question “Where?” answered: notes.",
        id="path-folder",
    ),
    pytest.param(
        {"kind": "text", "prompt": "Any notes for the release? " + "Really, any. " * 10},
        ['<textarea name="answer-text"'],
        [({"text": "   "}, "This field is required.")],
        {"text": "  Ship it on Monday.  "},
        "Ship it on Monday.",
        "Question “Any notes for the release? Really, any. Really, any. Really…” answered: "
        "“Ship it on Monday.”.",
        id="text",
    ),
    pytest.param(
        {"kind": "confirm", "prompt": "Deploy now?"},
        [
            '<button type="submit" name="action" value="answer" class="button default">Confirm',
            '<button type="submit" name="action" value="decline" class="button">Decline',
            '<button type="submit" name="action" value="dismiss" class="button">Dismiss',
        ],
        [],
        {},
        True,
        "Question “Deploy now?” answered: yes.",
        id="confirm",
    ),
    pytest.param(
        {"kind": "form", "prompt": "Tell me about the release.", "schema": SCHEMA},
        [
            'for="id_answer-title" class="required">Title:</label>',
            '<div class="help" id="id_answer-title_helptext">What to call it</div>',
            'type="text" name="answer-title"',
            'for="id_answer-owner">Owner:</label>',
            'type="email" name="answer-owner"',
            'type="url" name="answer-site"',
            'type="date" name="answer-day"',
            'type="datetime-local" name="answer-at"',
            'type="number" name="answer-budget"',
            'for="id_answer-seats" class="required">Seats:</label>',
            'type="number" name="answer-seats"',
            'type="checkbox" name="answer-public"',
            '<option value="l">Large</option>',
        ],
        [
            ({"title": "Launch"}, "This field is required."),  # seats
            ({"title": "Go", "seats": "3"}, "Ensure this value has at least 3 characters"),
            ({"title": "Launch", "seats": "12"}, "less than or equal to 9"),
            ({"title": "Launch", "seats": "3", "owner": "nobody"}, "Enter a valid email address"),
        ],
        {
            "title": "Launch",
            "owner": "ana@example.com",
            "site": "https://example.com/launch",
            "day": "2026-12-01",
            "at": "2026-12-01T09:30",
            "budget": "1250.5",
            "seats": "3",
            "size": "l",
        },
        {
            "title": "Launch",
            "owner": "ana@example.com",
            "site": "https://example.com/launch",
            "day": "2026-12-01",
            "at": "2026-12-01T09:30:00+00:00",
            "budget": 1250.5,
            "seats": 3,
            "public": False,  # its box left unticked
            "size": "l",
        },
        # In the form's own order (on every database: jsonb keeps none), cut at 100.
        "Question “Tell me about the release.” answered: Title: Launch; Owner: ana@example.com; "
        "Site: https://example.com/launch; Day: 2026-12-01; At: 2026-….",
        id="form",
    ),
]


@pytest.mark.parametrize("question, page_shows, refused, good, value, message", CASES)
def test_each_kind_is_answered_with_its_own_form(
    server, people, admin, question, page_shows, refused, good, value, message
):
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [{"ask": question}, {"say": "after"}])
        sid = wait_pending(client, cid)["id"]
        page = admin.get(f"/admin/selection/selection/{sid}/answer/")
        assert page.status_code == 200
        for snippet in page_shows:
            assert snippet in shown(page), snippet
        if question["kind"] == "form":  # its fields as the question ordered them
            names = [f'name="answer-{name}"' for name in SCHEMA["properties"]]
            at = [shown(page).index(name) for name in names]
            assert at == sorted(at), names
        assert "Dismiss" in page.text

        for fields, says in refused:
            page = answer_in_admin(admin, sid, **fields)
            assert page.status_code == 200 and says in shown(page), (fields, shown(page))
            assert client.get(f"/api/selections/{sid}/").json()["status"] == "pending"
        assert "selection.resolved" not in [e["type"] for e in all_events(client, cid)]

        assert message_after(admin, answer_in_admin(admin, sid, **good)) == message
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
    assert outcomes(events) == [{"status": "answered", "value": value, "by": "alice"}]
    said = [e["data"]["text"] for e in events if e["type"] == "message.completed"]
    assert said[-1] == "after" and events[-1]["type"] == "turn.completed"


@pytest.mark.parametrize(
    "question, action, status",
    [
        ({"kind": "confirm", "prompt": "Deploy now?"}, "decline", "declined"),
        ({"kind": "confirm", "prompt": "Deploy now?"}, "dismiss", "dismissed"),
        (
            {"kind": "form", "prompt": "Tell me about the release.", "schema": SCHEMA},
            "dismiss",
            "dismissed",
        ),
    ],
)
def test_decline_and_dismiss_need_no_answer(server, people, admin, question, action, status):
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [{"ask": question}, {"say": "after"}])
        sid = wait_pending(client, cid)["id"]
        done = answer_in_admin(admin, sid, action=action)
        assert message_after(admin, done) == f"Question “{question['prompt']}” {status}."
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
    assert outcomes(events) == [{"status": status, "value": None, "by": "alice"}]
    assert events[-1]["type"] == "turn.completed"


def test_a_question_settled_elsewhere_shows_who_won_and_takes_no_answer(server, people, admin):
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [{"ask": {"kind": "text", "prompt": "Name?"}}])
        sid = wait_pending(client, cid)["id"]
        page = admin.get(f"/admin/selection/selection/{sid}/answer/")  # opened before…
        reply = client.post(f"/api/selections/{sid}/reply/", json={"answer": "Bob's"})
        assert reply.status_code == 200  # …and Bob answered first
        late = post_form(
            admin,
            f"/admin/selection/selection/{sid}/answer/",
            {"action": "answer", "answer-text": "Alice's"},
        )
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
    assert 'name="answer-text"' in page.text
    assert late.status_code == 200
    assert "This question was already answered." in shown(late)
    assert "Question “Name?” answered: “Bob's”." in shown(late)
    assert 'name="answer-text"' not in late.text  # no form any more
    assert outcomes(events) == [{"status": "answered", "value": "Bob's", "by": "bob"}]
