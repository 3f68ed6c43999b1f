//! One trace from the client's call to the model and the tools.
//!
//! The three real binaries run as child processes with tracing on,
//! exporting to an in-test OTLP collector; the app's ToolService runs in the
//! test and exports its own span. One `Chat` turn with two tool calls (one
//! fails) must come back as one trace — the client's — with the right
//! parent links and attributes, spans from all four processes, and no
//! message text, tool argument or token on any span. The batch exporters
//! are set to wait 60 s, so the spans arrive only because each process
//! flushes them at SIGTERM.
//!
//! A second test points the stack at a collector that is not there and
//! checks that turns still succeed in about the same time as with tracing
//! off (a generous bound: timing is measured by benchmarks, not here).

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use parley_proto::gateway::v1::{
    ChatRequest, PageContext, TurnComplete, chat_event::Event,
    chat_gateway_client::ChatGatewayClient,
};
mod support;

use parley_testkit::process::free_port;
use prost_types::{Struct, Value, value::Kind};
use support::{
    collector::{Collector, KIND_CLIENT, KIND_INTERNAL, KIND_SERVER, STATUS_ERROR, SpanRecord},
    registry_with_tools, script,
    stack::{Stack, Tracing},
    tool_server::{self, ToolServer},
};

/// The client's own trace and span, sent as `traceparent`.
const CLIENT_TRACE: &str = "5e1ec7ed0ddba11cafef00d5ca1ab1e5";
const CLIENT_SPAN: &str = "0123456789abcdef";
/// Words that must never appear on a span by default.
const USER_WORDS: &str = "please look up the ostrich-canary-message rows";
const SECRET: &str = "Bearer sk-canary-not-a-real-token";
const NEVER_RECORDED: &[&str] = &[
    "ostrich-canary-message",
    "zebra-canary-query",
    "please-fail",
    "walrus-canary-answer",
    "Walrus Ltd",
    "sk-canary",
];

struct Answer {
    complete: TurnComplete,
    tools: Vec<(String, bool)>,
}

fn text(value: &str) -> Value {
    Value {
        kind: Some(Kind::StringValue(value.to_owned())),
    }
}

fn object(fields: &[(&str, Value)]) -> Value {
    Value {
        kind: Some(Kind::StructValue(Struct {
            fields: fields
                .iter()
                .map(|(key, value)| ((*key).to_owned(), value.clone()))
                .collect::<BTreeMap<_, _>>(),
        })),
    }
}

fn schema() -> Struct {
    let Some(Kind::StructValue(schema)) = object(&[
        ("type", text("object")),
        (
            "properties",
            object(&[("company", object(&[("type", text("string"))]))]),
        ),
    ])
    .kind
    else {
        unreachable!()
    };
    schema
}

async fn chat(gateway: &str, request: ChatRequest, traceparent: Option<&str>) -> Answer {
    let mut client = ChatGatewayClient::connect(gateway.to_owned())
        .await
        .expect("connect to the gateway");
    let mut call = tonic::Request::new(request);
    if let Some(traceparent) = traceparent {
        call.metadata_mut()
            .insert("traceparent", traceparent.parse().expect("ascii"));
    }
    call.metadata_mut()
        .insert("authorization", SECRET.parse().expect("ascii"));
    let mut stream = client.chat(call).await.expect("chat accepted").into_inner();
    let mut tools = Vec::new();
    let mut complete = None;
    while let Some(event) = stream.message().await.expect("the stream stays healthy") {
        match event.event {
            Some(Event::ToolComplete(done)) => tools.push((done.name, done.success)),
            Some(Event::Complete(done)) => complete = Some(*done),
            _ => {}
        }
    }
    Answer {
        complete: complete.expect("a complete event"),
        tools,
    }
}

