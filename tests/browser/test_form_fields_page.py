"""A form question's fields, and its answer read back, in the order its agent gave them, though
the stored schema and answer objects come back in another (as PostgreSQL's jsonb gives them:
shortest key first)."""

import pytest
from playwright.sync_api import expect

from conversations.models import TurnEvent
from selection.models import Selection
from tests.conftest import wait_for_turn_end
from tests.helpers import ask, create_conversation, start, wait_pending

pytestmark = pytest.mark.browser

ORDER = ["description", "owner", "at"]
TITLES = [name.title() for name in ORDER]


def jsonb_order(mapping: dict) -> dict:
    """The object as jsonb stores it: shorter keys first."""
    return {key: mapping[key] for key in sorted(mapping, key=lambda key: (len(key), key))}


def test_a_forms_fields_show_in_the_order_its_question_gave_them(browsing, people):
    schema = {
        "type": "object",
        "properties": {name: {"type": "string", "title": name.title()} for name in ORDER},
    }
    with browsing.server.client(people.alice) as alice:
        cid = create_conversation(alice, title="Ordered form")
        start(alice, cid, [ask(kind="form", prompt="Tell me about it.", schema=schema)])
        sid = wait_pending(alice, cid)["id"]
    # The stored schema loses its order, in the question and in its event.
    reordered = {**schema, "properties": jsonb_order(schema["properties"])}
    assert list(reordered["properties"]) != ORDER
    Selection.objects.filter(pk=sid).update(schema=reordered)
    requested = TurnEvent.objects.get(conversation_id=cid, type="selection.requested")
    requested.data = {**requested.data, "schema": reordered}
    requested.save(update_fields=["data"])

    page = browsing.conversation("alice", cid)
    expect(page.locator(".question label")).to_have_text(TITLES)
    waiting = browsing.open("alice", "/waiting/")
    card = waiting.locator(".waiting-item .question")
    expect(card.locator("label")).to_have_text(TITLES)
    for title, value in zip(TITLES, ["A launch", "Ana", "noon"], strict=True):
        card.get_by_label(title).fill(value)
    card.get_by_role("button", name="Send").click()
    said = "Answered by Alice: Description: A launch; Owner: Ana; At: noon"
    expect(card.locator(".question-outcome")).to_have_text(said)

    # Its answer, stored in another order too, reads back in the form's.
    with browsing.server.client(people.alice) as alice:
        wait_for_turn_end(alice, cid)
    resolved = TurnEvent.objects.get(conversation_id=cid, type="selection.resolved")
    resolved.data = {**resolved.data, "answer": jsonb_order(resolved.data["answer"])}
    resolved.save(update_fields=["data"])
    page.reload()
    expect(page.locator(".question .question-outcome")).to_have_text(said)
