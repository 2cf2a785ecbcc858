"""PostgreSQL, PgBouncer and Redis from Debian's packages, on loopback, for the tests and
`make cluster`.

Each server lives in a folder of its own and listens on 127.0.0.1 only, on a free port. PostgreSQL
refuses to run as root, so when we are root it runs as ``nobody``, which then owns its folder
(PgBouncer too).

As a command, ``python -m ops.servers -- CMD...`` starts them in a temporary folder, runs CMD
with ``DATABASE_URL`` naming PgBouncer in transaction mode in front of PostgreSQL (with
``PARLEY_DB_PGBOUNCER=1``) and ``PARLEY_TEST_REDIS_URL`` naming Redis (and
``PARLEY_TEST_PG_DIRECT_URL``, ``PARLEY_TEST_PGBOUNCER_ADMIN_URL``, ``PARLEY_TEST_PGDATA`` and
``PARLEY_TEST_PGPORT``, so that a test can reach PostgreSQL itself, ask PgBouncer, or restart
PostgreSQL), then stops them and removes the folder: this is how `make test` runs the suite on
PostgreSQL and the multi-process suite.
"""

import glob
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

UNPRIVILEGED = ("nobody", "nogroup")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int, timeout: float, what: str, alive=lambda: True) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"{what} exited while starting")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout} s")


def _postgres_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=_version_key)
    if found:
        return found[-1]
    if path := shutil.which(name):
        return path
    raise RuntimeError("PostgreSQL is not installed: apt-get install postgresql (make test does)")


def _version_key(path: str) -> int:
    return int(Path(path).parts[4]) if Path(path).parts[4].isdigit() else 0


def reachable_by_postgres(folder: Path) -> bool:
    """Whether PostgreSQL's user can reach ``folder`` (as root it runs as nobody, who needs to
    pass through every parent folder)."""
    if os.geteuid() != 0:
        return True
    user, group = UNPRIVILEGED
    check = ["setpriv", f"--reuid={user}", f"--regid={group}", "--clear-groups", "test", "-x"]
    return subprocess.run([*check, str(folder)], check=False).returncode == 0


