#!/usr/bin/env bash
# The same-run performance table of docs/performance.md: a mock OpenAI-compatible
# provider (parley-load mock), the three Parley services in front of it
# (SQLite, dev auth, the event log on, as shipped) and parley-load holding
# C concurrent streams against
#   - the mock directly (the baseline: what the provider itself takes),
#   - the agent-runner (one hop, like a proxy),
#   - the chat-gateway (the whole stack: gateway + runner + parser sidecar),
#   - any OpenAI-compatible peer you point at the same mock (--peer
#     NAME=URL[,PID[,MODEL]]: PID is measured beside the mock, MODEL is the
#     model name the peer wants for the mock, e.g. TensorZero's
#     tensorzero::model_name::mock; default the mock's own name).
# The mock always listens on 127.0.0.1:18080, so a peer can be configured
# with its URL (http://127.0.0.1:18080/v1) before load.sh starts it.
# "Added" first-token time is each target's p50/p99 minus the baseline's in
# the same run; CPU per turn is read from /proc for each server process.
#
#   scripts/load.sh                           levels 1 and 100, 30 s windows
#   scripts/load.sh --streams "1 100 1000" --duration 20s
#   scripts/load.sh --peer litellm=http://127.0.0.1:4000/v1,PID
#   scripts/load.sh --profile dev --streams 10 --duration 5s   (a quick look)
#   scripts/load.sh --streams 100 --max-turns 100 --excess 64   (overload)
#   scripts/load.sh --parser-uds   (the gateway dials the parser over a Unix socket)
#
# Overload (--excess N, with --max-turns at the level so the gateway is
# full): each level runs the gateway alone, then again while a second
# parley-load process adds N callers each calling Chat every 50 ms, refused
# (RESOURCE_EXHAUSTED, TOO_MANY_TURNS) unless they catch a slot just freed:
# rows "admitted" and "excess" show what the excess does to the admitted
# streams, and how many calls were refused.
#
# The mock answers with a first token after 100 ms, then 20 chunks 50 ms
# apart (--first-token, --chunks, --gap). Binaries are built with the
# containers' profile (`image`) unless --profile says otherwise.
#
# --parser-uds: the parser also serves a Unix domain socket
# (--uds-listen) and the gateway dials it (--parser unix:PATH), as in the
# Kubernetes pod; the gateway's rows are labelled parley-uds. Run once with
# and once without to compare the sidecar hop over TCP and over the socket.
# --check also fails when the parser served no Parse or ParseStream (the
# gateway would then have parsed every turn in-process, not measured the
# hop; a plain answer's turn makes one Parse, see turn/cleaner.rs).
#
# --parsing in_process: the gateway parses with the parser library in its
# own process (upstream.parsing), no sidecar hop; rows labelled
# parley-inproc. --bin DIR: run the binaries in DIR instead of building
# (say, those of an older commit, for a before/after in one session; the
# stack is started by the parley-stack of this checkout's build, which is
# built when DIR has none);
# --tag TEXT is appended to every row's label (after a space).
# --connect: each level also runs the gateway's Chat over the Connect
# protocol in proto3 JSON on HTTP/1.1, as a browser's fetch sends it (rows
# labelled parley-connect): its gateway CPU per turn against the gRPC row's
# is what the web translation costs.
# --pod-workers: the three services run on one thread each
# (TOKIO_WORKER_THREADS=1: tokio's current-thread scheduler, see
# parley_grpc::runtime), as in their Kubernetes pods, whose CPU limits
# (gateway 1, parser 500m, runner 1) leave each one CPU. Off Kubernetes
# each binary starts one worker per core.
# --database-url URL: the gateway's store (default: a new SQLite file per
# run), for example a PostgreSQL database as the replica set runs on; give
# it an empty database or schema, since the runs' turns stay in it.
set -euo pipefail
cd "$(dirname "$0")/.."

levels="1 100"
duration=30s
warmup=5s
profile=image
first_token=100ms
chunks=20
gap=50ms
max_turns=65536
excess=0
check=false
parser_uds=false
parsing=sidecar
bin=
tag=
pod_workers=false
connect=false
database_url=
peers=()
while (($#)); do
    case "$1" in
        --streams) levels=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --warmup) warmup=$2; shift 2 ;;
        --profile) profile=$2; shift 2 ;;
        --first-token) first_token=$2; shift 2 ;;
        --chunks) chunks=$2; shift 2 ;;
        --gap) gap=$2; shift 2 ;;
        --peer) peers+=("$2"); shift 2 ;;
        --max-turns) max_turns=$2; shift 2 ;;
        --excess) excess=$2; shift 2 ;;
        --check) check=true; shift ;;
        --parser-uds) parser_uds=true; shift ;;
        --pod-workers) pod_workers=true; shift ;;
        --connect) connect=true; shift ;;
        --database-url) database_url=$2; shift 2 ;;
        --parsing) parsing=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        --tag) tag=$2; shift 2 ;;
        -h | --help) sed -n '2,61p' "$0"; exit 0 ;;
        *) echo "load: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

