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
#
# When a Docker engine is usable, the cluster also listens on the default
# bridge's gateway address (172.17.0.1 usually), which containers reach as
# `host.docker.internal` (--add-host host.docker.internal:host-gateway): the
# end-to-end tests' gateway containers use it. Connections from Docker's
# address pools (172.16.0.0/12, 192.168.0.0/16) need the password (scram).
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

# 4. Where it listens: loopback, and the Docker bridge when there is one.
LISTEN="127.0.0.1"
BRIDGE=""
if command -v docker >/dev/null 2>&1 \
    && subnet="$(docker network inspect bridge -f '{{range .IPAM.Config}}{{.Subnet}} {{.Gateway}}{{end}}' 2>/dev/null)"; then
    # The gateway is often left implicit: the subnet's first address.
    BRIDGE="$(python3 -c 'import ipaddress, sys
net, gateway = (sys.argv[1:] + [""])[:2]
print(gateway or next(ipaddress.ip_network(net).hosts()))' $subnet 2>/dev/null || true)"
fi
if [ -n "$BRIDGE" ]; then
    LISTEN="127.0.0.1,$BRIDGE"
    if ! grep -q "parley-docker" "$DATA/pg_hba.conf"; then
        log "allowing password logins from Docker networks"
        {
            echo "# parley-docker: containers of the end-to-end tests (scripts/postgres.sh)"
            echo "host all parley 172.16.0.0/12 scram-sha-256"
            echo "host all parley 192.168.0.0/16 scram-sha-256"
        } >>"$DATA/pg_hba.conf"
        if "$BINDIR/pg_isready" -q -h 127.0.0.1 -p "$PORT"; then
            as_owner "$BINDIR/pg_ctl" -D "$DATA" reload >&2
        fi
    fi
fi

# 5. Start it unless it already answers where it should.
if "$BINDIR/pg_isready" -q -h 127.0.0.1 -p "$PORT" \
    && { [ -z "$BRIDGE" ] || "$BINDIR/pg_isready" -q -h "$BRIDGE" -p "$PORT"; }; then
    :
else
    # Running but not answering everywhere: it did not get one of its
    # addresses when it started (another socket held the port there, say a
    # load test's outgoing connection on 127.0.0.1:$PORT): start it again.
    if as_owner "$BINDIR/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
        log "restarting PostgreSQL to listen on $LISTEN"
        as_owner "$BINDIR/pg_ctl" -D "$DATA" -w -t 30 stop >&2
    fi
    log "starting PostgreSQL on $LISTEN port $PORT"
    as_owner "$BINDIR/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w -t 30 \
        -o "-h $LISTEN -p $PORT -k $DATA" start >&2
fi

# 6. The role and database the tests use (idempotent).
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
