"""The ceiling: a bare Daphne consumer that pushes pre-encoded frames to its sockets in a loop.

A client sends ``{"count": N}`` on any socket; every socket connected then gets N copies of a
frame the size of a Parley event, the loop handing each frame to each socket in turn.

At ``/stock/`` the same, the way Channels' documentation fans out: every socket joins one group
on the channel layer (Channels' in-memory layer), and each frame is a ``group_send`` that the
layer hands to each socket's consumer, which sends it. The baseline a Channels app starts from.

Over HTTP it is the bare request: any POST is read to its end and answered with a small JSON
200, with no framework in between (other methods get a 405), the floor for a round trip
through Daphne. A POST to ``/drf/`` goes instead through Django's ASGI handler, with no
middleware, to a DRF view with no authentication that parses the JSON body and answers the same
document: what the framework alone costs, before any of Parley's work.

The twins of bench/ratios.py, plain ASGI (no Channels consumer), through Daphne's own send:

- ``/accept/``: a socket accepted and sent one frame the size of Parley's ``ws.ready``, then
  held until it closes: a handshake's floor, and a socket's resident memory;
- ``/fan/<group>/``: the same, the socket joining group ``<group>``; a POST to ``/fan/run/``
  with ``{"groups": G, "rate": R, "seconds": S}`` sends an event-sized frame R times a second
  for S seconds to every socket of groups ``0`` to ``G - 1``, and answers once done: the
  fan-out's floor.
"""

import asyncio
import json

import django
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.urls import path

# Django for /drf/ alone: no apps but DRF's needs, no middleware, no database.
settings.configure(
    DEBUG=False,
    SECRET_KEY="bench-bare-app",
    ALLOWED_HOSTS=["*"],
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "rest_framework"],
    MIDDLEWARE=[],
    ROOT_URLCONF=__name__,
    DATABASES={},
    # Room for every frame of a round in each socket's queue: a full one drops messages.
    CHANNEL_LAYERS={
        "default": {
            "BACKEND": "channels.layers.InMemoryChannelLayer",
            "CONFIG": {"capacity": 1_000_000},
        }
    },
    REST_FRAMEWORK={
        "DEFAULT_AUTHENTICATION_CLASSES": [],
        "DEFAULT_PERMISSION_CLASSES": [],
        "UNAUTHENTICATED_USER": None,
    },
)
django.setup()

from django.core.asgi import get_asgi_application  # noqa: E402
from rest_framework.response import Response  # noqa: E402
from rest_framework.views import APIView  # noqa: E402

FRAME = json.dumps(
    {
        "seq": 123456,
        "type": "tool.completed",
        "conversation": "c_0123456789abcdef",
        "turn": "t_0123456789abcdef",
        "ts": "2026-11-22T10:00:00.123Z",
        "data": {"id": "call_12345", "name": "tick", "result": 12345},
    },
    separators=(",", ":"),
)
READY = json.dumps(
    {
        "type": "ws.ready",
        "conversation": "c_0123456789abcdef",
        "latest_seq": 123456,
        "in_flight": False,
        "turn": None,
        "status": None,
        "role": "owner",
    },
    separators=(",", ":"),
)
SOCKETS: set = set()
GROUPS: dict[str, set] = {}


class PushConsumer(AsyncWebsocketConsumer):
    channel_layer_alias = None

    async def connect(self):
        await self.accept()
        SOCKETS.add(self)

    async def disconnect(self, code):
        SOCKETS.discard(self)

    async def receive(self, text_data=None, bytes_data=None):
        count = json.loads(text_data)["count"]
        targets = list(SOCKETS)
        for number in range(count):
            for consumer in targets:
                await consumer.send(text_data=FRAME)
            if number % 100 == 99:
                await asyncio.sleep(0)  # let the reactor write, as any real producer would


class StockConsumer(AsyncWebsocketConsumer):
    groups = ["stock"]

    async def receive(self, text_data=None, bytes_data=None):
        for _ in range(json.loads(text_data)["count"]):
            await self.channel_layer.group_send("stock", {"type": "frame"})

    async def frame(self, event):
        await self.send(text_data=FRAME)


push = PushConsumer.as_asgi()
stock = StockConsumer.as_asgi()
ANSWER = b'{"ok":true}'


async def answer(scope, receive, send):
    """A bare POST: read the body, answer 200 with a small JSON document."""
    while (await receive()).get("more_body", False):
        pass
    ok = scope["method"] == "POST"
    await send(
        {
            "type": "http.response.start",
            "status": 200 if ok else 405,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(ANSWER) if ok else 0).encode()),
                *([] if ok else [(b"allow", b"POST")]),
            ],
        }
    )
    await send({"type": "http.response.body", "body": ANSWER if ok else b""})


async def accept(scope, receive, send, group: set | None = None):
    """A bare socket: accepted, sent a ws.ready-sized frame, held (in ``group``) until closed."""
    assert (await receive())["type"] == "websocket.connect"
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.send", "text": READY})
    if group is not None:
        group.add(send)
    try:
        while (await receive())["type"] != "websocket.disconnect":
            pass
    finally:
        if group is not None:
            group.discard(send)


async def fan_run(scope, receive, send):
    """POST /fan/run/: the frame sent ``rate`` times a second to every socket of the first
    ``groups`` groups for ``seconds``, each tick on time (as a paced turn's events are)."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body", False):
            break
    spec = json.loads(body)
    loop = asyncio.get_running_loop()
    started = loop.time()
    ticks = round(spec["rate"] * spec["seconds"])
    message = {"type": "websocket.send", "text": FRAME}
    for tick in range(ticks):
        for number in range(spec["groups"]):
            for member in list(GROUPS.get(str(number), ())):
                await member(message)
        await asyncio.sleep(max(0, started + (tick + 1) / spec["rate"] - loop.time()))
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": ANSWER})


class BareDrfView(APIView):
    def post(self, request):
        request.data  # parsed, as a view's body is  # noqa: B018
        return Response({"ok": True})


urlpatterns = [path("drf/", BareDrfView.as_view())]
django_app = get_asgi_application()


async def application(scope, receive, send):
    if scope["type"] == "http":
        if scope["path"] == "/drf/":
            await django_app(scope, receive, send)
        elif scope["path"] == "/fan/run/":
            await fan_run(scope, receive, send)
        else:
            await answer(scope, receive, send)
    elif scope["path"] == "/stock/":
        await stock(scope, receive, send)
    elif scope["path"] == "/accept/":
        await accept(scope, receive, send)
    elif scope["path"].startswith("/fan/"):
        group = GROUPS.setdefault(scope["path"].split("/")[2], set())
        await accept(scope, receive, send, group)
    else:
        await push(scope, receive, send)