case "$parsing" in sidecar | in_process) ;; *) echo "load: --parsing is sidecar or in_process" >&2; exit 2 ;; esac
if [[ -z "$bin" ]]; then
    echo "load: building parley-load and the three services (profile $profile)" >&2
    cargo build --quiet --profile "$profile" -p parley-load -p payload-parser -p agent-runner -p chat-gateway -p parley-testkit --bins
    case "$profile" in dev) bin=target/debug ;; *) bin="target/$profile" ;; esac
fi

# 1 000 streams hold about 2 000 sockets in the runner and the mock.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

state="$(mktemp -d -t parley-load.XXXXXX)"
database_url=${database_url:-"sqlite://$state/load.db?mode=rwc"}
pids=()
stop() {
    local status=$? pid
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    if ((status == 0)); then rm -rf "$state"; else echo "load: logs kept in $state" >&2; fi
    exit "$status"
}
trap stop EXIT
trap 'exit 130' INT

mock=127.0.0.1:18080
gateway=127.0.0.1:28061
runner=127.0.0.1:28062
parser=127.0.0.1:28063
parser_metrics=127.0.0.1:19466
# Below 32768, outside Linux's ephemeral range (32768-60999): a port in it
# can be taken by any outgoing connection's source port just before a
# service binds it (a CI run once lost its runner to EADDRINUSE so).
# Another stack on these ports (a second load run, a demo) would answer in
# place of the one started here, and the figures would be its.
for address in "$mock" "$gateway" "$runner" "$parser" "$parser_metrics"; do
    if (exec 3<>"/dev/tcp/${address%:*}/${address##*:}") 2>/dev/null; then
        echo "load: something already listens on $address (another load run?); stop it first" >&2
        exit 1
    fi
done
cat >"$state/runner.toml" <<TOML
default_provider = "mock"
max_concurrent_runs = 65536
[server]
listen = "$runner"
metrics_listen = "off"
[providers.mock]
kind = "openai"
base_url = "http://$mock/v1"
default_model = "parley-load-mock"
TOML

export RUST_LOG="${RUST_LOG:-warn}"
parser_url="http://$parser"
parser_args=()
parser_waits=()
parley_label=parley
if $parser_uds; then
    parser_socket="$state/parser.sock"
    parser_url="unix:$parser_socket"
    parser_args=(--uds-listen "$parser_socket")
    parser_waits=(--wait "socket:$parser_socket")
    parley_label=parley-uds
fi
# Set only when asked for, so --bin can run binaries older than the key.
parsing_env=()
if [[ "$parsing" == in_process ]]; then
    parley_label=parley-inproc
    parsing_env=(PARLEY_UPSTREAM__PARSING=in_process)
fi
# One thread each for the three services with --pod-workers.
pod_env=()
if $pod_workers; then
    pod_env=(TOKIO_WORKER_THREADS=1)
fi
# One dev user holds every stream: the per-user limits are off, the
# gateway's own limits raised past the largest level. The per-user stream
# limit is set only for binaries that have it (--bin may run older ones,
# which refuse keys they do not know).
limit_env=()
if "$bin/chat-gateway" --dev-auth --print-config 2>/dev/null | grep -q '^follower_stall'; then
    limit_env=(PARLEY_TURNS__PER_USER__STREAMS=0)
fi
# parley-stack starts the mock and the three services (logs in
# $state/NAME.log), waits until each listens, prints `pid NAME PID` lines
# and `ready`, and stops them on SIGTERM. With --bin DIR it is this
# checkout's (DIR's when DIR has one).
stack_bin="$bin/parley-stack"
if [[ ! -x "$stack_bin" ]]; then
    cargo build --quiet -p parley-testkit --bin parley-stack
    stack_bin=target/debug/parley-stack
