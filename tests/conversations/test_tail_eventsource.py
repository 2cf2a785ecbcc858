"""The npm `eventsource` package (tests/clients/tail.mjs, run by Node) on the tail of a running
turn, through a proxy that cuts the connection mid-turn: it comes back by itself with
Last-Event-ID, misses nothing and gets nothing twice, and stops by itself at the end (204),
never having been closed."""

import json
import subprocess
from datetime import datetime
from pathlib import Path

from tests.conftest import all_events
from tests.cut_proxy import CutProxy
from tests.helpers import start

SCRIPT = Path(__file__).resolve().parents[1] / "clients" / "tail.mjs"
CUT_AFTER = 15
TIMEOUT = 45  # the script's own bound; the subprocess's is a little longer


def test_eventsource_resumes_a_cut_tail_and_stops_by_itself_at_the_end(
    make_server, people, flood_conversation
):
    server = make_server(PARLEY_SSE_RETRY_SECONDS="0.3")
    cid = flood_conversation.pk
    with server.client(people.alice) as client, CutProxy(server.port, CUT_AFTER) as proxy:
        turn = start(client, cid, "200 events every 15")
        run = subprocess.run(
            [
                "node",
                str(SCRIPT),
                f"{proxy.url}/api/conversations/{cid}/tail/?from_seq=0",
                people.bob.token,
                str(TIMEOUT),
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT + 15,
        )
        stored = all_events(client, cid)
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    kinds = [line["kind"] for line in lines]
    assert run.returncode == 0, (run.returncode, run.stdout[-2000:], run.stderr[-2000:])
    assert "timeout" not in kinds

    # Every event once, in order, each with its seq as id: the whole turn as stored.
    events = [line for line in lines if line["kind"] == "event"]
    assert [e["seq"] for e in events] == [e["seq"] for e in stored] == list(range(1, 203))
    assert all(e["id"] == str(e["seq"]) for e in events)
    assert {e["turn"] for e in stored} == {turn} and events[-1]["type"] == "turn.completed"

    # The cut: after CUT_AFTER events (the next one's start was delivered, and dropped), while
    # the turn was running; the EventSource reconnected on its own with the last id it had.
    first_error = kinds.index("error")
    assert kinds[:first_error].count("event") == CUT_AFTER
    assert lines[first_error]["readyState"] == 0  # CONNECTING: it will come back
    ended = datetime.fromisoformat(stored[-1]["ts"].replace("Z", "+00:00")).timestamp()
    assert lines[first_error]["at"] / 1000 < ended, "the cut came after the turn's end"
    exchanges = [
        (headers.get("last-event-id"), status)
        for passage in proxy.passages
        for headers, status in passage.exchanges()
    ]
    # Then the end: done, and the reconnect that follows it answered 204.
    assert exchanges == [(None, 200), (str(CUT_AFTER), 200), ("202", 204)], exchanges
    assert proxy.passages[0].cut and len(proxy.passages[0].exchanges()) == 1
    assert all(p.response.count(b"retry: 300\n") == 1 for p in proxy.passages[:2])

    # done has the last seq as its id; the 204 CLOSED the EventSource, which the script
    # never closed, and the script then ended by itself.
    done = next(line for line in lines if line["kind"] == "done")
    assert done == {"kind": "done", "id": "202", "data": {"latest_seq": 202}}
    # Each end of a response is an error to an EventSource: the cut and the end after done
    # (CONNECTING: it comes back), then the 204 (CLOSED: it does not).
    errors = [(line["code"], line["readyState"]) for line in lines if line["kind"] == "error"]
    assert errors == [(None, 0), (None, 0), (204, 2)], errors
    assert kinds[kinds.index("done") + 1 :] == ["error", "error", "stopped"]
    assert lines[-1] == {"kind": "stopped", "readyState": 2}  # CLOSED
