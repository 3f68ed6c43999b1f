//! `parley-chat`: a terminal client for the chat-gateway.
//!
//! It sends each message given on the command line (or typed at the prompt
//! when none is given) as one `Chat` call and renders the stream the way a
//! chat UI would: text as it arrives, reasoning dimmed, tool progress on its
//! own lines, and the final suggestions, actions and proposal as cards. The
//! demo (`scripts/demo.sh`) uses it; so can anyone probing a gateway.

use std::io::{BufRead, Write};

use anyhow::{Context, Result};
use clap::Parser;
use parley_proto::gateway::v1::{
    ChatRequest, PageContext, TurnComplete, chat_event::Event,
    chat_gateway_client::ChatGatewayClient,
};
use parley_proto::parser::v1::{Payload, data_operation, payload::Typed, schema_operation};
use tonic::{Request, metadata::MetadataValue};

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
    /// Print no colours.
    #[arg(long)]
    plain: bool,
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
    let style = Style { plain: args.plain };
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
            ..Default::default()
        };
        let mut request = Request::new(request);
        if let Some(token) = &args.token {
            let value = MetadataValue::try_from(format!("Bearer {token}"))
                .context("token is not valid metadata")?;
            request.metadata_mut().insert("authorization", value);
        }
        let mut stream = client
            .chat(request)
            .await
            .map_err(describe_status)?
            .into_inner();
        print!("{} ", style.cyan("parley ›"));
        let mut in_reasoning = false;
        while let Some(event) = stream.message().await.map_err(describe_status)? {
            match event.event {
                Some(Event::Status(status)) if !status.conversation_id.is_empty() => {
                    *conversation_id = status.conversation_id;
                }
                Some(Event::Status(_)) => {}
                Some(Event::TextDelta(text)) => {
                    if in_reasoning {
                        println!();
                        in_reasoning = false;
                    }
                    print!("{text}");
                }
                Some(Event::ReasoningDelta(text)) => {
                    in_reasoning = true;
                    print!("{}", style.dim(&text));
                }
                Some(Event::StructuredDelta(text)) => print!("{}", style.dim(&text)),
                Some(Event::ToolStart(tool)) => {
                    println!("\n  {} {}", style.dim("⚙ tool"), style.bold(&tool.name));
                }
                Some(Event::ToolProgress(progress)) => {
                    let percent = progress
                        .fraction
                        .map(|f| format!(" {:>3.0}%", f * 100.0))
                        .unwrap_or_default();
                    println!(
                        "  {}{} {}",
                        style.dim(&format!("  ↳ {}", progress.stage)),
                        percent,
                        progress.message
                    );
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
                    println!(
                        "  {outcome} {} ({millis} ms) {}",
                        tool.name,
                        style.dim(&tool.result_text)
                    );
                    print!("{} ", style.cyan("parley ›"));
                }
                Some(Event::Error(error)) => {
                    let retry = if error.retryable { " (retryable)" } else { "" };
                    println!(
                        "\n{} {}: {}{retry}",
                        style.red("error"),
                        error.reason,
                        error.message
                    );
                }
                Some(Event::Complete(complete)) => {
                    println!();
                    render_complete(&style, &complete);
                }
                None => {}
            }
            std::io::stdout().flush().ok();
        }
        println!();
        Ok(())
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
    Ok(chat_gateway::convert::map_to_struct(&map))
}

fn describe_status(status: tonic::Status) -> anyhow::Error {
    let reason = parley_grpc::status::reason(&status)
        .map(|r| format!(" [{r}]"))
        .unwrap_or_default();
    anyhow::anyhow!("{:?}{reason}: {}", status.code(), status.message())
}
