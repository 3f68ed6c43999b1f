//! A faulty parser sidecar: the parser library behind the `PayloadParser`
//! contract whose streams break with UNAVAILABLE after N responses, to test
//! the gateway's switch to the in-process parser mid-turn. (Working
//! sidecars in these tests are the real payload-parser binary:
//! `parley_testkit::sidecar`.)

use std::sync::Arc;

use parley_parse::{Limits, Profile, StreamParser};
use parley_proto::parser::v1::{
    ParseRequest, ParseResponse, ParseStreamRequest, ParseStreamResponse,
    parse_stream_request::Input,
    parse_stream_response::Output,
    payload_parser_server::{PayloadParser, PayloadParserServer},
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

/// The library behind the parser's gRPC contract.
#[derive(Debug, Clone, Default)]
pub struct LibraryParser {
    /// Break each stream with UNAVAILABLE after this many responses.
    pub fail_after: Option<usize>,
}

impl LibraryParser {
    /// The tonic service.
    pub fn server(self) -> PayloadParserServer<Self> {
        PayloadParserServer::new(self)
    }
}

fn profile(proto: Option<&parley_proto::parser::v1::ParseProfile>) -> Result<Profile, Status> {
    Profile::from_proto(&proto.cloned().unwrap_or_default())
        .map_err(|e| Status::invalid_argument(e.to_string()))
}

#[tonic::async_trait]
impl PayloadParser for LibraryParser {
    type ParseStreamStream = ReceiverStream<Result<ParseStreamResponse, Status>>;

    async fn parse(
        &self,
        request: Request<ParseRequest>,
    ) -> Result<Response<ParseResponse>, Status> {
        let request = request.into_inner();
        let profile = profile(request.profile.as_ref())?;
        let parsed = parley_parse::parse(&request.text, &profile, &Limits::default())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        Ok(Response::new(parsed.into_proto()))
    }

    async fn parse_stream(
        &self,
        request: Request<Streaming<ParseStreamRequest>>,
    ) -> Result<Response<Self::ParseStreamStream>, Status> {
        let mut input = request.into_inner();
        let (tx, rx) = mpsc::channel(64);
        let fail_after = self.fail_after;
        tokio::spawn(async move {
            let mut sent = 0_usize;
            let mut send = |response: Result<ParseStreamResponse, Status>| {
                sent += 1;
                let tx = tx.clone();
                let fail = fail_after.is_some_and(|limit| sent > limit);
                async move {
                    if fail {
                        let _ = tx
                            .send(Err(Status::unavailable("parser sidecar broke")))
                            .await;
                        return false;
                    }
                    tx.send(response).await.is_ok()
                }
            };
            let first = match input.message().await {
                Ok(Some(ParseStreamRequest {
                    input: Some(Input::Profile(profile)),
                })) => profile,
                _ => {
                    let _ = send(Err(Status::invalid_argument(
                        "the first message must be a profile",
                    )))
                    .await;
                    return;
                }
            };
            let profile = match Profile::from_proto(&first) {
                Ok(profile) => Arc::new(profile),
                Err(e) => {
                    let _ = send(Err(Status::invalid_argument(e.to_string()))).await;
                    return;
                }
            };
            let mut parser = StreamParser::new(profile, Limits::default());
            loop {
                match input.message().await {
                    Ok(Some(ParseStreamRequest {
                        input: Some(Input::Text(text)),
                    })) => {
                        let items = match parser.push(&text) {
                            Ok(items) => items,
                            Err(e) => {
                                let _ = send(Err(Status::invalid_argument(e.to_string()))).await;
                                return;
                            }
                        };
                        for item in items {
                            if !send(Ok(item.into_proto())).await {
                                return;
                            }
                        }
                    }
                    Ok(Some(ParseStreamRequest {
                        input: Some(Input::Checkpoint(mark)),
                    })) => {
                        let answer = ParseStreamResponse {
                            output: Some(Output::Checkpoint(mark)),
                        };
                        if !send(Ok(answer)).await {
                            return;
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(_) => return,
                }
            }
            let (items, parsed) = parser.finish_with_items();
            for item in items {
                if !send(Ok(item.into_proto())).await {
                    return;
                }
            }
            let _ = send(Ok(ParseStreamResponse {
                output: Some(Output::Final(Box::new(parsed.into_proto()))),
            }))
            .await;
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}
