//! The gateway's web protocols with clients that are not ours, against the
//! local binaries (payload-parser, agent-runner playing the demo script,
//! chat-gateway on SQLite with dev auth, as `scripts/demo.sh` runs them):
//! the official Connect client for Python (`tests/web/connect_client.py`:
//! Connect with JSON and binary, gRPC-Web) holds a two-turn conversation,
//! reads a refusal's `google.rpc` details, cuts a server stream and resumes
//! its turn.
//!
//! The binaries come from this build's target directory (`cargo test
//! --workspace` builds them). Without python3 and the Connect client
//! (`scripts/setup.sh` installs it) the test prints `NOT RUN`; under
//! `CI=true` it fails instead.

// The trace tests' process stack, without tracing.
#[path = "../trace/support/stack.rs"]
#[allow(dead_code)]
mod stack;

use std::process::Command;

use parley_testkit::process::repo_root;
use stack::{Stack, Tracing};

/// Whether python3 with the Connect client and its stub generators is here.
fn connect_client_available(test: &str) -> bool {
    let python = Command::new("python3")
        .args(["-c", "import connectrpc, grpc_tools"])
        .output()
        .is_ok_and(|output| output.status.success());
    let plugins = ["protoc-gen-connectrpc", "protoc-gen-py"]
        .iter()
        .all(|plugin| {
            Command::new("sh")
                .args(["-c", &format!("command -v {plugin}")])
                .output()
                .is_ok_and(|output| output.status.success())
        });
    if !(python && plugins) {
        parley_testkit::not_run(
            test,
            "python3 with connectrpc, grpcio-tools, protoc-gen-connectrpc and protoc-gen-py is needed: run scripts/setup.sh",
        );
    }
    python && plugins
}

#[tokio::test]
async fn connect_and_grpc_web_clients_hold_a_conversation_with_the_local_binaries() {
    let test = "connect_and_grpc_web_clients_hold_a_conversation_with_the_local_binaries";
    if !connect_client_available(test) {
        return;
    }
    let tracing = Tracing {
        endpoint: None,
        schedule_delay_ms: 0,
    };
    let config = repo_root().join("deploy/config");
    let stack = Stack::start(
        &tracing,
        &config.join("demo-script.toml"),
        &config.join("registry.yaml"),
    )
    .await;
    let address = stack.gateway.trim_start_matches("http://").to_owned();
    let script = repo_root().join("tests/web/connect_client.py");
    let output = tokio::task::spawn_blocking(move || {
        Command::new("python3").arg(script).arg(address).output()
    })
    .await
    .expect("join")
    .expect("run python3");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the Connect client failed:\n{stdout}\n{stderr}\n{}",
        stack.logs()
    );
    for line in [
        "connect json: 2 turns in ",
        "connect json: refused NOT_FOUND, ErrorInfo CONVERSATION_NOT_FOUND (parley.dev)",
        "connect json: a stream cut after 3 events, the turn resumed to complete",
        "connect proto: a turn to complete",
        "grpc-web: a turn to complete",
    ] {
        assert!(stdout.contains(line), "no `{line}` in:\n{stdout}");
    }
}
