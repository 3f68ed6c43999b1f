//! The agent-runner binary: telemetry and configuration first, then the
//! ports (gRPC, metrics), then serve until SIGTERM, drain within a bound and
//! flush the spans. SIGHUP reads the secret files again
//! ([`RunnerApp::reload_secrets`]). As PID 1 it first becomes a minimal
//! init that reaps orphans and runs the runner as its child
//! ([`agent_runner::init`]).

use agent_runner::app::RunnerApp;

fn main() -> std::process::ExitCode {
    // PID 1 (the FROM scratch image): be a minimal init that reaps orphans
    // and run the runner as its child (agent_runner::init).
    if agent_runner::init::is_pid1() {
        match agent_runner::init::supervise() {
            Ok(code) => std::process::exit(code),
            Err(error) => eprintln!(
                "agent-runner: cannot start itself as the child of PID 1 ({error}); \
                 running as PID 1, orphaned processes will not be reaped"
            ),
        }
    }
    parley_grpc::binary::main::<RunnerApp>(env!("CARGO_PKG_VERSION"))
}
