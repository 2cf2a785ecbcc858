"""`make cluster`: Parley as production runs it, on one machine. PostgreSQL, Redis with
Sentinel, two Parley processes started as ``ops/deploy/parley@.service`` starts them, with
``ops/deploy/parley.env``, and HAProxy in front (``ops/deploy/haproxy.cfg``, see ops.proxy)
ending TLS on one https address.

    python -m ops.cluster           start it all; Ctrl-C (or SIGTERM) stops everything cleanly
    python -m ops.cluster deploy    replace each process of the running cluster in turn

A deploy migrates, then for each process: starts its successor on the process's other port,
waits until the successor is ready and the proxy sends it work, then stops the old one as systemd
would (the unit's KillSignal, SIGTERM, which drains it; killed only after TimeoutStopSec). The
running cluster does it, told over a Unix socket in its folder, and reports each step.

Redis runs as the recipe's Sentinel setup (a primary, a replica, three sentinels). Data lives
under ``var/cluster/`` (``PARLEY_CLUSTER_DIR``), so conversations survive a restart.
The processes listen on 8001 and 8002 (``PARLEY_CLUSTER_PORTS``) and their successors on 8011 and
8012 (``PARLEY_CLUSTER_SPARE_PORTS``); the proxy on https://localhost:8443/
(``PARLEY_CLUSTER_HTTPS_PORT``), redirecting http on 8080 (``PARLEY_CLUSTER_HTTP_PORT``).
"""

import configparser
import hashlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from ops.proxy import Proxy
from ops.sentinels import RedisSentinels
from ops.servers import PgBouncer, Postgres, reachable_by_postgres

ROOT = Path(__file__).resolve().parent.parent
UNIT = ROOT / "ops" / "deploy" / "parley@.service"
ENV_FILE = ROOT / "ops" / "deploy" / "parley.env"


def _ports(name: str, default: str) -> list[int]:
    text = os.environ.get(name, default)
    return [int(port) for port in text.split(",") if port.strip()]


