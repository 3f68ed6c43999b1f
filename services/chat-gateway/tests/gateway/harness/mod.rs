//! The in-process stack the gateway tests talk to: a fake runner and the
//! real payload-parser (the binary, as a child process) on port 0, the
//! gateway (SQLite in a temp dir) on port 0, and a client.

pub mod fake_runner;
pub mod parser;
pub mod process;

use std::{net::SocketAddr, time::Duration};

use chat_gateway::{app::Gateway, auth::Authenticator, config::GatewayConfig, registry::Registry};
use parley_proto::gateway::v1::{
    ChatEvent, ChatRequest, PageContext, TurnComplete, TurnError, chat_event::Event,
    chat_gateway_client::ChatGatewayClient,
};
use tokio::{net::TcpListener, sync::oneshot, task::JoinHandle};
use tonic::{Request, Status, Streaming, transport::Channel};

use fake_runner::FakeRunner;
use parley_testkit::sidecar::ParserSidecar;
use parser::LibraryParser;

/// Where the gateway's parser sidecar is.
#[derive(Debug, Clone, Copy)]
pub enum ParserMode {
    /// The real payload-parser service.
    Up,
    /// Nothing listens at its address.
    Down,
    /// A sidecar (the parser library behind the contract) whose streams
    /// break after this many responses.
    BreaksAfter(usize),
}

/// How to start the stack.
pub struct Options {
    /// The authenticator.
    pub auth: Authenticator,
    /// The parser sidecar.
    pub parser: ParserMode,
    /// Whether the runner is down.
    pub runner_down: bool,
    /// A runner to use instead of the fake one.
    pub runner_url: Option<String>,
    /// A parser sidecar URL to dial instead of the one `parser` starts
    /// (`unix:/path` for a sidecar serving a Unix socket).
    pub parser_url: Option<String>,
    /// `upstream.runner_token_file`: the token sent to the runner.
    pub runner_token_file: Option<std::path::PathBuf>,
    /// Changes to the gateway's configuration.
    pub tweak: fn(&mut GatewayConfig),
    /// The page registry (the example's when `None`).
    pub registry: Option<Registry>,
    /// An object store for attachment bytes (`attachments.store = "s3"`).
    pub s3: Option<chat_gateway::config::S3Config>,
    /// An SQLite database to start from (copied: a store fixture written
    /// by an earlier version, say).
    pub database_file: Option<std::path::PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            auth: Authenticator::dev(),
            parser: ParserMode::Up,
            runner_down: false,
            runner_url: None,
            parser_url: None,
            runner_token_file: None,
            tweak: |_| {},
            registry: None,
            s3: None,
            database_file: None,
        }
    }
}

/// The running stack.
pub struct Harness {
    /// A client of the gateway.
    pub client: ChatGatewayClient<Channel>,
    /// The gateway's address.
    pub addr: SocketAddr,
    /// The fake runner.
    pub runner: FakeRunner,
    /// The gateway's database.
    pub database_url: String,
    /// Makes the gateway's store writes fail (fault injection).
    pub faults: chat_gateway::store::Faults,
    shutdown: Option<oneshot::Sender<()>>,
    served: Option<JoinHandle<()>>,
    dir: tempfile::TempDir,
    /// The parser process, stopped when the harness goes.
    _parser: Option<ParserSidecar>,
}

async fn listen() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
    let addr = listener.local_addr().expect("addr");
    (listener, addr)
}

/// Accepted connections with TCP_NODELAY (tonic ignores the builder's
/// setting for `serve_with_incoming`; without it small stream frames wait
/// for delayed ACKs).
pub fn incoming(listener: TcpListener) -> tonic::transport::server::TcpIncoming {
    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true))
}

/// An address where nothing listens.
async fn closed_addr() -> SocketAddr {
    let (listener, addr) = listen().await;
    drop(listener);
    addr
}

