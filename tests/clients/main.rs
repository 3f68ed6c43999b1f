//! The generated clients of other languages against the local binaries:
//! payload-parser, agent-runner (the scripted demo) and chat-gateway
//! (SQLite, dev auth) as child processes on free ports, as `scripts/demo.sh`
//! runs them. The Go client of `tests/clients/go` and the Python client of
//! `tests/python` hold the conversation of `tests/clients/scenario.json`
//! and must print the same transcript; two of its turns pause (an approval
//! of `lookup_rows`, rejected, and the app-run `ask_user_to_pick_rows`) and
//! continue with `SubmitToolDecisions`, and one sends a PNG and a PDF
//! uploaded in chunks, which the scripted model echoes (name, media type,
//! size, SHA-256) so the clients check that it received both.
//!
//! The binaries come from this build's target directory (`cargo test
//! --workspace` builds them; otherwise `cargo build --bins`). Without Go or
//! Python with grpcio-tools the test prints `NOT RUN`; under `CI=true` it
//! fails instead.

mod support;

// The trace tests' process stack, without tracing.
#[path = "../trace/support/stack.rs"]
#[allow(dead_code)]
mod stack;

use parley_testkit::process::repo_root;
use stack::{Stack, Tracing};

#[tokio::test]
async fn generated_go_and_python_clients_hold_the_same_conversation_with_the_local_binaries() {
    let test = "generated_go_and_python_clients_hold_the_same_conversation_with_the_local_binaries";
    if !support::python_available(test) || !support::go_available(test) {
        return;
    }
    let go = support::GoClient::build().await;
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

    let go_run = go.run(&address).await;
    let python_run = support::run_python(&address).await;
    support::assert_same_transcript(&python_run, &go_run);
}
