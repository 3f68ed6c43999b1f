//! `chat-gateway`: the Parley chat API.
//!
//! Reads the configuration (defaults, file, `PARLEY_<SECTION>__<KEY>`
//! variables, flags: see [`parley_grpc::config`]), validates it and the page registry before binding any port,
//! then serves until SIGTERM or Ctrl-C and drains within a bound. With no
//! flags and no file it forms the local stack: it listens on
//! 127.0.0.1:50051, uses the runner on 50052 and the parser on 50053, keeps
//! conversations in `parley.db` in the working directory and serves the example
//! registry. It needs a verifier (`[[auth.jwt]]`, `[[auth.static_tokens]]`)
//! or dev auth asked for explicitly (`--dev-auth`), and refuses to start
//! without one; SIGHUP reads its secret files again. Metrics are served on
//! `server.metrics_listen` (default 127.0.0.1:9464); spans go to the OTLP endpoint of the standard
//! `OTEL_*` variables, and are flushed at shutdown.

use chat_gateway::app::Gateway;

fn main() -> std::process::ExitCode {
    parley_grpc::binary::main::<Gateway>(env!("CARGO_PKG_VERSION"))
}
