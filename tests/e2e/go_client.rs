//! An application backend in Go against the containers: the client of
//! `tests/clients/go`, generated from `proto/` with protoc-gen-go and
//! protoc-gen-go-grpc and built in GOPATH mode against Debian's Go
//! packages, holds the conversation of `tests/clients/scenario.json`
//! through the gateway's published port (five turns, two of which pause for
//! an approval and a tool the app runs and continue with
//! `SubmitToolDecisions` and one of which sends a PNG and a PDF uploaded in
//! chunks to the scripted model, which echoes what it received; a download,
//! a `ResumeTurn` replay, refused calls with their `google.rpc` details, and
//! a second conversation edited with `EditMessage` and switched back with
//! `SwitchBranch`),
//! and the Python client holding the same scenario prints the same
//! transcript.

use crate::support::{
    gate,
    stack::{Service, Stack, StackOptions},
};

#[path = "../clients/support.rs"]
mod clients;

#[tokio::test]
async fn a_generated_go_client_holds_the_python_clients_conversation_with_the_containers() {
    let test = "a_generated_go_client_holds_the_python_clients_conversation_with_the_containers";
    let Some(prerequisites) = gate::prerequisites(test).await else {
        return;
    };
    if !clients::python_available(test) || !clients::go_available(test) {
        return;
    }
    let go = clients::GoClient::build().await;
    // The scenario's table_view turns: the runner allows lookup_rows' endpoint.
    let options = StackOptions {
        runner_registry: true,
        ..StackOptions::default()
    };
    Stack::start(&prerequisites, options)
        .await
        .run(async |stack| {
            let address = stack.addr(Service::Gateway).await;
            let go_run = go.run(&address).await;
            let python_run = clients::run_python(&address).await;
            clients::assert_same_transcript(&python_run, &go_run);
        })
        .await;
}
