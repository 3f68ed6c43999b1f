#!/usr/bin/env bash
# Where the first token's added time goes, hop by hop, at one stream.
#
# Runs `scripts/load.sh --streams 1` (its other arguments are passed on:
# --bin DIR, --duration, --parsing in_process...) while tcpdump records
# the loopback packets between the load tool, the gateway, the runner, the
# parser and the mock provider, then prints per turn (p50, min, max):
#   client → runner request    the gateway's set-up: auth, the user message
#                              committed, history, prompt, the runner call
#   runner → provider request  the runner's set-up
#   provider → runner event    the first chunk through the runner
#   gateway → parser → gateway the sidecar's answer (absent over a socket
#                              or in-process)
#   → client                   the cleaned delta out to the client
#   added                      all of it: the gateway's first delta less
#                              the time the provider itself took
# Packets are timed by the kernel as they cross loopback, so the processes
# run at full speed (strace would slow every syscall). Needs root for
# tcpdump (installed from Debian's packages when missing).
#
#   scripts/first_token.sh                      15 s of turns, the current tree
#   scripts/first_token.sh --bin DIR --duration 30s
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v tcpdump >/dev/null; then
    echo "first_token: installing tcpdump" >&2
    apt-get install -y -q tcpdump >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null && apt-get install -y -q tcpdump >/dev/null; }
fi

capture="$(mktemp -t parley-first-token.XXXXXX)"
trap 'rm -f "$capture"' EXIT
# load.sh's ports: gateway 28061, runner 28062, parser 28063, mock 18080.
tcpdump -i lo -nn -tt -l \
    'tcp and (port 28061 or port 28062 or port 28063 or port 18080) and (tcp[tcpflags] & tcp-push != 0)' \
    >"$capture" 2>/dev/null &
tcpdump_pid=$!
sleep 0.5
scripts/load.sh --streams 1 --duration 15s --warmup 2s "$@"
sleep 0.3
kill "$tcpdump_pid"
wait "$tcpdump_pid" 2>/dev/null || true

python3 - "$capture" <<'PY'
import re
import statistics
import sys

GATEWAY, RUNNER, PARSER, MOCK = 28061, 28062, 28063, 18080
packets = []
for line in open(sys.argv[1]):
    m = re.match(r"(\d+\.\d+) IP 127\.0\.0\.1\.(\d+) > 127\.0\.0\.1\.(\d+): .* length (\d+)", line)
    if m and int(m[4]) > 0:
        packets.append((float(m[1]), int(m[2]), int(m[3])))

# A gateway turn starts with the client's Chat; one stream, so turns follow
# each other (the mock and runner rows come before the gateway's).
turns, current = [], None
for packet in packets:
    t, src, dst = packet
    if dst == GATEWAY and (current is None or t - current[0][0] > 0.5):
        current = [packet]
        turns.append(current)
    elif current is not None:
        current.append(packet)


def first(turn, after, test):
    return next((t for t, src, dst in turn if t >= after and test(src, dst)), None)


rows = []
for turn in turns:
    t0 = turn[0][0]
    run = first(turn, t0, lambda s, d: d == RUNNER)
    asked = first(turn, run or t0, lambda s, d: d == MOCK)
    if run is None or asked is None:
        continue
    # The provider's first chunk: after its response headers (sent at once).
    chunk = first(turn, asked + 0.01, lambda s, d: s == MOCK)
    event = first(turn, chunk or asked, lambda s, d: s == RUNNER)
    if chunk is None or event is None:
        continue
    to_parser = first(turn, event, lambda s, d: d == PARSER)
    parsed = first(turn, to_parser, lambda s, d: s == PARSER) if to_parser else None
    out = first(turn, event, lambda s, d: s == GATEWAY)
    if out is None:
        continue
    rows.append({
        "client → runner request": run - t0,
        "runner → provider request": asked - run,
        "provider → runner event": event - chunk,
        "gateway → parser → gateway": (parsed - event) if parsed else None,
        "→ client": out - (parsed or event),
        "added": (asked - t0) + (out - chunk),
    })

print(f"{len(rows)} gateway turns at one stream (ms: p50, min, max)")
for name in rows[0] if rows else []:
    values = [row[name] * 1e3 for row in rows if row[name] is not None]
    if values:
        print(f"  {name:28} {statistics.median(values):7.3f} {min(values):7.3f} {max(values):7.3f}")
PY