/// The fake runner and the parser sidecar of `options`, serving; returns
/// the runner, both addresses and the parser process (when it is one: it
/// stops when dropped).
pub async fn start_upstreams(
    options: &Options,
) -> (FakeRunner, SocketAddr, SocketAddr, Option<ParserSidecar>) {
    let runner = FakeRunner::default();
    let runner_addr = if options.runner_down {
        closed_addr().await
    } else {
        let (listener, addr) = listen().await;
        let service = runner.server();
        tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming(listener))
                .await;
        });
        addr
    };
    let (parser_addr, parser) = match options.parser {
        ParserMode::Down => (closed_addr().await, None),
        ParserMode::Up => {
            // The real payload-parser, as a child process.
            let parser = ParserSidecar::start::<_, &str>([]).await;
            (parser.addr, Some(parser))
        }
        ParserMode::BreaksAfter(n) => {
            let (listener, addr) = listen().await;
            let service = LibraryParser {
                fail_after: Some(n),
            }
            .server();
            tokio::spawn(async move {
                let _ = tonic::transport::Server::builder()
                    .add_service(service)
                    .serve_with_incoming(incoming(listener))
                    .await;
            });
            (addr, None)
        }
    };
    (runner, runner_addr, parser_addr, parser)
}

impl Harness {
    /// Starts the stack.
    pub async fn start(options: Options) -> Self {
        let (runner, runner_addr, parser_addr, parser) = start_upstreams(&options).await;
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = GatewayConfig::default();
        if let Some(file) = &options.database_file {
            std::fs::copy(file, dir.path().join("gateway.db")).expect("copy the database");
        }
        config.store.database_url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("gateway.db").display()
        );
        config.upstream.runner_url = options
            .runner_url
            .clone()
            .unwrap_or_else(|| format!("http://{runner_addr}"));
        config.upstream.parser_url = options
            .parser_url
            .clone()
            .unwrap_or_else(|| format!("http://{parser_addr}"));
        config.upstream.runner_token_file = options.runner_token_file.clone();
        if let Some(s3) = options.s3.clone() {
            config.attachments.store = chat_gateway::config::AttachmentStore::S3;
            config.attachments.s3 = s3;
        }
        (options.tweak)(&mut config);
        let registry = options.registry.unwrap_or_else(Registry::example);
        let gateway = Gateway::build(&config, registry, options.auth)
            .await
            .expect("gateway builds");
        let faults = gateway.engine().store().faults().clone();
        let server = config.server.clone();
        let (listener, addr) = listen().await;
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        let served = tokio::spawn(async move {
            let shutdown = async move {
                let _ = shutdown_rx.await;
            };
            gateway
                .serve(listener, &server, shutdown)
                .await
                .expect("gateway serves");
        });
        let channel = Channel::from_shared(format!("http://{addr}"))
            .expect("url")
            .connect()
            .await
            .expect("connect");
        Self {
            client: ChatGatewayClient::new(channel),
            addr,
            runner,
            database_url: config.store.database_url.clone(),
            faults,
            shutdown: Some(shutdown_tx),
            served: Some(served),
            dir,
            _parser: parser,
        }
    }

    /// Sends SIGTERM's equivalent and waits for the gateway to stop; the
    /// returned directory keeps the database until it is dropped.
    pub async fn stop(mut self) -> tempfile::TempDir {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(served) = self.served.take() {
            tokio::time::timeout(Duration::from_secs(30), served)
                .await
                .expect("stops in time")
                .expect("join");
        }
        self.dir
    }
}