fn lookup_request() -> ChatRequest {
    ChatRequest {
        message: USER_WORDS.to_owned(),
        page: Some(PageContext {
            page: "table_view".to_owned(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The one span of `trace` named `name` from `service`.
fn one<'a>(spans: &'a [SpanRecord], service: &str, name: &str) -> &'a SpanRecord {
    let found: Vec<&SpanRecord> = spans
        .iter()
        .filter(|span| span.service == service && span.name == name)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected one `{name}` span from {service}; the trace has: {:#?}",
        spans
            .iter()
            .map(|s| (&s.service, &s.name))
            .collect::<Vec<_>>()
    );
    found[0]
}

fn assert_parent(child: &SpanRecord, parent: &SpanRecord) {
    assert_eq!(
        child.parent_span_id, parent.span_id,
        "`{}` ({}) should be a child of `{}` ({})",
        child.name, child.service, parent.name, parent.service
    );
}

fn assert_rpc(span: &SpanRecord, kind: i32, method: &str) {
    assert_eq!(span.kind, kind, "{span:#?}");
    assert_eq!(span.attr("rpc.system.name"), Some("grpc"), "{span:#?}");
    assert_eq!(span.attr("rpc.method"), Some(method), "{span:#?}");
    assert_eq!(
        span.attr("rpc.response.status_code"),
        Some("OK"),
        "{span:#?}"
    );
    assert_ne!(span.status, STATUS_ERROR, "{span:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_chat_turn_is_one_trace_across_every_process() {
    let collector = Collector::start().await;
    let tools = ToolServer::start(&collector.endpoint()).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let registry = registry_with_tools(dir.path(), &format!("http://{}", tools.addr));
    let tracing = Tracing {
        endpoint: Some(collector.endpoint()),
        // Nothing is exported before shutdown: the flush at SIGTERM must do it.
        schedule_delay_ms: 60_000,
    };
    let mut stack = Stack::start(&tracing, &script(), &registry).await;

    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let answer = chat(&stack.gateway, lookup_request(), Some(&traceparent)).await;
    assert!(
        answer.complete.success,
        "{:?}\n{}",
        answer.complete,
        stack.logs()
    );
    let mut outcomes = answer.tools.clone();
    outcomes.sort();
    assert_eq!(
        outcomes,
        vec![
            ("lookup_rows".to_owned(), false),
            ("lookup_rows".to_owned(), true)
        ],
        "one lookup succeeds, one fails"
    );
    let structured = chat(
        &stack.gateway,
        ChatRequest {
            response_schema: Some(schema()),
            ..lookup_request()
        },
        None,
    )
    .await;
    assert!(structured.complete.success, "{:?}", structured.complete);

    assert!(
        collector
            .spans()
            .iter()
            .all(|span| span.service == tool_server::SERVICE_NAME),
        "the services exported before shutdown; their 60 s batch delay should hold the spans"
    );
    let logs = stack.logs();
    stack.stop().await;
    tools.flush().await;
    let all = collector.spans();
    let trace: Vec<SpanRecord> = all
        .iter()
        .filter(|span| span.trace_id == CLIENT_TRACE)
        .cloned()
        .collect();

    // Every process reported into the client's trace.
    let services: BTreeSet<&str> = trace.iter().map(|span| span.service.as_str()).collect();
    for service in [
        "chat-gateway",
        "agent-runner",
        "payload-parser",
        tool_server::SERVICE_NAME,
    ] {
        assert!(
            services.contains(service),
            "no span from {service}: {services:?}\n{logs}"
        );
    }

    // gateway: Chat continues the client's span.
    let chat_server = one(&trace, "chat-gateway", "parley.gateway.v1.ChatGateway/Chat");
    assert_rpc(
        chat_server,
        KIND_SERVER,
        "parley.gateway.v1.ChatGateway/Chat",
    );
    assert_eq!(chat_server.parent_span_id, CLIENT_SPAN);
    let turn = one(&trace, "chat-gateway", "turn");
    assert_parent(turn, chat_server);
    assert_eq!(turn.attr("parley.turn.outcome"), Some("completed"));
    assert_eq!(
        turn.attr("gen_ai.conversation.id"),
        Some(answer.complete.conversation_id.as_str())
    );
    assert_eq!(
        turn.attr("parley.turn.id"),
        Some(answer.complete.turn_id.as_str())
    );
    for stage in ["store.load_history", "prompt.build", "store.finish_turn"] {
        assert_parent(one(&trace, "chat-gateway", stage), turn);
    }

    // gateway -> runner (a turn with tools: the runner asks before each
    // round of tool calls)
    let run_client = one(
        &trace,
        "chat-gateway",
        "parley.runner.v1.AgentRunner/RunFenced",
    );
    assert_parent(run_client, turn);
    assert_rpc(
        run_client,
        KIND_CLIENT,
        "parley.runner.v1.AgentRunner/RunFenced",
    );
    assert_eq!(run_client.attr("server.address"), Some("127.0.0.1"));
    let run_server = one(
        &trace,
        "agent-runner",
        "parley.runner.v1.AgentRunner/RunFenced",
    );
    assert_rpc(
        run_server,
        KIND_SERVER,
        "parley.runner.v1.AgentRunner/RunFenced",
    );
    assert_parent(run_server, run_client);

    // gateway -> parser
    let parse_client = one(
        &trace,
        "chat-gateway",
        "parley.parser.v1.PayloadParser/ParseStream",
    );
    assert_parent(parse_client, turn);
    assert_rpc(
        parse_client,
        KIND_CLIENT,
        "parley.parser.v1.PayloadParser/ParseStream",
    );
    let parse_server = one(
        &trace,
        "payload-parser",
        "parley.parser.v1.PayloadParser/ParseStream",
    );
    assert_rpc(
        parse_server,
        KIND_SERVER,
        "parley.parser.v1.PayloadParser/ParseStream",
    );
    assert_parent(parse_server, parse_client);

    // runner: the agent, its two model calls, its two tool calls.
    let agent = one(&trace, "agent-runner", "invoke_agent");
    assert_parent(agent, run_server);
    assert_eq!(agent.kind, KIND_INTERNAL);
    assert_eq!(agent.attr("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(agent.attr("gen_ai.provider.name"), Some("parley.scripted"));
    let chats: Vec<&SpanRecord> = trace
        .iter()
        .filter(|span| span.name == "chat scripted-trace")
        .collect();
    assert_eq!(chats.len(), 2, "a model call before and after the tools");
    for chat in &chats {
        assert_parent(chat, agent);
        assert_eq!(chat.kind, KIND_CLIENT);
        for (key, value) in [
            ("gen_ai.operation.name", "chat"),
            ("gen_ai.provider.name", "parley.scripted"),
            ("gen_ai.request.model", "scripted-trace"),
            ("gen_ai.response.model", "scripted-trace"),
            (
                "gen_ai.conversation.id",
                answer.complete.conversation_id.as_str(),
            ),
        ] {
            assert_eq!(chat.attr(key), Some(value), "{key} on {chat:#?}");
        }
        for key in [
            "gen_ai.response.id",
            "gen_ai.response.finish_reasons",
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
            "gen_ai.response.time_to_first_chunk",
        ] {
            assert!(
                chat.attr(key).is_some_and(|v| !v.is_empty()),
                "{key} on {chat:#?}"
            );
        }
        assert!(
            chat.attr("gen_ai.output.type").is_none(),
            "no schema: {chat:#?}"
        );
    }
    let executions: Vec<&SpanRecord> = trace
        .iter()
        .filter(|span| span.name == "execute_tool lookup_rows")
        .collect();
    assert_eq!(executions.len(), 2);
    let tool_spans: Vec<&SpanRecord> = trace
        .iter()
        .filter(|span| span.service == tool_server::SERVICE_NAME)
        .collect();
    assert_eq!(tool_spans.len(), 2);
    let mut failed = 0;
    for execution in &executions {
        assert_parent(execution, agent);
        assert_eq!(execution.attr("gen_ai.tool.name"), Some("lookup_rows"));
        assert_eq!(execution.attr("gen_ai.tool.type"), Some("extension"));
        assert!(
            execution
                .attr("gen_ai.tool.call.id")
                .is_some_and(|id| !id.is_empty())
        );
        if execution.status == STATUS_ERROR {
            failed += 1;
            assert_eq!(
                execution.attr("error.type"),
                Some("TOOL_ERROR"),
                "{execution:#?}"
            );
        } else {
            assert!(execution.attr("error.type").is_none(), "{execution:#?}");
        }
        // runner -> the app's ToolService
        let client = trace
            .iter()
            .find(|span| {
                span.parent_span_id == execution.span_id
                    && span.name == "parley.tools.v1.ToolService/Execute"
            })
            .unwrap_or_else(|| panic!("no ToolService client span under {execution:#?}"));
        assert_rpc(client, KIND_CLIENT, "parley.tools.v1.ToolService/Execute");
        assert!(
            tool_spans
                .iter()
                .any(|span| span.parent_span_id == client.span_id),
            "the tool server's span continues the runner's call"
        );
    }
    assert_eq!(failed, 1, "exactly one tool call failed");

    // The structured turn (its own trace) says what it asked for.
    assert!(
        all.iter().any(|span| span.name == "chat scripted-trace"
            && span.trace_id != CLIENT_TRACE
            && span.attr("gen_ai.output.type") == Some("json")),
        "a chat span with gen_ai.output.type = json"
    );

    // Nothing the user, the model or the tool wrote, and no token.
    for span in &all {
        for (key, value) in &span.attributes {
            for word in NEVER_RECORDED {
                assert!(
                    !value.contains(word),
                    "`{word}` recorded in {key} of `{}` ({})",
                    span.name,
                    span.service
                );
            }
            assert!(!key.contains("authorization"), "{key} on `{}`", span.name);
        }
    }
}

/// Runs `turns` default-script turns and returns how long they took.
async fn timed_turns(stack: &Stack, turns: usize) -> Duration {
    let started = Instant::now();
    for n in 0..turns {
        let request = ChatRequest {
            message: format!("hello number {n}"),
            page: Some(PageContext {
                page: "tables_list".to_owned(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let answer = chat(&stack.gateway, request, None).await;
        assert!(
            answer.complete.success,
            "{:?}\n{}",
            answer.complete,
            stack.logs()
        );
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_neither_fails_nor_slows_a_turn() {
    let dir = tempfile::tempdir().expect("temp dir");
    let registry = registry_with_tools(dir.path(), "http://127.0.0.1:9");
    const TURNS: usize = 5;

    let mut off = Stack::start(
        &Tracing {
            endpoint: None,
            schedule_delay_ms: 0,
        },
        &script(),
        &registry,
    )
    .await;
    timed_turns(&off, 1).await; // warm up connections and the database
    let untraced = timed_turns(&off, TURNS).await;
    off.stop().await;

    // Nothing listens there; exports are attempted every 50 ms.
    let nowhere = format!("http://127.0.0.1:{}", free_port());
    let mut on = Stack::start(
        &Tracing {
            endpoint: Some(nowhere),
            schedule_delay_ms: 50,
        },
        &script(),
        &registry,
    )
    .await;
    timed_turns(&on, 1).await;
    let traced = timed_turns(&on, TURNS).await;
    let logs = on.logs();
    let stopping = on.stop().await;

    assert!(
        logs.contains("tracing on"),
        "the second stack really exported (to nowhere):\n{logs}"
    );
    // Generous: a blocked exporter would add seconds per turn, not percent.
    assert!(
        traced < untraced * 3 + Duration::from_secs(2),
        "{TURNS} turns took {traced:?} with an unreachable collector, {untraced:?} without tracing"
    );
    assert!(
        stopping < Duration::from_secs(20),
        "shutting down with an unreachable collector took {stopping:?}"
    );
}
