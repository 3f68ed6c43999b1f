# parley/agent-runner: the LLM tool loop and the provider adapters.
#
# FROM scratch: a statically linked binary and the CA bundle (provider
# TLS), nothing else: no shell, no package manager. Runs as the non-root
# numeric user 65532 that deploy/ expects. Nothing is pulled. Without
# --config the runner plays its compiled-in demo script (scripted provider).
# It is PID 1 here: it then starts itself again as its child and stays a
# minimal init that forwards SIGTERM/SIGINT/SIGHUP and reaps the orphans an
# MCP stdio server leaves (services/agent-runner/src/init.rs); no --init.
# The build context is the directory scripts/images.sh prepares:
# bin/<service> and ca-certificates.crt (docker/README.md).
FROM scratch
LABEL org.opencontainers.image.title="parley/agent-runner" \
      org.opencontainers.image.vendor="Parley" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY bin/agent-runner /usr/local/bin/agent-runner
ENV PARLEY_LISTEN=0.0.0.0:50052
EXPOSE 50052
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/agent-runner"]
