"""The admin for the model's conversations and turns: the model a conversation picked, whether a
turn confirms its writes, and the tokens a turn used (from its terminal event), on the turn's
page and as a column of the list that costs no query per row."""

import html
import re

import pytest
from django.contrib.admin.utils import quote
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from conversations import services
from conversations.models import Turn

TURNS = "/admin/conversations/turn/"
CONVERSATIONS = "/admin/conversations/conversation/"
USAGE = {"prompt_tokens": 1200, "completion_tokens": 34, "total_tokens": 1234}


@pytest.fixture
def with_model(settings):
    """This process set up as a server with a model is: the openai agent, offering two models."""
    settings.PARLEY_LLM_MODEL = "gpt-test"
    settings.PARLEY_LLM_MODELS = ["gpt-other"]
    settings.PARLEY_AGENTS = {
        **settings.PARLEY_AGENTS,
        "openai": "conversations.agents.llm.OpenAIAgent",
    }


def model_conversation(people, title: str = "With a model"):
    return services.conversation_create(
        workspace=people.workspace,
        user=people.alice.user,
        title=title,
        agent="openai",
        model="gpt-other",
    )


def finished(conversation, user, *, usage=None, confirm_writes=True, notice=None) -> Turn:
    """A turn that ran and ended as a runner ends one: its events, then its terminal event
    (with the tokens its model used, if any)."""
    turn, _ = services.turn_start(
        conversation=conversation, user=user, input="hello", confirm_writes=confirm_writes
    )
    events = [("message.delta", {"text": "Hi."}), ("message.completed", {"text": "Hi."})]
    if notice:
        events.insert(0, ("turn.notice", notice))
    with transaction.atomic():
        services.append_events(conversation_id=conversation.pk, turn_id=turn.pk, events=events)
    services.turn_finish(turn_id=turn.pk, status=Turn.Status.COMPLETED, usage=usage)
    return turn


def text(fragment: str) -> str:
    """Markup as a person reads it: tags dropped, entities decoded, spaces squeezed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def readonly(page: str, field: str) -> str:
    """What a read-only field of a change page shows, with its label."""
    row = re.search(
        rf'<div class="form-row[^"]*field-{field}[^"]*">(.*?)<div class="readonly">(.*?)</div>',
        page,
        re.S,
    )
    assert row, f"no read-only field {field!r} on the page"
    return f"{text(row.group(1))} {text(row.group(2))}"


def column(page: str, name: str) -> list[str]:
    """A changelist column's cells, top to bottom, as text."""
    return [text(cell) for cell in re.findall(rf'<td class="field-{name}">(.*?)</td>', page, re.S)]


def test_a_turns_page_shows_the_tokens_its_model_used_and_whether_it_confirms_writes(
    admin_client, people, with_model
):
    notice = {"kind": "retry", "text": "The model server answered 429; trying again in 1 s."}
    turn = finished(
        model_conversation(people),
        people.bob.user,
        usage=USAGE,
        confirm_writes=False,
        notice=notice,
    )
    page = admin_client.get(f"{TURNS}{quote(turn.pk)}/change/")
    assert page.status_code == 200
    body = page.content.decode()
    assert readonly(body, "tokens_used") == (
        "Tokens used: 1,200 prompt / 34 completion / 1,234 total"
    )
    assert readonly(body, "confirm_writes").startswith("Confirm writes:")
    assert 'name="confirm_writes"' not in body  # read-only: no control to change it
    assert re.search(r'field-confirm_writes.*?alt="False"', body, re.S)
    # The timeline says what the notice said, and the tokens with the end.
    assert f"<code>turn.notice</code></td><td>retry: {html.escape(notice['text'])}" in body
    assert "<code>turn.completed</code></td><td>1,200 prompt / 34 completion / 1,234 total" in body


def test_a_turn_without_a_model_shows_no_tokens(admin_client, people, conversation):
    turn = finished(conversation, people.bob.user)
    body = admin_client.get(f"{TURNS}{quote(turn.pk)}/change/").content.decode()
    assert readonly(body, "tokens_used") == "Tokens used: —"
    assert re.search(r'field-confirm_writes.*?alt="True"', body, re.S)


def test_the_turn_list_shows_each_turns_tokens_in_the_same_few_queries(
    admin_client, people, with_model, conversation
):
    def listing() -> tuple[str, int]:
        with CaptureQueriesContext(connection) as queries:
            page = admin_client.get(TURNS)
        assert page.status_code == 200
        return page.content.decode(), len(queries)

    finished(model_conversation(people, "First"), people.bob.user, usage=USAGE)
    first, alone = listing()
    assert column(first, "tokens") == ["1,234"]
    assert 'title="1,200 prompt / 34 completion / 1,234 total"' in first

    finished(conversation, people.alice.user)  # the builtin agent: no model, no tokens
    small = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    finished(model_conversation(people, "Third"), people.bob.user, usage=small)
    services.turn_start(
        conversation=model_conversation(people, "Running"),
        user=people.bob.user,
        input="still going",
    )
    page, many = listing()
    assert many == alone
    # The newest first: running (no end yet), then the small one, the builtin's, the first.
    assert column(page, "tokens") == ["—", "10", "—", "1,234"]
    assert len(column(page, "confirm_writes")) == 4


def test_the_turn_list_filters_by_confirm_writes(admin_client, people, with_model):
    asks = finished(model_conversation(people, "Asks"), people.bob.user, usage=USAGE)
    free = finished(
        model_conversation(people, "Free"), people.bob.user, usage=USAGE, confirm_writes=False
    )
    page = admin_client.get(TURNS, {"confirm_writes__exact": "0"}).content.decode()
    assert free.pk in page and asks.pk not in page


def test_the_conversation_admin_shows_the_model_picked(admin_client, people, with_model):
    picked = model_conversation(people, "Picked")
    default = services.conversation_create(
        workspace=people.workspace, user=people.alice.user, title="Default", agent="openai"
    )
    listing = admin_client.get(CONVERSATIONS).content.decode()
    assert column(listing, "model") == ["-", "gpt-other"]  # newest first; '-': its default
    assert column(listing, "agent") == ["openai", "openai"]
    page = admin_client.get(f"{CONVERSATIONS}{quote(picked.pk)}/change/").content.decode()
    assert re.search(r'<input[^>]*name="model"[^>]*value="gpt-other"', page)
    filtered = admin_client.get(CONVERSATIONS, {"model__exact": "gpt-other"}).content.decode()
    assert picked.pk in filtered and default.pk not in filtered
