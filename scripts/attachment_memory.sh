#!/usr/bin/env bash
# What uploading a file and sending it to the model adds to the gateway's
# peak resident memory.
#
# Starts the stack on embedded defaults (SQLite, the scripted demo model)
# on ports of its own, makes a PDF of --size bytes (20 MiB by default),
# and with parley-chat uploads it and sends it with a message on the demo's
# `tables_list` page (the scripted model echoes the files it received, so
# the run also checks the model got the whole file). The gateway's VmRSS
# before and its VmHWM (peak) after, from /proc, give what the file added
# at its worst, in MiB and as a multiple of the file's size.
#
#   scripts/attachment_memory.sh                 the current tree (image profile)
#   scripts/attachment_memory.sh --bin DIR       binaries built elsewhere
#   scripts/attachment_memory.sh --size 5242880
set -euo pipefail
cd "$(dirname "$0")/.."

bin=""
size=$((20 * 1024 * 1024))
while (($#)); do
    case "$1" in
        --bin) bin="$2"; shift 2 ;;
        --size) size="$2"; shift 2 ;;
        *) echo "attachment_memory: unknown argument $1" >&2; exit 2 ;;
    esac
done
if [[ -z "$bin" ]]; then
    cargo build --quiet --profile image -p payload-parser -p agent-runner -p chat-gateway -p parley-testkit --bins
    bin=target/image
fi

state="$(mktemp -d -t parley-attachment-memory.XXXXXX)"
pids=()
stop() {
    local status=$? pid
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    if ((status == 0)); then rm -rf "$state"; else echo "attachment_memory: logs kept in $state" >&2; fi
    exit "$status"
}
trap stop EXIT
trap 'exit 130' INT

gateway=127.0.0.1:50081
runner=127.0.0.1:50082
parser=127.0.0.1:50083
export RUST_LOG="${RUST_LOG:-warn}"
"$bin/parley-stack" --logs "$state" \
    --service parser --wait "port:$parser" -- \
    "$bin/payload-parser" --listen "$parser" --metrics-listen off --profiles deploy/config/parser-profiles.json --end \
    --service runner --wait "port:$runner" -- \
    env PARLEY_TOOLS__REGISTRY=deploy/config/registry.yaml "$bin/agent-runner" --listen "$runner" --metrics-listen off --end \
    --service gateway --wait "port:$gateway" -- \
    "$bin/chat-gateway" --listen "$gateway" --metrics-listen off --dev-auth \
    --runner "http://$runner" --parser "http://$parser" \
    --database-url "sqlite://$state/parley.db?mode=rwc" --end \
    >"$state/stack.out" &
pids+=($!)
until grep -qx ready "$state/stack.out" 2>/dev/null; do
    if ! kill -0 "${pids[0]}" 2>/dev/null; then
        echo "attachment_memory: the stack did not start" >&2
        exit 1
    fi
    sleep 0.05
done
gateway_pid=$(awk '$1 == "pid" && $2 == "gateway" { print $3 }' "$state/stack.out")
kib() { awk -v key="$1:" '$1 == key { print $2 }' "/proc/$gateway_pid/status"; }

# A PDF: its header, then random bytes (sniffed as application/pdf).
file="$state/report.pdf"
{ printf '%%PDF-1.7\n'; head -c "$((size - 9))" /dev/urandom; } >"$file"
digest=$(sha256sum "$file" | cut -c1-12)

# One plain turn first, so that what every turn allocates is in the
# baseline.
"$bin/parley-chat" --gateway "http://$gateway" --page tables_list "Hello" >/dev/null
sleep 0.5
before=$(kib VmRSS)
peak_before=$(kib VmHWM)
answer=$("$bin/parley-chat" --gateway "http://$gateway" --page tables_list \
    --attach "$file" "What did I attach?")
sleep 0.5
peak=$(kib VmHWM)
after=$(kib VmRSS)
if ! grep -q "report.pdf (application/pdf, $size bytes, sha256 $digest)" <<<"$answer"; then
    echo "attachment_memory: the model did not get the whole file; it answered:" >&2
    echo "$answer" >&2
    exit 1
fi
awk -v size="$size" -v before="$before" -v peak_before="$peak_before" -v peak="$peak" -v after="$after" 'BEGIN {
    mib = 1024 * 1024
    added = (peak - before) * 1024
    printf "file                     %.1f MiB\n", size / mib
    printf "gateway RSS before       %.1f MiB (peak so far %.1f MiB)\n", before / 1024, peak_before / 1024
    printf "gateway peak after       %.1f MiB\n", peak / 1024
    printf "gateway RSS after        %.1f MiB\n", after / 1024
    printf "added to the peak        %.1f MiB = %.2f x the file\n", added / mib, added / size
}'
