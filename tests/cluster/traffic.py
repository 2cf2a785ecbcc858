"""Steady traffic through the proxy, as a team and its scripts make it, for the deploy tests:
REST requests, sockets watching streaming turns, tails, questions parked and answered, and an
outside agent's question waiting as an MCP task. Every client reconnects as the README says (a
socket from its last seq after 1012, a tail with Last-Event-ID), and everything each one saw is
kept, to be compared with what is stored once the traffic stops.

A failure is what a person would see go wrong: an HTTP answer 500 or above, or a request whose
connection broke (reset, cut off mid-response, refused); each is kept with what it was."""

import asyncio
import json
import ssl
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx
import websockets
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.helpers import CHOICE
from tests.mcp_client import mcp_session

TERMINAL = ("turn.completed", "turn.failed", "turn.cancelled")
# How a socket may be closed during a deploy: a process stopping (1012) or going away (1001).
RECONNECT_CODES = (1000, 1001, 1012)
# How a tail may end: its turn's end, its process stopping, or nothing new since (204).
TAIL_ENDINGS = ("done", "restarting", "nothing new")
STREAM = "summarize README.md"  # the builtin agent streams a summary at a readable pace
ASK = "summarize"  # no path: it asks which file (a path question), then streams


@dataclass
class Tally:
    requests: int = 0
    statuses: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    reconnects: Counter = field(default_factory=Counter)  # by what ended the connection

    def failed(self, what: str) -> None:
        self.failures.append(what)


@dataclass
class Watcher:
    """What one socket or tail saw of a conversation, across its reconnections."""

    cid: str
    kind: str
    events: list[dict] = field(default_factory=list)
    received_at: list[float] = field(default_factory=list)
    out_of_order: list[tuple[int, int]] = field(default_factory=list)

    @property
    def last(self) -> int:
        return self.events[-1]["seq"] if self.events else 0

    def take(self, event: dict) -> None:
        if event["seq"] <= self.last:
            self.out_of_order.append((self.last, event["seq"]))  # a duplicate
            return
        if event["seq"] != self.last + 1:
            self.out_of_order.append((self.last, event["seq"]))  # a gap
        self.events.append(event)
        self.received_at.append(time.monotonic())

    def longest_pause(self) -> float:
        """The longest wait between two events of one turn (a turn's end to the next's start
        is the traffic's own pace, not a pause)."""
        longest = 0.0
        for (one, at), (two, later) in zip(
            zip(self.events, self.received_at, strict=True),
            zip(self.events[1:], self.received_at[1:], strict=True),
            strict=False,
        ):
            if one["turn"] == two["turn"] and one["type"] not in TERMINAL:
                longest = max(longest, later - at)
        return longest


