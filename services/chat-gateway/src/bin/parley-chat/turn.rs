//! One turn's stream, however it began (`Chat`, `EditMessage` or
//! `RegenerateTurn`): rendered as it arrives, resumed with `ResumeTurn`
//! from the last event printed when it breaks, and continued with
//! `SubmitToolDecisions` when it pauses.

use std::{io::Write, time::Duration};

use anyhow::Result;
use parley_proto::gateway::v1::{
    ChatEvent, ChatRequest, EditMessageRequest, RegenerateTurnRequest, ResumeTurnRequest,
    SubmitToolDecisionsRequest, chat_event::Event, chat_gateway_client::ChatGatewayClient,
};
use tonic::{Code, Status, Streaming, transport::Channel};

use crate::{Session, authorized, decide, describe_status, render::Renderer, verdict};

/// The first wait before reconnecting; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// The longest wait between reconnections.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How many times a broken turn is resumed before giving up.
const MAX_RECONNECTS: u32 = 10;

/// The call that begins a turn. Each carries a `request_id`, so the call
/// retried after a failed connection never runs the turn twice.
pub(crate) enum Start {
    /// A message (`Chat`).
    Chat(ChatRequest),
    /// An edited message (`EditMessage`).
    Edit(EditMessageRequest),
    /// A message run again (`RegenerateTurn`).
    Regenerate(RegenerateTurnRequest),
}

impl Start {
    /// Makes the call.
    async fn call(
        &self,
        client: &mut ChatGatewayClient<Channel>,
        token: Option<&str>,
    ) -> Result<Streaming<ChatEvent>, Status> {
        let internal = |error: anyhow::Error| Status::internal(error.to_string());
        let opened = match self {
            Self::Chat(request) => {
                client
                    .chat(authorized(request.clone(), token).map_err(internal)?)
                    .await
            }
            Self::Edit(request) => {
                client
                    .edit_message(authorized(request.clone(), token).map_err(internal)?)
                    .await
            }
            Self::Regenerate(request) => {
                client
                    .regenerate_turn(authorized(request.clone(), token).map_err(internal)?)
                    .await
            }
        };
        opened.map(tonic::Response::into_inner)
    }
}

/// Whether a failed call or stream is worth retrying: the connection or
/// the replica went away, not the request.
fn transient(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::Unknown | Code::Internal | Code::Cancelled
    )
}

/// Where a turn's stream is, for resuming it.
#[derive(Debug, Default)]
struct Position {
    conversation_id: String,
    turn_id: String,
    last_seq: u64,
}

/// Opens a turn's stream: the call that begins it (`start`), retried with
/// the same request id while the gateway is unreachable, the decisions of
/// a pause, or `ResumeTurn` from `position`.
async fn open(
    client: &mut ChatGatewayClient<Channel>,
    start: &Start,
    position: &Position,
    decisions: Option<&SubmitToolDecisionsRequest>,
    token: Option<&str>,
) -> Result<Streaming<ChatEvent>, Status> {
    if let Some(decisions) = decisions {
        let request =
            authorized(decisions.clone(), token).map_err(|e| Status::internal(e.to_string()))?;
        return client
            .submit_tool_decisions(request)
            .await
            .map(tonic::Response::into_inner);
    }
    if position.turn_id.is_empty() {
        return start.call(client, token).await;
    }
    let request = authorized(
        ResumeTurnRequest {
            conversation_id: position.conversation_id.clone(),
            turn_id: position.turn_id.clone(),
            after_seq: position.last_seq,
        },
        token,
    )
    .map_err(|e| Status::internal(e.to_string()))?;
    client
        .resume_turn(request)
        .await
        .map(tonic::Response::into_inner)
}

impl Session<'_> {
    /// Runs a turn from `start` to its `complete`, rendering it; the turn
    /// becomes the last one shown.
    pub(crate) async fn stream(&mut self, start: Start) -> Result<()> {
        let token = self.args.token.as_deref();
        let style = self.style;
        let mut out = Renderer::new(style);
        let mut position = Position::default();
        let mut reconnects = 0;
        let mut backoff = FIRST_BACKOFF;
        let mut waiting = decide::Waiting::default();
        let mut decisions: Option<SubmitToolDecisionsRequest> = None;
        let mut pause_seq = 0;
        loop {
            let opened = open(
                &mut self.client,
                &start,
                &position,
                decisions.as_ref(),
                token,
            )
            .await;
            let broken = match opened {
                Err(status) => status,
                Ok(mut stream) => loop {
                    match stream.message().await {
                        Ok(Some(event)) => {
                            if let Some(Event::Status(status)) = &event.event
                                && !status.turn_id.is_empty()
                            {
                                self.conversation_id.clone_from(&status.conversation_id);
                                position.conversation_id.clone_from(&status.conversation_id);
                                position.turn_id.clone_from(&status.turn_id);
                            }
                            position.last_seq = event.seq;
                            waiting.see(&event.event);
                            let done = matches!(event.event, Some(Event::Complete(_)));
                            if let Some(Event::Complete(complete)) = &event.event {
                                self.last = verdict::LastTurn {
                                    conversation_id: position.conversation_id.clone(),
                                    turn_id: position.turn_id.clone(),
                                    proposal: complete.custom_payload.is_some(),
                                };
                            }
                            out.event(event.event);
                            std::io::stdout().flush().ok();
                            if done {
                                out.line_break();
                                println!();
                                return Ok(());
                            }
                        }
                        Ok(None) if waiting.paused => {
                            // The turn waits for decisions: answer them, and
                            // its stream goes on from the submission.
                            out.line_break();
                            pause_seq = position.last_seq;
                            let answers = decide::answer(
                                &std::mem::take(&mut waiting),
                                self.args.approve,
                                self.state.as_ref(),
                                style,
                            )?;
                            decisions = Some(SubmitToolDecisionsRequest {
                                conversation_id: position.conversation_id.clone(),
                                turn_id: position.turn_id.clone(),
                                decisions: answers,
                                request_id: uuid::Uuid::new_v4().to_string(),
                            });
                            break Status::ok("paused");
                        }
                        Ok(None) => {
                            break Status::unavailable("the stream ended before the turn did");
                        }
                        Err(status) => break status,
                    }
                },
            };
            if broken.code() == Code::Ok {
                continue;
            }
            // A submission whose stream had begun is not sent again: the
            // turn is resumed from the last event printed. One that broke
            // before is sent again with its request id (it runs once).
            if decisions.is_some() && position.last_seq > pause_seq {
                decisions = None;
            }
            if !transient(&broken) || reconnects == MAX_RECONNECTS {
                return Err(describe_status(broken));
            }
            reconnects += 1;
            out.line_break();
            println!(
                "{}",
                style.dim(&format!(
                    "(connection lost: {}; resuming after event {} in {} ms)",
                    broken.message(),
                    position.last_seq,
                    backoff.as_millis()
                ))
            );
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}
