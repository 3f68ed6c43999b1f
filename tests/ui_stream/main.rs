//! The AI SDK's UI message stream through the gateway's real listener:
//! the three local binaries (the scripted demo model, a static token), and
//! HTTP requests shaped as `useChat`'s default transport sends them — a
//! turn with reasoning, a tool and a proposal card, a turn that waits for
//! an approval and one that waits for a tool the app runs, each continued
//! when the assistant message comes back with the answer, resume with
//! nothing running, and refused requests.
//!
//! The binaries come from this build's target directory (`cargo test
//! --workspace` builds them; otherwise `cargo build --bins`).

// The trace tests' process stack, without tracing.
#[path = "../trace/support/stack.rs"]
#[allow(dead_code)]
mod stack;

use parley_testkit::process::repo_root;
use serde_json::{Value, json};
use stack::{Stack, Tracing};

/// The static token of the test's user.
const TOKEN: &str = "ui-stream-test-token-0123456789";

/// The stack, its UI endpoint and an HTTP client.
struct Ui {
    stack: Stack,
    url: String,
    http: reqwest::Client,
    _config: tempfile::TempDir,
}

impl Ui {
    async fn start() -> Self {
        let config = tempfile::tempdir().expect("config directory");
        let file = config.path().join("gateway.toml");
        std::fs::write(
            &file,
            format!("[[auth.static_tokens]]\nuser = \"web-app\"\ntoken = \"{TOKEN}\"\n"),
        )
        .expect("write the gateway's configuration");
        let deploy = repo_root().join("deploy/config");
        let stack = Stack::start_with(
            &Tracing {
                endpoint: None,
                schedule_delay_ms: 0,
            },
            &deploy.join("demo-script.toml"),
            &deploy.join("registry.yaml"),
            &["--config".into(), file.into_os_string()],
        )
        .await;
        // reqwest is built without a TLS provider of its own.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            url: format!("{}/v1/ui/chat", stack.gateway),
            stack,
            http: reqwest::Client::new(),
            _config: config,
        }
    }

    /// Posts `body` with the token; the parts of the streamed answer.
    async fn post(&self, body: &Value) -> Vec<Value> {
        let response = self
            .http
            .post(&self.url)
            .bearer_auth(TOKEN)
            .json(body)
            .send()
            .await
            .expect("post");
        assert_eq!(response.status(), 200, "{}", self.stack.logs());
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        assert_eq!(response.headers()["x-vercel-ai-ui-message-stream"], "v1");
        parts(&response.text().await.expect("the stream"))
    }
}

/// The JSON parts of a stream, which must end with `data: [DONE]`.
fn parts(text: &str) -> Vec<Value> {
    let events: Vec<&str> = text
        .split("\n\n")
        .filter(|event| !event.is_empty())
        .map(|event| {
            event
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data event: {event:?}"))
        })
        .collect();
    assert_eq!(events.last(), Some(&"[DONE]"), "{text}");
    events[..events.len() - 1]
        .iter()
        .map(|data| serde_json::from_str(data).expect("a JSON part"))
        .collect()
}

fn types(parts: &[Value]) -> Vec<&str> {
    parts
        .iter()
        .map(|part| part["type"].as_str().expect("a type"))
        .collect()
}

fn find<'a>(parts: &'a [Value], kind: &str) -> &'a Value {
    parts
        .iter()
        .find(|part| part["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {:?}", types(parts)))
}

fn text(parts: &[Value]) -> String {
    parts
        .iter()
        .filter(|part| part["type"] == "text-delta")
        .map(|part| part["delta"].as_str().expect("a delta"))
        .collect()
}

fn user(id: &str, text: &str) -> Value {
    json!({"id": id, "role": "user", "parts": [{"type": "text", "text": text}]})
}