class Traffic:
    def __init__(self, url: str, ca_file: str, tokens: dict[str, str]):
        self.url = url
        self.ws_url = url.replace("https://", "wss://")
        self.ca_file = ca_file
        self.tokens = tokens
        self.tally = Tally()
        self.stopping = asyncio.Event()
        # Set once every turn-starting worker has returned: only then may a watcher, having
        # every stored event with no turn running, be done (a turn started after it looked would
        # be missed).
        self.settled = asyncio.Event()
        self.watchers: list[Watcher] = []
        self.questions: dict[str, dict] = {}  # id -> the question as first seen
        self.answered: Counter = Counter()  # question id -> 200s for its answer
        self.turns_started: Counter = Counter()
        self.mcp_result: dict | None = None
        self.ssl = ssl.create_default_context(cafile=ca_file)

    def client(self, who: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.url,
            verify=self.ssl,
            headers={"Authorization": f"Bearer {self.tokens[who]}"},
            timeout=httpx.Timeout(60),
        )

    async def request(self, client, method: str, path: str, **kwargs) -> httpx.Response | None:
        """One request, counted; None when its connection broke (a failure)."""
        try:
            response = await client.request(method, path, **kwargs)
        except httpx.TransportError as error:
            self.tally.failed(f"{method} {path}: {error!r}")
            return None
        self.tally.requests += 1
        self.tally.statuses[response.status_code] += 1
        if response.status_code >= 500:
            self.tally.failed(f"{method} {path}: {response.status_code} {response.text[:200]}")
        return response

    async def create_conversation(self, who: str, title: str) -> str:
        async with self.client(who) as client:
            response = await self.request(
                client, "POST", "/api/conversations/", json={"workspace": "demo", "title": title}
            )
            assert response is not None and response.status_code == 201, response
            return response.json()["id"]

    # --- the traffic -------------------------------------------------------------------------

    async def browse(self, who: str, cids: list[str]) -> None:
        """A person's page loads and a script's polling: reads, round and round."""
        async with self.client(who) as client:
            while not self.stopping.is_set():
                for path in (
                    "/api/workspaces/",
                    "/api/conversations/?workspace=demo",
                    *(f"/api/conversations/{cid}/" for cid in cids),
                    *(f"/api/conversations/{cid}/events/?limit=20" for cid in cids),
                    "/api/selections/?status=pending",
                    "/healthz",
                ):
                    await self.request(client, "GET", path)
                await asyncio.sleep(0.05)

    async def _run_turn(self, client, cid: str, text: str) -> str | None:
        """Start a turn (waiting while another is active); its id."""
        while True:
            response = await self.request(
                client, "POST", f"/api/conversations/{cid}/turns/", json={"input": text}
            )
            if response is not None and response.status_code == 202:
                self.turns_started[cid] += 1
                return response.json()["turn"]
            if self.stopping.is_set():
                return None
            await asyncio.sleep(0.2)

    async def _until_ended(self, client, cid: str) -> None:
        while True:
            response = await self.request(client, "GET", f"/api/conversations/{cid}/in-flight/")
            if response is not None and response.status_code == 200:
                if not response.json()["in_flight"]:
                    return
            await asyncio.sleep(0.2)

    async def stream_turns(self, who: str, cid: str) -> None:
        """Turns that stream, one after the other, until the traffic stops."""
        async with self.client(who) as client:
            while not self.stopping.is_set():
                if await self._run_turn(client, cid, STREAM):
                    await self._until_ended(client, cid)

    async def ask_and_answer(self, who: str, answerer: str, cid: str) -> None:
        """Turns that park on a question, answered over REST by someone else."""
        async with self.client(who) as client, self.client(answerer) as answering:
            while not self.stopping.is_set():
                if not await self._run_turn(client, cid, ASK):
                    return
                question = await self._pending_in(answering, cid)
                self.questions[question["id"]] = question
                response = await self.request(
                    answering,
                    "POST",
                    f"/api/selections/{question['id']}/reply/",
                    json={"answer": "README.md"},
                )
                if response is not None and response.status_code == 200:
                    self.answered[question["id"]] += 1
                await self._until_ended(client, cid)

    async def _pending_in(self, client, cid: str) -> dict:
        while True:
            response = await self.request(client, "GET", "/api/selections/?status=pending")
            if response is not None and response.status_code == 200:
                for question in response.json():
                    if question["conversation"] == cid:
                        return question
            await asyncio.sleep(0.1)

    async def watch(self, who: str, cid: str) -> Watcher:
        """A socket on the conversation, reconnecting from its last seq whenever it is closed."""
        watcher = Watcher(cid, "socket")
        self.watchers.append(watcher)
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        while True:
            url = f"{self.ws_url}/ws/conversations/{cid}/?from_seq={watcher.last}"
            try:
                async with websockets.connect(
                    url, additional_headers=headers, ssl=self.ssl, open_timeout=30
                ) as ws:
                    while True:
                        try:
                            message = await asyncio.wait_for(ws.recv(), timeout=1)
                        except TimeoutError:
                            if self.settled.is_set() and await self._caught_up(watcher):
                                return watcher
                            continue
                        frame = json.loads(message)
                        if "seq" in frame and "type" in frame and "turn" in frame:
                            watcher.take(frame)
            except ConnectionClosed as closed:
                code = closed.rcvd.code if closed.rcvd else None
                self.tally.reconnects[f"socket {code}"] += 1
                if code not in RECONNECT_CODES:
                    # No close frame (cut off), or a close that is no "come back".
                    self.tally.failed(f"socket closed: {code} {closed!r}")
            except InvalidStatus as refused:
                self.tally.failed(f"socket handshake: {refused.response.status_code}")
            except OSError as error:
                self.tally.failed(f"socket connect: {error!r}")
            if self.settled.is_set() and await self._caught_up(watcher):
                return watcher

    async def tail(self, who: str, cid: str) -> Watcher:
        """A tail, reconnected with Last-Event-ID whenever it ends, as an EventSource would
        (after a turn's ``done``, to follow the next)."""
        watcher = Watcher(cid, "tail")
        self.watchers.append(watcher)
        async with self.client(who) as client:
            while True:
                headers = {"Last-Event-ID": str(watcher.last)}
                path = f"/api/conversations/{cid}/tail/"
                ending = None
                try:
                    async with client.stream("GET", path, headers=headers) as response:
                        self.tally.requests += 1
                        self.tally.statuses[response.status_code] += 1
                        if response.status_code >= 500:
                            self.tally.failed(f"tail: {response.status_code}")
                        if response.status_code == 204:
                            ending = "nothing new"
                        name = None
                        async for line in response.aiter_lines():
                            if line.startswith(": restarting"):
                                ending = "restarting"
                            elif line.startswith("event: "):
                                name = line.removeprefix("event: ")
                            elif line.startswith("data: "):
                                data = json.loads(line.removeprefix("data: "))
                                if name is None:
                                    watcher.take(data)
                                else:
                                    ending = name
                                name = None
                except httpx.TransportError as error:
                    self.tally.failed(f"tail: {error!r}")
                self.tally.reconnects[f"tail {ending}"] += 1
                if ending not in TAIL_ENDINGS:
                    # An error event (fell behind, access lost) or an end with no word at all.
                    self.tally.failed(f"tail ended: {ending}")
                if self.settled.is_set() and await self._caught_up(watcher):
                    return watcher
                if ending != "restarting":
                    await asyncio.sleep(0.2)  # between turns: look again shortly

    async def _caught_up(self, watcher: Watcher) -> bool:
        """Whether the watcher has every stored event and no turn is running."""
        async with self.client("alice") as client:
            response = await self.request(
                client, "GET", f"/api/conversations/{watcher.cid}/in-flight/"
            )
        if response is None or response.status_code != 200:
            return False
        state = response.json()
        return not state["in_flight"] and watcher.last >= state["latest_seq"]

    async def outside_agent(self, who: str) -> None:
        """An outside agent asks the team as an MCP task, lets its session go, and collects the
        answer from a new session, whichever process it reaches."""
        from mcp import types

        async with mcp_session(self.url, self.tokens[who], verify=self.ssl) as mcp:
            created = await mcp.experimental.call_tool_as_task("ask", CHOICE, ttl=600_000)
        task_id = created.task.taskId
        while True:
            try:
                async with mcp_session(self.url, self.tokens[who], verify=self.ssl) as later:
                    found = await later.experimental.get_task(task_id)
                    if found.status == "completed":
                        result = await later.experimental.get_task_result(
                            task_id, types.CallToolResult
                        )
                        self.mcp_result = result.structuredContent
                        return
            except Exception as error:
                if "Session terminated" in repr(error):
                    # 404 for a session its process ended as it stopped: open a new one.
                    self.tally.reconnects["mcp session ended"] += 1
                else:
                    self.tally.failed(f"mcp: {error!r}")
            await asyncio.sleep(0.5)

    async def stored(self, cid: str) -> list[dict]:
        events, after = [], 0
        async with self.client("alice") as client:
            while True:
                response = await client.get(
                    f"/api/conversations/{cid}/events/", params={"after_seq": after, "limit": 1000}
                )
                page = response.json()["events"]
                if not page:
                    return events
                events += page
                after = page[-1]["seq"]