def read_env_file(path: Path = ENV_FILE) -> dict[str, str]:
    """An EnvironmentFile as systemd reads it: ``KEY=value`` lines, comments and blanks skipped."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";")):
            key, _, value = line.partition("=")
            found[key.strip()] = value.strip().strip('"')
    return found


class Unit:
    """What systemd takes from ``parley@.service`` to start and stop one process."""

    def __init__(self, path: Path = UNIT):
        parser = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
        parser.optionxform = str
        parser.read(path)
        service = parser["Service"]
        self.exec_start = shlex.split(service["ExecStart"])
        self.environment = dict(
            item.split("=", 1) for item in shlex.split(service.get("Environment", ""))
        )
        self.kill_signal = signal.Signals[service.get("KillSignal", "SIGTERM")]
        self.stop_timeout = float(service.get("TimeoutStopSec", "90").removesuffix("s"))

    def command(self, port: int, env: dict) -> list[str]:
        """ExecStart for ``parley@<port>``, ``${VAR}`` filled from ``env``, run by this Python
        (the unit names the virtualenv's daphne, which is this interpreter's)."""
        args = [
            re.sub(r"\$\{(\w+)\}", lambda match: env[match.group(1)], arg.replace("%i", str(port)))
            for arg in self.exec_start[1:]
        ]
        return [sys.executable, "-m", os.path.basename(self.exec_start[0]), *args]


class Process:
    """One Parley process, started from the unit on ``port``, logging to ``folder``."""

    def __init__(self, unit: Unit, port: int, env: dict, folder: Path):
        self.unit, self.port = unit, port
        self.address = f"127.0.0.1:{port}"
        env = {**env, **unit.environment}
        with open(folder / f"daphne-{port}.log", "a") as log:
            self.popen = subprocess.Popen(
                unit.command(port, env),
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def wait_ready(self, timeout: float = 60) -> None:
        """Until the process says on /readyz that it is ``ready``: its database and Redis
        answered (this address is the operator's, told what each check found)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise RuntimeError(f"the process on port {self.port} exited while starting")
            try:
                answer = httpx.get(f"http://{self.address}/readyz", timeout=5)
                if answer.status_code == 200 and answer.json()["status"] == "ready":
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the process on port {self.port} was not ready in {timeout} s")

    def stop(self) -> bool:
        """Stop it as systemd would: the unit's KillSignal, then SIGKILL after TimeoutStopSec.
        True if it stopped by itself."""
        if self.popen.poll() is not None:
            return True
        self.popen.send_signal(self.unit.kill_signal)
        try:
            self.popen.wait(timeout=self.unit.stop_timeout)
            return True
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
            return False


def _manage(env: dict, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout


class Cluster:
    def __init__(self, folder: Path):
        self.folder = folder
        self.unit = Unit()
        self.slots = list(
            zip(
                _ports("PARLEY_CLUSTER_PORTS", "8001,8002"),
                _ports("PARLEY_CLUSTER_SPARE_PORTS", "8011,8012"),
                strict=True,
            )
        )
        self.processes: list[Process] = []
        self.lock = threading.Lock()  # one deploy at a time, and never while stopping
        pg_folder = folder
        if not reachable_by_postgres(folder):
            # Running as root in a private home: PostgreSQL (as nobody) cannot reach var/, so
            # its data goes to a folder of its own under /var/tmp, named after this checkout.
            digest = hashlib.sha1(bytes(folder)).hexdigest()[:8]
            pg_folder = Path("/var/tmp") / f"parley-cluster-{digest}"
            pg_folder.mkdir(mode=0o755, exist_ok=True)
            print(f"PostgreSQL's user cannot reach {folder}; its data is in {pg_folder}")
        self.postgres = Postgres(
            pg_folder / "postgres", int(os.environ.get("PARLEY_CLUSTER_PG_PORT", 0)) or None
        )
        # PostgreSQL behind PgBouncer in transaction mode, and Redis with Sentinel (a primary,
        # a replica and three sentinels), as the recipe runs them.
        self.pgbouncer = PgBouncer(pg_folder / "pgbouncer", self.postgres.port)
        self.redis = RedisSentinels(folder / "redis")
        self.proxy = Proxy(
            folder / "proxy",
            [f"127.0.0.1:{port}" for slot in self.slots for port in slot],
            port=int(os.environ.get("PARLEY_CLUSTER_HTTPS_PORT", 8443)),
            http_port=int(os.environ.get("PARLEY_CLUSTER_HTTP_PORT", 8080)),
        )
        self.env: dict = {}

    def start(self) -> str:
        new_cluster = not (self.postgres.data / "PG_VERSION").exists()
        self.postgres.start()
        if new_cluster:
            self.postgres.create_database("parley")
        self.pgbouncer.start()
        self.redis.start()
        # The recipe's settings, then whatever the caller's environment sets (PARLEY_* limits,
        # say), then the addresses of what this cluster runs.
        env = read_env_file()
        env.update(
            (key, value)
            for key, value in os.environ.items()
            if not key.startswith(("DATABASE_URL", "REDIS_URL", "CHANNEL_LAYER_URL"))
        )
        env.update(self.redis.parley_env())
        env.update(
            DATABASE_URL=self.pgbouncer.url("parley"),
            PARLEY_VAR_DIR=str(self.folder),
            PARLEY_PUBLIC_URL=self.proxy.url,
            ALLOWED_HOSTS="localhost,127.0.0.1",
        )
        self.env = env
        _manage(env, "migrate", "--noinput")
        _manage(env, "collectstatic", "--noinput")
        seeded = _manage(env, "seed_demo")
        self.proxy.start()
        for live, _ in self.slots:
            self.processes.append(Process(self.unit, live, env, self.folder))
        for process in self.processes:
            process.wait_ready()
            self.proxy.wait_for(process.address, "UP")
        return seeded

    def deploy(self, say) -> bool:
        """Replace each process in turn; ``say`` reports each step. False if a successor did
        not come up (its predecessor then keeps serving)."""
        with self.lock:
            say("Migrating the database...")
            _manage(self.env, "migrate", "--noinput")
            _manage(self.env, "collectstatic", "--noinput")
            for index, (live, spare) in enumerate(self.slots):
                old = self.processes[index]
                port = spare if old.port == live else live
                say(f"Starting a process on port {port} to replace the one on {old.port}...")
                new = Process(self.unit, port, self.env, self.folder)
                try:
                    new.wait_ready()
                    # The port may have been left draining by the last deploy.
                    self.proxy.set_state(new.address, "ready")
                    self.proxy.wait_for(new.address, "UP")
                except Exception as error:
                    new.stop()
                    say(f"Deploy stopped: {error!r}; the process on port {old.port} serves on.")
                    return False
                self.processes[index] = new
                say(f"Port {port} is ready and in the proxy; draining port {old.port}...")
                started = time.monotonic()
                # Nothing new to the old process from now on (its clients reconnect elsewhere
                # when it closes them), then SIGTERM, which drains it.
                self.proxy.set_state(old.address, "drain")
                clean = old.stop()
                how = "stopped" if clean else "killed after TimeoutStopSec"
                say(f"Port {old.port} {how} after {time.monotonic() - started:.1f} s.")
            say("Deploy done.")
            return True

    def check(self) -> bool:
        """Whether every current process still runs (none died outside a deploy)."""
        with self.lock:
            return all(process.popen.poll() is None for process in self.processes)

    def stop(self) -> None:
        with self.lock:
            for process in self.processes:
                if process.popen.poll() is None:
                    process.popen.terminate()
            for process in self.processes:
                try:
                    process.popen.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.popen.kill()
                    process.popen.wait()
            self.proxy.stop()
            self.redis.stop()
            self.pgbouncer.stop()
            self.postgres.stop()


def _control_path(folder: Path) -> Path:
    return folder / "control.sock"


def _serve_control(cluster: Cluster, server: socket.socket) -> None:
    """Deploys asked for by ``python -m ops.cluster deploy``, one connection at a time."""
    while True:
        try:
            connection, _ = server.accept()
        except OSError:
            return  # closed: the cluster is stopping
        with connection, connection.makefile("rw") as stream:
            if stream.readline().strip() != "deploy":
                stream.write("failed: unknown command\n")
                continue

            def say(line: str) -> None:
                print(line, flush=True)
                try:
                    stream.write(line + "\n")
                    stream.flush()
                except OSError:
                    pass  # the caller went away; the deploy goes on

            try:
                ok = cluster.deploy(say)
            except Exception as error:  # reported to the caller; the cluster lives on
                say(f"Deploy failed: {error!r}")
                ok = False
            say("ok" if ok else "failed")


def run(folder: Path) -> int:
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    control = _control_path(folder)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        if probe.connect_ex(str(control)) == 0:
            print(f"A cluster is already running in {folder}: stop it first (Ctrl-C).")
            return 1
    cluster = Cluster(folder)
    control.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        seeded = cluster.start()
        server.bind(str(control))
        control.chmod(0o600)
        server.listen(1)
        threading.Thread(target=_serve_control, args=(cluster, server), daemon=True).start()
        print(f"PostgreSQL: {cluster.postgres.url('parley')}  (data: {cluster.postgres.data})")
        print(
            f"PgBouncer:  127.0.0.1:{cluster.pgbouncer.port}, transaction mode "
            f"(admin console: database pgbouncer; config: {cluster.pgbouncer.config})"
        )
        primary = cluster.redis.primary_address()
        print(
            f"Redis:      primary {primary[0]}:{primary[1]}, a replica, sentinels on "
            f"{','.join(cluster.redis.sentinels)}"
        )
        for process in cluster.processes:
            print(f"Process:    {process.address}  (log: {folder}/daphne-{process.port}.log)")
        print(f"Proxy log:  {cluster.proxy.log_path}")
        print(seeded.rstrip())
        print(f"Parley:     {cluster.proxy.url}/  (trust {cluster.proxy.ca_file}, e.g.")
        print(f"            curl --cacert {cluster.proxy.ca_file} {cluster.proxy.url}/healthz)")
        print("Cluster ready. `make deploy` replaces its processes; Ctrl-C stops it.", flush=True)
        while not stop.wait(1):
            if not cluster.check():
                print("A Parley process stopped; stopping the cluster.", file=sys.stderr)
                return 1
        return 0
    finally:
        server.close()
        control.unlink(missing_ok=True)
        cluster.stop()
        print("Cluster stopped.", flush=True)


def deploy(folder: Path) -> int:
    """Ask the running cluster to deploy, printing its steps as they come."""
    sys.stdout.reconfigure(line_buffering=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        try:
            client.connect(str(_control_path(folder)))
        except OSError:
            print(f"No cluster is running in {folder} (start one with make cluster).")
            return 1
        with client.makefile("rw") as stream:
            stream.write("deploy\n")
            stream.flush()
            last = ""
            for line in stream:
                last = line.strip()
                if last not in ("ok", "failed"):
                    print(last)
    return 0 if last == "ok" else 1


def main(argv: list[str]) -> int:
    sys.stdout.reconfigure(line_buffering=True)
    folder = Path(os.environ.get("PARLEY_CLUSTER_DIR", ROOT / "var" / "cluster")).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)  # PostgreSQL's unprivileged user must reach its folder inside
    if argv[:1] == ["deploy"]:
        return deploy(folder)
    if argv:
        print("usage: python -m ops.cluster [deploy]", file=sys.stderr)
        return 2
    return run(folder)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
