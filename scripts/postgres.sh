#!/usr/bin/env bash
# Starts a throwaway PostgreSQL for the chat-gateway's store tests and prints
# its URL on stdout (everything else goes to stderr), so that
#
#   export PARLEY_TEST_POSTGRES_URL="$(scripts/postgres.sh)"
#   cargo test -p chat-gateway
#
# runs the PostgreSQL tests for real. Idempotent: when the URL in
# PARLEY_TEST_POSTGRES_URL (or the cluster this script manages) already
# answers, nothing is started. Meant to run as root (CI containers): it
# installs PostgreSQL from Debian packages when missing, initialises a
# cluster in /tmp owned by the `postgres` user and starts it on
# 127.0.0.1:55432 (PARLEY_PG_PORT, PARLEY_PG_DATA override the port and
# directory). Trust authentication on loopback only: test data, never real.
set -euo pipefail

PORT="${PARLEY_PG_PORT:-55432}"
DATA="${PARLEY_PG_DATA:-/tmp/parley-pg-${PORT}}"
URL="postgres://parley:parley@127.0.0.1:${PORT}/parley"

log() { echo "postgres.sh: $*" >&2; }

find_bindir() {
    if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
        pg_config --bindir
        return
    fi
    # Debian keeps the server binaries out of PATH, one directory per version.
    local dir
    dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then
        echo "$dir"
    fi
}

# Runs a command as the cluster owner: `postgres` when we are root.
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# 1. An already reachable server wins.
if [ -n "${PARLEY_TEST_POSTGRES_URL:-}" ]; then
    BINDIR="$(find_bindir || true)"
    if [ -n "$BINDIR" ] && "$BINDIR/pg_isready" -q -d "$PARLEY_TEST_POSTGRES_URL"; then
        log "PARLEY_TEST_POSTGRES_URL is reachable"
        echo "$PARLEY_TEST_POSTGRES_URL"
        exit 0
    fi
    log "PARLEY_TEST_POSTGRES_URL is set but not reachable; starting a local cluster"
fi

# 2. Install when missing.
BINDIR="$(find_bindir || true)"
if [ -z "$BINDIR" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        log "PostgreSQL is not installed and this is not root: install the 'postgresql' package"
        exit 1
    fi
    log "installing PostgreSQL from Debian packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2
    apt-get install -y postgresql >&2
    BINDIR="$(find_bindir || true)"
    if [ -z "$BINDIR" ]; then
        log "PostgreSQL installed but initdb was not found"
        exit 1
    fi
fi

# 3. Initialise the throwaway cluster once.
if [ ! -f "$DATA/PG_VERSION" ]; then
    log "initialising a cluster in $DATA"
    mkdir -p "$DATA"
    if [ "$(id -u)" -eq 0 ]; then
        chown postgres:postgres "$DATA"
    fi
    chmod 700 "$DATA"
    as_owner "$BINDIR/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 --no-locale >&2
fi

# 4. Start it unless it already answers.
if ! "$BINDIR/pg_isready" -q -h 127.0.0.1 -p "$PORT"; then
    log "starting PostgreSQL on 127.0.0.1:$PORT"
    as_owner "$BINDIR/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w -t 30 \
        -o "-h 127.0.0.1 -p $PORT -k $DATA" start >&2
fi

# 5. The role and database the tests use (idempotent).
psql_admin() {
    "$BINDIR/psql" -h 127.0.0.1 -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -qAt "$@"
}
if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = 'parley'")" != "1" ]; then
    psql_admin -c "CREATE ROLE parley LOGIN PASSWORD 'parley'" >&2
fi
if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = 'parley'")" != "1" ]; then
    psql_admin -c "CREATE DATABASE parley OWNER parley" >&2
fi

echo "$URL"
