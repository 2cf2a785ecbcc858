"""Shared fixtures: people, a workspace, and a real Daphne on loopback serving the test database."""

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
import websockets
from asgiref.sync import SyncToAsync
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connections

from accounts.models import ApiToken, hash_key, new_key
from conversations import services
from conversations.models import Membership, Workspace
from core.dbthreads import close_connections
from tests import llm_server as llm
from tests.pgbouncer import behind_pgbouncer, release_database
from tests.smtp_server import Mailbox

DEMO_FILES = Path(settings.BASE_DIR) / "conversations" / "demo_files"
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Person:
    user: object
    token: str

    @property
    def username(self) -> str:
        return self.user.username

    @property
    def headers(self) -> dict:
        return {"Authorization": f"Token {self.token}"}


@dataclass
class People:
    alice: Person  # owner
    bob: Person  # member
    carol: Person  # viewer
    dave: Person  # a stranger: member of another workspace only
    workspace: Workspace
    other_workspace: Workspace


def _person(username: str) -> Person:
    user = get_user_model().objects.create_user(
        username=username,
        password=f"{username}-pw",
        first_name=username.title(),
        email=f"{username}@example.com",
    )
    # Made as an admin's fixture would be, with no audit entry (tests of the audit log start
    # from an empty one); tokens made through accounts.tokens are audited.
    key = new_key()
    ApiToken.objects.create(user=user, name="tests", key_hash=hash_key(key), key_start=key[:12])
    return Person(user=user, token=key)


def pytest_sessionfinish(session, exitstatus):
    """Remove the run's scratch folder (test database, files roots), if this run made it."""
    if os.environ.get("PARLEY_TEST_DIR_MADE_BY") == str(os.getpid()):
        shutil.rmtree(os.environ["PARLEY_TEST_DIR"], ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def _pgbouncer_lets_the_test_database_go(request):
    """Behind PgBouncer (the PostgreSQL pass), its idle server connections to the test database
    would keep pytest-django from dropping it at the end: they are closed first."""
    if not behind_pgbouncer():
        yield
        return
    request.getfixturevalue("django_db_setup")
    yield
    release_database(connections["default"].settings_dict["NAME"])


@pytest.fixture
def files_root():
    """The test workspace's files: a fresh copy of the demo files for every test.

    The whole files root is emptied first, so a folder another test's workspace
    was given (say "other", made when its agent first ran) is not seen here.
    """
    everything = Path(settings.PARLEY_FILES_ROOT)
    shutil.rmtree(everything, ignore_errors=True)
    root = everything / "team"
    shutil.copytree(DEMO_FILES, root)
    return root


@pytest.fixture
def people(db, files_root) -> People:
    workspace = Workspace.objects.create(slug="team", name="The Team")
    other = Workspace.objects.create(slug="other", name="Other Team")
    alice, bob, carol, dave = (_person(n) for n in ("alice", "bob", "carol", "dave"))
    services.membership_set(workspace=workspace, user=alice.user, role=Membership.Role.OWNER)
    services.membership_set(workspace=workspace, user=bob.user, role=Membership.Role.MEMBER)
    services.membership_set(workspace=workspace, user=carol.user, role=Membership.Role.VIEWER)
    services.membership_set(workspace=other, user=dave.user, role=Membership.Role.OWNER)
    return People(alice, bob, carol, dave, workspace, other)


@pytest.fixture
def conversation(people):
    return services.conversation_create(
        workspace=people.workspace, user=people.alice.user, title="Plans"
    )


@pytest.fixture
def flood_conversation(people):
    return services.conversation_create(
        workspace=people.workspace, user=people.alice.user, title="Load", agent="flood"
    )


class LiveServer:
    """A real Daphne process on 127.0.0.1, on a socket this test bound (no port race)."""

    def __init__(self, log_path: Path, extra_env: dict | None = None, daphne_args: tuple = ()):
        self.log_path = log_path
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "DATABASE_URL": _server_database_url(),
            "PYTHONUNBUFFERED": "1",
            # Links in what it sends lead to it, as `make run` makes them.
            "PARLEY_PUBLIC_URL": self.url,
            **(extra_env or {}),
        }
        # The browser tests lift Django's async-safety check in this process, never the server's.
        env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        self.log = open(log_path, "w")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daphne",
                "--fd",
                str(self.sock.fileno()),
                *daphne_args,
                "config.asgi:application",
            ],
            cwd=ROOT,
            env=env,
            pass_fds=[self.sock.fileno()],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"Daphne exited early:\n{self.log_text()}")
            try:
                httpx.get(f"{self.url}/api/workspaces/", timeout=2)
                return
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError(f"Daphne did not answer in {timeout} s:\n{self.log_text()}")

    def log_text(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text()

    def client(self, person: Person | None = None, **kwargs) -> httpx.Client:
        headers = person.headers if person else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=20, **kwargs)

    def async_client(self, person: Person | None = None, **kwargs) -> httpx.AsyncClient:
        headers = person.headers if person else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=20, **kwargs)

    def ws_url(self, conversation_id: str, from_seq=None, presence: bool = False) -> str:
        params = {} if from_seq is None else {"from_seq": from_seq}
        if presence:
            params["presence"] = 1
        query = f"?{urlencode(params)}" if params else ""
        return f"ws://127.0.0.1:{self.port}/ws/conversations/{conversation_id}/{query}"

    def connect(
        self,
        conversation_id: str,
        person: Person | None,
        from_seq=None,
        presence: bool = False,
        **kwargs,
    ):
        headers = person.headers if person else {}
        return websockets.connect(
            self.ws_url(conversation_id, from_seq, presence),
            additional_headers=headers,
            open_timeout=10,
            max_size=2**24,
            **kwargs,
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.sock.close()
        self.log.close()


def _server_database_url() -> str:
    database = settings.DATABASES["default"]
    if database["ENGINE"] == "config.sqlite":
        return f"sqlite:///{database['NAME']}"
    # PostgreSQL: the same server, the test database pytest-django created.
    return (
        f"postgres://{database['USER']}:{database['PASSWORD']}@{database['HOST']}:"
        f"{database['PORT']}/{database['NAME']}"
    )


def manage(*args: str, **extra_env: str) -> str:
    """Run a management command in a process of its own, as `make run` runs it, on this test's
    database (a test using it needs ``transactional_db``); what it printed."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": _server_database_url(),
        **extra_env,
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def make_server(transactional_db, tmp_path):
    """Start real Daphnes (with extra environment if given); each log must show no server error."""
    started = []

    def start(
        *, allow_errors_from: tuple[str, ...] = (), daphne_args: tuple = (), **extra_env
    ) -> LiveServer:
        """``allow_errors_from``: loggers whose errors the test provokes on purpose (a library
        complaining while its server is down); ``daphne_args``: Daphne's own options."""
        live = LiveServer(tmp_path / f"daphne-{len(started)}.log", extra_env, daphne_args)
        live.allow_errors_from = allow_errors_from
        started.append(live)
        return live

    yield start
    for live in started:
        live.stop()
    for live in started:
        log = live.log_text()
        # A 500, a crashed consumer or a broken turn is logged at ERROR level.
        for marker in ("Exception inside application", "Task exception"):
            assert marker not in log, log
        for line in log.splitlines():
            if " ERROR " in line:
                fields = line.split(" ", 4)  # date, time, level, logger, message
                assert fields[2:3] == ["ERROR"], log
                assert fields[3].rstrip(":") in live.allow_errors_from, log


@pytest.fixture
def server(make_server) -> LiveServer:
    return make_server()


@pytest.fixture
def mailbox():
    """A real SMTP server on loopback (tests.smtp_server) that keeps what it is sent."""
    box = Mailbox().start()
    yield box
    box.stop()


@pytest.fixture
def admin(server, people):
    """Alice, made a superuser, signed in to the admin of the live server (an httpx client)."""
    from tests.helpers import admin_of  # tests.helpers imports this module

    client = admin_of(server, people)
    yield client
    client.close()


@pytest.fixture(autouse=True)
def _close_db_threads(request):
    yield
    # The database threads keep connections open between calls; close them before the
    # test database is flushed or dropped.
    if "transactional_db" in request.fixturenames or "db" in request.fixturenames:
        close_connections()
        # And the connection of asgiref's thread, where async tests' ORM calls (aget, asave)
        # ran: PostgreSQL will not drop a database that someone is still connected to.
        SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)


