//! An application backend in another language against the containers: the
//! Python client of `tests/python/chat_client.py` generates its stubs from
//! `proto/` with grpcio-tools and holds the conversation of
//! `tests/clients/scenario.json` (a PNG and a PDF uploaded in chunks; five
//! turns, two of which pause and continue with `SubmitToolDecisions` and one
//! of which sends the files to the scripted model, which says it received
//! each; then a second conversation edited with `EditMessage` and switched
//! back with `SwitchBranch`) through the gateway's published port.

use std::{path::PathBuf, process::Command};

use crate::support::{
    gate,
    stack::{Service, Stack, StackOptions},
};

#[tokio::test]
async fn a_generated_python_client_holds_a_conversation_with_the_containers() {
    let test = "a_generated_python_client_holds_a_conversation_with_the_containers";
    let Some(prerequisites) = gate::prerequisites(test).await else {
        return;
    };
    if !gate::command_available(
        test,
        "python3",
        &["-c", "import grpc, grpc_tools"],
        "python3 with grpcio-tools is needed: run scripts/setup.sh",
    ) {
        return;
    }
    // The scenario's table_view turns: the runner allows lookup_rows' endpoint.
    let options = StackOptions {
        runner_registry: true,
        ..StackOptions::default()
    };
    Stack::start(&prerequisites, options)
        .await
        .run(async |stack| {
            let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/chat_client.py");
            let address = stack.addr(Service::Gateway).await;
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
                    ": 5 turns, 2 paused, payload schema_proposal, 0 suggested values, 2 files uploaded"
                ),
                "{stdout}"
            );
        })
        .await;
}
