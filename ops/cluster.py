"""`make cluster`: Parley scaled out on one machine. PostgreSQL, Redis and two Daphne processes on
loopback, sharing the database and the channel layer as production would behind a load balancer.

Data lives under ``var/cluster/`` (``PARLEY_CLUSTER_DIR``), so conversations survive a restart.
The processes listen on ports 8001 and 8002 (``PARLEY_CLUSTER_PORTS``, comma-separated). Ctrl-C
(or SIGTERM) stops everything cleanly.
"""

import hashlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from ops.servers import Postgres, Redis, reachable_by_postgres

ROOT = Path(__file__).resolve().parent.parent
DAPHNE = [sys.executable, "-m", "daphne", "-b", "127.0.0.1"]


def _ports() -> list[int]:
    text = os.environ.get("PARLEY_CLUSTER_PORTS", "8001,8002")
    return [int(port) for port in text.split(",") if port.strip()]


def _manage(env: dict, *args: str, quiet: bool = False) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return "" if quiet else result.stdout


def main() -> int:
    sys.stdout.reconfigure(line_buffering=True)
    folder = Path(os.environ.get("PARLEY_CLUSTER_DIR", ROOT / "var" / "cluster")).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)  # PostgreSQL's unprivileged user must reach its folder inside
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())

    pg_folder = folder
    if not reachable_by_postgres(folder):
        # Running as root in a private home: PostgreSQL (as nobody) cannot reach var/, so its
        # data goes to a folder of its own under /var/tmp, named after this checkout.
        pg_folder = (
            Path("/var/tmp") / f"parley-cluster-{hashlib.sha1(bytes(folder)).hexdigest()[:8]}"
        )
        pg_folder.mkdir(mode=0o755, exist_ok=True)
        print(f"PostgreSQL's user cannot reach {folder}; its data is in {pg_folder}")
    postgres = Postgres(pg_folder / "postgres", int(os.environ.get("PARLEY_CLUSTER_PG_PORT", 0)))
    redis = Redis(folder / "redis", int(os.environ.get("PARLEY_CLUSTER_REDIS_PORT", 0)) or None)
    servers: list[subprocess.Popen] = []
    try:
        new_cluster = not (postgres.data / "PG_VERSION").exists()
        postgres.start()
        if new_cluster:
            postgres.create_database("parley")
        redis.start()
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("DATABASE_URL", "REDIS_URL", "CHANNEL_LAYER_URL"))
        }
        env.update(
            DJANGO_SETTINGS_MODULE="config.settings",
            DATABASE_URL=postgres.url("parley"),
            REDIS_URL=redis.url,
            PARLEY_VAR_DIR=str(folder),
            PYTHONUNBUFFERED="1",
        )
        _manage(env, "migrate", "--noinput", quiet=True)
        _manage(env, "collectstatic", "--noinput", quiet=True)
        seeded = _manage(env, "seed_demo")
        for port in _ports():
            log = open(folder / f"daphne-{port}.log", "a")
            servers.append(
                subprocess.Popen(
                    [*DAPHNE, "-p", str(port), "config.asgi:application"],
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            log.close()
        print(f"PostgreSQL: {postgres.url('parley')}  (data: {postgres.data})")
        print(f"Redis:      {redis.url}")
        for port in _ports():
            print(f"Parley:     http://127.0.0.1:{port}/  (log: {folder}/daphne-{port}.log)")
        print(seeded.rstrip())
        print("Cluster ready. Ctrl-C stops it.", flush=True)
        while not stop.wait(1):
            if any(server.poll() is not None for server in servers):
                print("A Parley process stopped; stopping the cluster.", file=sys.stderr)
                return 1
        return 0
    finally:
        for server in servers:
            if server.poll() is None:
                server.terminate()
        for server in servers:
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        redis.stop()
        postgres.stop()
        print("Cluster stopped.", flush=True)


if __name__ == "__main__":
    sys.exit(main())
