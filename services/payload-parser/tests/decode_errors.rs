//! Request messages the server cannot decode, sent as raw bytes over real
//! gRPC to the sidecar as `main` serves it (`parley_grpc::serve`): too deep,
//! malformed, too large, first or later in a `ParseStream`. Each is the
//! client's mistake, with a short message and a reason, never `INTERNAL`;
//! and each leaves one audit line.

use std::net::SocketAddr;

use parley_grpc::status::{self, MALFORMED_MESSAGE, REQUEST_TOO_LARGE};
use parley_parse::{Limits, Profiles};
use parley_proto::parser::v1::payload_parser_server::PayloadParserServer;
use parley_testkit::raw::{self, LogCapture, deep_struct, field};
use payload_parser::service::ParserService;
use prost::bytes::Bytes;
use tokio::{net::TcpListener, sync::oneshot};
use tonic::{Code, Status, server::NamedService, transport::Channel};

const PARSE: &str = "/parley.parser.v1.PayloadParser/Parse";
const PARSE_STREAM: &str = "/parley.parser.v1.PayloadParser/ParseStream";
const LIMIT: usize = 8 * 1024;

struct Server {
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
        let addr = listener.local_addr().expect("local addr");
        let limits = Limits {
            max_bytes: LIMIT,
            ..Limits::default()
        };
        let routes = tonic::service::Routes::new(
            ParserService::new(Profiles::default(), limits).into_server(),
        );
        let options = parley_grpc::ServeOptions::new(
            "payload-parser",
            vec![<PayloadParserServer<ParserService> as NamedService>::NAME],
        );
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            parley_grpc::serve(listener, routes, options, shutdown)
                .await
                .expect("serve");
        });
        Self { addr, stop, task }
    }

    async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.addr))
            .expect("uri")
            .connect()
            .await
            .expect("connect")
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.expect("server task");
    }
}

/// A `ParseProfile` whose one payload's schema is a Struct `depth` deep.
fn deep_profile(depth: usize) -> Vec<u8> {
    let spec = [field(1, b"x"), field(3, &deep_struct(depth))].concat();
    field(1, &spec)
}

/// The status a call ended with; it must not have succeeded.
async fn refused(channel: Channel, path: &'static str, messages: Vec<Vec<u8>>) -> Status {
    let messages = messages.into_iter().map(Bytes::from).collect();
    match raw::call(channel, path, messages).await {
        Ok(responses) => panic!("{path} accepted: {} responses", responses.len()),
        Err(status) => status,
    }
}

fn assert_short(status: &Status, code: Code, reason: &str) {
    assert_eq!(status.code(), code, "{status:?}");
    assert_eq!(
        status::reason(status).as_deref(),
        Some(reason),
        "{status:?}"
    );
    assert!(
        status.message().len() < 200,
        "a short message: {}",
        status.message()
    );
}

#[tokio::test]
async fn undecodable_requests_are_the_clients_mistake() {
    // Every test of this binary captures its logs: a thread without a
    // subscriber could register a log callsite as never wanted while
    // another thread's capture is being installed.
    let (logs, _guard) = LogCapture::install();
    let server = Server::start().await;
    let channel = server.channel().await;

    // ParseRequest.profile (2) with a schema 10 000 deep.
    let deep = field(2, &deep_profile(10_000));
    let status = refused(channel.clone(), PARSE, vec![deep]).await;
    assert_short(&status, Code::InvalidArgument, MALFORMED_MESSAGE);
    assert_eq!(status.message(), "profile: is nested too deeply");

    // ParseRequest.text (1) that is not UTF-8.
    let status = refused(channel.clone(), PARSE, vec![field(1, &[0xff, 0xfe])]).await;
    assert_short(&status, Code::InvalidArgument, MALFORMED_MESSAGE);
    assert!(status.message().starts_with("text: "), "{status:?}");

    // Bytes that are no message at all: a length running past the end.
    let status = refused(channel.clone(), PARSE, vec![vec![0x0a, 0x40, b'x']]).await;
    assert_short(&status, Code::InvalidArgument, MALFORMED_MESSAGE);

    // Over max_decoding_message_size (twice the text limit plus 1 MiB).
    let limit = ParserService::max_decoding_bytes(&Limits {
        max_bytes: LIMIT,
        ..Limits::default()
    });
    let huge = field(1, &vec![b'a'; limit + 1]);
    let status = refused(channel.clone(), PARSE, vec![huge]).await;
    assert_short(&status, Code::ResourceExhausted, REQUEST_TOO_LARGE);

    // ParseStream: a first message 10 000 deep (ParseStreamRequest.profile, 1).
    let first = field(1, &deep_profile(10_000));
    let status = refused(channel.clone(), PARSE_STREAM, vec![first]).await;
    assert_short(&status, Code::InvalidArgument, MALFORMED_MESSAGE);
    // prost names a oneof member by its oneof.
    assert_eq!(status.message(), "input: is nested too deeply");

    // ParseStream: a good first message (an empty inline profile), a text
    // delta (2), then one that is not UTF-8: the stream ends with that
    // error, not with OK and no `final`.
    let status = refused(
        channel.clone(),
        PARSE_STREAM,
        vec![field(1, &[]), field(2, b"hello"), field(2, &[0xc3, 0x28])],
    )
    .await;
    assert_short(&status, Code::InvalidArgument, MALFORMED_MESSAGE);
    assert!(status.message().starts_with("input: "), "{status:?}");

    server.stop().await;
    let audit = audit_lines(&logs);
    let codes: Vec<_> = audit.iter().map(|line| line["code"].clone()).collect();
    assert_eq!(
        codes,
        [
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT",
            "RESOURCE_EXHAUSTED",
            "INVALID_ARGUMENT",
            "INVALID_ARGUMENT"
        ],
        "one audit line per refused call"
    );
}

fn audit_lines(logs: &LogCapture) -> Vec<serde_json::Value> {
    logs.lines()
        .into_iter()
        .filter(|line| line["target"] == parley_grpc::edge::AUDIT_TARGET)
        .collect()
}

#[tokio::test]
async fn a_refused_call_leaves_one_audit_line() {
    let (logs, _guard) = LogCapture::install();
    let server = Server::start().await;
    let secret_text = "do-not-log-this-text";
    let mut bad = field(1, secret_text.as_bytes());
    bad.extend(field(1, &[0xff]));
    let status = refused(server.channel().await, PARSE, vec![bad]).await;
    assert_eq!(status.code(), Code::InvalidArgument);
    server.stop().await;

    let audit = audit_lines(&logs);
    assert_eq!(audit.len(), 1, "{audit:?}");
    let line = &audit[0];
    assert_eq!(line["message"], "call rejected");
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["rpc"], "parley.parser.v1.PayloadParser/Parse");
    assert_eq!(line["code"], "INVALID_ARGUMENT");
    assert_eq!(line["reason"], MALFORMED_MESSAGE);
    assert!(line.get("tenant").is_none(), "no tenant here: {line}");
    assert!(!logs.text().contains(secret_text));
}