/// A chat request on a page.
pub fn chat_request(conversation_id: &str, message: &str, page: &str) -> ChatRequest {
    ChatRequest {
        conversation_id: conversation_id.to_owned(),
        message: message.to_owned(),
        page: Some(PageContext {
            page: page.to_owned(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Adds a bearer token.
pub fn with_token<T>(message: T, token: &str) -> Request<T> {
    let mut request = Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("ascii"),
    );
    request
}

/// A collected turn.
#[derive(Debug, Clone)]
pub struct Turn {
    /// Every event, in order.
    pub events: Vec<ChatEvent>,
    /// The concatenated text deltas.
    pub text: String,
    /// The final event.
    pub complete: TurnComplete,
    /// The error event, when there was one.
    pub error: Option<TurnError>,
}

impl Turn {
    /// The conversation id from the first status.
    pub fn conversation_id(&self) -> String {
        self.complete.conversation_id.clone()
    }
}

/// Reads a stream to its end (10 s at most) and checks the framing every
/// turn must have: seq 1.. without gaps, a first status with the ids, and
/// `complete` last.
pub async fn collect(stream: Streaming<ChatEvent>) -> Turn {
    let events = drain(stream).await;
    let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
    assert_eq!(
        seqs,
        (1..=events.len() as u64).collect::<Vec<_>>(),
        "seq 1.. without gaps"
    );
    let Some(Event::Status(first)) = events.first().and_then(|event| event.event.clone()) else {
        panic!("the first event is a status: {events:?}");
    };
    assert!(
        !first.conversation_id.is_empty() && !first.turn_id.is_empty(),
        "{first:?}"
    );
    let Some(Event::Complete(complete)) = events.last().and_then(|event| event.event.clone())
    else {
        panic!("the last event is complete: {events:?}");
    };
    assert_eq!(
        (complete.conversation_id.as_str(), complete.turn_id.as_str()),
        (first.conversation_id.as_str(), first.turn_id.as_str())
    );
    let text = events
        .iter()
        .filter_map(|event| match &event.event {
            Some(Event::TextDelta(text)) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let error = events.iter().find_map(|event| match &event.event {
        Some(Event::Error(error)) => Some(error.clone()),
        _ => None,
    });
    Turn {
        events,
        text,
        complete: *complete,
        error,
    }
}

/// Reads a stream to its end (10 s at most).
pub async fn drain(mut stream: Streaming<ChatEvent>) -> Vec<ChatEvent> {
    let mut events = Vec::new();
    let read = async {
        while let Some(event) = stream.message().await.expect("stream ok") {
            events.push(event);
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("the stream ended within 10 s");
    events
}

/// Sends a chat and collects the turn.
pub async fn chat(
    client: &mut ChatGatewayClient<Channel>,
    request: impl tonic::IntoRequest<ChatRequest>,
) -> Turn {
    collect(
        client
            .chat(request)
            .await
            .expect("chat accepted")
            .into_inner(),
    )
    .await
}

/// The `ErrorInfo.reason` of a refusal.
pub fn reason(status: &Status) -> String {
    parley_grpc::status::reason(status).unwrap_or_default()
}

/// Reads `stream` until its first text delta (the turn is running and has
/// written); returns the conversation and turn ids and that event's seq.
pub async fn until_text(stream: &mut Streaming<ChatEvent>) -> (String, String, u64) {
    let mut ids = (String::new(), String::new());
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("an event within 10 s")
            .expect("stream ok")
            .expect("not ended");
        match event.event {
            Some(Event::Status(status)) if ids.0.is_empty() => {
                ids = (status.conversation_id, status.turn_id)
            }
            Some(Event::TextDelta(_)) => return (ids.0, ids.1, event.seq),
            _ => {}
        }
    }
}

/// Polls (at most 15 s) until the conversation's last message is a
/// finished answer, and returns it.
pub async fn answered(
    client: &mut ChatGatewayClient<Channel>,
    conversation_id: &str,
) -> parley_proto::gateway::v1::ConversationMessage {
    use parley_proto::gateway::v1 as gw;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let stored = client
            .get_conversation(gw::GetConversationRequest {
                conversation_id: conversation_id.into(),
                ..Default::default()
            })
            .await
            .expect("get")
            .into_inner();
        if let Some(last) = stored.messages.last()
            && last.role == gw::MessageRole::Assistant as i32
            && last.state != gw::TurnState::Running as i32
        {
            return last.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the turn was not stored within 15 s: {stored:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
