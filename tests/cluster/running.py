"""`make cluster` (``python -m ops.cluster``) run by a test as an operator runs it: in a folder of
its own, on free ports, read from what it prints; and `make deploy` (``python -m ops.cluster
deploy``) sent to it."""

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg

from ops.cluster import read_env_file
from ops.servers import Postgres, free_port
from tests.conftest import ROOT


class RunningCluster:
    def __init__(self, folder: Path, **environment: str):
        self.folder = folder
        self.ports = [free_port(), free_port()]
        self.spare_ports = [free_port(), free_port()]
        self.https_port, self.http_port = free_port(), free_port()
        # The recipe's settings as written (not the test run's own, such as a grace of 0),
        # then the test's.
        recipe = read_env_file()
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE") and key not in recipe
        }
        env.update(
            PARLEY_CLUSTER_DIR=str(folder),
            PARLEY_CLUSTER_PORTS=",".join(map(str, self.ports)),
            PARLEY_CLUSTER_SPARE_PORTS=",".join(map(str, self.spare_ports)),
            PARLEY_CLUSTER_HTTPS_PORT=str(self.https_port),
            PARLEY_CLUSTER_HTTP_PORT=str(self.http_port),
            **environment,
        )
        self.env = env
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ops.cluster"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: queue.Queue = queue.Queue()
        self.output: list[str] = []
        threading.Thread(
            target=lambda: [self.lines.put(line) for line in self.process.stdout], daemon=True
        ).start()

    def wait_ready(self, timeout: float = 180) -> str:
        deadline = time.monotonic() + timeout
        while not self.output or "Cluster ready" not in self.output[-1]:
            assert self.process.poll() is None, self.text + "".join(self.lines.queue)
            assert time.monotonic() < deadline, self.text
            try:
                self.output.append(self.lines.get(timeout=1))
            except queue.Empty:
                continue
        return self.text

    @property
    def text(self) -> str:
        return "".join(self.output)

    @property
    def url(self) -> str:
        return re.search(r"Parley: +(https://\S+)/ ", self.text).group(1)

    @property
    def ca_file(self) -> str:
        return re.search(r"\(trust (\S+),", self.text).group(1)

    def token(self, username: str) -> str:
        return re.search(rf"{username} .* token: (\S+)", self.text).group(1)

    @property
    def postgres(self) -> Postgres:
        found = re.search(r"PostgreSQL: \S+:(\d+)/parley +\(data: (\S+)\)", self.text)
        return Postgres(Path(found.group(2)), int(found.group(1)))

    def deploy(self, on_line=None, timeout: float = 300) -> str:
        """`make deploy`, as an operator runs it; what it printed (it must succeed).
        ``on_line`` is called with each line it prints, as it prints it."""
        deploying = subprocess.Popen(
            [sys.executable, "-m", "ops.cluster", "deploy"],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        killer = threading.Timer(timeout, deploying.kill)
        killer.start()
        printed = []
        try:
            for line in deploying.stdout:
                printed.append(line)
                if on_line is not None:
                    on_line(line)
            code = deploying.wait()
        finally:
            killer.cancel()
        assert code == 0, "".join(printed)
        return "".join(printed)

    def restart_database(self) -> None:
        """PostgreSQL restarted as an operator restarts it behind PgBouncer: PAUSE (what runs
        finishes, what comes waits in PgBouncer), the restart, RESUME."""
        config = Path(re.search(r"config: (\S+)\)", self.text).group(1))
        user, password = (
            word.strip('"') for word in (config.parent / "userlist.txt").read_text().split()[:2]
        )
        port = re.search(r"PgBouncer: +127.0.0.1:(\d+)", self.text).group(1)
        url = f"postgres://{user}:{password}@127.0.0.1:{port}/pgbouncer"
        # The console speaks the simple query protocol only.
        with psycopg.connect(url, autocommit=True, prepare_threshold=None) as console:
            psycopg.ClientCursor(console).execute("PAUSE")
            try:
                self.postgres.restart()
            finally:
                psycopg.ClientCursor(console).execute("RESUME")

    def kill_redis_primary(self) -> None:
        """SIGKILL the Redis primary the sentinels name (the sentinels then promote the
        replica)."""
        import redis

        host, port = re.search(r"sentinels on ([^,\s]+)", self.text).group(1).split(":")
        with redis.Redis(host=host, port=int(port), socket_timeout=5) as sentinel:
            address = sentinel.sentinel_get_master_addr_by_name("parley")
        with redis.Redis(host=address[0], port=int(address[1]), socket_timeout=5) as primary:
            pid = primary.info("server")["process_id"]
        os.kill(pid, signal.SIGKILL)

    def stop(self, timeout: float = 90) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout=timeout)
        finally:
            while not self.lines.empty():
                self.output.append(self.lines.get())
