//! A `parley.tools.v1.ToolService` for tests, on a free port of 127.0.0.1,
//! over plain gRPC or TLS. It records every call and every cancellation.
//!
//! Tools by name: `search` (two progress updates, then text and a
//! payload), `fail` (a tool error), `hang` (never answers; records when the
//! call is cancelled), `meet` (waits until [`ToolOptions::meet_count`] calls
//! run at once, proving overlap; a cancelled call leaves), `lookup_rows`
//! (one row, or a tool error for the query [`FAILING_QUERY`]); anything
//! else echoes its input. [`ToolOptions::answer`] answers every call with
//! one text instead. With [`ToolOptions::tracer`] each call is a SERVER
//! span that continues the caller's `traceparent`, as an app's ToolService
//! would export it.

use std::{
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use opentelemetry::{
    KeyValue,
    trace::{Span as _, SpanKind, Status as SpanStatus, Tracer as _},
};
use opentelemetry_sdk::trace::SdkTracer;
use parley_grpc::tls::{ServerTls, ServerTlsConfig};
use parley_proto::{
    parser::v1::Payload,
    tools::v1::{
        ToolCall, ToolError, ToolProgress, ToolResult, ToolUpdate,
        tool_service_server::{ToolService, ToolServiceServer},
        tool_update::Update,
    },
};
use tokio::sync::{Notify, mpsc};
use tokio_stream::{
    Stream,
    wrappers::{ReceiverStream, TcpListenerStream},
};
use tonic::{Request, Response, Status};

/// The query that makes `lookup_rows` fail.
pub const FAILING_QUERY: &str = "please-fail";
/// `lookup_rows`'s answer.
pub const ROW: &str = "1 row: {\"Company\": \"Walrus Ltd\"}";

/// How the server answers and what it serves on.
#[derive(Debug, Clone)]
pub struct ToolOptions {
    /// How many `meet` calls must run at once to meet.
    pub meet_count: usize,
    /// TLS (with these server settings) instead of plain gRPC.
    pub tls: Option<ServerTlsConfig>,
    /// Every call answered with this text, whatever the tool's name.
    pub answer: Option<String>,
    /// Each call as a SERVER span of this tracer.
    pub tracer: Option<SdkTracer>,
    /// Where to listen; a free port of 127.0.0.1 when unset.
    pub listen: Option<SocketAddr>,
}

impl Default for ToolOptions {
    fn default() -> Self {
        Self {
            meet_count: 1,
            tls: None,
            answer: None,
            tracer: None,
            listen: None,
        }
    }
}

/// What the server saw.
#[derive(Debug, Default)]
pub struct Record {
    pub calls: Mutex<Vec<ToolCall>>,
    pub cancelled: Mutex<Vec<String>>,
    pub cancelled_notify: Notify,
}

impl Record {
    /// The names of the calls, in arrival order.
    pub fn names(&self) -> Vec<String> {
        self.calls
            .lock()
            .expect("lock")
            .iter()
            .map(|c| c.name.clone())
            .collect()
    }
}

/// A running tool server; it serves until the test's runtime ends.
#[derive(Debug, Clone)]
pub struct ToolServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// What it saw.
    pub record: Arc<Record>,
    tls: bool,
}

impl ToolServer {
    /// Starts the server with `options`.
    pub async fn start(options: ToolOptions) -> Self {
        let listen = options
            .listen
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .expect("bind the tool server");
        let addr = listener.local_addr().expect("tool server address");
        let record = Arc::new(Record::default());
        let tools = Tools {
            record: record.clone(),
            meet: Arc::new(Meeting {
                needed: options.meet_count,
                active: AtomicUsize::new(0),
                met: AtomicBool::new(false),
                changed: Notify::new(),
            }),
            answer: options.answer,
            tracer: options.tracer,
        };
        let tls = options.tls.is_some();
        match options.tls {
            Some(config) => {
                let mut serve = parley_grpc::ServeOptions::new("test-tools", vec![]);
                serve.tls = ServerTls::from_config(&config).expect("tool server TLS");
                tokio::spawn(parley_grpc::serve(
                    listener,
                    tonic::service::Routes::new(ToolServiceServer::new(tools)),
                    serve,
                    std::future::pending(),
                ));
            }
            None => {
                tokio::spawn(async move {
                    let _ = tonic::transport::Server::builder()
                        .add_service(ToolServiceServer::new(tools))
                        .serve_with_incoming(TcpListenerStream::new(listener))
                        .await;
                });
            }
        }
        Self { addr, record, tls }
    }

    /// The endpoint a runner dials: `http://127.0.0.1:PORT`, or
    /// `https://localhost:PORT` (the test certificates' name) over TLS.
    pub fn url(&self) -> String {
        if self.tls {
            format!("https://localhost:{}", self.addr.port())
        } else {
            format!("http://{}", self.addr)
        }
    }
}

/// A plain server where `meet_count` calls of `meet` must overlap: its
/// URL and its record.
pub async fn start(meet_count: usize) -> (String, Arc<Record>) {
    let server = ToolServer::start(ToolOptions {
        meet_count,
        ..ToolOptions::default()
    })
    .await;
    (server.url(), server.record)
}

