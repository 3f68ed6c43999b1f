//! The service over real gRPC: started on port 0, called through the
//! generated tonic client, including the error statuses and their details.

use std::net::SocketAddr;

use parley_parse::Limits;
use parley_proto::parser::v1::{
    ParseProfile, ParseRequest, ParseStreamRequest, ParseStreamResponse, PayloadSpec,
    parse_stream_request::Input, parse_stream_response::Output, payload::Typed,
    payload_parser_client::PayloadParserClient, payload_parser_server::PayloadParserServer,
};
use parley_testkit::examples::{fixture, profile, profiles};
use payload_parser::service::{ParserService, ServiceOptions};
use tokio::{net::TcpListener, sync::oneshot};
use tonic::{Code, Status, server::NamedService, transport::Channel};
use tonic_types::StatusExt;

const LIMIT: usize = 8 * 1024;

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start() -> Self {
        Self::start_with(ServiceOptions::default()).await
    }

    async fn start_with(options: ServiceOptions) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
        let addr = listener.local_addr().expect("local addr");
        let service = ParserService::with_options(
            profiles(),
            Limits {
                max_bytes: LIMIT,
                ..Limits::default()
            },
            options,
        );
        let routes = tonic::service::Routes::new(service.into_server());
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
        Self {
            addr,
            stop: Some(stop),
            task,
        }
    }

    async fn client(&self) -> PayloadParserClient<Channel> {
        let channel = Channel::from_shared(format!("http://{}", self.addr))
            .expect("uri")
            .connect()
            .await
            .expect("connect");
        PayloadParserClient::new(channel)
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.await.expect("server task");
    }
}

fn request(text: &str, profile_name: &str) -> ParseRequest {
    ParseRequest {
        text: text.into(),
        profile: None,
        profile_name: profile_name.into(),
    }
}

fn violation(status: &Status) -> (String, String) {
    let bad = status
        .get_details_bad_request()
        .expect("a BadRequest detail");
    let first = bad.field_violations.first().expect("a field violation");
    (first.field.clone(), first.description.clone())
}

fn stream_of(messages: Vec<Input>) -> impl tokio_stream::Stream<Item = ParseStreamRequest> {
    tokio_stream::iter(
        messages
            .into_iter()
            .map(|input| ParseStreamRequest { input: Some(input) }),
    )
}

async fn collect(
    mut responses: tonic::Streaming<ParseStreamResponse>,
) -> (Vec<Output>, Option<Status>) {
    let mut out = Vec::new();
    loop {
        match responses.message().await {
            Ok(Some(message)) => out.extend(message.output),
            Ok(None) => return (out, None),
            Err(status) => return (out, Some(status)),
        }
    }
}

