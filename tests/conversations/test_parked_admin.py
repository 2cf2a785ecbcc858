"""The admin's parked turns: turns waiting for an answer, the longest waiting first, with what
each asks, of whom, for how long, and which process holds it (or that none does)."""

import html
import json
import re
import time
from contextlib import closing
from datetime import timedelta

from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from conversations import services
from conversations.models import Turn
from selection.models import Selection
from tests.conftest import log_in, wait_for_turn_end

LISTING = "/admin/conversations/parkedturn/"


def scripted(people, title: str):
    return services.conversation_create(
        workspace=people.workspace, user=people.alice.user, title=title, agent="scripted"
    )


def start(client, conversation, steps: list[dict]) -> str:
    response = client.post(
        f"/api/conversations/{conversation.pk}/turns/", json={"input": json.dumps(steps)}
    )
    assert response.status_code == 202, response.text
    return response.json()["turn"]


def wait_for_question(client, conversation, timeout: float = 20) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = client.get(
            "/api/selections/", params={"status": "pending", "conversation": conversation.pk}
        ).json()
        if pending:
            return pending[0]
        time.sleep(0.05)
    raise AssertionError(f"no question pending in {conversation.pk} after {timeout} s")


def rows(page: str) -> list[str]:
    """The changelist's rows, as text (tags dropped, entities decoded), in order."""
    body = page.split('<table id="result_list">', 1)[1].split("</table>", 1)[0]
    found = re.findall(r"<tr[^>]*>(.*?)</tr>", body.split("<tbody>", 1)[1], re.S)
    return [html.unescape(re.sub(r"<[^>]+>", " ", row)) for row in found]


def test_parked_turns_are_listed_oldest_first_with_their_question_and_holder(server, people):
    get_user_model().objects.create_superuser("root", "root@example.com", "root-pw")
    asks_name, asks_bob, finished = (
        scripted(people, title) for title in ("Names", "Checks", "Done")
    )
    with server.client(people.alice) as alice:
        named = start(alice, asks_name, [{"ask": {"kind": "text", "prompt": "Name?"}}])
        wait_for_question(alice, asks_name)
        confirm = {"kind": "confirm", "prompt": "Ship it, <b>Bob</b>?", "addressee": "bob"}
        checked = start(alice, asks_bob, [{"ask": confirm}])
        wait_for_question(alice, asks_bob)
        done = start(alice, finished, [{"say": "Nothing to ask."}])
        wait_for_turn_end(alice, finished.pk)

    with closing(log_in(server, "root", login_path="/admin/login/")) as admin:
        page = admin.get(LISTING)
        assert page.status_code == 200
        listed = rows(page.text)
        assert len(listed) == 2 and done not in page.text
        first, second = listed
        assert named in first and checked in second  # the one waiting longest comes first
        holder = Turn.objects.get(pk=named).runner
        assert holder and Turn.objects.get(pk=named).lease_expires_at > timezone.now()
        assert "Names" in first and "Name?" in first and " text " in first
        assert re.search(r"\b\d+ s\b", first), first  # how long it has waited
        assert holder in first and "anyone allowed" in first and " alice " in first
        assert "Ship it, <b>Bob</b>?" in second and " confirm " in second and " bob " in second
        assert "Ship it, <b>" not in page.text  # the prompt is escaped
        # Links to each turn's own page (its timeline and Stop) and to the live page.
        assert f'href="/admin/conversations/turn/{quote(named)}/change/"' in page.text
        assert f'href="/conversations/{asks_name.pk}/"' in page.text

        # Released from memory: nobody holds it until its question is settled.
        Turn.objects.filter(pk=named).update(runner="", inbox="", lease_expires_at=None)
        first, second = rows(admin.get(LISTING).text)
        assert named in first and "none (released from memory)" in first
        assert holder not in first
        assert checked in second and "none" not in second
        released = rows(admin.get(LISTING, params={"held": "no"}).text)
        assert len(released) == 1 and named in released[0]
        held = rows(admin.get(LISTING, params={"held": "yes"}).text)
        assert len(held) == 1 and checked in held[0]


def park(conversation, user, prompts: list[str], asked_ago: timedelta) -> Turn:
    """A turn waiting on its questions, stored as selection_request stores them."""
    turn, _ = services.turn_start(conversation=conversation, user=user, input="ask me")
    for ordinal, prompt in enumerate(prompts, start=1):
        question = Selection.objects.create(
            conversation=conversation,
            turn=turn,
            ordinal=ordinal,
            kind=Selection.Kind.TEXT,
            prompt=prompt,
            expires_at=timezone.now() + timedelta(minutes=5),
        )
        Selection.objects.filter(pk=question.pk).update(
            created_at=timezone.now() - asked_ago + timedelta(seconds=ordinal - 1)
        )
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.AWAITING_INPUT)
    return turn


def test_the_listing_reads_the_same_few_queries_however_many_turns_are_parked(admin_client, people):
    def listing() -> tuple[str, int]:
        with CaptureQueriesContext(connection) as queries:
            page = admin_client.get(LISTING)
        assert page.status_code == 200
        return page.content.decode(), len(queries)

    conversations = [
        services.conversation_create(workspace=people.workspace, user=people.bob.user, title=t)
        for t in ("One", "Two", "Three", "Four")
    ]
    park(conversations[0], people.bob.user, ["First?"], timedelta(minutes=3))
    _, alone = listing()
    park(conversations[1], people.bob.user, ["Second?", "Also?"], timedelta(hours=2, minutes=5))
    park(conversations[2], people.bob.user, ["Third?"], timedelta(days=1, hours=3))
    answered = park(conversations[3], people.bob.user, ["Done?"], timedelta(hours=9))
    answered.selections.update(status=Selection.Status.ANSWERED)
    page, many = listing()
    assert many == alone
    listed = rows(page)
    assert len(listed) == 3 and answered.pk not in page  # once each; a settled question is not
    assert [re.search(r"(First|Second|Third)\?", row).group(1) for row in listed] == [
        "Third",
        "Second",
        "First",
    ]
    assert "1 d 3 h" in listed[0] and "2 h 5 min" in listed[1] and "3 min" in listed[2]
    assert "(and 1 more)" in listed[1] and "Also?" not in listed[1]


def test_the_admin_index_and_a_turns_timeline_show_resumed_turns(admin_client, people):
    conversation = services.conversation_create(
        workspace=people.workspace, user=people.bob.user, title="Resumed"
    )
    turn = park(conversation, people.bob.user, ["Still there?"], timedelta(seconds=5))
    with transaction.atomic():
        services.append_events(
            conversation_id=conversation.pk,
            turn_id=turn.pk,
            events=[
                (
                    "turn.resumed",
                    {"process": "web-2:88:bb", "previous": "web-1:77:aa", "reason": "handed_back"},
                )
            ],
        )
    assert "Parked turns" in admin_client.get("/admin/").content.decode()
    page = admin_client.get(f"/admin/conversations/turn/{quote(turn.pk)}/change/")
    assert "<code>turn.resumed</code></td><td>handed_back: by web-2:88:bb (was web-1:77:aa)" in (
        page.content.decode()
    )
