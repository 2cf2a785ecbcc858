"""Figure 1 of bench/ratios.py: a socket handshake's server CPU beside a bare Daphne accept.

Rounds take turns, bare then Parley: each opens ``sockets`` sockets from bench/sockets.py's
client processes (100 handshakes in flight each), all at once, and reads the server's process
user + system time over the opening, divided by the sockets opened; then closes them and waits
for the server to be idle. The bare twin is bench/bare_app.py's ``/accept/`` (accept, one frame
the size of ``ws.ready``). On two processes the sockets go to A, and A's CPU is the figure;
PostgreSQL's and Redis's CPU over the same opening is given beside it, not in it.
"""

from pathlib import Path

from bench import gauges
from bench.sockets import Workers, profiling, stop_profiling

AIM = 2.0


async def open_round(
    pid: int, port: int, token: str, targets: list[str], sockets: int, backing=(), spy_into=None
) -> dict:
    """One round: ``sockets`` sockets opened to the server ``pid`` listening on ``port``
    (``targets``: conversations or paths), measured, closed."""
    workers = Workers(port, token, targets, sockets)
    try:
        pids = await workers.spawn()
        await gauges.wait_idle([pid])
        spy = profiling(pid, spy_into, "handshake") if spy_into else None
        meter = gauges.ClientMeter(pids)
        cpu, backed = gauges.cpu_seconds([pid]), gauges.cpu_seconds(backing)
        opened = await workers.start()
        cpu, backed = gauges.cpu_seconds([pid]) - cpu, gauges.cpu_seconds(backing) - backed
        client = meter.stop()
        stop_profiling(spy)
        await workers.stop()
        workers = None
    finally:
        if workers is not None:
            workers.kill()
    await gauges.wait_idle([pid])
    connected = max(opened["connected"], 1)
    return {
        "cpu_ms": cpu * 1000 / connected,
        "backing_cpu_ms": backed * 1000 / connected,
        "connected": opened["connected"],
        "failed": opened["failed"],
        "client": client,
    }


async def run(
    parley, bare, token: str, conversations: list[str], *, rounds: int, sockets: int, backing=()
) -> dict:
    """``rounds`` rounds, bare and Parley taking turns (``parley`` and ``bare``: Daphnes)."""
    bare_pid, parley_pid = bare.process.pid, parley.process.pid
    measured = {"bare": [], "parley": []}
    for _ in range(rounds):
        measured["bare"].append(await open_round(bare_pid, bare.port, token, ["/accept/"], sockets))
        measured["parley"].append(
            await open_round(parley_pid, parley.port, token, conversations, sockets, backing)
        )
    return figure(measured, sockets)


def figure(measured: dict, sockets: int) -> dict:
    from bench.run import percentile

    bare = percentile([r["cpu_ms"] for r in measured["bare"]], 0.5)
    parley = percentile([r["cpu_ms"] for r in measured["parley"]], 0.5)
    return {
        "sockets_per_round": sockets,
        "rounds": len(measured["parley"]),
        "parley_ms": parley,
        "twin_ms": bare,
        "ratio": parley / bare,
        "aim": AIM,
        "backing_cpu_ms": percentile([r["backing_cpu_ms"] for r in measured["parley"]], 0.5),
        "failed": sum(r["failed"] for rounds in measured.values() for r in rounds),
        "client": gauges.worst([r["client"] for rounds in measured.values() for r in rounds]),
        "raw": measured,
    }


async def profile(parley, token: str, conversations: list[str], sockets: int, into: Path) -> list:
    """One more Parley round with py-spy recording the server; the profile's path."""
    await open_round(parley.process.pid, parley.port, token, conversations, sockets, spy_into=into)
    return [into / "handshake.txt"]