#[derive(Debug, Clone)]
struct Tools {
    record: Arc<Record>,
    meet: Arc<Meeting>,
    answer: Option<String>,
    tracer: Option<SdkTracer>,
}

/// Counts `meet` calls running right now.
#[derive(Debug)]
struct Meeting {
    needed: usize,
    active: AtomicUsize,
    /// Set once `needed` calls were running at the same time.
    met: AtomicBool,
    changed: Notify,
}

/// Leaves the meeting when the call ends (or is cancelled).
struct Attending(Arc<Meeting>);

impl Drop for Attending {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

type Updates = Pin<Box<dyn Stream<Item = Result<ToolUpdate, Status>> + Send>>;
type Sender = mpsc::Sender<Result<ToolUpdate, Status>>;

fn progress(stage: &str, fraction: f32) -> Result<ToolUpdate, Status> {
    Ok(ToolUpdate {
        update: Some(Update::Progress(ToolProgress {
            stage: stage.into(),
            message: format!("{stage}..."),
            fraction: Some(fraction),
        })),
    })
}

fn done(result: ToolResult) -> Result<ToolUpdate, Status> {
    Ok(ToolUpdate {
        update: Some(Update::Result(result)),
    })
}

fn text(text: &str) -> ToolResult {
    ToolResult {
        text: text.into(),
        payload: None,
        error: None,
    }
}

fn failed(message: &str, code: &str) -> ToolResult {
    ToolResult {
        text: String::new(),
        payload: None,
        error: Some(ToolError {
            message: message.into(),
            code: code.into(),
        }),
    }
}

/// The `query` string of a call's input.
fn query(call: &ToolCall) -> String {
    call.input
        .as_ref()
        .and_then(|input| input.fields.get("query"))
        .and_then(|value| match &value.kind {
            Some(prost_types::value::Kind::StringValue(text)) => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[tonic::async_trait]
impl ToolService for Tools {
    type ExecuteStream = Updates;

    async fn execute(&self, request: Request<ToolCall>) -> Result<Response<Updates>, Status> {
        let span = self.tracer.as_ref().map(|tracer| {
            let parent = parley_grpc::telemetry::propagation::extract(request.metadata().as_ref());
            tracer
                .span_builder("parley.tools.v1.ToolService/Execute")
                .with_kind(SpanKind::Server)
                .with_attributes([
                    KeyValue::new("rpc.system.name", "grpc"),
                    KeyValue::new("rpc.method", "parley.tools.v1.ToolService/Execute"),
                ])
                .start_with_context(tracer, &parent)
        });
        let call = request.into_inner();
        self.record.calls.lock().expect("lock").push(call.clone());
        let (tx, rx) = mpsc::channel(8);
        let tools = self.clone();
        tokio::spawn(async move {
            let error = tools.answer(call, &tx).await;
            if let Some(mut span) = span {
                if let Some(error) = error {
                    span.set_status(SpanStatus::error(error.message));
                }
                span.end();
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

impl Tools {
    /// Sends the call's updates; the tool error it answered with, if any.
    async fn answer(&self, call: ToolCall, tx: &Sender) -> Option<ToolError> {
        if let Some(answer) = &self.answer {
            let _ = tx.send(done(text(answer))).await;
            return None;
        }
        let result = match call.name.as_str() {
            "search" => {
                let _ = tx.send(progress("searching", 0.3)).await;
                let _ = tx.send(progress("ranking", 0.8)).await;
                ToolResult {
                    payload: Some(Payload {
                        r#type: "search_results".into(),
                        data: None,
                        typed: None,
                    }),
                    ..text("3 results")
                }
            }
            "fail" => failed("the index is offline", "OFFLINE"),
            "hang" => {
                let _ = tx.send(progress("waiting", 0.1)).await;
                // Resolves when the client resets the stream.
                tx.closed().await;
                self.record
                    .cancelled
                    .lock()
                    .expect("lock")
                    .push(call.call_id.clone());
                self.record.cancelled_notify.notify_waiters();
                return None;
            }
            "meet" => match self.meet(tx).await {
                Some(met) => text(if met { "met" } else { "alone" }),
                None => return None,
            },
            "lookup_rows" if query(&call) == FAILING_QUERY => {
                failed("the lookup failed", "LOOKUP_FAILED")
            }
            "lookup_rows" => text(ROW),
            _ => text(&format!("{:?}", call.input)),
        };
        let error = result.error.clone();
        let _ = tx.send(done(result)).await;
        error
    }

    /// Waits for the meeting: whether it met (false after 10 s alone),
    /// `None` when the call was cancelled.
    async fn meet(&self, tx: &Sender) -> Option<bool> {
        let meet = &self.meet;
        meet.active.fetch_add(1, Ordering::SeqCst);
        let _attending = Attending(meet.clone());
        meet.changed.notify_waiters();
        let give_up = tokio::time::sleep(Duration::from_secs(10));
        tokio::pin!(give_up);
        loop {
            let changed = meet.changed.notified();
            if meet.active.load(Ordering::SeqCst) >= meet.needed {
                meet.met.store(true, Ordering::SeqCst);
            }
            if meet.met.load(Ordering::SeqCst) {
                return Some(true);
            }
            tokio::select! {
                () = changed => {}
                () = tx.closed() => return None,
                () = &mut give_up => return Some(false),
            }
        }
    }
}