#[tokio::test]
async fn use_chat_requests_stream_turns_approvals_and_refusals_through_the_listener() {
    let ui = Ui::start().await;

    // A turn: reasoning, text, a tool, more text with a proposal card.
    let parts = ui
        .post(&json!({
            "id": "chat-1",
            "messages": [user("m1", "Create a job tracker")],
            "trigger": "submit-message",
            "page": {"page": "tables_list"},
        }))
        .await;
    let kinds = types(&parts);
    assert_eq!(&kinds[..2], ["start", "start-step"], "{kinds:?}");
    assert_eq!(&kinds[kinds.len() - 2..], ["finish-step", "finish"]);
    let turn = parts[0]["messageId"]
        .as_str()
        .expect("the turn id")
        .to_owned();
    let conversation = parts[0]["messageMetadata"]["conversationId"].clone();
    assert!(kinds.contains(&"reasoning-delta"), "{kinds:?}");
    let tool = find(&parts, "tool-input-available");
    assert_eq!(tool["toolName"], "current_time");
    assert_eq!(tool["dynamic"], true);
    let output = find(&parts, "tool-output-available");
    assert_eq!(output["toolCallId"], tool["toolCallId"]);
    // The model's second call is a step of its own.
    let tool_at = kinds.iter().position(|k| *k == "tool-output-available");
    let steps = kinds.iter().filter(|k| **k == "start-step").count();
    assert!(tool_at.is_some() && steps == 2, "{kinds:?}");
    assert!(kinds.contains(&"data-parley-payload-partial"), "{kinds:?}");
    let payload = find(&parts, "data-parley-payload");
    assert_eq!(payload["data"]["type"], "schema_proposal");
    assert_eq!(payload["data"]["data"]["table_name"], "Job Applications");
    assert!(text(&parts).contains("job application tracker"));
    assert!(
        !text(&parts).contains("SCHEMA_PROPOSAL"),
        "markers stay out"
    );
    let complete = find(&parts, "data-parley-complete");
    assert_eq!(complete["data"]["turnId"], turn.as_str());
    assert_eq!(complete["data"]["state"], "completed");

    // The same chat, a tool that waits for the user's approval.
    let parts = ui
        .post(&json!({
            "id": "chat-1",
            "messages": [user("m2", "Now find the applications at Walrus")],
            "page": {"page": "table_view"},
        }))
        .await;
    assert_eq!(parts[0]["messageMetadata"]["conversationId"], conversation);
    let paused = parts[0]["messageId"]
        .as_str()
        .expect("a turn id")
        .to_owned();
    let approval = find(&parts, "tool-approval-request");
    let call = approval["toolCallId"]
        .as_str()
        .expect("a call id")
        .to_owned();
    assert_eq!(approval["approvalId"], call.as_str());
    let asked = find(&parts, "data-parley-approval-request");
    assert_eq!(asked["data"]["toolName"], "lookup_rows");
    assert_eq!(types(&parts).last(), Some(&"finish"));

    // The assistant message comes back with the user's answer, as
    // `addToolApprovalResponse` leaves it: the turn continues.
    let input = find(&parts, "tool-input-available")["input"].clone();
    let parts = ui
        .post(&json!({
            "id": "chat-1",
            "messages": [
                user("m2", "Now find the applications at Walrus"),
                {"id": paused, "role": "assistant", "parts": [
                    {"type": "step-start"},
                    {"type": "text", "text": "I'll search the rows of your table for Walrus."},
                    {"type": "dynamic-tool", "toolName": "lookup_rows", "toolCallId": call, "state": "approval-responded",
                     "input": input, "approval": {"id": call, "approved": false, "reason": "not today"}},
                    asked,
                ]},
            ],
            "trigger": "submit-message",
        }))
        .await;
    assert_eq!(parts[0]["type"], "start");
    assert_eq!(
        parts[0]["messageId"],
        paused.as_str(),
        "the same message goes on"
    );
    assert!(text(&parts).contains("Walrus Ltd"), "{:?}", types(&parts));
    assert_eq!(
        find(&parts, "data-parley-complete")["data"]["turnId"],
        paused.as_str()
    );

    // A tool the app runs: the SDK's onToolCall sees its input, and the
    // assistant message comes back with its output (`addToolOutput`).
    let parts = ui
        .post(&json!({
            "id": "chat-1",
            "messages": [user("m3", "Let me pick the rows that got an interview")],
            "page": {"page": "table_view"},
        }))
        .await;
    let picking = parts[0]["messageId"]
        .as_str()
        .expect("a turn id")
        .to_owned();
    let call = find(&parts, "tool-input-available").clone();
    assert_eq!(call["toolName"], "ask_user_to_pick_rows");
    let asked = find(&parts, "data-parley-client-tool-call").clone();
    assert_eq!(asked["data"]["toolCallId"], call["toolCallId"]);
    let parts = ui
        .post(&json!({
            "id": "chat-1",
            "messages": [{"id": picking, "role": "assistant", "parts": [
                {"type": "step-start"},
                {"type": "dynamic-tool", "toolName": "ask_user_to_pick_rows", "toolCallId": call["toolCallId"],
                 "state": "output-available", "input": call["input"], "output": {"row_ids": [1, 2]}},
                asked,
            ]}],
        }))
        .await;
    assert_eq!(parts[0]["messageId"], picking.as_str());
    let proposal = find(&parts, "data-parley-payload");
    assert_eq!(proposal["data"]["type"], "data_proposal");

    // Nothing runs now: nothing to resume; nor for an unknown chat.
    for chat in ["chat-1", "chat-never-used"] {
        let idle = ui
            .http
            .get(format!("{}/{chat}/stream", ui.url))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("get");
        assert_eq!(idle.status(), 204);
    }

    // Refused: no token, another token, a body that is not JSON.
    let refusal = |request: reqwest::RequestBuilder| async move {
        let response = request.send().await.expect("a response");
        let status = response.status().as_u16();
        assert_eq!(response.headers()["content-type"], "application/json");
        (
            status,
            response.json::<Value>().await.expect("a JSON error"),
        )
    };
    let body = json!({"id": "chat-2", "messages": [user("m1", "hello")]});
    let (status, error) = refusal(ui.http.post(&ui.url).json(&body)).await;
    assert_eq!(status, 401);
    assert_eq!(error["code"], "UNAUTHENTICATED");
    assert_eq!(error["reason"], "MISSING_TOKEN");
    let (status, error) = refusal(
        ui.http
            .post(&ui.url)
            .bearer_auth("wrong-token-0123456789")
            .json(&body),
    )
    .await;
    assert_eq!((status, &error["reason"]), (401, &json!("INVALID_TOKEN")));
    let (status, _) = refusal(ui.http.get(format!("{}/chat-1/stream", ui.url))).await;
    assert_eq!(status, 401);
    let (status, error) = refusal(
        ui.http
            .post(&ui.url)
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body("{\"id\": [}"),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(error["reason"], "MALFORMED_MESSAGE");
}
