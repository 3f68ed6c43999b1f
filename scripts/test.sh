#!/usr/bin/env bash
# Runs Parley's test suite: every crate's unit and integration tests,
# including the PostgreSQL store tests (a throwaway PostgreSQL is installed
# and started by scripts/postgres.sh when none is configured) and the
# end-to-end tests of tests/e2e, which run the images that
# scripts/images.sh builds here, and the generated Go and Python clients
# (tests/clients; scripts/go.sh installs Go from Debian packages), and the
# chat page of web/ in headless Chromium (tests/browser; scripts/browser.sh
# installs Chromium, its driver and selenium).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The Go client of tests/clients/go: Go and its gRPC libraries from Debian.
bash scripts/go.sh
# The browser test of tests/browser: chromium, chromium-driver, selenium.
bash scripts/browser.sh
# libfaketime, for the test of a gateway replica whose clock runs ahead
# (chat-gateway's leases tests), from Debian packages.
if ! ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ] \
    && command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: installing libfaketime from Debian packages" >&2
    apt-get install -y -q libfaketime >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null && apt-get install -y -q libfaketime >/dev/null; }
fi
if [[ -z "${PARLEY_TEST_POSTGRES_URL:-}" && -f scripts/postgres.sh ]]; then
    PARLEY_TEST_POSTGRES_URL="$(bash scripts/postgres.sh)"
    export PARLEY_TEST_POSTGRES_URL
fi
# The end-to-end suite (tests/e2e) runs the three images: build them when a
# Docker engine is here. Without one its tests print NOT RUN (and fail
# under CI=true).
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    bash scripts/images.sh
else
    echo "test.sh: no usable Docker engine: the end-to-end tests (tests/e2e) will not run" >&2
fi
cargo test --workspace --all-targets "$@"