#[tokio::test]
async fn parse_by_profile_name_returns_the_typed_payload() {
    let server = Server::start().await;
    let mut client = server.client().await;
    let text = fixture("schema_proposal_create.txt");
    let response = client
        .parse(request(&text, "table_view"))
        .await
        .expect("parse")
        .into_inner();
    assert_eq!(
        response.message,
        "I'll set up a customer tracker for you with a name and a status column."
    );
    let payload = response.custom_payload.expect("payload");
    assert_eq!(payload.r#type, "schema_proposal");
    let Some(Typed::SchemaProposal(view)) = payload.typed else {
        panic!("typed view")
    };
    assert_eq!(view.table_name.as_deref(), Some("My Table"));
    assert_eq!(view.operations.len(), 2);
    server.stop().await;
}

#[tokio::test]
async fn parse_errors_carry_reasons_and_field_violations() {
    let server = Server::start().await;
    let mut client = server.client().await;

    let status = client
        .parse(request(&"x".repeat(LIMIT + 1), ""))
        .await
        .expect_err("too large");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        parley_grpc::status::reason(&status).as_deref(),
        Some("TEXT_TOO_LARGE")
    );
    let (field, description) = violation(&status);
    assert_eq!(field, "text");
    assert!(
        description.contains(&LIMIT.to_string()) && description.contains(&(LIMIT + 1).to_string()),
        "{description}"
    );

    let status = client
        .parse(request("hi", "no_such_page"))
        .await
        .expect_err("unknown profile");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        parley_grpc::status::reason(&status).as_deref(),
        Some("UNKNOWN_PROFILE")
    );
    assert_eq!(violation(&status).0, "profile_name");

    let schema = prost_types::Struct {
        fields: [(
            "type".to_owned(),
            prost_types::Value {
                kind: Some(prost_types::value::Kind::NumberValue(3.0)),
            },
        )]
        .into(),
    };
    let profile = ParseProfile {
        payloads: vec![PayloadSpec {
            name: "p".into(),
            marker: "P".into(),
            schema: Some(schema),
        }],
        ..ParseProfile::default()
    };
    let bad = ParseRequest {
        text: "hi".into(),
        profile: Some(profile),
        profile_name: String::new(),
    };
    let status = client.parse(bad).await.expect_err("invalid profile");
    assert_eq!(
        parley_grpc::status::reason(&status).as_deref(),
        Some("INVALID_PROFILE")
    );
    assert_eq!(violation(&status).0, "profile.payloads[0].schema");

    let plain = client
        .parse(request(
            "SUGGESTED_VALUES: [{\"label\": \"A\", \"value\": \"a\"}]",
            "",
        ))
        .await;
    assert_eq!(
        plain
            .expect("default profile")
            .into_inner()
            .suggested_values
            .len(),
        1
    );
    server.stop().await;
}

#[tokio::test]
async fn parse_stream_streams_text_elements_and_final() {
    let server = Server::start().await;
    let mut client = server.client().await;
    let text = fixture("suggestions.txt");
    let mut messages = vec![Input::ProfileName("table_view".into())];
    let mut rest = text.as_str();
    while !rest.is_empty() {
        let cut = rest.ceil_char_boundary(7.min(rest.len()));
        messages.push(Input::Text(rest[..cut].to_owned()));
        rest = &rest[cut..];
    }
    let responses = client
        .parse_stream(stream_of(messages))
        .await
        .expect("stream starts")
        .into_inner();
    let (outputs, error) = collect(responses).await;
    assert!(error.is_none(), "{error:?}");
    let streamed: String = outputs
        .iter()
        .filter_map(|o| {
            if let Output::Text(t) = o {
                Some(t.as_str())
            } else {
                None
            }
        })
        .collect();
    let Some(Output::Final(last)) = outputs.last() else {
        panic!("final comes last: {outputs:?}")
    };
    assert_eq!(streamed, last.message);
    assert!(
        outputs
            .iter()
            .any(|o| matches!(o, Output::SuggestedValues(v) if v.values.len() == 2))
    );
    assert!(
        outputs
            .iter()
            .any(|o| matches!(o, Output::SuggestedActions(a) if a.actions.len() == 1))
    );
    let unary = client
        .parse(request(&text, "table_view"))
        .await
        .expect("parse")
        .into_inner();
    assert_eq!(**last, unary);
    server.stop().await;
}

