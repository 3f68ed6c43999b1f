//! The three services together in-process: the gateway, the parser and the
//! real agent-runner playing its demo script with the scripted provider.

use agent_runner::{app::RunnerApp, config::RunnerConfig};
use parley_proto::{
    gateway::v1::{self as gw, chat_event::Event},
    parser::v1::payload::Typed,
};

use crate::harness::{Harness, Options, chat, chat_request, incoming};

/// The scripted demo runner's configuration, allowed to dial the tool
/// endpoints of the example registry the harness's gateway serves
/// (`tools.registry`), as a deployment's runner is.
pub(crate) fn runner_config() -> RunnerConfig {
    let mut config = RunnerConfig::scripted_demo();
    config.tools.registry = Some(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/registry.yaml"),
    );
    config
}

/// Starts the real runner (no configuration: the scripted demo) on port 0.
pub(crate) async fn real_runner() -> String {
    real_runner_with(runner_config()).await
}

/// Starts the real runner of `config` on port 0.
pub(crate) async fn real_runner_with(config: RunnerConfig) -> String {
    let app = RunnerApp::build(&config, |_| None).expect("runner");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_routes(app.routes())
            .serve_with_incoming(incoming(listener))
            .await;
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn a_two_turn_conversation_through_the_whole_stack() {
    let runner_url = real_runner().await;
    let mut stack = Harness::start(Options {
        runner_url: Some(runner_url),
        ..Options::default()
    })
    .await;

    let first = chat(
        &mut stack.client,
        chat_request("", "Please create a job tracker", "tables_list"),
    )
    .await;
    assert!(first.complete.success, "{:?}", first.complete);
    for leak in ["SCHEMA_PROPOSAL", "\"mode\"", "{"] {
        assert!(
            !first.text.contains(leak),
            "{leak} leaked into {:?}",
            first.text
        );
    }
    assert_eq!(first.text, first.complete.message);
    let tool_events = first
        .events
        .iter()
        .filter(|e| matches!(e.event, Some(Event::ToolStart(_))))
        .count();
    assert_eq!(tool_events, 1, "the demo calls current_time");
    assert_eq!(first.complete.tool_history[0].name, "current_time");
    let payload = first
        .complete
        .custom_payload
        .as_ref()
        .expect("the schema proposal");
    let Some(Typed::SchemaProposal(proposal)) = &payload.typed else {
        panic!("{payload:?}")
    };
    assert_eq!(proposal.table_name.as_deref(), Some("Job Applications"));

    // The user accepts the card: the model sees it in the next prompt's
    // payload manifest (the demo script answers "what now?" by it).
    stack
        .client
        .record_payload_decision(gw::RecordPayloadDecisionRequest {
            conversation_id: first.conversation_id(),
            turn_id: first.complete.turn_id.clone(),
            decision: gw::PayloadDecision::Accepted as i32,
            ..Default::default()
        })
        .await
        .expect("accepted");
    let second = chat(
        &mut stack.client,
        chat_request(&first.conversation_id(), "What now?", "tables_list"),
    )
    .await;
    assert!(second.complete.success, "{:?}", second.complete);
    assert!(
        second
            .text
            .starts_with("You accepted the Job Applications table"),
        "{:?}",
        second.text
    );
    assert!(!second.text.contains("SUGGESTED"), "{:?}", second.text);
    let labels: Vec<&str> = second
        .complete
        .suggested_values
        .iter()
        .map(|v| v.label.as_str())
        .collect();
    assert!(labels.contains(&"Add sample data"), "{labels:?}");
    assert_eq!(
        second
            .complete
            .suggested_actions
            .first()
            .map(|a| a.action.as_str()),
        Some("close_chat")
    );

    let stored = stack
        .client
        .get_conversation(gw::GetConversationRequest {
            conversation_id: first.conversation_id(),
            ..Default::default()
        })
        .await
        .expect("get")
        .into_inner();
    let roles: Vec<i32> = stored.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, vec![1, 2, 1, 2]);
    assert_eq!(stored.messages[3].text, second.complete.message);
    assert_eq!(stored.conversation.expect("summary").turn_count, 2);
    stack.stop().await;
}

