//! `parley-chat`: a terminal client for the chat-gateway.
//!
//! It sends each message given on the command line (or typed at the prompt
//! when none is given) as one `Chat` call and renders the stream the way a
//! chat UI would: text as it arrives, reasoning dimmed, tool progress on its
//! own lines, and the final suggestions, actions and proposal as cards. The
//! demo (`scripts/demo.sh`) uses it; so can anyone probing a gateway.
//!
//! On a terminal, a proposal card grows in place while the model writes it
//! (`payload_partial`: redrawn at each revision, taken down when the
//! payload fails), and is replaced by the validated card at `complete`.
//! With `--failover` the turn may run a failed model call again: a
//! `step_reset` takes down the step's card, says so, and the answer starts
//! again on a new line. Without colours (a pipe, `--plain`) only the
//! take-down and the reset are printed, one line each.
//!
//! When the stream breaks mid-turn (network, a gateway replica drained or
//! killed), it reconnects with backoff and calls `ResumeTurn` from the last
//! event it printed, on whichever replica answers: the rest of the answer
//! follows without a gap or a repeat. Each message carries a `request_id`,
//! so a `Chat` call retried after a failed connection never runs twice.
//!
//! A turn that pauses for decisions (`approval_request`,
//! `client_tool_call`, then an `AWAITING_INPUT` status) is answered with
//! `SubmitToolDecisions`, and its stream goes on: approvals are asked y/n
//! on the terminal (`--approve yes|no` answers them all), and the demo's
//! app tool `ask_user_to_pick_rows` picks the rows of `--state`'s
//! `sample_rows` (see [`decide`]).
//!
//! A line `/accept` or `/dismiss` records what the user did with the last
//! answer's proposal card, and `/rate N` rates the last answer (see
//! [`verdict`]).
//!
//! `--attach FILE` (again for more) uploads files first and sends them with
//! the first message (see [`attach`]).

use std::{
    io::{BufRead, IsTerminal, Write},
    time::Duration,
};

use anyhow::{Context, Result};
use clap::Parser;
use parley_proto::gateway::v1::{
    AttachmentRef, ChatEvent, ChatRequest, PageContext, ResumeTurnRequest,
    SubmitToolDecisionsRequest, chat_event::Event, chat_gateway_client::ChatGatewayClient,
};
use tonic::{Code, Request, Status, Streaming, metadata::MetadataValue, transport::Channel};

/// The first wait before reconnecting; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// The longest wait between reconnections.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How many times a broken turn is resumed before giving up.
const MAX_RECONNECTS: u32 = 10;

/// Whether a failed call or stream is worth retrying: the connection or
/// the replica went away, not the request.
fn transient(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::Unknown | Code::Internal | Code::Cancelled
    )
}

/// Adds the bearer token, when there is one.
fn authorized<T>(message: T, token: Option<&str>) -> Result<Request<T>> {
    let mut request = Request::new(message);
    if let Some(token) = token {
        let value = MetadataValue::try_from(format!("Bearer {token}"))
            .context("token is not valid metadata")?;
        request.metadata_mut().insert("authorization", value);
    }
    Ok(request)
}

/// Where a turn's stream is, for resuming it.
#[derive(Debug, Default)]
struct Position {
    conversation_id: String,
    turn_id: String,
    last_seq: u64,
}

/// Opens a turn's stream: the `Chat` call, retried with the same request
/// id while the gateway is unreachable, the decisions of a pause, or
/// `ResumeTurn` from `position`.
async fn open(
    client: &mut ChatGatewayClient<Channel>,
    chat: &ChatRequest,
    position: &Position,
    decisions: Option<&SubmitToolDecisionsRequest>,
    token: Option<&str>,
) -> Result<Streaming<ChatEvent>, Status> {
    let opened = if let Some(decisions) = decisions {
        let request =
            authorized(decisions.clone(), token).map_err(|e| Status::internal(e.to_string()))?;
        client.submit_tool_decisions(request).await
    } else if position.turn_id.is_empty() {
        let request =
            authorized(chat.clone(), token).map_err(|e| Status::internal(e.to_string()))?;
        client.chat(request).await
    } else {
        let request = authorized(
            ResumeTurnRequest {
                conversation_id: position.conversation_id.clone(),
                turn_id: position.turn_id.clone(),
                after_seq: position.last_seq,
            },
            token,
        )
        .map_err(|e| Status::internal(e.to_string()))?;
        client.resume_turn(request).await
    };
    opened.map(tonic::Response::into_inner)
}

