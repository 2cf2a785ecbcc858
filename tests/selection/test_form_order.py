"""A form question's fields keep the order its agent gave them wherever the question is
delivered (its event on the socket and the events page, the REST reads, "Waiting for you", an
answer link's page), though PostgreSQL's jsonb stores the schema's keys shortest first."""

import asyncio
import json

from django.db import connection

from tests.conftest import all_events, events_until_terminal, receive_json
from tests.helpers import ask, create_conversation, start, wait_pending

# Names of decreasing length: jsonb would give them backwards.
ORDER = ["description", "owner", "at"]
SCHEMA = {
    "type": "object",
    "properties": {name: {"type": "string", "title": name.title()} for name in ORDER},
}


def test_a_forms_fields_keep_their_order_wherever_it_is_delivered(server, people):
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [ask(kind="form", schema=SCHEMA)])
        pending = wait_pending(client, cid)
        sid = pending["id"]
        delivered = {
            "in-flight": pending,
            "read": client.get(f"/api/selections/{sid}/").json(),
            "list": client.get("/api/selections/?status=pending").json()[0],
            "waiting": client.get("/api/waiting/").json()["results"][0],
            "answer link page": client.get(f"/api/selections/{sid}/link/").json()["selection"],
        }

        async def over_the_socket():
            async with server.connect(cid, people.bob) as ws:
                await receive_json(ws)  # ws.ready; then the stored events, then live ones
                await ws.send(
                    json.dumps(
                        {
                            "type": "selection.reply",
                            "ref": "r",
                            "selection_id": sid,
                            "answer": {"description": "A launch", "owner": "Ana", "at": "noon"},
                        }
                    )
                )
                return await events_until_terminal(ws)

        socket_events = asyncio.run(over_the_socket())
        delivered["socket"] = next(
            e["data"] for e in socket_events if e["type"] == "selection.requested"
        )
        delivered["events"] = next(
            e["data"] for e in all_events(client, cid) if e["type"] == "selection.requested"
        )
    assert socket_events[-1]["type"] == "turn.completed"
    for where, question in delivered.items():
        assert question["id"] == sid, where
        assert question["field_order"] == ORDER, where
    # Why it must say so: the schema object itself comes back in the database's order.
    stored = list(delivered["read"]["schema"]["properties"])
    assert stored == (sorted(ORDER, key=len) if connection.vendor == "postgresql" else ORDER)
    # A question of another kind has no fields to order.
    with server.client(people.bob) as client:
        other = create_conversation(client)
        start(client, other, [ask(kind="text")])
        assert wait_pending(client, other)["field_order"] is None
