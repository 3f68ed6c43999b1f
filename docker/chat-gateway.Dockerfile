# parley/chat-gateway: the client-facing Chat API.
#
# FROM scratch: a statically linked binary and the CA bundle (for a TLS
# telemetry endpoint), nothing else: no shell, no package manager. Runs as
# the non-root numeric user 65532 that deploy/ expects. Nothing is pulled.
# The build context is the directory scripts/images.sh prepares:
# bin/<service>, ca-certificates.crt and an empty data/ (docker/README.md).
FROM scratch
LABEL org.opencontainers.image.title="parley/chat-gateway" \
      org.opencontainers.image.vendor="Parley" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY bin/chat-gateway /usr/local/bin/chat-gateway
# A writable working directory for the embedded SQLite default
# (sqlite://parley.db?mode=rwc). In Kubernetes the store is PostgreSQL and
# the root filesystem read-only.
COPY --chown=65532:65532 data/ /var/lib/parley/
WORKDIR /var/lib/parley
ENV PARLEY_LISTEN=0.0.0.0:50051
EXPOSE 50051
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/chat-gateway"]
