#!/usr/bin/env python3
"""Prints scripts/load.sh's results (parley-load's JSON lines) as the
Markdown table of docs/performance.md: per level and system, first-token
time, what it adds to the mock's own (same run), whole-turn time, CPU per
turn of the system's server processes (the mock and parley-load left out),
turns/s and failed turns. With --check it exits 1 when the mock, the runner
or the gateway (alone) failed a turn or completed none (CI's smoke run)."""

import json
import sys

NOT_SERVERS = {"mock", "parley-load"}


def is_mock(row: dict) -> bool:
    """The baseline row (load.sh --tag appends to every label)."""
    return row["label"].split()[0] == "mock"


def main(path: str, check: bool) -> int:
    rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    # load.sh runs each level starting with the mock: a level is the rows
    # from one mock row to the next (the excess callers of an overload run
    # hold their own stream count).
    levels = []
    for row in rows:
        if is_mock(row) or not levels:
            levels.append([])
        levels[-1].append(row)
    print(
        "| streams | system | first token p50 / p99 | added p50 / p99 | whole turn p50 | "
        "CPU per turn (server processes) | resident memory | turns/s | failed |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for level in levels:
        base = next((row for row in level if is_mock(row)), None)
        for row in level:
            ft = row["first_token_ms"]
            if base is None or row is base:
                added = "—"
            else:
                bft = base["first_token_ms"]
                added = f"{ft['p50'] - bft['p50']:.2f} / {ft['p99'] - bft['p99']:.2f} ms"
            servers = {
                name: value
                for name, value in row["processes"].items()
                if name not in NOT_SERVERS
            }
            cpu = sum(value["cpu_ms_per_turn"] for value in servers.values())
            split = " + ".join(
                f"{name} {value['cpu_ms_per_turn']:.2f}" for name, value in servers.items()
            )
            cpu_cell = f"{cpu:.2f} ms" + (f" ({split})" if len(servers) > 1 else "")
            if not servers:
                cpu_cell = "—"
            rss = sum(value["rss_bytes"] for value in servers.values()) / 1e6
            rss_cell = f"{rss:.1f} MB" if servers else "—"
            if len(servers) > 1:
                rss_cell += " (" + " + ".join(
                    f"{name} {value['rss_bytes'] / 1e6:.1f}" for name, value in servers.items()
                ) + ")"
            failed = sum(row["errors"].values())
            print(
                f"| {row['streams']} | {row['label']} | {ft['p50']:.2f} / {ft['p99']:.2f} ms | {added} | "
                f"{row['total_ms']['p50']:.1f} ms | {cpu_cell} | "
                f"{rss_cell} | {row['turns_per_s']:.1f} | {failed} |"
            )
    errors = {row["label"]: row["errors"] for row in rows if row["errors"]}
    if errors:
        print("\nfailed turns:", json.dumps(errors), file=sys.stderr)
    broken = [
        row["label"]
        for row in rows
        if row["label"] in {"mock", "runner", "parley", "parley-uds", "parley-inproc"} and (row["errors"] or row["ok"] == 0)
    ]
    if check and broken:
        print(f"load: failed or no turns: {broken}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    check = "--check" in args
    paths = [arg for arg in args if arg != "--check"]
    sys.exit(main(paths[0], check))