/// Talk to a Parley chat-gateway from the terminal.
#[derive(Debug, Parser)]
#[command(name = "parley-chat", version)]
struct Args {
    /// Gateway address.
    #[arg(
        long,
        env = "PARLEY_GATEWAY_URL",
        default_value = "http://127.0.0.1:50051"
    )]
    gateway: String,
    /// Bearer token (not needed when the gateway runs with dev auth).
    #[arg(long, env = "PARLEY_TOKEN")]
    token: Option<String>,
    /// The page the user is on (for example `tables_list`, `table_view`).
    #[arg(long, default_value = "tables_list")]
    page: String,
    /// The active tab.
    #[arg(long, default_value = "")]
    tab: String,
    /// UI state as a JSON object.
    #[arg(long)]
    state: Option<String>,
    /// Continue this conversation instead of starting a new one.
    #[arg(long)]
    conversation: Option<String>,
    /// Print no colours (also when stdout is not a terminal or NO_COLOR is set).
    #[arg(long)]
    plain: bool,
    /// Allow mid-answer failover: a model call that fails midway runs again
    /// (`ChatRequest.mid_answer_failover`).
    #[arg(long)]
    failover: bool,
    /// How tool calls that wait for approval are answered: `ask` on the
    /// terminal (y/n; no terminal answers no), or `yes` / `no` to all.
    #[arg(long, value_enum, default_value_t = decide::Approve::Ask)]
    approve: decide::Approve,
    /// A file to attach to the first message (uploaded first; the page
    /// must take its type). Repeat for more.
    #[arg(long = "attach", value_name = "FILE")]
    attach: Vec<std::path::PathBuf>,
    /// Messages to send, one turn each. With none, read them from stdin.
    messages: Vec<String>,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    // Colours only on a terminal, and never with NO_COLOR set.
    let plain = args.plain
        || !std::io::stdout().is_terminal()
        || std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
    let style = Style { plain };
    let mut client = ChatGatewayClient::connect(args.gateway.clone())
        .await
        .with_context(|| format!("cannot connect to the gateway at {}", args.gateway))?;
    let state = match &args.state {
        Some(json) => Some(state_struct(json)?),
        None => None,
    };
    let mut conversation_id = args.conversation.clone().unwrap_or_default();
    let mut last = verdict::LastTurn::default();
    let page = PageContext {
        page: args.page.clone(),
        tab: args.tab.clone(),
        state: state.clone(),
        ..Default::default()
    };
    let mut attachments = Vec::new();
    for path in &args.attach {
        let stored = attach::upload(&mut client, args.token.as_deref(), &page, path).await?;
        println!(
            "{}",
            style.dim(&format!(
                "attached {} ({}, {} bytes)",
                stored.name, stored.media_type, stored.size_bytes
            ))
        );
        attachments.push(AttachmentRef {
            id: stored.id,
            inline: None,
        });
    }

    let mut send = async |message: String, conversation_id: &mut String| -> Result<()> {
        if let Some(command) = verdict::parse(&message) {
            return verdict::run(&mut client, command?, &last, args.token.as_deref(), &style).await;
        }
        println!("{} {}", style.bold("you ›"), message);
        let request = ChatRequest {
            conversation_id: conversation_id.clone(),
            message,
            page: Some(PageContext {
                page: args.page.clone(),
                tab: args.tab.clone(),
                state: state.clone(),
                ..Default::default()
            }),
            mid_answer_failover: args.failover,
            // The files go with the first message.
            attachments: std::mem::take(&mut attachments),
            ..Default::default()
        };
        let request = ChatRequest {
            request_id: uuid::Uuid::new_v4().to_string(),
            ..request
        };
        let token = args.token.as_deref();
        let mut out = Renderer::new(&style);
        let mut position = Position::default();
        let mut reconnects = 0;
        let mut backoff = FIRST_BACKOFF;
        let mut waiting = decide::Waiting::default();
        let mut decisions: Option<SubmitToolDecisionsRequest> = None;
        let mut pause_seq = 0;
        loop {
            let opened = open(&mut client, &request, &position, decisions.as_ref(), token).await;
            let broken = match opened {
                Err(status) => status,
                Ok(mut stream) => loop {
                    match stream.message().await {
                        Ok(Some(event)) => {
                            if let Some(Event::Status(status)) = &event.event
                                && !status.turn_id.is_empty()
                            {
                                conversation_id.clone_from(&status.conversation_id);
                                position.conversation_id.clone_from(&status.conversation_id);
                                position.turn_id.clone_from(&status.turn_id);
                            }
                            position.last_seq = event.seq;
                            waiting.see(&event.event);
                            let done = matches!(event.event, Some(Event::Complete(_)));
                            if let Some(Event::Complete(complete)) = &event.event {
                                last = verdict::LastTurn {
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
                                args.approve,
                                state.as_ref(),
                                &style,
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
    };

    if args.messages.is_empty() {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let line = line?;
            if !line.trim().is_empty() {
                send(line, &mut conversation_id).await?;
            }
        }
    } else {
        for message in args.messages.clone() {
            send(message, &mut conversation_id).await?;
        }
    }
    if !conversation_id.is_empty() {
        println!("{}", style.dim(&format!("conversation {conversation_id}")));
    }
    Ok(())
}

/// Parses `--state` into the UI state `Struct`.
fn state_struct(json: &str) -> Result<prost_types::Struct> {
    let value: serde_json::Value =
        serde_json::from_str(json).context("--state is not valid JSON")?;
    let serde_json::Value::Object(map) = value else {
        anyhow::bail!("--state must be a JSON object");
    };
    Ok(parley_proto::json::to_struct(&map))
}

fn describe_status(status: tonic::Status) -> anyhow::Error {
    let reason = parley_grpc::status::reason(&status)
        .map(|r| format!(" [{r}]"))
        .unwrap_or_default();
    anyhow::anyhow!("{:?}{reason}: {}", status.code(), status.message())
}

mod attach;
mod decide;
mod render;
mod verdict;

use render::{Renderer, Style};
