//! The AI SDK's UI message stream over HTTP: the routes of
//! `chat_gateway::web::ui_stream` served on port 0 over a gateway with the
//! fake runner, spoken to as `useChat`'s default transport does (a JSON
//! post, then server-sent events).

use std::{sync::Arc, time::Duration};

use chat_gateway::{app::Gateway, auth::Authenticator, config::GatewayConfig, registry::Registry};
use futures::StreamExt;
use parley_proto::runner::v1::run_event::Event as RunEvent;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::harness::{
    Options,
    fake_runner::{FakeRunner, Reply, Step, finished, text_reply},
    start_upstreams,
};

/// The UI routes over a gateway, on port 0.
struct Ui {
    url: String,
    runner: FakeRunner,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
    _parser: Option<parley_testkit::sidecar::ParserSidecar>,
}

impl Ui {
    async fn start(auth: Authenticator) -> Self {
        let options = Options::default();
        let (runner, runner_addr, parser_addr, parser) = start_upstreams(&options).await;
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = GatewayConfig::default();
        config.store.database_url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("gateway.db").display()
        );
        config.upstream.runner_url = format!("http://{runner_addr}");
        config.upstream.parser_url = format!("http://{parser_addr}");
        let gateway = Gateway::build(&config, Registry::example(), auth)
            .await
            .expect("gateway builds");
        let routes =
            chat_gateway::web::ui_stream::routes(gateway.engine().clone(), gateway.auth().clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind port 0");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, routes).await;
            // The gateway lives as long as its routes.
            drop(gateway);
        });
        // reqwest is built without a TLS provider of its own.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            url: format!("http://{addr}/v1/ui/chat"),
            runner,
            http: reqwest::Client::new(),
            _dir: dir,
            _parser: parser,
        }
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        self.http.post(&self.url).json(body)
    }

    fn resume(&self, chat: &str) -> reqwest::RequestBuilder {
        self.http.get(format!("{}/{chat}/stream", self.url))
    }
}

