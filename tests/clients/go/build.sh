#!/usr/bin/env bash
# Generates Go stubs from proto/ and builds the Go client of this directory,
# the way a Go app team without a module proxy would: protoc with
# protoc-gen-go and protoc-gen-go-grpc, then `go build` in GOPATH mode
# against Debian's Go sources in /usr/share/gocode (golang-google-grpc-dev,
# golang-google-protobuf-dev, golang-google-genproto-dev). scripts/go.sh
# installs all of it.
#
#   tests/clients/go/build.sh OUT_DIR     writes OUT_DIR/parley-go-client
#
# OUT_DIR/gopath holds the generated stubs under the import path
# parley/gen/<proto package path> (for example parley/gen/parley/gateway/v1);
# the protos name no go_package, so the M options below map each file.
set -euo pipefail

if [ "$#" -ne 1 ]; then
    echo "usage: $0 OUT_DIR" >&2
    exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="$(mkdir -p "$1" && cd "$1" && pwd)"
debian_gopath=/usr/share/gocode

for tool in go protoc protoc-gen-go protoc-gen-go-grpc; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "build.sh: $tool is missing: run scripts/go.sh" >&2
        exit 1
    fi
done
if [ ! -d "$debian_gopath/src/google.golang.org/grpc" ]; then
    echo "build.sh: $debian_gopath has no gRPC sources: run scripts/go.sh" >&2
    exit 1
fi

gopath="$out/gopath"
rm -rf "$gopath"
mkdir -p "$gopath/src"
protos=()
mappings=()
while IFS= read -r file; do
    protos+=("$file")
    package_dir="$(dirname "$file")" # parley/gateway/v1
    name="$(basename "$(dirname "$package_dir")")$(basename "$package_dir")" # gatewayv1
    mappings+=("M$file=parley/gen/$package_dir;$name")
done < <(cd "$root/proto" && find parley -name '*.proto' | sort)

go_opts=()
for mapping in "${mappings[@]}"; do
    go_opts+=("--go_opt=$mapping" "--go-grpc_opt=$mapping")
done
(cd "$root/proto" && protoc -I . \
    --go_out="$gopath/src" "${go_opts[@]}" \
    --go-grpc_out="$gopath/src" \
    "${protos[@]}")

# GOPATH mode: no module proxy, no go.mod; imports resolve in our stubs,
# then in Debian's sources.
GO111MODULE=off GOPATH="$gopath:$debian_gopath" GOFLAGS= \
    go build -o "$out/parley-go-client" "$here/main.go"