fi
"$stack_bin" --logs "$state" \
    --service mock --wait "port:$mock" -- \
    "$bin/parley-load" mock --listen "$mock" --first-token "$first_token" --chunks "$chunks" --gap "$gap" --end \
    --service parser --wait "port:$parser" ${parser_waits[@]+"${parser_waits[@]}"} -- \
    env ${pod_env[@]+"${pod_env[@]}"} "$bin/payload-parser" --listen "$parser" --metrics-listen "$parser_metrics" \
    ${parser_args[@]+"${parser_args[@]}"} --end \
    --service runner --wait "port:$runner" -- \
    env ${pod_env[@]+"${pod_env[@]}"} "$bin/agent-runner" --config "$state/runner.toml" --end \
    --service gateway --wait "port:$gateway" -- \
    env PARLEY_TURNS__MAX_CONCURRENT="$max_turns" PARLEY_TURNS__MAX_STREAMS=65536 \
    PARLEY_TURNS__PER_USER__CONCURRENT_TURNS=0 PARLEY_TURNS__PER_USER__TURNS_PER_MINUTE=0 \
    PARLEY_TURNS__PER_USER__TOKENS_PER_DAY=0 \
    ${limit_env[@]+"${limit_env[@]}"} ${parsing_env[@]+"${parsing_env[@]}"} ${pod_env[@]+"${pod_env[@]}"} \
    "$bin/chat-gateway" --listen "$gateway" --metrics-listen off --dev-auth \
    --runner "http://$runner" --parser "$parser_url" \
    --database-url "$database_url" --end \
    >"$state/stack.out" &
pids+=($!)
until grep -qx ready "$state/stack.out" 2>/dev/null; do
    if ! kill -0 "${pids[0]}" 2>/dev/null; then
        echo "load: the stack did not start (see above)" >&2
        exit 1
    fi
    sleep 0.05
done
pid_of() { awk -v name="$1" '$1 == "pid" && $2 == name { print $3 }' "$state/stack.out"; }
mock_pid=$(pid_of mock)
parser_pid=$(pid_of parser)
runner_pid=$(pid_of runner)
gateway_pid=$(pid_of gateway)

results="$state/results.jsonl"
run() {
    local args=()
    while (($#)); do
        if [[ "$1" == --label ]]; then args+=(--label "$2${tag:+ $tag}"); shift 2; else args+=("$1"); shift; fi
    done
    "$bin/parley-load" run --json --duration "$duration" --warmup "$warmup" --pid self "${args[@]}" \
        | tee -a "$results" >/dev/null
}
for streams in $levels; do
    echo "load: $streams stream(s): mock, runner, gateway${peers:+, peers} ($duration each)" >&2
    run --label mock --target openai --url "http://$mock/v1" --streams "$streams" --pid "mock=$mock_pid"
    run --label runner --target runner --url "http://$runner" --streams "$streams" \
        --pid "runner=$runner_pid" --pid "mock=$mock_pid"
    run --label "$parley_label" --target gateway --url "http://$gateway" --streams "$streams" \
        --pid "gateway=$gateway_pid" --pid "runner=$runner_pid" --pid "parser=$parser_pid" \
        --pid "mock=$mock_pid"
    if $connect; then
        run --label parley-connect --target connect --url "http://$gateway" --streams "$streams" \
            --pid "gateway=$gateway_pid" --pid "runner=$runner_pid" --pid "parser=$parser_pid" \
            --pid "mock=$mock_pid"
    fi
    if ((excess > 0)); then
        run --label excess --target gateway --url "http://$gateway" --streams "$excess" \
            --interval 50ms --backoff 50ms --stagger 50ms &
        excess_pid=$!
        run --label admitted --target gateway --url "http://$gateway" --streams "$streams" \
            --pid "gateway=$gateway_pid" --pid "runner=$runner_pid" --pid "parser=$parser_pid" \
            --pid "mock=$mock_pid"
        wait "$excess_pid"
    fi
    for peer in "${peers[@]}"; do
        name=${peer%%=*}
        spec=${peer#*=}
        IFS=, read -r url peer_pid peer_model <<<"$spec"
        peer_args=()
        [[ -n "$peer_pid" ]] && peer_args+=(--pid "$name=$peer_pid")
        [[ -n "$peer_model" ]] && peer_args+=(--model "$peer_model")
        run --label "$name" --target openai --url "$url" --streams "$streams" \
            --pid "mock=$mock_pid" ${peer_args[@]+"${peer_args[@]}"}
    done
done
if $check && [[ "$parsing" == sidecar ]]; then
    # The sidecar's own count of the streams it parsed (over the socket
    # with --parser-uds: the gateway knows no other way to it).
    parsed=$(python3 - "http://$parser_metrics/metrics" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()
print(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
          if line.startswith("rpc_server_call_duration_seconds_count") and "PayloadParser/Parse" in line))
PY
)
    echo "load: the parser sidecar ($parser_url) served ${parsed%.0} Parse or ParseStream call(s)" >&2
    if [[ "${parsed%.0}" == 0 ]]; then
        echo "load: the gateway never reached its parser sidecar" >&2
        exit 1
    fi
fi
if $check; then
    python3 scripts/load_table.py --check "$results"
else
    python3 scripts/load_table.py "$results"
fi
