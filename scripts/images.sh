#!/usr/bin/env bash
# Builds Parley's three container images from the workspace, with no
# registry and no download:
#
#   1. static binaries of payload-parser, agent-runner and chat-gateway
#      (glibc with +crt-static, cargo profile `image`; the explicit --target
#      keeps build scripts and proc-macros dynamic);
#   2. a small build context, target/image-context: bin/<service>, the
#      host's CA bundle (provider TLS) and an empty data/ directory;
#   3. FROM scratch images from docker/<service>.Dockerfile, tagged
#      parley/<service>:<workspace version> (what deploy/ expects) and
#      parley/<service>:dev, and prints their sizes.
#
#   scripts/images.sh                 build the three images
#   PARLEY_IMAGE_TAG=1.2.3 scripts/images.sh   also tag parley/<service>:1.2.3
#
# Push them to a registry, or load them into a local cluster:
#   kind load docker-image parley/chat-gateway:0.1.0 ...   (or minikube image load)
set -euo pipefail
cd "$(dirname "$0")/.."

services=(payload-parser agent-runner chat-gateway)
log() { echo "images: $*" >&2; }

if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
    log "a running Docker engine is required (docker info failed)"
    exit 1
fi
ca_bundle=/etc/ssl/certs/ca-certificates.crt
if [ ! -s "$ca_bundle" ]; then
    log "$ca_bundle is missing: install the ca-certificates package"
    exit 1
fi
version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)"
host="$(rustc -vV | sed -n 's/^host: //p')"

log "building static binaries ($host, profile image)"
started=$SECONDS
bins=()
for service in "${services[@]}"; do bins+=(--bin "$service"); done
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
    cargo build --quiet --profile image --target "$host" "${bins[@]}"
log "binaries built in $((SECONDS - started)) s"

out="target/$host/image"
context=target/image-context
rm -rf "$context"
mkdir -p "$context/bin" "$context/data"
cp "$ca_bundle" "$context/ca-certificates.crt"
for service in "${services[@]}"; do
    # A static executable has no program interpreter (ld-linux).
    if command -v readelf >/dev/null 2>&1 && readelf -l "$out/$service" | grep -q 'program interpreter'; then
        log "$out/$service is dynamically linked; FROM scratch needs a static binary"
        exit 1
    fi
    cp "$out/$service" "$context/bin/$service"
done

for service in "${services[@]}"; do
    tags=(-t "parley/$service:$version" -t "parley/$service:dev")
    if [ -n "${PARLEY_IMAGE_TAG:-}" ]; then
        tags+=(-t "parley/$service:$PARLEY_IMAGE_TAG")
    fi
    log "building parley/$service:$version"
    # The output only on failure (the legacy builder warns about itself).
    if ! docker build "${tags[@]}" -f "docker/$service.Dockerfile" "$context" >"$context/build.log" 2>&1; then
        cat "$context/build.log" >&2
        exit 1
    fi
done
# The images these tags pointed to before, now untagged.
docker image prune --force --filter label=org.opencontainers.image.vendor=Parley >/dev/null

for service in "${services[@]}"; do
    bytes="$(docker image inspect -f '{{.Size}}' "parley/$service:$version")"
    printf 'images: parley/%s:%s  %s MB (binary %s MB)\n' "$service" "$version" \
        "$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1000000 }')" \
        "$(awk -v b="$(stat -c %s "$context/bin/$service")" 'BEGIN { printf "%.1f", b / 1000000 }')" >&2
done
