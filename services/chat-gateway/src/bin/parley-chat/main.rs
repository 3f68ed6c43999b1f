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

use std::{
    io::{BufRead, IsTerminal, Write},
    time::Duration,
};

use anyhow::{Context, Result};
use clap::Parser;
use parley_proto::gateway::v1::{
    ChatEvent, ChatRequest, PageContext, PayloadPartial, ResumeTurnRequest, TurnComplete,
    chat_event::Event, chat_gateway_client::ChatGatewayClient,
};
use parley_proto::parser::v1::{Payload, data_operation, payload::Typed, schema_operation};
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
/// id while the gateway is unreachable, or `ResumeTurn` from `position`.
async fn open(
    client: &mut ChatGatewayClient<Channel>,
    chat: &ChatRequest,
    position: &Position,
    token: Option<&str>,
) -> Result<Streaming<ChatEvent>, Status> {
    let opened = if position.turn_id.is_empty() {
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
    /// Messages to send, one turn each. With none, read them from stdin.
    messages: Vec<String>,
}

struct Style {
    plain: bool,
}

impl Style {
    fn paint(&self, code: &str, text: &str) -> String {
        if self.plain {
            text.to_owned()
        } else {
            format!("\x1b[{code}m{text}\x1b[0m")
        }
    }
    fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }
    fn bold(&self, text: &str) -> String {
        self.paint("1", text)
    }
    fn cyan(&self, text: &str) -> String {
        self.paint("36", text)
    }
    fn red(&self, text: &str) -> String {
        self.paint("31", text)
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
    let mut client = ChatGatewayClient::connect(args.gateway.clone())
        .await
        .with_context(|| format!("cannot connect to the gateway at {}", args.gateway))?;
    let state = match &args.state {
        Some(json) => Some(state_struct(json)?),
        None => None,
    };
    let mut conversation_id = args.conversation.clone().unwrap_or_default();

    let mut send = async |message: String, conversation_id: &mut String| -> Result<()> {
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
        loop {
            let broken = match open(&mut client, &request, &position, token).await {
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
                            let done = matches!(event.event, Some(Event::Complete(_)));
                            out.event(event.event);
                            std::io::stdout().flush().ok();
                            if done {
                                out.line_break();
                                println!();
                                return Ok(());
                            }
                        }
                        Ok(None) => {
                            break Status::unavailable("the stream ended before the turn did");
                        }
                        Err(status) => break status,
                    }
                },
            };
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

/// Where the cursor is in the turn's output: each part starts on its own
/// line with its label, so text, reasoning and tools never run together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Nothing,
    Reasoning,
    Text,
    Structured,
    Tools,
}

/// The card being drawn while its payload is written.
struct LiveCard {
    /// The payload's offset (which payload it is).
    offset: u64,
    /// How many lines it takes on screen.
    lines: usize,
    /// Whether nothing was printed after it (so it can be redrawn in place).
    last: bool,
}

/// Renders one turn's events as they arrive.
struct Renderer<'a> {
    style: &'a Style,
    part: Part,
    /// Whether the cursor is in the middle of a line.
    mid_line: bool,
    /// The growing card, on a terminal.
    card: Option<LiveCard>,
}

impl<'a> Renderer<'a> {
    fn new(style: &'a Style) -> Self {
        Self {
            style,
            part: Part::Nothing,
            mid_line: false,
            card: None,
        }
    }

    /// Notes that something was printed after the live card.
    fn printed(&mut self) {
        if let Some(card) = &mut self.card {
            card.last = false;
        }
    }

    /// Erases the live card when it is the last thing on screen.
    fn erase_card(&mut self) {
        if let Some(card) = self.card.take()
            && card.last
            && card.lines > 0
        {
            print!("\x1b[{}F\x1b[J", card.lines);
        }
    }

