#!/usr/bin/env bash
# Installs what the browser test of tests/browser needs, idempotently:
#   - chromium and chromium-driver from Debian packages (a headless browser
#     and the WebDriver server that drives it);
#   - selenium from PyPI (the WebDriver client the test is written with).
# scripts/test.sh calls it; the test target `browser` (package parley-e2e)
# runs `scripts/browser.sh --check` and fails under CI=true when anything is
# missing.
#
#   scripts/browser.sh           install what is missing
#   scripts/browser.sh --check   only say what is missing (exit 1 if anything is)
set -euo pipefail

packages=(chromium chromium-driver)
log() { echo "browser.sh: $*" >&2; }

missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$package")
    fi
done
python3 -c "import selenium" >/dev/null 2>&1 || missing+=("selenium (PyPI)")
if ((${#missing[@]} == 0)); then
    exit 0
fi
if [ "${1:-}" = "--check" ]; then
    log "missing: ${missing[*]} (scripts/browser.sh installs them)"
    exit 1
fi

debian=()
for package in "${missing[@]}"; do
    [[ "$package" == *"(PyPI)" ]] || debian+=("$package")
done
if ((${#debian[@]})); then
    if ! command -v apt-get >/dev/null 2>&1; then
        log "no apt-get here: install ${debian[*]} (or their equivalents) yourself"
        exit 1
    fi
    if [ "$(id -u)" -ne 0 ]; then
        log "${debian[*]} missing and this is not root: install them with apt-get"
        exit 1
    fi
    log "installing ${debian[*]} from Debian packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2
    apt-get install -y --no-install-recommends "${debian[@]}" >&2
fi
if ! python3 -c "import selenium" >/dev/null 2>&1; then
    log "installing selenium from PyPI"
    python3 -m pip install --quiet --disable-pip-version-check selenium
fi
