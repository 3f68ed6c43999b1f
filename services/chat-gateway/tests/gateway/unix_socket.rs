//! The sidecar hop over a Unix domain socket, as in the Kubernetes pod: the
//! real payload-parser (the binary, as a child process) with
//! `--uds-listen`, and the gateway given only its `unix:` URL (never its TCP
//! port). A turn parsed by the sidecar carries no `PARSER_FALLBACK`
//! diagnostic; one whose socket nobody serves does. And the other way the
//! gateway may parse: in-process by configuration (`upstream.parsing =
//! "in_process"`), the same results with no sidecar and no diagnostic.

use std::time::Duration;

use parley_grpc::tls::ClientTls;
use parley_proto::{
    gateway::v1::chat_event::Event, parser::v1::DiagnosticKind,
    parser::v1::payload_parser_server::SERVICE_NAME,
};
use parley_testkit::sidecar::ParserSidecar;
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

use crate::harness::{
    Harness, Options, ParserMode, Turn, chat, chat_request,
    fake_runner::{Reply, deltas},
};

const PROPOSAL: &str = r#"{"mode": "create", "reasoning": "Track applications", "table_name": "Job Applications", "table_description": "Tracks job applications", "operations": [{"action": "add", "column": {"name": "Company", "type": "text", "required": true}}], "sample_rows": [{"Company": "Acme"}]}"#;

/// Prose, a proposal marker and suggestions, in 5-character deltas a
/// millisecond apart, so each travels to the parser on its own.
fn answer() -> Reply {
    deltas(
        &format!(
            "Here is a table to track your applications.\n\n**SCHEMA_PROPOSAL:** {PROPOSAL}\n\nSUGGESTED_VALUES: [{{\"label\": \"Add rows\", \"value\": \"Add some sample rows\"}}]"
        ),
        5,
    )
}

/// Waits (5 s at most) until the parser answers health over `url`.
async fn serving(url: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let channel = ClientTls::default()
            .endpoint(url)
            .expect("a unix: URL")
            .connect_lazy();
        let status = HealthClient::new(channel)
            .check(HealthCheckRequest {
                service: SERVICE_NAME.into(),
            })
            .await
            .map(|response| response.into_inner().status)
            .map_err(|status| status.code());
        if status == Ok(ServingStatus::Serving as i32) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the parser is not serving on {url}: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn fallbacks(turn: &Turn) -> usize {
    turn.complete
        .diagnostics
        .iter()
        .filter(|d| d.kind == DiagnosticKind::ParserFallback as i32)
        .count()
}

fn assert_parsed(turn: &Turn) {
    assert!(turn.complete.success, "{:?}", turn.complete);
    assert_eq!(
        turn.complete
            .custom_payload
            .as_ref()
            .map(|p| p.r#type.as_str()),
        Some("schema_proposal"),
        "{:?}",
        turn.complete
    );
    for event in &turn.events {
        if let Some(Event::TextDelta(text)) = &event.event {
            for leak in ["SCHEMA", "SUGGESTED", "{", "}", "**"] {
                assert!(!text.contains(leak), "delta {text:?} leaks {leak:?}");
            }
        }
    }
    assert_eq!(turn.text, turn.complete.message);
}

/// One turn of [`answer`], checked by [`assert_parsed`].
async fn parsed_turn(stack: &mut Harness) -> Turn {
    stack.runner.push(answer());
    let turn = chat(
        &mut stack.client,
        chat_request("", "Track my job applications", "tables_list"),
    )
    .await;
    assert_parsed(&turn);
    turn
}

#[tokio::test]
async fn a_turn_is_parsed_by_the_sidecar_over_a_unix_socket() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("parser.sock");
    let url = format!("unix:{}", path.display());
    let parser =
        ParserSidecar::start([std::ffi::OsStr::new("--uds-listen"), path.as_os_str()]).await;
    serving(&url).await;

    let mut stack = Harness::start(Options {
        // Nothing at the harness's own parser address: only the socket parses.
        parser: ParserMode::Down,
        parser_url: Some(url),
        ..Options::default()
    })
    .await;
    for _ in 0..2 {
        let turn = parsed_turn(&mut stack).await;
        assert_eq!(fallbacks(&turn), 0, "{:?}", turn.complete.diagnostics);
    }
    stack.stop().await;

    let exit = parser.stop().await;
    assert!(exit.success(), "the parser stops cleanly: {exit}");
    assert!(!path.exists(), "the parser removed its socket file");
}

#[tokio::test]
async fn a_unix_socket_nobody_serves_falls_back_in_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("parser.sock");
    let mut stack = Harness::start(Options {
        parser: ParserMode::Down,
        parser_url: Some(format!("unix://{}", path.display())),
        ..Options::default()
    })
    .await;
    let turn = parsed_turn(&mut stack).await;
    assert_eq!(fallbacks(&turn), 1, "{:?}", turn.complete.diagnostics);
    stack.stop().await;
}

#[tokio::test]
async fn parsing_in_process_needs_no_sidecar_and_is_no_fallback() {
    let mut stack = Harness::start(Options {
        // Nothing serves the parser's URL: the gateway must not call it.
        parser: ParserMode::Down,
        tweak: |config| config.upstream.parsing = chat_gateway::config::Parsing::InProcess,
        ..Options::default()
    })
    .await;
    for _ in 0..2 {
        let turn = parsed_turn(&mut stack).await;
        assert_eq!(fallbacks(&turn), 0, "{:?}", turn.complete.diagnostics);
        // The suggestions were handed out while the answer streamed.
        assert!(
            turn.events
                .iter()
                .any(|e| matches!(e.event, Some(Event::SuggestedValues(_)))),
            "{:?}",
            turn.events
        );
    }
    stack.stop().await;
}
