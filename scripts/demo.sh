#!/usr/bin/env bash
# Starts the whole Parley stack on embedded defaults — payload-parser,
# agent-runner (scripted model, demo script) and chat-gateway (SQLite, example
# pages, dev auth, the chat page of web/ at http://127.0.0.1:50051/ui/) on
# localhost — and streams a demo conversation through the gateway with
# parley-chat.
#
#   scripts/demo.sh          run the demo, then keep the stack up until Ctrl-C
#   scripts/demo.sh --once   run the demo and the documented commands that
#                            need the stack (scripts/doc_commands.py --run),
#                            then stop (CI does this)
#   scripts/demo.sh --bin DIR --save-db FILE
#                            run the demo with the binaries in DIR (an
#                            earlier release's, say), copy its SQLite
#                            database to FILE, then stop: how the store
#                            fixtures of services/chat-gateway/testdata are
#                            made
set -euo pipefail
cd "$(dirname "$0")/.."
once=false
bin=""
save_db=""
while (($#)); do
    case "$1" in
        --once) once=true; shift ;;
        --bin) bin=$2; shift 2 ;;
        --save-db) save_db=$2; shift 2 ;;
        *) echo "demo: unknown argument $1" >&2; exit 2 ;;
    esac
done

bash scripts/setup.sh
# The gateway serves the chat page of web/ (`[web] enabled = true`); a
# release's binaries given with --bin may predate the setting.
gateway_env=()
if [[ -z "$bin" ]]; then
    gateway_env=(PARLEY_WEB__ENABLED=true)
    echo "demo: building the three services (first build takes a few minutes)" >&2
    cargo build --quiet -p payload-parser -p agent-runner -p chat-gateway -p parley-testkit --bins
    bin=target/debug
fi

# The services' logs and the SQLite file. Removed on exit, unless the demo
# failed, was interrupted before it ended, or a service did not stop cleanly:
# then it stays, for the logs.
state="$(mktemp -d -t parley-demo.XXXXXX)"
pids=()
stop() {
    local status=$? pid
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || status=$((status == 0 ? 1 : status))
    done
    if ((status == 0)); then
        rm -rf "$state"
    else
        echo "demo: failed or interrupted (status $status); the services' logs are kept in $state" >&2
    fi
    exit "$status"
}
trap stop EXIT
# Interrupted before the demo has finished: a failure (bash would otherwise
# run the EXIT trap with status 0).
trap 'exit 130' INT
trap 'exit 143' TERM

export RUST_LOG="${RUST_LOG:-info}"
# parley-stack starts the three services (logs in $state/NAME.log), waits
# until each answers health, prints `ready`, and stops them on SIGTERM.
# The runner may dial the ToolService endpoints of the registry the gateway
# reads (tools.registry; without it a page with a remote tool is refused).
"$bin/parley-stack" --logs "$state" \
    --service tools --wait port:127.0.0.1:50061 -- \
    "$bin/parley-tools" --listen 127.0.0.1:50061 --end \
    --service parser --wait health:127.0.0.1:50053 -- \
    "$bin/payload-parser" --log-format text --profiles deploy/config/parser-profiles.json --end \
    --service runner --wait health:127.0.0.1:50052 -- \
    env PARLEY_TOOLS__REGISTRY=deploy/config/registry.yaml "$bin/agent-runner" --log-format text --end \
    --service gateway --wait health:127.0.0.1:50051 -- \
    env "${gateway_env[@]}" "$bin/chat-gateway" --log-format text --dev-auth --database-url "sqlite://$state/parley.db?mode=rwc" --end \
    >"$state/stack.out" &
pids+=($!)
until grep -qx ready "$state/stack.out" 2>/dev/null; do
    if ! kill -0 "${pids[0]}" 2>/dev/null; then
        echo "demo: the stack did not start (see above)" >&2
        exit 1
    fi
    sleep 0.1
done
echo "demo: stack is up (logs in $state until it stops)" >&2
if ((${#gateway_env[@]})); then
    echo "demo: the chat page is at http://127.0.0.1:50051/ui/" >&2
fi
echo >&2

"$bin/parley-chat" --page tables_list \
    "Help me create a job tracker for my applications" \
    /accept "What now?"
"$bin/parley-chat" --page table_view --tab rows \
    --state '{"table":{"name":"Job Applications","row_count":2,"columns":[{"id":"col_company","name":"Company","type":"text"},{"id":"col_status","name":"Status","type":"select","options":["Applied","Interview","Offer"]}]}}' \
    "Add some sample data"
# A tool that waits for the user's approval (lookup_rows, on the demo's tool
# server), then a tool the app runs: each turn pauses, parley-chat answers
# with SubmitToolDecisions (approving, and its demo app picking rows of the
# state), and the turn goes on.
"$bin/parley-chat" --page table_view --tab rows --approve yes \
    --state '{"table":{"id":"tbl_jobs","name":"Job Applications","row_count":2},"sample_rows":[{"id":1,"Company":"Acme Corp","Status":"Applied"},{"id":2,"Company":"Globex","Status":"Applied"}]}' \
    "Find the applications at Walrus" \
    "Let me pick the rows that got an interview"

if [[ -n "$save_db" ]]; then
    # A consistent copy while the gateway runs (its WAL included).
    python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("VACUUM INTO ?", (sys.argv[2],))' \
        "$state/parley.db" "$save_db"
    echo "demo: the database is saved in $save_db" >&2
elif $once; then
    # The commands README.md and docs/ show against this stack, as written.
    python3 scripts/doc_commands.py --run
else
    echo >&2
    echo "demo: the stack keeps running: open http://127.0.0.1:50051/ui/ in a browser, or try 'target/debug/parley-chat' or grpcurl (see README). Ctrl-C stops it." >&2
    # Ctrl-C is how this ends: a clean stop, not a failure.
    trap 'exit 0' INT TERM
    wait
fi
