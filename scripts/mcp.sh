#!/usr/bin/env bash
# Installs the Python MCP servers the MCP tests run (the official SDK, PyPI
# `mcp`, for the tests' own fixture server, and the reference server
# `mcp-server-time`) into a virtual environment, and prints the path of its
# python on stdout (everything else goes to stderr), so that
#
#   PARLEY_MCP_PYTHON="$(scripts/mcp.sh)" cargo test -p agent-runner --test mcp
#
# uses it. The tests run this script themselves when PARLEY_MCP_PYTHON is
# unset. Idempotent: an environment that already has the pinned versions is
# used as it is. Needs python3 with the venv module and PyPI.
# PARLEY_MCP_VENV moves the environment (default: target/mcp-venv).
set -euo pipefail
cd "$(dirname "$0")/.."

MCP_VERSION="2.3.0"
TIME_VERSION="2026.10.19"
VENV="${PARLEY_MCP_VENV:-${CARGO_TARGET_DIR:-$PWD/target}/mcp-venv}"
PY="$VENV/bin/python"

log() { echo "mcp.sh: $*" >&2; }

have() {
    [ -x "$PY" ] && "$PY" - "$MCP_VERSION" "$TIME_VERSION" <<'EOF' >/dev/null 2>&1
import sys
from importlib.metadata import version
assert version("mcp") == sys.argv[1], "mcp"
assert version("mcp-server-time") == sys.argv[2], "mcp-server-time"
EOF
}

if ! have; then
    if ! command -v python3 >/dev/null 2>&1; then
        log "python3 is required"
        exit 1
    fi
    mkdir -p "$(dirname "$VENV")"
    # A lock, so concurrent test binaries install once.
    exec 9>"$VENV.lock"
    flock 9
    if ! have; then
        log "installing mcp==$MCP_VERSION and mcp-server-time==$TIME_VERSION into $VENV"
        rm -rf "$VENV"
        python3 -m venv "$VENV" >&2
        "$PY" -m pip install --quiet --disable-pip-version-check \
            "mcp==$MCP_VERSION" "mcp-server-time==$TIME_VERSION" >&2
        have || { log "the installed packages are not the pinned versions"; exit 1; }
    fi
fi
echo "$PY"
