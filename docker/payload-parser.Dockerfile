# parley/payload-parser: the stateless parser, a sidecar of the gateway.
#
# FROM scratch: a statically linked binary and the CA bundle (for a TLS
# telemetry endpoint), nothing else: no shell, no package manager. Runs as
# the non-root numeric user 65532 that deploy/ expects. Nothing is pulled.
# In the gateway's pod it listens on 127.0.0.1 (deploy/base/gateway.yaml passes
# --listen); the image's default listens on every interface, for a parser
# in its own container. The build context is the directory
# scripts/images.sh prepares: bin/<service> and ca-certificates.crt
# (docker/README.md).
FROM scratch
LABEL org.opencontainers.image.title="parley/payload-parser" \
      org.opencontainers.image.vendor="Parley" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY bin/payload-parser /usr/local/bin/payload-parser
ENV PARLEY_LISTEN=0.0.0.0:50053
EXPOSE 50053
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/payload-parser"]
