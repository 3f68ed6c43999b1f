//! An application backend in another language: the Python client of
//! `tests/python/chat_client.py` generates its stubs from `proto/` with
//! grpcio-tools and holds the conversation of `tests/clients/scenario.json`
//! with the whole stack (gateway, real parser, real runner on the scripted
//! demo): a PNG and a PDF uploaded in chunks, then five turns, two of which
//! pause (an approval, a tool the app runs) and continue with
//! `SubmitToolDecisions`, and one of which sends the two files to the
//! scripted model, which says it received each; then a second conversation
//! whose second message is edited (`EditMessage`) and switched back to
//! (`SwitchBranch`).
//!
//! Needs `python3` with `grpcio-tools` (scripts/setup.sh installs it). Without
//! it the test fails under `CI=true` and prints a loud NOT RUN line elsewhere.

use std::{path::PathBuf, process::Command};

use crate::harness::{Harness, Options};
use crate::real_stack::real_runner;
use parley_testkit::not_run;

fn python_with_grpc() -> bool {
    Command::new("python3")
        .args(["-c", "import grpc, grpc_tools"])
        .status()
        .map(|status| status.success())
        .unwrap_or(false)
}

#[tokio::test]
async fn a_generated_python_client_holds_the_scenario_with_its_pauses() {
    if !python_with_grpc() {
        not_run(
            "python_client::a_generated_python_client_holds_the_scenario_with_its_pauses",
            "python3 with grpcio-tools is missing: run scripts/setup.sh",
        );
        return;
    }
    let stack = Harness::start(Options {
        runner_url: Some(real_runner().await),
        ..Options::default()
    })
    .await;
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/python/chat_client.py");
    let address = stack.addr.to_string();
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
        "python client failed:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains(
            "5 turns, 2 paused, payload schema_proposal, 0 suggested values, 2 files uploaded"
        ),
        "{stdout}"
    );
}
