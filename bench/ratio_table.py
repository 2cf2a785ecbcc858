"""bench/ratios.py's table: every figure beside its bare twin, on S and on P, with its aim,
whether it is met, the clients' CPU share, and under the table the profile of each missed aim.
"""

from pathlib import Path

from bench.owners import profile_lines, summarise_profile
from bench.tracing import report as tracing_report

CONFIGS = ("S", "P")


def _cell(found: dict | None, ours: str, twin: str, note: str = "") -> dict | None:
    if found is None:
        return None
    profiles = [Path(p) for p in found.get("profiles") or ()]
    return {
        "parley": found[ours],
        "twin": found[twin],
        "ratio": found["ratio"],
        "aim": found["aim"],
        "met": found["ratio"] <= found["aim"],
        "client": found["client"],
        "note": note,
        "profiles": [str(p) for p in profiles],
        "profile": summarise_profile(profiles) if profiles else None,
    }


def rows(results: dict) -> list[dict]:
    """One row per figure, with its S and P cells (None where not measured)."""

    def get(config: str, *keys):
        found = results.get(config)
        for key in keys:
            if not isinstance(found, dict) or key not in found:
                return None
            found = found[key]
        return found

    table = []

    def add(figure: str, twin: str, unit: str, pick):
        cells = {config: pick(config) for config in CONFIGS}
        if any(cells.values()):
            table.append({"figure": figure, "twin": twin, "unit": unit, **cells})

    def handshake(config):
        found = get(config, "handshake")
        note = (
            f"PG+Redis {found['backing_cpu_ms']:.2f} ms beside" if found and config == "P" else ""
        )
        return _cell(found, "parley_ms", "twin_ms", note)

    def fan_out(config):
        found = get(config, "sockets", "cpu")
        if found is not None:
            found = {**found, "profiles": get(config, "sockets", "profiles")}
        note = (
            f"PG+Redis {found['backing_cpu_us']:.0f} us beside" if found and config == "P" else ""
        )
        return _cell(found, "parley_us", "twin_us", note)

    sockets = next((get(c, "sockets", "sockets") for c in CONFIGS if get(c, "sockets")), 0)
    add("1. handshake: server CPU per socket", "bare Daphne accept", "ms", handshake)
    add(f"2. CPU per delivered event, {sockets:,} sockets", "bare fan-out per frame", "us", fan_out)
    add(
        "3. resident memory per open socket",
        "bare Daphne socket",
        "KB",
        lambda c: _cell(get(c, "sockets", "memory"), "parley_kb", "twin_kb"),
    )
    add(
        "4. REST answer -> resumed turn's next event",
        "bare ASGI POST",
        "ms",
        lambda c: _cell(get(c, "requests", "answer"), "parley_ms", "twin_ms"),
    )
    from bench.answers import ENDPOINTS

    for key, label, _ in ENDPOINTS:
        add(
            f"5. {label}: round trip",
            "bare DRF POST",
            "ms",
            lambda c, key=key: _cell(get(c, "requests", "endpoints", key), "parley_ms", "twin_ms"),
        )
    return table


def _ratio(cell: dict | None, unit: str) -> str:
    if cell is None:
        return "-"
    return f"{cell['ratio']:.2f} ({cell['parley']:.2f} / {cell['twin']:.2f} {unit})"


def _client(cell: dict | None) -> str:
    if cell is None:
        return ""
    c = cell["client"]
    mark = " client saturated" if c["saturated"] else ""
    if c.get("machine_saturated"):
        mark += " machine full"
    return f"{c['bench']:.0%}/{c['workers_max']:.0%} m{c['machine']:.0%}{mark}"


def _aims(row: dict) -> str:
    aims = sorted({row[c]["aim"] for c in CONFIGS if row[c]})
    if len(aims) == 1:
        return f"<= {aims[0]:g}x"
    return " ".join(f"{c} <= {row[c]['aim']:g}x" for c in CONFIGS if row[c])


def report(results: dict) -> str:
    table = results["rows"]
    header = ["figure", "twin", "aim", "S: ratio (p50 / twin)", "P: ratio", "met?", "client CPU"]
    body = []
    for row in table:
        met = " ".join(
            f"{c} {'yes' if row[c]['met'] else 'NO'}" for c in CONFIGS if row[c] is not None
        )
        client = "; ".join(f"{c} {_client(row[c])}" for c in CONFIGS if row[c] is not None)
        body.append(
            [
                row["figure"],
                row["twin"],
                _aims(row),
                _ratio(row["S"], row["unit"]),
                _ratio(row["P"], row["unit"]),
                met,
                client,
            ]
        )
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def render(line):
        return (
            "| "
            + " | ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
            + " |"
        )

    lines = [
        f"Ratios to the bare stack ({'quick' if results['quick'] else 'full'} run; machine: "
        f"{results['machine']['cpus']} cores, load {results['machine']['load_before'][0]:.1f} "
        "before): every figure's p50 over its bare twin's, measured in the same run, taking turns",
        render(header),
        "|" + "|".join("-" * (width + 2) for width in widths) + "|",
        *map(render, body),
        "client CPU: the bench process's / its busiest worker process's share of a core, and m: "
        "the machine's busy share of all its cores, over the measurement (the worst round); "
        "'client saturated': a client process at >= 90% of a core (the client may have been "
        "the bottleneck); 'machine full': both cores at >= 95% (servers and clients shared "
        "them: CPU per unit still holds, latencies include waiting for a core).",
    ]
    notes = [
        f"  {row['figure']} on {c}: {row[c]['note']}"
        for row in table
        for c in CONFIGS
        if row[c] and row[c]["note"]
    ]
    if notes:
        lines += ["Beside the figures (not in them):", *notes]
    for what, error in results.get("failed", {}).items():
        lines.append(f"FAILED: {what}: {error}")
    if "tracemalloc" in results:
        lines += ["", *tracing_report(results["tracemalloc"], indent="")]
    shown: dict[tuple, str] = {}
    for row in table:
        for c in CONFIGS:
            cell = row[c]
            if cell is None or cell["met"]:
                continue
            lines += [
                "",
                f"MISSED {row['figure']} on {c}: {cell['ratio']:.2f}x against <= {cell['aim']:g}x",
            ]
            if tuple(cell["profiles"]) in shown:
                lines.append(f"  the same profile as {shown[tuple(cell['profiles'])]}'s, above")
            elif cell["profile"] is not None:
                shown[tuple(cell["profiles"])] = f"{row['figure']} on {c}"
                lines.append(
                    f"  measured again under py-spy (--gil --threads), "
                    f"kept in {', '.join(cell['profiles'])}:"
                )
                lines += profile_lines(cell["profile"])
            elif row["unit"] == "KB":
                lines.append("  where the memory goes: the tracemalloc breakdown above")
            else:
                lines.append("  (no profile taken)")
    return "\n".join(lines)
