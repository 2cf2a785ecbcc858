"""Redis Sentinel on loopback, for the tests, the failover bench and `make cluster`: a primary,
its replica and three sentinels (``redis-server sentinel.conf --sentinel``), each sentinel's
configuration written from ``ops/deploy/sentinel.conf``, the production recipe's file."""

import shutil
import subprocess
import time
from pathlib import Path

from ops.servers import Redis, free_port, wait_for_port

# Redis Sentinel ------------------------------------------------------------------------------

SENTINEL_TEMPLATE = Path(__file__).parent / "deploy" / "sentinel.conf"


def sentinel_conf(template: str, changes: dict[str, str]) -> str:
    """``template`` (ops/deploy/sentinel.conf's text) with each line that begins with one of
    ``changes``' keys replaced by that key's value (a whole line)."""
    lines = []
    for line in template.splitlines():
        found = next(
            (key for key in changes if line.split()[: len(key.split())] == key.split()), None
        )
        lines.append(changes[found] if found and not line.startswith("#") else line)
    return "\n".join(lines) + "\n"


class RedisSentinels:
    """A Redis primary, its replica and three sentinels watching them (``redis-server
    sentinel.conf --sentinel``, each from ops/deploy/sentinel.conf), all on loopback on free
    ports, with their logs in ``folder``. The sentinels think the primary down after
    ``down_after_ms`` and promote the replica; ``primary`` is whichever they name now."""

    master_name = "parley"

    def __init__(
        self, folder: Path, *, down_after_ms: int = 1000, failover_timeout_ms: int = 10000
    ):
        self.folder = Path(folder)
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        first = Redis(self.folder / "redis-1")
        self.servers = [
            first,
            Redis(self.folder / "redis-2", extra=("--replicaof", "127.0.0.1", str(first.port))),
        ]
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.sentinel_processes: list[subprocess.Popen] = []

    @property
    def sentinels(self) -> list[str]:
        """Where the sentinels listen, as ``host:port`` (PARLEY_REDIS_SENTINELS's items)."""
        return [f"127.0.0.1:{port}" for port in self.sentinel_ports]

    def parley_env(self) -> dict[str, str]:
        """The environment that points Parley at these sentinels (and at no single Redis)."""
        return {
            "REDIS_URL": "",
            "CHANNEL_LAYER_URL": "",
            "PARLEY_REDIS_SENTINELS": ",".join(self.sentinels),
            "PARLEY_REDIS_SENTINEL_MASTER": self.master_name,
        }

    def _sentinel(self, port: int):
        import redis

        return redis.Redis(host="127.0.0.1", port=port, socket_timeout=2, decode_responses=True)

    def primary_address(self, port: int | None = None) -> tuple[str, int] | None:
        """The primary a sentinel (the first that answers, or the one on ``port``) names."""
        for sentinel in [port] if port else self.sentinel_ports:
            try:
                with self._sentinel(sentinel) as client:
                    found = client.sentinel_get_master_addr_by_name(self.master_name)
            except Exception:
                continue
            if found:
                return found[0], int(found[1])
        return None

    @property
    def primary(self) -> Redis:
        """The Redis the sentinels name as the primary now."""
        address = self.primary_address()
        if address is None:
            raise RuntimeError("no sentinel answers")
        return next(server for server in self.servers if server.port == address[1])

    def start(self, timeout: float = 60) -> "RedisSentinels":
        for server in self.servers:
            server.start()
        binary = shutil.which("redis-server")
        template = SENTINEL_TEMPLATE.read_text()
        for n, port in enumerate(self.sentinel_ports, 1):
            folder = self.folder / f"sentinel-{n}"
            folder.mkdir(parents=True, exist_ok=True)
            conf = folder / "sentinel.conf"
            conf.write_text(
                sentinel_conf(
                    template,
                    self._changes(port, folder),
                )
            )
            with open(folder / "sentinel.log", "a") as log:
                self.sentinel_processes.append(
                    subprocess.Popen(
                        [
                            binary,
                            str(conf),
                            "--sentinel",
                            "--logfile",
                            str(folder / "sentinel.log"),
                        ],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
            process = self.sentinel_processes[-1]
            wait_for_port(port, timeout, "Redis Sentinel", alive=lambda p=process: p.poll() is None)
        self._wait(self._watching, timeout, "the sentinels to know the replica and each other")
        return self

    def _changes(self, port: int, folder: Path) -> dict[str, str]:
        """The template's lines a test sentinel changes (marked "tests:" there)."""
        name = f" {self.master_name}"
        return {
            "port": f"port {port}",
            "bind": "bind 127.0.0.1",
            "dir": f"dir {folder}",
            "sentinel monitor" + name: f"sentinel monitor{name} 127.0.0.1 {self.servers[0].port} 2",
            "sentinel down-after-milliseconds" + name: (
                f"sentinel down-after-milliseconds{name} {self.down_after_ms}"
            ),
            "sentinel failover-timeout" + name: (
                f"sentinel failover-timeout{name} {self.failover_timeout_ms}"
            ),
        }

    def _watching(self) -> bool:
        """Every sentinel knows the primary's replica, in sync, and the two other sentinels."""
        for port in self.sentinel_ports:
            with self._sentinel(port) as client:
                master = client.sentinel_master(self.master_name)
                if master["num-slaves"] < 1 or master["num-other-sentinels"] < 2:
                    return False
                replicas = client.sentinel_slaves(self.master_name)
                if any(replica["master-link-status"] != "ok" for replica in replicas):
                    return False
        return True

    @staticmethod
    def _wait(check, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if check():
                    return
            except Exception:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"waited {timeout} s for {what}")

    def kill_primary(self) -> Redis:
        """SIGKILL the current primary's process (it is not started again); return it."""
        primary = self.primary
        primary.process.kill()
        primary.process.wait()
        return primary

    def wait_for_failover(self, timeout: float = 60) -> Redis:
        """Wait until every sentinel names a primary whose process is alive and which answers
        as a primary (``ROLE``); return it."""
        import redis

        chosen: list[Redis] = []

        def promoted() -> bool:
            names = {self.primary_address(port) for port in self.sentinel_ports}
            if len(names) != 1 or None in names:
                return False
            _, port = names.pop()
            server = next(s for s in self.servers if s.port == port)
            if server.process is None or server.process.poll() is not None:
                return False
            with redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=2) as client:
                if client.execute_command("ROLE")[0] != b"master":
                    return False
            chosen[:] = [server]
            return True

        self._wait(promoted, timeout, "the sentinels to promote a replica")
        return chosen[0]

    def switched_at(self) -> list[float]:
        """When (Unix time, from the sentinels' logs) a sentinel saw the primary switched."""
        import datetime

        times = []
        for n in range(1, len(self.sentinel_ports) + 1):
            log = self.folder / f"sentinel-{n}" / "sentinel.log"
            for line in log.read_text(errors="replace").splitlines() if log.exists() else ():
                if "+switch-master" in line:
                    # "1234:X 27 Nov 2026 01:50:00.123 # +switch-master parley ..."
                    stamp = " ".join(line.split()[1:5])
                    when = datetime.datetime.strptime(stamp, "%d %b %Y %H:%M:%S.%f")
                    times.append(when.timestamp())
        return sorted(times)

    def stop(self) -> None:
        for process in self.sentinel_processes:
            if process.poll() is None:
                process.terminate()
        for process in self.sentinel_processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.sentinel_processes = []
        for server in self.servers:
            server.stop()