def scratch_folder(prefix: str) -> Path:
    """A new temporary folder that PostgreSQL's user can reach: in the usual temporary folder,
    or under /var/tmp when that one is private (a TMPDIR in root's home)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)
    if not reachable_by_postgres(folder):
        shutil.rmtree(folder, ignore_errors=True)
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))
        folder.chmod(0o755)
    return folder


class Postgres:
    """One PostgreSQL server: ``data`` is its cluster folder (made on first start)."""

    def __init__(self, data: Path, port: int | None = None, *, durable: bool = True):
        self.data = Path(data)
        self.port = port or free_port()
        self.durable = durable
        self.log = self.data.parent / f"{self.data.name}.log"
        self._as_root = os.geteuid() == 0

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *command: str, **kwargs) -> subprocess.CompletedProcess:
        prefix = []
        if self._as_root:
            user, group = UNPRIVILEGED
            prefix = ["setpriv", f"--reuid={user}", f"--regid={group}", "--clear-groups", "--"]
        return subprocess.run([*prefix, *command], check=True, **kwargs)

    def _prepare(self) -> None:
        if (self.data / "PG_VERSION").exists():
            return
        self.data.mkdir(parents=True, exist_ok=True)
        self.log.touch()
        if self._as_root:
            for path in (self.data, self.log):
                shutil.chown(path, *UNPRIVILEGED)
        self.data.chmod(0o700)
        self._run(
            _postgres_bin("initdb"),
            "--pgdata",
            str(self.data),
            "--username=postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C.UTF-8",  # whatever locale the caller's environment names
            "--no-sync",
            stdout=subprocess.DEVNULL,
        )

    def start(self, timeout: float = 60) -> "Postgres":
        self._prepare()
        options = [
            "-h 127.0.0.1",
            f"-p {self.port}",
            "-k ''",  # no Unix socket: loopback TCP only
            "-c max_connections=200",
        ]
        if not self.durable:
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        self._run(
            _postgres_bin("pg_ctl"),
            "start",
            "--pgdata",
            str(self.data),
            "--log",
            str(self.log),
            "--wait",
            f"--timeout={int(timeout)}",
            "-o",
            " ".join(options),
            stdout=subprocess.DEVNULL,
        )
        _wait_for_port(self.port, timeout, "PostgreSQL")
        return self

    def stop(self, mode: str = "fast") -> None:
        if not (self.data / "postmaster.pid").exists():
            return
        self._run(
            _postgres_bin("pg_ctl"),
            "stop",
            "--pgdata",
            str(self.data),
            "--mode",
            mode,
            "--wait",
            stdout=subprocess.DEVNULL,
        )

    def restart(self) -> None:
        self.stop()
        self.start()

    def create_database(self, name: str) -> None:
        self._run(
            "psql",
            "--quiet",
            "--host=127.0.0.1",
            f"--port={self.port}",
            "--username=postgres",
            "--dbname=postgres",
            "--command",
            f'CREATE DATABASE "{name}"',
            stdout=subprocess.DEVNULL,
        )


class Redis:
    """One Redis server, keeping nothing on disk."""

    def __init__(self, folder: Path, port: int | None = None, extra: tuple[str, ...] = ()):
        self.folder = Path(folder)
        self.port = port or free_port()
        self.extra = extra  # more of redis-server's options (a replica's --replicaof)
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 30) -> "Redis":
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError(
                "Redis is not installed: apt-get install redis-server (make test does)"
            )
        self.folder.mkdir(parents=True, exist_ok=True)
        log = open(self.folder / "redis.log", "a")
        self.process = subprocess.Popen(
            [
                binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--dir",
                str(self.folder),
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                *self.extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        _wait_for_port(self.port, timeout, "Redis", alive=lambda: self.process.poll() is None)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


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
            _wait_for_port(
                port, timeout, "Redis Sentinel", alive=lambda p=process: p.poll() is None
            )
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


class PgBouncer:
    """PgBouncer in transaction mode in front of a PostgreSQL on loopback, configured from
    ``ops/deploy/pgbouncer.ini`` (the production recipe's file) with only addresses, ports and
    paths filled in. It refuses to run as root, so when we are root it runs as ``nobody``."""

    TEMPLATE = Path(__file__).parent / "deploy" / "pgbouncer.ini"
    USER = "postgres"

    def __init__(self, folder: Path, postgres_port: int, port: int | None = None):
        self.folder = Path(folder)
        self.postgres_port = postgres_port
        self.port = port or free_port()
        self.config = self.folder / "pgbouncer.ini"
        self.log = self.folder / "pgbouncer.log"
        self.password = secrets.token_urlsafe(16)
        self.process: subprocess.Popen | None = None

    def url(self, database: str = "postgres") -> str:
        return f"postgres://{self.USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def _write_config(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        auth_file = self.folder / "userlist.txt"
        auth_file.write_text(f'"{self.USER}" "{self.password}"\n')
        values = {
            "PGBOUNCER_LISTEN_ADDR": "127.0.0.1",
            "PGBOUNCER_LISTEN_PORT": str(self.port),
            "POSTGRES_HOST": "127.0.0.1",
            "POSTGRES_PORT": str(self.postgres_port),
            "PGBOUNCER_AUTH_FILE": str(auth_file),
        }
        text = re.sub(
            r"\$\{(\w+)\}", lambda match: values[match.group(1)], self.TEMPLATE.read_text()
        )
        self.config.write_text(text)
        auth_file.chmod(0o600)
        if os.geteuid() == 0:
            for path in (self.folder, self.config, auth_file):
                shutil.chown(path, *UNPRIVILEGED)

    def start(self, timeout: float = 30) -> "PgBouncer":
        binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        if not Path(binary).exists():
            raise RuntimeError(
                "PgBouncer is not installed: apt-get install pgbouncer (make services)"
            )
        self._write_config()
        prefix = []
        if os.geteuid() == 0:
            user, group = UNPRIVILEGED
            prefix = ["setpriv", f"--reuid={user}", f"--regid={group}", "--clear-groups", "--"]
        log = open(self.log, "a")
        self.process = subprocess.Popen(
            [*prefix, binary, str(self.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        _wait_for_port(self.port, timeout, "PgBouncer", alive=lambda: self.process.poll() is None)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


def main(argv: list[str]) -> int:
    if "--" in argv:
        argv = argv[argv.index("--") + 1 :]
    if not argv:
        print("usage: python -m ops.servers -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    root = scratch_folder("parley-services-")
    postgres = Postgres(root / "postgres", durable=False)
    pgbouncer = PgBouncer(root / "pgbouncer", postgres.port)
    redis = Redis(root / "redis")
    try:
        postgres.start()
        postgres.create_database("parley")
        pgbouncer.start()
        redis.start()
        env = {
            **os.environ,
            # Parley, and every Daphne a test starts, goes through PgBouncer in transaction mode.
            "DATABASE_URL": pgbouncer.url("parley"),
            "PARLEY_DB_PGBOUNCER": "1",
            # For what must reach PostgreSQL itself (and PgBouncer's admin console).
            "PARLEY_TEST_PG_DIRECT_URL": postgres.url("parley"),
            "PARLEY_TEST_PGBOUNCER_ADMIN_URL": pgbouncer.url("pgbouncer"),
            "PARLEY_TEST_PGDATA": str(postgres.data),
            "PARLEY_TEST_PGPORT": str(postgres.port),
            "PARLEY_TEST_REDIS_URL": redis.url,
        }
        print(
            f"PostgreSQL on 127.0.0.1:{postgres.port} behind PgBouncer on "
            f"127.0.0.1:{pgbouncer.port}, Redis on 127.0.0.1:{redis.port}"
        )
        command = subprocess.Popen(argv, env=env)
        try:
            return command.wait()
        except KeyboardInterrupt:
            command.send_signal(signal.SIGINT)
            return command.wait()
    finally:
        redis.stop()
        pgbouncer.stop()
        try:
            postgres.stop(mode="immediate")
        finally:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