    /// Draws the card of a `payload_partial`, over its previous drawing
    /// when nothing came after it; takes it down when the payload failed.
    fn partial(&mut self, partial: &PayloadPartial) {
        let style = self.style;
        if partial.data.is_none() {
            let same = self
                .card
                .as_ref()
                .is_some_and(|c| c.offset == partial.offset);
            if same {
                self.erase_card();
            }
            let why = partial
                .diagnostic
                .as_ref()
                .map(|d| d.reason.clone())
                .unwrap_or_default();
            self.tool_line(format!(
                "  {} {}",
                style.red(&format!("✗ {} withdrawn:", partial.r#type)),
                style.dim(&why)
            ));
            return;
        }
        if style.plain {
            return;
        }
        if self
            .card
            .as_ref()
            .is_some_and(|c| c.offset == partial.offset)
        {
            self.erase_card();
        } else {
            self.card = None;
        }
        self.line_break();
        let lines = card_lines(style, partial);
        for line in &lines {
            println!("{line}");
        }
        self.part = Part::Tools;
        self.card = Some(LiveCard {
            offset: partial.offset,
            lines: lines.len(),
            last: true,
        });
    }

    /// A model call failed midway and runs again: its card goes, and the
    /// answer starts again on a new line.
    fn step_reset(&mut self, reset: &parley_proto::gateway::v1::StepReset) {
        self.erase_card();
        let message = format!(
            "↻ {} (step {}, {})",
            reset.message, reset.step, reset.reason
        );
        self.tool_line(format!("  {}", self.style.dim(&message)));
        self.part = Part::Nothing;
    }

    /// Ends the current line, if one is open.
    fn line_break(&mut self) {
        if self.mid_line {
            println!();
            self.mid_line = false;
        }
    }

    /// Streams `text` under `label`, opening a new part when needed (a new
    /// part starts at its first visible character, after the label).
    fn stream(&mut self, part: Part, label: &str, text: &str, dim: bool) {
        self.printed();
        let mut text = text;
        if self.part != part {
            text = text.trim_start();
            if text.is_empty() {
                return;
            }
            self.line_break();
            print!("{label} ");
            self.part = part;
        }
        if dim {
            print!("{}", self.style.dim(text));
        } else {
            print!("{text}");
        }
        self.mid_line = !text.ends_with('\n');
    }

    /// A whole line in the tools part.
    fn tool_line(&mut self, line: String) {
        self.printed();
        self.line_break();
        println!("{line}");
        self.part = Part::Tools;
    }

    fn event(&mut self, event: Option<Event>) {
        let style = self.style;
        match event {
            Some(Event::Status(_)) | None => {}
            Some(Event::PayloadPartial(partial)) => self.partial(&partial),
            Some(Event::StepReset(reset)) => self.step_reset(&reset),
            // Shown by `complete` with the rest of the answer's elements.
            Some(
                Event::SuggestedValues(_)
                | Event::SuggestedActions(_)
                | Event::StructuredPartial(_),
            ) => {}
            Some(Event::TextDelta(text)) => {
                self.stream(Part::Text, &style.cyan("parley ›"), &text, false)
            }
            Some(Event::ReasoningDelta(text)) => {
                self.stream(Part::Reasoning, &style.dim("  thinking ›"), &text, true)
            }
            Some(Event::StructuredDelta(text)) => {
                self.stream(Part::Structured, &style.dim("  structured ›"), &text, true)
            }
            Some(Event::ToolStart(tool)) => self.tool_line(format!(
                "  {} {}",
                style.dim("⚙ tool"),
                style.bold(&tool.name)
            )),
            Some(Event::ToolProgress(progress)) => {
                let percent = progress
                    .fraction
                    .map(|f| format!(" {:>3.0}%", f * 100.0))
                    .unwrap_or_default();
                self.tool_line(format!(
                    "  {}{} {}",
                    style.dim(&format!("  ↳ {}", progress.stage)),
                    percent,
                    progress.message
                ));
            }
            Some(Event::ToolComplete(tool)) => {
                let outcome = if tool.success {
                    "✓".to_owned()
                } else {
                    style.red("✗")
                };
                let millis = tool
                    .duration
                    .map(|d| d.seconds * 1000 + i64::from(d.nanos) / 1_000_000)
                    .unwrap_or(0);
                let result = if tool.success {
                    &tool.result_text
                } else {
                    &tool.error
                };
                self.tool_line(format!(
                    "  {outcome} {} ({millis} ms) {}",
                    tool.name,
                    style.dim(result)
                ));
            }
            Some(Event::Error(error)) => {
                let retry = if error.retryable { " (retryable)" } else { "" };
                self.tool_line(format!(
                    "{} {}: {}{retry}",
                    style.red("error"),
                    error.reason,
                    error.message
                ));
            }
            Some(Event::Complete(complete)) => {
                // The validated card replaces the one drawn while it grew.
                self.erase_card();
                self.line_break();
                render_complete(style, &complete);
                self.part = Part::Nothing;
            }
        }
    }
}

/// The lines of a card drawn from a payload's value so far: its title, its
/// reasoning and one line per operation written yet; `…` until it is whole.
fn card_lines(style: &Style, partial: &PayloadPartial) -> Vec<String> {
    let data = partial
        .data
        .as_ref()
        .map(parley_proto::json::from_struct)
        .unwrap_or_default();
    let text = |key: &str| data.get(key).and_then(|v| v.as_str()).unwrap_or_default();
    let title = partial.r#type.replace('_', " ");
    let mut lines = vec![format!("  ┌ {} {}", style.bold(&title), text("table_name"))];
    if !text("reasoning").is_empty() {
        lines.push(format!("  │ {}", style.dim(text("reasoning"))));
    }
    let operations = data.get("operations").and_then(|v| v.as_array());
    for operation in operations.into_iter().flatten() {
        let field = |key: &str| {
            operation
                .get(key)
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .unwrap_or_default()
        };
        let column = operation.get("column");
        let column_field = |key: &str| {
            column
                .and_then(|c| c.get(key))
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_owned()
        };
        let line = match field("action").as_str() {
            "add" if !column_field("name").is_empty() => {
                format!("+ {} ({})", column_field("name"), column_field("type"))
            }
            "add" if partial.r#type == "data_proposal" => "+ add row".to_owned(),
            "modify" => format!("~ {}", field("column_id")),
            "remove" => format!("- {}", field("column_id")),
            "reorder" => format!("↕ {}", field("column_id")),
            "update" => format!("~ update row {}", field("row_id")),
            "delete" => format!("- delete row {}", field("row_id")),
            _ => "…".to_owned(),
        };
        lines.push(format!("  │ {line}"));
    }
    if partial.complete_paths.iter().any(String::is_empty) {
        lines.push("  └ [ Accept ] [ Dismiss ]".to_owned());
    } else {
        lines.push(format!("  └ {}", style.dim("…")));
    }
    lines
}

fn render_complete(style: &Style, complete: &TurnComplete) {
    if let Some(payload) = &complete.custom_payload {
        render_payload(style, payload);
    }
    if !complete.suggested_values.is_empty() {
        let chips: Vec<String> = complete
            .suggested_values
            .iter()
            .map(|v| format!("[ {} ]", v.label))
            .collect();
        println!("  {} {}", style.dim("suggestions:"), chips.join(" "));
    }
    if !complete.suggested_actions.is_empty() {
        let buttons: Vec<String> = complete
            .suggested_actions
            .iter()
            .map(|a| format!("⟨ {} → {} ⟩", a.label, a.action))
            .collect();
        println!("  {} {}", style.dim("actions:"), buttons.join(" "));
    }
    for diagnostic in &complete.diagnostics {
        println!("  {} {}", style.dim("note:"), style.dim(&diagnostic.reason));
    }
    if !complete.success {
        println!(
            "  {}",
            style.red(&format!("turn ended: {}", complete.stop_reason))
        );
    }
    if let Some(usage) = &complete.usage {
        println!(
            "  {}",
            style.dim(&format!(
                "{} · {} in / {} out tokens · {} model call(s)",
                usage.model, usage.input_tokens, usage.output_tokens, usage.model_calls
            ))
        );
    }
}

fn render_payload(style: &Style, payload: &Payload) {
    match &payload.typed {
        Some(Typed::SchemaProposal(proposal)) => {
            let name = proposal.table_name.clone().unwrap_or_default();
            println!("  ┌ {} {}", style.bold("schema proposal"), name);
            if !proposal.reasoning.is_empty() {
                println!("  │ {}", style.dim(&proposal.reasoning));
            }
            for operation in &proposal.operations {
                let line = match &operation.operation {
                    Some(schema_operation::Operation::Add(add)) => {
                        let column = add.column.clone().unwrap_or_default();
                        format!("+ {} ({:?})", column.name, column.r#type())
                    }
                    Some(schema_operation::Operation::Modify(modify)) => {
                        format!("~ {}", modify.column_id)
                    }
                    Some(schema_operation::Operation::Remove(remove)) => {
                        format!("- {}", remove.column_id)
                    }
                    Some(schema_operation::Operation::Reorder(reorder)) => {
                        format!("↕ {}", reorder.column_id)
                    }
                    None => continue,
                };
                println!("  │ {line}");
            }
            println!(
                "  └ {} rows of sample data  [ Accept ] [ Dismiss ]",
                proposal.sample_rows.len()
            );
        }
        Some(Typed::DataProposal(proposal)) => {
            println!("  ┌ {}", style.bold("data proposal"));
            if !proposal.reasoning.is_empty() {
                println!("  │ {}", style.dim(&proposal.reasoning));
            }
            for operation in &proposal.operations {
                let line = match &operation.operation {
                    Some(data_operation::Operation::Add(_)) => "+ add row".to_owned(),
                    Some(data_operation::Operation::Update(update)) => {
                        format!("~ update row {}", update.row_id)
                    }
                    Some(data_operation::Operation::Delete(delete)) => {
                        format!("- delete row {}", delete.row_id)
                    }
                    None => continue,
                };
                println!("  │ {line}");
            }
            println!("  └ [ Apply ] [ Dismiss ]");
        }
        None => println!(
            "  ┌ {} payload\n  └ [ Accept ] [ Dismiss ]",
            style.bold(&payload.r#type)
        ),
    }
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

#[cfg(test)]
mod tests;