#[tokio::test]
async fn parse_stream_shows_a_payload_growing_and_sends_the_rest_unchanged() {
    let server = Server::start().await;
    let mut client = server.client().await;
    let text = fixture("schema_proposal_create.txt");
    let mut deltas = Vec::new();
    let mut rest = text.as_str();
    while !rest.is_empty() {
        let cut = rest.ceil_char_boundary(9.min(rest.len()));
        deltas.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    let mut messages = vec![Input::ProfileName("table_view".into())];
    messages.extend(deltas.iter().map(|d| Input::Text((*d).to_owned())));
    let responses = client
        .parse_stream(stream_of(messages))
        .await
        .expect("stream starts")
        .into_inner();
    let (outputs, error) = collect(responses).await;
    assert!(error.is_none(), "{error:?}");

    let partials: Vec<_> = outputs
        .iter()
        .filter_map(|o| match o {
            Output::Partial(partial) => Some(partial),
            _ => None,
        })
        .collect();
    assert!(partials.len() > 20, "{} partials", partials.len());
    for (n, partial) in partials.iter().enumerate() {
        assert_eq!(partial.r#type, "schema_proposal");
        assert_eq!(usize::try_from(partial.revision), Ok(n + 1));
    }
    let Some(Output::Final(last)) = outputs.last() else {
        panic!("final comes last: {outputs:?}")
    };
    let payload = last.custom_payload.as_ref().expect("a valid proposal");
    let whole = partials.last().expect("partials");
    assert_eq!(whole.complete_paths, [""]);
    assert_eq!(whole.data, payload.data);

    // Without the new case, the outputs are the library's without partials.
    let mut parser = parley_parse::StreamParser::new(profile("table_view"), Limits::default());
    let mut expected = Vec::new();
    for delta in &deltas {
        expected.extend(parser.push(delta).expect("within limits"));
    }
    let (tail, parsed) = parser.finish_with_items();
    expected.extend(tail);
    expected.push(parley_parse::StreamItem::Final(Box::new(parsed)));
    let expected: Vec<_> = expected
        .into_iter()
        .filter_map(|item| item.into_proto().output)
        .collect();
    let others: Vec<_> = outputs
        .into_iter()
        .filter(|o| !matches!(o, Output::Partial(_)))
        .collect();
    assert_eq!(others, expected);
    server.stop().await;
}

#[tokio::test]
async fn a_checkpoint_is_answered_after_the_output_of_the_text_before_it() {
    let server = Server::start().await;
    let mut client = server.client().await;
    let messages = vec![
        Input::ProfileName("table_view".into()),
        Input::Text("Let me check ".into()),
        Input::Text("the time. ".into()),
        Input::Checkpoint(1),
        Input::Text("Done.\n\nSUGGESTED_VALUES: [{\"label\": \"A\", \"value\": \"a\"}]".into()),
        Input::Checkpoint(2),
    ];
    let responses = client
        .parse_stream(stream_of(messages))
        .await
        .expect("stream starts")
        .into_inner();
    let (outputs, error) = collect(responses).await;
    assert!(error.is_none(), "{error:?}");
    let mut text_before = String::new();
    let mut marks = Vec::new();
    for output in &outputs {
        match output {
            Output::Text(text) if marks.is_empty() => text_before.push_str(text),
            Output::Checkpoint(mark) => marks.push(*mark),
            _ => {}
        }
    }
    assert_eq!(text_before, "Let me check the time.");
    assert_eq!(marks, [1, 2]);
    // The suggestions closed before checkpoint 2: they came before it.
    let second = outputs
        .iter()
        .position(|o| matches!(o, Output::Checkpoint(2)))
        .expect("checkpoint 2");
    let values = outputs
        .iter()
        .position(|o| matches!(o, Output::SuggestedValues(_)))
        .expect("suggested values");
    assert!(values < second, "{outputs:?}");
    assert!(matches!(outputs.last(), Some(Output::Final(_))));
    server.stop().await;
}

#[tokio::test]
async fn parse_stream_requires_a_profile_first_and_bounds_its_bytes() {
    let server = Server::start().await;
    let mut client = server.client().await;

    let status = client
        .parse_stream(stream_of(vec![Input::Text("hello".into())]))
        .await
        .expect_err("no profile");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        parley_grpc::status::reason(&status).as_deref(),
        Some("PROFILE_REQUIRED")
    );

    let status = client
        .parse_stream(stream_of(vec![Input::ProfileName("nope".into())]))
        .await
        .expect_err("unknown");
    assert_eq!(
        parley_grpc::status::reason(&status).as_deref(),
        Some("UNKNOWN_PROFILE")
    );

    let chunk = "y".repeat(LIMIT / 2);
    let messages = vec![
        Input::Profile(ParseProfile::default()),
        Input::Text(chunk.clone()),
        Input::Text(chunk.clone()),
        Input::Text(chunk),
    ];
    let responses = client
        .parse_stream(stream_of(messages))
        .await
        .expect("stream starts")
        .into_inner();
    let (outputs, error) = collect(responses).await;
    let status = error.expect("the limit ends the stream");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(
        parley_grpc::status::reason(&status).as_deref(),
        Some("TEXT_TOO_LARGE")
    );
    assert_eq!(violation(&status).0, "text");
    assert!(!outputs.iter().any(|o| matches!(o, Output::Final(_))));

    let messages = vec![
        Input::Profile(ParseProfile::default()),
        Input::ProfileName("table_view".into()),
    ];
    let responses = client
        .parse_stream(stream_of(messages))
        .await
        .expect("stream starts")
        .into_inner();
    let (_, error) = collect(responses).await;
    assert_eq!(
        parley_grpc::status::reason(&error.expect("second profile")).as_deref(),
        Some("PROFILE_ALREADY_SET")
    );
    server.stop().await;
}

/// Opens a stream with the default profile whose requests the test sends
/// one by one (the stream stays open while the sender lives).
async fn open_stream(
    client: &mut PayloadParserClient<Channel>,
) -> (
    tokio::sync::mpsc::Sender<ParseStreamRequest>,
    tonic::Streaming<ParseStreamResponse>,
) {
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tx.send(ParseStreamRequest {
        input: Some(Input::Profile(ParseProfile::default())),
    })
    .await
    .expect("queue the profile");
    let responses = client
        .parse_stream(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect("stream starts")
        .into_inner();
    (tx, responses)
}

async fn send_text(tx: &tokio::sync::mpsc::Sender<ParseStreamRequest>, text: &str) {
    tx.send(ParseStreamRequest {
        input: Some(Input::Text(text.into())),
    })
    .await
    .expect("the call is open");
}

/// The call ended with STREAM_TIMEOUT saying `why`.
fn expect_stream_timeout(error: Option<Status>, why: &str) {
    let status = error.expect("a timeout ends the stream");
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert_eq!(
        parley_grpc::status::reason(&status).as_deref(),
        Some("STREAM_TIMEOUT")
    );
    assert!(status.message().contains(why), "{status:?}");
}

#[tokio::test]
async fn a_stream_ends_after_its_idle_timeout_and_each_message_moves_it_on() {
    let idle = std::time::Duration::from_millis(300);
    let server = Server::start_with(ServiceOptions {
        idle_timeout: idle,
        ..ServiceOptions::default()
    })
    .await;
    let mut client = server.client().await;
    let (tx, mut responses) = open_stream(&mut client).await;
    // Messages 100 ms apart for three idle timeouts: the stream stays open.
    for _ in 0..9 {
        send_text(&tx, "word ").await;
        let message = responses
            .message()
            .await
            .expect("no error while messages come");
        assert!(
            matches!(message.and_then(|m| m.output), Some(Output::Text(_))),
            "each word is answered"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // Then nothing: the stream ends with STREAM_TIMEOUT (the sender still open).
    let (outputs, error) = collect(responses).await;
    expect_stream_timeout(error, "idle");
    assert!(outputs.is_empty(), "{outputs:?}");
    drop(tx);
    server.stop().await;
}

#[tokio::test]
async fn a_stream_ends_at_its_maximum_duration_however_busy() {
    let server = Server::start_with(ServiceOptions {
        max_stream_duration: std::time::Duration::from_millis(400),
        ..ServiceOptions::default()
    })
    .await;
    let mut client = server.client().await;
    let (tx, responses) = open_stream(&mut client).await;
    let sender = tokio::spawn(async move {
        let word = || ParseStreamRequest {
            input: Some(Input::Text("word ".into())),
        };
        // Until the call is gone.
        while tx.send(word()).await.is_ok() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    });
    let (outputs, error) = collect(responses).await;
    expect_stream_timeout(error, "maximum duration");
    assert!(
        outputs.iter().any(|o| matches!(o, Output::Text(_))),
        "the words before it were answered"
    );
    assert!(!outputs.iter().any(|o| matches!(o, Output::Final(_))));
    sender.abort();
    server.stop().await;
}
