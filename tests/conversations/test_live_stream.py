"""Streaming, replay and tailing through a real Daphne on loopback."""



from tests.conftest import events_until_terminal, receive_json


def assert_contiguous(events, start: int, end: int | None = None):
    seqs = [e["seq"] for e in events]
    expected = list(range(start, start + len(seqs)))
    assert seqs == expected, f"gap or duplicate: {seqs[:10]}…"
    if end is not None:
        assert seqs[-1] == end


async def test_rest_start_streams_live_to_a_watching_socket(server, people, conversation):
    async with server.connect(conversation.pk, people.bob) as ws:
        ready = await receive_json(ws)
        assert ready["type"] == "ws.ready"
        assert ready["latest_seq"] == 0 and ready["in_flight"] is False
        async with server.async_client(people.alice) as client:
            response = await client.post(
                f"/api/conversations/{conversation.pk}/turns/",
                json={"input": "summarize README.md"},
            )
        assert response.status_code == 202, response.text
        started = response.json()
        assert started["conversation"] == conversation.pk and started["seq"] == 1
        events = await events_until_terminal(ws, started["turn"])
    assert_contiguous(events, 1)
    types = [e["type"] for e in events]
    assert types[0] == "turn.started" and types[-1] == "turn.completed"
    assert events[0]["data"]["started_by"]["username"] == "alice"
    assert "tool.started" in types and "tool.completed" in types
    text = "".join(e["data"]["text"] for e in events if e["type"] == "message.delta")
    completed = [e["data"]["text"] for e in events if e["type"] == "message.completed"]
    assert completed == [text]
    assert "**README.md**: 11 lines" in text