/// The body `DefaultChatTransport` posts for a new message.
fn submit(chat: &str, message_id: &str, text: &str) -> Value {
    json!({
        "id": chat,
        "messages": [{"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}],
        "trigger": "submit-message",
        "page": {"page": "table_view"},
    })
}

/// The events of a whole SSE response: each part's JSON, and whether the
/// stream ended with `[DONE]`.
async fn read_events(response: reqwest::Response) -> (Vec<Value>, bool) {
    let text = response.text().await.expect("the stream");
    parse_events(&text)
}

fn parse_events(text: &str) -> (Vec<Value>, bool) {
    let mut parts = Vec::new();
    let mut done = false;
    for event in text.split("\n\n").filter(|event| !event.is_empty()) {
        let data = event
            .strip_prefix("data: ")
            .unwrap_or_else(|| panic!("not a data event: {event:?}"));
        assert!(!done, "nothing may follow [DONE]: {text}");
        if data == "[DONE]" {
            done = true;
        } else {
            parts.push(serde_json::from_str(data).expect("a JSON part"));
        }
    }
    (parts, done)
}

fn types(parts: &[Value]) -> Vec<&str> {
    parts
        .iter()
        .map(|part| part["type"].as_str().expect("a type"))
        .collect()
}

#[tokio::test]
async fn a_posted_message_streams_its_turn_as_ui_message_parts() {
    let ui = Ui::start(Authenticator::dev()).await;
    ui.runner.push(text_reply(&["Hello", ", world"]));
    let response = ui
        .post(&submit("chat-a", "m1", "Say hello"))
        .send()
        .await
        .expect("post");
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "text/event-stream",
        "{:?}",
        response.headers()
    );
    assert_eq!(response.headers()["x-vercel-ai-ui-message-stream"], "v1");
    let (parts, done) = read_events(response).await;
    assert!(done, "[DONE] ends the stream");
    let kinds = types(&parts);
    assert_eq!(kinds.first(), Some(&"start"), "{kinds:?}");
    assert_eq!(kinds[1], "start-step");
    assert_eq!(&kinds[kinds.len() - 2..], ["finish-step", "finish"]);
    let text: String = parts
        .iter()
        .filter(|part| part["type"] == "text-delta")
        .map(|part| part["delta"].as_str().expect("delta"))
        .collect();
    assert_eq!(text, "Hello, world");
    let complete = parts
        .iter()
        .find(|part| part["type"] == "data-parley-complete")
        .expect("the turn's summary");
    // The message id is the turn id.
    assert_eq!(parts[0]["messageId"], complete["data"]["turnId"]);
    let conversation = parts[0]["messageMetadata"]["conversationId"].clone();
    assert_eq!(conversation, complete["data"]["conversationId"]);

    // The chat's next message continues the same conversation.
    ui.runner.push(text_reply(&["Again"]));
    let next = ui
        .post(&submit("chat-a", "m2", "Once more"))
        .send()
        .await
        .expect("post");
    let (parts, _) = read_events(next).await;
    assert_eq!(parts[0]["messageMetadata"]["conversationId"], conversation);
    let seen = ui.runner.seen();
    assert_eq!(seen.len(), 2);

    // Regenerate: the latest answer runs again, in the same conversation.
    ui.runner.push(text_reply(&["Another"]));
    let regenerated = ui
        .post(&json!({"id": "chat-a", "messages": [], "trigger": "regenerate-message"}))
        .send()
        .await
        .expect("post");
    assert_eq!(regenerated.status(), 200);
    let (parts, done) = read_events(regenerated).await;
    assert!(done);
    assert_eq!(parts[0]["messageMetadata"]["conversationId"], conversation);

    // Nothing runs: nothing to resume.
    let idle = ui.resume("chat-a").send().await.expect("get");
    assert_eq!(idle.status(), 204);
    let unknown = ui.resume("never-used").send().await.expect("get");
    assert_eq!(unknown.status(), 204);
}

#[tokio::test]
async fn a_client_that_goes_away_can_resume_the_running_turn_from_its_start() {
    let ui = Ui::start(Authenticator::dev()).await;
    let gate = Arc::new(Notify::new());
    ui.runner.push(Reply::Steps(vec![
        Step::Send(RunEvent::TextDelta("Hel".into())),
        Step::Gate(gate.clone()),
        Step::Send(RunEvent::TextDelta("lo".into())),
        Step::Send(finished("Hello")),
    ]));
    let response = ui
        .post(&submit("chat-b", "m1", "Say hello"))
        .send()
        .await
        .expect("post");
    // Read until the first text, then go away.
    let mut body = response.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("\"text-delta\"") {
        let chunk = body.next().await.expect("more").expect("bytes");
        seen.push_str(std::str::from_utf8(&chunk).expect("utf-8"));
    }
    drop(body);
    let (first, _) = parse_events(seen.split_inclusive("\n\n").collect::<String>().as_str());
    let turn = first[0]["messageId"].clone();

    let resumed = ui.resume("chat-b").send().await.expect("get");
    assert_eq!(resumed.status(), 200);
    assert_eq!(resumed.headers()["x-vercel-ai-ui-message-stream"], "v1");
    gate.notify_one();
    let (parts, done) = tokio::time::timeout(Duration::from_secs(30), read_events(resumed))
        .await
        .expect("the turn ends");
    assert!(done);
    assert_eq!(parts[0]["type"], "start");
    assert_eq!(
        parts[0]["messageId"], turn,
        "the same message, from its start"
    );
    let text: String = parts
        .iter()
        .filter(|part| part["type"] == "text-delta")
        .map(|part| part["delta"].as_str().expect("delta"))
        .collect();
    assert_eq!(text, "Hello");
    assert_eq!(parts.last().expect("parts")["type"], "finish");
}

#[tokio::test]
async fn refused_requests_are_http_errors_with_a_json_reason() {
    let ui = Ui::start(crate::auth::authenticator()).await;
    let refusal = |response: reqwest::Response| async move {
        let status = response.status().as_u16();
        assert_eq!(response.headers()["content-type"], "application/json");
        let body: Value = response.json().await.expect("a JSON body");
        (status, body)
    };

    let (status, body) =
        refusal(ui.post(&submit("c", "m", "hi")).send().await.expect("post")).await;
    assert_eq!(status, 401);
    assert_eq!(body["code"], "UNAUTHENTICATED");
    assert_eq!(body["reason"], "MISSING_TOKEN");
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));

    let (status, body) = refusal(
        ui.post(&submit("c", "m", "hi"))
            .bearer_auth("not-a-token-of-ours")
            .send()
            .await
            .expect("post"),
    )
    .await;
    assert_eq!((status, &body["reason"]), (401, &json!("INVALID_TOKEN")));

    let (status, _) = refusal(ui.resume("c").send().await.expect("get")).await;
    assert_eq!(status, 401);

    // With the token: a body that is not JSON, and one too large.
    let token = crate::auth::CI_TOKEN;
    let (status, body) = refusal(
        ui.http
            .post(&ui.url)
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body("{\"id\": ")
            .send()
            .await
            .expect("post"),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["code"], "INVALID_ARGUMENT");
    assert_eq!(body["reason"], "MALFORMED_MESSAGE");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("not the JSON useChat sends")),
        "{body}"
    );
    let huge = "x".repeat(4 * 1024 * 1024);
    let (status, body) = refusal(
        ui.post(&submit("c", "m", &huge))
            .bearer_auth(token)
            .send()
            .await
            .expect("post"),
    )
    .await;
    assert_eq!(status, 413);
    assert_eq!(body["reason"], "REQUEST_TOO_LARGE");

    // An empty message is the gateway's own refusal.
    let (status, body) = refusal(
        ui.post(&submit("c", "m", "  "))
            .bearer_auth(token)
            .send()
            .await
            .expect("post"),
    )
    .await;
    assert_eq!((status, &body["reason"]), (400, &json!("EMPTY_MESSAGE")));

    // Regenerating a chat that has no conversation.
    let (status, body) = refusal(
        ui.post(&json!({"id": "c", "messages": [], "trigger": "regenerate-message"}))
            .bearer_auth(token)
            .send()
            .await
            .expect("post"),
    )
    .await;
    assert_eq!((status, &body["code"]), (404, &json!("NOT_FOUND")));

    // The token's user has no turn running: nothing to resume.
    let idle = ui.resume("c").bearer_auth(token).send().await.expect("get");
    assert_eq!(idle.status(), 204);
}
