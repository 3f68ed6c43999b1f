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
//! so a `Chat` call retried after a failed connection never runs twice
//! (see [`turn`], which runs every turn, edited and regenerated ones too).
//!
//! A turn that pauses for decisions (`approval_request`,
//! `client_tool_call`, then an `AWAITING_INPUT` status) is answered with
//! `SubmitToolDecisions`, and its stream goes on: approvals are asked y/n
//! on the terminal (`--approve yes|no` answers them all), and the demo's
//! app tool `ask_user_to_pick_rows` picks the rows of `--state`'s
//! `sample_rows` (see [`decide`]).
//!
//! A line that starts with `/` is a command (see [`command`]): `/accept` or
//! `/dismiss` records what the user did with the last answer's proposal
//! card, and `/rate N` rates the last answer (see [`verdict`]). `/edit
//! TEXT` replaces the user message of the last turn shown with TEXT and
//! `/regenerate` runs it again: either makes a sibling of that turn whose
//! branch becomes current, streamed like any message. `/branches
//! [TURN_ID]` prints the current branch (or the one through a turn) with
//! `‹ i/n ›` where a turn has siblings and each sibling's turn id, and
//! `/switch TURN_ID` makes the branch through a turn current and prints it
//! (see [`branches`]). With `--conversation`, the commands are about the
//! last turn of its current branch until a turn runs here. At the prompt,
//! a line that fails (a mistyped command, a refused call) is said and the
//! session goes on; given as arguments or piped in, it ends the run.
//!
//! `--attach FILE` (again for more) uploads files first and sends them with
//! the first message (see [`attach`]).

use std::io::{BufRead, IsTerminal};

use anyhow::{Context, Result};
use clap::Parser;
use parley_proto::gateway::v1::{
    AttachmentRef, ChatRequest, PageContext, chat_gateway_client::ChatGatewayClient,
};
use tonic::{Request, metadata::MetadataValue, transport::Channel};

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
    /// Messages to send, one turn each, or commands (`/edit TEXT`...).
    /// With none, read them from stdin, one a line.
    messages: Vec<String>,
}

/// What a run of `parley-chat` holds between lines: the connection, the
/// conversation and the last turn shown.
pub(crate) struct Session<'a> {
    client: ChatGatewayClient<Channel>,
    args: &'a Args,
    style: &'a Style,
    /// `--state`, parsed.
    state: Option<prost_types::Struct>,
    /// The conversation, once the gateway named it (or `--conversation`).
    conversation_id: String,
    /// What `/accept`, `/rate`, `/edit` and `/regenerate` are about.
    last: verdict::LastTurn,
    /// The files of `--attach`, until the first message takes them.
    attachments: Vec<AttachmentRef>,
}

impl Session<'_> {
    /// The page every message is sent from.
    fn page(&self) -> PageContext {
        PageContext {
            page: self.args.page.clone(),
            tab: self.args.tab.clone(),
            state: self.state.clone(),
            ..Default::default()
        }
    }

    /// Sends a line: a command, or a message as one `Chat` turn.
    async fn line(&mut self, line: String) -> Result<()> {
        let Some(command) = command::parse(&line) else {
            return self.chat(line).await;
        };
        let token = self.args.token.clone();
        match command? {
            Command::Verdict(command) => {
                let last = self.last_turn().await?;
                verdict::run(
                    &mut self.client,
                    command,
                    &last,
                    token.as_deref(),
                    self.style,
                )
                .await
            }
            Command::Edit(text) => self.edit(text).await,
            Command::Regenerate => self.regenerate().await,
            Command::Branches(turn_id) => self.branches(turn_id.as_deref()).await,
            Command::Switch(turn_id) => self.switch(&turn_id).await,
        }
    }

    /// Sends `message` as one `Chat` turn and renders it.
    async fn chat(&mut self, message: String) -> Result<()> {
        println!("{} {}", self.style.bold("you ›"), message);
        let request = ChatRequest {
            conversation_id: self.conversation_id.clone(),
            message,
            page: Some(self.page()),
            mid_answer_failover: self.args.failover,
            // The files go with the first message.
            attachments: std::mem::take(&mut self.attachments),
            request_id: uuid::Uuid::new_v4().to_string(),
            ..Default::default()
        };
        self.stream(Start::Chat(request)).await
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    // Colours only on a terminal, and never with NO_COLOR set.
    let plain = args.plain
        || !std::io::stdout().is_terminal()
        || std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
    let style = Style { plain };
    let client = ChatGatewayClient::connect(args.gateway.clone())
        .await
        .with_context(|| format!("cannot connect to the gateway at {}", args.gateway))?;
    let state = match &args.state {
        Some(json) => Some(state_struct(json)?),
        None => None,
    };
    let mut session = Session {
        client,
        args: &args,
        style: &style,
        state,
        conversation_id: args.conversation.clone().unwrap_or_default(),
        last: verdict::LastTurn::default(),
        attachments: Vec::new(),
    };
    let page = session.page();
    for path in &args.attach {
        let stored =
            attach::upload(&mut session.client, args.token.as_deref(), &page, path).await?;
        println!(
            "{}",
            style.dim(&format!(
                "attached {} ({}, {} bytes)",
                stored.name, stored.media_type, stored.size_bytes
            ))
        );
        session.attachments.push(AttachmentRef {
            id: stored.id,
            inline: None,
        });
    }

    if args.messages.is_empty() {
        let stdin = std::io::stdin();
        // At the prompt, a mistyped command or a refused call is said and
        // the user goes on; a script (stdin not a terminal) stops at it.
        let interactive = stdin.is_terminal();
        for line in stdin.lock().lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            match session.line(line).await {
                Err(error) if interactive => println!("{}\n", style.red(&format!("{error:#}"))),
                done => done?,
            }
        }
    } else {
        for message in args.messages.clone() {
            session.line(message).await?;
        }
    }
    if !session.conversation_id.is_empty() {
        println!(
            "{}",
            style.dim(&format!("conversation {}", session.conversation_id))
        );
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
mod branches;
mod command;
mod decide;
mod render;
mod turn;
mod verdict;

use command::Command;
use render::Style;
use turn::Start;
