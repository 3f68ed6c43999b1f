#!/usr/bin/env bash
# Installs what the Go client of tests/clients/go needs, idempotently, from
# Debian packages (no Go module proxy is needed: the client builds in GOPATH
# mode against the sources these packages put in /usr/share/gocode):
#   - golang-go, protobuf-compiler, protoc-gen-go, protoc-gen-go-grpc: the
#     compiler, protoc and its two Go plugins;
#   - golang-google-grpc-dev, golang-google-protobuf-dev,
#     golang-google-genproto-dev (google.rpc error details) and
#     golang-github-golang-protobuf-1-5-dev: the Go libraries. grpc-go 1.33
#     decodes messages through github.com/golang/protobuf, whose 1.3 package
#     cannot decode the APIv2 messages protoc-gen-go generates; 1.5 can.
# scripts/test.sh calls it; tests/clients/go/build.sh builds the client.
#
#   scripts/go.sh           install what is missing
#   scripts/go.sh --check   only say what is missing (exit 1 if anything is)
set -euo pipefail

packages=(
    golang-go
    protobuf-compiler
    protoc-gen-go
    protoc-gen-go-grpc
    golang-google-grpc-dev
    golang-google-protobuf-dev
    golang-google-genproto-dev
    golang-github-golang-protobuf-1-5-dev
)
log() { echo "go.sh: $*" >&2; }

missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$package")
    fi
done
if ((${#missing[@]} == 0)); then
    exit 0
fi
if [ "${1:-}" = "--check" ]; then
    log "missing Debian packages: ${missing[*]} (scripts/go.sh installs them)"
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    log "no apt-get here: install ${missing[*]} (or their equivalents) yourself"
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    log "${missing[*]} missing and this is not root: install them with apt-get"
    exit 1
fi
log "installing ${missing[*]} from Debian packages"
export DEBIAN_FRONTEND=noninteractive
apt-get update >&2
apt-get install -y --no-install-recommends "${missing[@]}" >&2