async def receive_json(ws, timeout: float = 10) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def events_until_terminal(ws, turn_id: str | None = None, timeout: float = 30) -> list[dict]:
    """Read events from a socket until a turn's terminal event (any turn if ``turn_id`` is None)."""
    events = []
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        remaining = deadline - asyncio.get_running_loop().time()
        frame = await receive_json(ws, max(remaining, 0.01))
        if "seq" not in frame:
            continue
        events.append(frame)
        if frame["type"] in ("turn.completed", "turn.failed", "turn.cancelled") and (
            turn_id is None or frame["turn"] == turn_id
        ):
            return events


def log_in(server: "LiveServer", username: str, login_path: str = "/login/") -> httpx.Client:
    """A client logged in through a login form (the site's or the admin's), as a browser
    would: its session cookie, and the CSRF cookie it needs for unsafe requests."""
    client = httpx.Client(base_url=server.url, timeout=20, follow_redirects=False)
    page = client.get(login_path)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    response = client.post(
        login_path,
        data={"username": username, "password": f"{username}-pw", "csrfmiddlewaretoken": token},
        headers={"Referer": f"{server.url}{login_path}"},
    )
    assert response.status_code == 302, response.text
    return client


def wait_until(condition, timeout: float = 30, what: str = "the condition"):
    """Poll ``condition`` until it returns something true (and return that), for up to
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := condition():
            return result
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def kill(server: "LiveServer") -> None:
    """SIGKILL a server, as a crash would."""
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(timeout=10)


def wait_for_turn_end(client: httpx.Client, conversation_id: str, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = client.get(f"/api/conversations/{conversation_id}/in-flight/").json()
        if not state["in_flight"]:
            return state
        time.sleep(0.05)
    raise AssertionError(f"turn of {conversation_id} still running after {timeout} s")


def all_events(client: httpx.Client, conversation_id: str) -> list[dict]:
    events, after = [], 0
    while True:
        page = client.get(
            f"/api/conversations/{conversation_id}/events/",
            params={"after_seq": after, "limit": 1000},
        ).json()
        events += page["events"]
        after = page["next_after_seq"]
        if not page["has_more"]:
            return events


# The agent backed by a model: a local server speaking the OpenAI protocol (tests/llm_server.py),
# and Parley started pointing at it.
LLM_KEY = "sk-test-secret"


@pytest.fixture
def model():
    with llm.ModelServer(api_key=LLM_KEY, models=("gpt-test", "gpt-other")) as server:
        yield server


@pytest.fixture
def start_parley(make_server, model):
    def start(**env):
        settings = {
            "PARLEY_LLM_BASE_URL": model.base_url,
            "PARLEY_LLM_API_KEY": LLM_KEY,
            "PARLEY_LLM_MODEL": "gpt-test",
            **env,
        }
        return make_server(**settings)

    return start


@pytest.fixture
def admin_client(client, db):
    """Django's test client, logged in as a superuser."""
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(admin)
    return client