/// PyPI's reference MCP server `mcp-server-time` in the real runner, allowed
/// on `table_view` by the example registry's `time/get_current_time` rule:
/// the gateway learns the tool from the runner's `ListTools` (DescribePage
/// shows the server's description and schema), and a whole Chat turn with
/// the scripted model calls it; its result reaches the client as
/// `tool_complete` and is stored with the turn.
#[tokio::test]
async fn an_mcp_servers_tool_through_a_whole_chat_turn() {
    use agent_runner::{config::ProviderConfig, tools::mcp::McpServerConfig};
    use std::time::Duration;

    let Some(python) = parley_testkit::mcp_python("gateway_mcp_time") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("script.toml");
    std::fs::write(
        &script,
        r#"
model = "mcp-time"
[[turns]]
match = { contains = "time" }
steps = [
  { tool_call = { name = "time__get_current_time", input = { timezone = "Europe/Paris" } } },
  { text = "Here is the time in Paris." },
]
[default]
steps = [{ text = "Nothing to do." }]
"#,
    )
    .expect("script");
    let mut config = runner_config();
    config
        .providers
        .insert("scripted".into(), ProviderConfig::scripted(Some(script)));
    config.mcp_servers.insert(
        "time".into(),
        McpServerConfig::stdio(vec![
            python.display().to_string(),
            "-m".into(),
            "mcp_server_time".into(),
            "--local-timezone".into(),
            "UTC".into(),
        ]),
    );
    let app = RunnerApp::build(&config, |name| std::env::var(name).ok()).expect("runner");
    let server = app
        .runner()
        .tools
        .mcp
        .get("time")
        .expect("configured")
        .clone();
    let mut state = server.watch();
    let ready = tokio::time::timeout(
        Duration::from_secs(60),
        state.wait_for(|s| s.state == agent_runner::tools::mcp::ServerState::Ready),
    )
    .await;
    assert!(
        ready.is_ok(),
        "mcp-server-time is not ready: {:?}",
        server.snapshot()
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let routes = app.routes();
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_routes(routes)
            .serve_with_incoming(incoming(listener))
            .await;
    });
    let mut stack = Harness::start(Options {
        runner_url: Some(format!("http://{addr}")),
        ..Options::default()
    })
    .await;

    // The gateway reads the runner's tools at start-up: wait for that read.
    let describe = gw::DescribePageRequest {
        page: Some(gw::PageContext {
            page: "table_view".into(),
            ..Default::default()
        }),
        include_system_prompt: true,
    };
    let mut page = None;
    for _ in 0..600 {
        let described = stack
            .client
            .describe_page(describe.clone())
            .await
            .expect("DescribePage")
            .into_inner();
        if described
            .tools
            .iter()
            .any(|t| t.name == "time__get_current_time")
        {
            page = Some(described);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let page = page.expect("the gateway never listed the MCP tool");
    let tool = page
        .tools
        .iter()
        .find(|t| t.name == "time__get_current_time")
        .expect("listed");
    assert_eq!(tool.description, "Get current time in a specific timezone");
    let schema = parley_proto::json::from_struct_value(tool.input_schema.as_ref().expect("schema"));
    assert_eq!(schema["required"], serde_json::json!(["timezone"]));
    assert!(
        page.system_prompt.contains("time__get_current_time"),
        "the prompt's tool section names it"
    );
    assert!(
        !page.tools.iter().any(|t| t.name == "time__convert_time"),
        "only the tool the rule names"
    );

    let turn = chat(
        &mut stack.client,
        chat_request("", "What time is it in Paris?", "table_view"),
    )
    .await;
    assert!(turn.complete.success, "{:?}", turn.complete);
    let complete = turn
        .events
        .iter()
        .find_map(|e| match &e.event {
            Some(Event::ToolComplete(c)) => Some(c.clone()),
            _ => None,
        })
        .expect("tool_complete");
    assert_eq!(complete.name, "time__get_current_time");
    assert!(complete.success, "{complete:?}");
    let result: serde_json::Value =
        serde_json::from_str(&complete.result_text).expect("structured JSON");
    assert_eq!(result["timezone"], "Europe/Paris", "{result}");
    assert!(
        result["datetime"].as_str().is_some_and(|d| d.contains('T')),
        "{result}"
    );
    assert_eq!(turn.text, "Here is the time in Paris.");
    assert_eq!(turn.complete.tool_history[0].name, "time__get_current_time");
    stack.stop().await;
}

#[tokio::test]
async fn the_runner_token_file_lets_the_gateway_through_a_runner_that_requires_it() {
    let dir = tempfile::tempdir().expect("dir");
    let token = dir.path().join("runner-token");
    std::fs::write(&token, "runner-shared-token-0123456789\n").expect("write token");
    let mut config = runner_config();
    config.auth.token_file = Some(token.clone());
    let runner_url = real_runner_with(config).await;

    // With the token file: the whole turn, tools and payload included.
    let mut stack = Harness::start(Options {
        runner_url: Some(runner_url.clone()),
        runner_token_file: Some(token.clone()),
        ..Options::default()
    })
    .await;
    let turn = chat(
        &mut stack.client,
        chat_request("", "Please create a job tracker", "tables_list"),
    )
    .await;
    assert!(turn.complete.success, "{:?}", turn.complete);
    assert_eq!(turn.complete.tool_history[0].name, "current_time");
    stack.stop().await;

    // Without it, the runner refuses the turn.
    let mut stack = Harness::start(Options {
        runner_url: Some(runner_url),
        ..Options::default()
    })
    .await;
    let turn = chat(
        &mut stack.client,
        chat_request("", "Please create a job tracker", "tables_list"),
    )
    .await;
    assert!(!turn.complete.success, "{:?}", turn.complete);
    stack.stop().await;
}

/// A page whose turns run on the runner's route `smart`, and may ask for
/// `cheap`.
fn routed_registry() -> chat_gateway::registry::Registry {
    chat_gateway::registry::Registry::from_str(
        "version: 1\npages:\n  routed:\n    model: smart\n    models_allowed: [smart, cheap]\n",
        "routed.yaml",
    )
    .expect("a valid registry")
}

/// The runner's `[models.smart]`: a primary whose provider answers 503 to
/// every call, then the scripted demo model; `cheap` is the demo model,
/// priced in EUR (so the fallback's calls cost what `cheap`'s do).
fn routed_runner(dir: &std::path::Path) -> RunnerConfig {
    use agent_runner::{config::ProviderConfig, routes::RouteConfig};
    let down = dir.join("down.toml");
    std::fs::write(
        &down,
        "model = \"down-1\"\n[default]\n[[default.steps]]\nfail = { status = 503, message = '{\"error\": {\"message\": \"overloaded\"}}' }\n",
    )
    .expect("write the script");
    let mut config = runner_config();
    config
        .providers
        .insert("down".into(), ProviderConfig::scripted(Some(down)));
    config.retry.max_attempts = 2;
    config.retry.base_delay = std::time::Duration::from_millis(10);
    config.retry.max_delay = std::time::Duration::from_millis(20);
    config.pricing.currency = "EUR".into();
    for (name, primary, fallbacks) in [
        (
            "smart",
            "down/down-1",
            vec!["scripted/scripted-demo".to_owned()],
        ),
        ("cheap", "scripted/scripted-demo", vec![]),
    ] {
        config.models.routes.insert(
            name.into(),
            RouteConfig {
                primary: primary.into(),
                fallbacks,
                context_window: None,
                max_output_tokens: None,
                input: Vec::new(),
                prices: (name == "cheap").then_some(agent_runner::pricing::PricesConfig {
                    input: 2.0,
                    cached_input: None,
                    cache_write: None,
                    output: 8.0,
                }),
                max_image_bytes: None,
                max_image_edge: None,
            },
        );
    }
    config
}

#[tokio::test]
async fn a_pages_route_falls_back_when_its_primary_is_down() {
    let dir = tempfile::tempdir().expect("dir");
    let runner_url = real_runner_with(routed_runner(dir.path())).await;
    let mut stack = Harness::start(Options {
        runner_url: Some(runner_url),
        registry: Some(routed_registry()),
        ..Options::default()
    })
    .await;

    // The page's model is the route: its primary fails (503, retried), the
    // fallback answers, and `complete` names the model that did.
    let turn = chat(&mut stack.client, chat_request("", "Hello there", "routed")).await;
    assert!(turn.complete.success, "{:?}", turn.complete);
    let usage = turn.complete.usage.as_ref().expect("usage");
    assert_eq!(usage.model, "scripted-demo", "{usage:?}");
    // Priced by `cheap`'s entry: 2 EUR per million in, 8 per million out,
    // each call rounded to the micro-euro.
    assert_eq!(usage.currency, "EUR", "{usage:?}");
    assert!(
        usage.input_tokens > 0 && usage.model_calls == 1,
        "{usage:?}"
    );
    let expected = (usage.input_tokens * 2 + usage.output_tokens * 8) as i64;
    assert_eq!(usage.cost_micros, expected, "{usage:?}");
    // The client saw the runner move on (a RETRYING status that says so).
    let moved_on = turn.events.iter().any(|event| {
        matches!(&event.event, Some(Event::Status(status))
            if status.phase == gw::TurnPhase::Retrying as i32
                && status.message.contains("Falling back to scripted/scripted-demo"))
    });
    assert!(moved_on, "{:?}", turn.events);

    // A model the page allows by name; one it does not is refused before
    // any model is called.
    let mut cheap = chat_request("", "Hello there", "routed");
    cheap.model = "cheap".into();
    let answered = chat(&mut stack.client, cheap).await;
    assert!(answered.complete.success, "{:?}", answered.complete);
    let mut other = chat_request("", "Hello there", "routed");
    other.model = "openai/gpt-4.1".into();
    let refused = stack.client.chat(other).await.expect_err("not allowed");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert_eq!(crate::harness::reason(&refused), "MODEL_NOT_ALLOWED");
    let details =
        tonic_types::StatusExt::get_details_bad_request(&refused).expect("field violations");
    assert!(
        details
            .field_violations
            .iter()
            .any(|violation| violation.field == "model"
                && violation.description.contains("allowed: smart, cheap")),
        "{details:?}"
    );
    // DescribePage says what the page allows.
    let described = stack
        .client
        .describe_page(gw::DescribePageRequest {
            page: Some(gw::PageContext {
                page: "routed".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("describe")
        .into_inner();
    assert_eq!(described.model, "smart");
    assert_eq!(described.models_allowed, ["smart", "cheap"]);
    stack.stop().await;
}
