#!/usr/bin/env bash
# Runs Parley's test suite: every crate's unit and integration tests,
# including the PostgreSQL store tests (a throwaway PostgreSQL is installed
# and started by scripts/postgres.sh when none is configured).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [[ -z "${PARLEY_TEST_POSTGRES_URL:-}" && -f scripts/postgres.sh ]]; then
    PARLEY_TEST_POSTGRES_URL="$(bash scripts/postgres.sh)"
    export PARLEY_TEST_POSTGRES_URL
fi
cargo test --workspace --all-targets "$@"
