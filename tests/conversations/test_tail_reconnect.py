"""The tail and the clients that reconnect to it, through a real Daphne: `retry:` with the first
frame, a reconnect before the end given the rest (no gap, no duplicate), and one with nothing
left to give answered 204, which stops an EventSource."""

import json

import httpx_sse

from tests.conftest import all_events, wait_for_turn_end
from tests.helpers import assert_contiguous, assert_one_terminal_last, start


def tail_path(cid) -> str:
    return f"/api/conversations/{cid}/tail/"


def whole_body(client, cid, **kwargs) -> str:
    with client.stream("GET", tail_path(cid), **kwargs) as response:
        assert response.status_code == 200, response.read()
        return "".join(response.iter_text())


def frames(body: str) -> list[dict]:
    """Each block of the stream as its fields (``comment`` for a comment line)."""
    blocks = []
    for block in body.split("\n\n")[:-1]:
        fields = {}
        for line in block.split("\n"):
            name, _, value = line.partition(": ")
            fields[name or "comment"] = value
        blocks.append(fields)
    return blocks


def read_until_done(client, cid, *, stop_after: int | None = None, **kwargs):
    """The events of one tail response, its `done` (None if it was left early) and the `retry`
    of each frame that had one; with ``stop_after``, the client hangs up after that many
    events, as a dropped connection would leave it."""
    events, done, retries = [], None, []
    with httpx_sse.connect_sse(client, "GET", tail_path(cid), **kwargs) as sse:
        assert sse.response.status_code == 200
        for message in sse.iter_sse():
            if message.retry is not None:
                retries.append(message.retry)
            if message.event == "done":
                done = (message.id, json.loads(message.data))
                break
            events.append(json.loads(message.data))
            assert message.id == str(events[-1]["seq"])
            if stop_after is not None and len(events) == stop_after:
                break
    return events, done, retries


def test_the_first_frame_carries_retry_and_done_carries_an_id(make_server, people, conversation):
    server = make_server(PARLEY_SSE_RETRY_SECONDS="0.25")
    cid = conversation.pk
    with server.client(people.alice) as client:
        start(client, cid, "list")
        latest = wait_for_turn_end(client, cid)["latest_seq"]
        body = whole_body(client, cid, params={"from_seq": 0})
        blocks = frames(body)
        assert blocks[0] == {"comment": "connected"}
        # The retry rides on the first event, not in a block of its own (which some clients,
        # httpx-sse among them, would hand over as an empty event).
        assert list(blocks[1]) == ["retry", "id", "data"]
        assert blocks[1]["retry"] == "250" and blocks[1]["id"] == "1"
        assert body.count("retry:") == 1
        assert blocks[-1]["id"] == str(latest) and blocks[-1]["event"] == "done"
        assert json.loads(blocks[-1]["data"]) == {"latest_seq": latest}

        # Nothing to send (a fresh tail, no Last-Event-ID): done alone, with the retry and an
        # id, so that an EventSource opened here comes back with Last-Event-ID and is told 204.
        blocks = frames(whole_body(client, cid, params={"from_seq": latest}))
        assert blocks[1:] == [
            {
                "retry": "250",
                "id": str(latest),
                "event": "done",
                "data": json.dumps({"latest_seq": latest}, separators=(",", ":")),
            }
        ]


def test_a_reconnect_at_the_end_of_a_finished_turn_gets_204_and_nothing_else(
    server, people, conversation
):
    cid = conversation.pk
    with server.client(people.alice) as client:
        start(client, cid, "list")
        latest = wait_for_turn_end(client, cid)["latest_seq"]
        events, done, _ = read_until_done(client, cid)
        assert_contiguous(events, 1, latest)
        assert done == (str(latest), {"latest_seq": latest})
        # As an EventSource comes back (the URL it was given, and the id it has).
        for params in ({}, {"from_seq": 0}):
            response = client.get(tail_path(cid), params=params, headers={"Last-Event-ID": done[0]})
            assert response.status_code == 204
            assert response.content == b"" and "content-type" not in response.headers
            assert response.headers["cache-control"] == "no-cache"
        # Beyond the conversation's end is not a reconnect: a clear error, as before.
        response = client.get(tail_path(cid), headers={"Last-Event-ID": str(latest + 1)})
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "invalid_last_event_id"
        # A fresh tail from the end (no Last-Event-ID) keeps its contract: done.
        assert frames(whole_body(client, cid, params={"from_seq": latest}))[-1]["event"] == "done"
        # Before the end, a reconnect gets the rest.
        events, done, _ = read_until_done(client, cid, headers={"Last-Event-ID": str(latest - 2)})
        assert [e["seq"] for e in events] == [latest - 1, latest]
    # Access first: a stranger learns nothing, not even that the tail has ended.
    with server.client(people.dave) as stranger:
        response = stranger.get(tail_path(cid), headers={"Last-Event-ID": str(latest)})
        assert response.status_code == 404


def test_a_tail_cut_mid_turn_resumes_with_no_gap_and_no_duplicate_then_stops(
    server, people, flood_conversation
):
    cid = flood_conversation.pk
    with server.client(people.alice) as client:
        start(client, cid, "300 events every 10")
        first, done, retries = read_until_done(client, cid, stop_after=12)
        assert done is None and retries == [2000]  # the default, PARLEY_SSE_RETRY_SECONDS
        assert client.get(f"/api/conversations/{cid}/in-flight/").json()["in_flight"] is True
        last_id = str(first[-1]["seq"])
        rest, done, retries = read_until_done(client, cid, headers={"Last-Event-ID": last_id})
        assert retries == [2000]  # every response's first frame
        stored = all_events(client, cid)
        assert first + rest == stored
        assert_contiguous(first + rest, 1, 302)
        assert_one_terminal_last(first + rest)
        assert done == ("302", {"latest_seq": 302})
        response = client.get(tail_path(cid), headers={"Last-Event-ID": done[0]})
        assert response.status_code == 204


def test_a_reconnect_after_a_newer_turn_started_gets_that_turn_to_its_end(
    server, people, flood_conversation
):
    """A tail gives what the client has not seen: if a turn started after the one it followed
    ended, a reconnect from that end gets the new turn, then done, then 204."""
    cid = flood_conversation.pk
    with server.client(people.alice) as client:
        first_turn = start(client, cid, "4 events")
        end_of_first = wait_for_turn_end(client, cid)["latest_seq"]
        events, done, _ = read_until_done(client, cid)
        assert done == (str(end_of_first), {"latest_seq": end_of_first})
        second_turn = start(client, cid, "200 events every 10")
        rest, done, _ = read_until_done(client, cid, headers={"Last-Event-ID": done[0]})
        assert_contiguous(rest, end_of_first + 1, end_of_first + 202)
        assert {e["turn"] for e in events} == {first_turn}
        assert {e["turn"] for e in rest} == {second_turn}
        assert rest[0]["type"] == "turn.started" and rest[-1]["type"] == "turn.completed"
        assert done == (str(end_of_first + 202), {"latest_seq": end_of_first + 202})
        response = client.get(tail_path(cid), headers={"Last-Event-ID": done[0]})
        assert response.status_code == 204
