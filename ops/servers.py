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


def wait_for_port(port: int, timeout: float, what: str, alive=lambda: True) -> None:
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


def stop_process(process: subprocess.Popen | None, timeout: float = 10) -> None:
    """Stop a server we started: SIGTERM, then SIGKILL if it has not exited within ``timeout``."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


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
        wait_for_port(self.port, timeout, "PostgreSQL")
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
        wait_for_port(self.port, timeout, "Redis", alive=lambda: self.process.poll() is None)
        return self

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


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
        wait_for_port(self.port, timeout, "PgBouncer", alive=lambda: self.process.poll() is None)
        return self

    def stop(self) -> None:
        stop_process(self.process)
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
