//! How `parley-chat` draws a turn: text as it arrives, reasoning dimmed,
//! tool progress on its own lines, proposal cards that grow in place, and
//! the final suggestions, actions and payloads; colours only on a terminal.

use parley_proto::gateway::v1::{PayloadPartial, TurnComplete, Usage, chat_event::Event};
use parley_proto::parser::v1::{Payload, data_operation, payload::Typed, schema_operation};

pub(crate) struct Style {
    /// No colours and no redrawing (a pipe, `--plain`).
    pub(crate) plain: bool,
}

impl Style {
    pub(crate) fn paint(&self, code: &str, text: &str) -> String {
        if self.plain {
            text.to_owned()
        } else {
            format!("\x1b[{code}m{text}\x1b[0m")
        }
    }
    pub(crate) fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }
    pub(crate) fn bold(&self, text: &str) -> String {
        self.paint("1", text)
    }
    pub(crate) fn cyan(&self, text: &str) -> String {
        self.paint("36", text)
    }
    pub(crate) fn red(&self, text: &str) -> String {
        self.paint("31", text)
    }
}

/// Where the cursor is in the turn's output: each part starts on its own
/// line with its label, so text, reasoning and tools never run together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Nothing,
    Reasoning,
    Text,
    Structured,
    Tools,
}

/// The card being drawn while its payload is written.
pub(crate) struct LiveCard {
    /// The payload's offset (which payload it is).
    offset: u64,
    /// How many lines it takes on screen.
    lines: usize,
    /// Whether nothing was printed after it (so it can be redrawn in place).
    last: bool,
}

/// Renders one turn's events as they arrive.
pub(crate) struct Renderer<'a> {
    style: &'a Style,
    part: Part,
    /// Whether the cursor is in the middle of a line.
    mid_line: bool,
    /// The growing card, on a terminal.
    card: Option<LiveCard>,
}

impl<'a> Renderer<'a> {
    pub(crate) fn new(style: &'a Style) -> Self {
        Self {
            style,
            part: Part::Nothing,
            mid_line: false,
            card: None,
        }
    }

    /// Notes that something was printed after the live card.
    pub(crate) fn printed(&mut self) {
        if let Some(card) = &mut self.card {
            card.last = false;
        }
    }

    /// Erases the live card when it is the last thing on screen.
    pub(crate) fn erase_card(&mut self) {
        if let Some(card) = self.card.take()
            && card.last
            && card.lines > 0
        {
            print!("\x1b[{}F\x1b[J", card.lines);
        }
    }

    /// Draws the card of a `payload_partial`, over its previous drawing
    /// when nothing came after it; takes it down when the payload failed.
    pub(crate) fn partial(&mut self, partial: &PayloadPartial) {
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
    pub(crate) fn step_reset(&mut self, reset: &parley_proto::gateway::v1::StepReset) {
        self.erase_card();
        let message = format!(
            "↻ {} (step {}, {})",
            reset.message, reset.step, reset.reason
        );
        self.tool_line(format!("  {}", self.style.dim(&message)));
        self.part = Part::Nothing;
    }

    /// Ends the current line, if one is open.
    pub(crate) fn line_break(&mut self) {
        if self.mid_line {
            println!();
            self.mid_line = false;
        }
    }

    /// Streams `text` under `label`, opening a new part when needed (a new
    /// part starts at its first visible character, after the label).
    pub(crate) fn stream(&mut self, part: Part, label: &str, text: &str, dim: bool) {
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
    pub(crate) fn tool_line(&mut self, line: String) {
        self.printed();
        self.line_break();
        println!("{line}");
        self.part = Part::Tools;
    }

    pub(crate) fn event(&mut self, event: Option<Event>) {
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
            Some(Event::ApprovalRequest(request)) => {
                self.tool_line(format!("  {} {}", style.bold("? approve"), request.summary))
            }
            Some(Event::ClientToolCall(call)) => self.tool_line(format!(
                "  {} {}",
                style.dim("⇄ app tool"),
                style.bold(&call.tool)
            )),
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
pub(crate) fn card_lines(style: &Style, partial: &PayloadPartial) -> Vec<String> {
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
            "add" if partial.r#type == "data_proposal" => {
                format!("+ add row {}", row_values(operation.get("data")))
            }
            "modify" => format!("~ {}", field("column_id")),
            "remove" => format!("- {}", field("column_id")),
            "reorder" => format!("↕ {}", field("column_id")),
            "update" => format!(
                "~ update row {}: {}",
                field("row_id"),
                row_values(operation.get("changes"))
            ),
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

pub(crate) fn render_complete(style: &Style, complete: &TurnComplete) {
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
        println!("  {}", style.dim(&usage_line(usage)));
    }
}

/// The footer's usage: `model · 4270 in (3900 cached) / 333 out tokens · 2
/// model call(s) · 0.0115 USD`; the cached and reasoning parts only when
/// there are any, the cost only when the runner priced the turn.
pub(crate) fn usage_line(usage: &Usage) -> String {
    let part = |count: u64, what: &str| {
        if count == 0 {
            String::new()
        } else {
            format!(" ({count} {what})")
        }
    };
    let cost = if usage.currency.is_empty() {
        String::new()
    } else {
        format!(" · {} {}", cost_text(usage.cost_micros), usage.currency)
    };
    format!(
        "{} · {} in{} / {} out{} tokens · {} model call(s){cost}",
        usage.model,
        usage.input_tokens,
        part(usage.cached_input_tokens, "cached"),
        usage.output_tokens,
        part(usage.reasoning_tokens, "reasoning"),
        usage.model_calls
    )
}

/// An amount in micro-units as a decimal: cents from one unit up, three
/// significant digits below it (`2.50`, `0.15`, `0.0114`, `0.000125`),
/// truncated.
pub(crate) fn cost_text(micros: i64) -> String {
    let micros = micros.max(0);
    let whole = micros / 1_000_000;
    let fraction = format!("{:06}", micros % 1_000_000);
    let leading = fraction.bytes().take_while(|b| *b == b'0').count();
    let places = if whole > 0 {
        2
    } else {
        (leading + 3).clamp(2, 6)
    };
    let shown = fraction[..places].trim_end_matches('0');
    let shown = if shown.len() < 2 {
        &fraction[..2]
    } else {
        shown
    };
    format!("{whole}.{shown}")
}

pub(crate) fn render_payload(style: &Style, payload: &Payload) {
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
                    Some(data_operation::Operation::Add(add)) => {
                        format!("+ add row {}", struct_values(add.data.as_ref()))
                    }
                    Some(data_operation::Operation::Update(update)) => format!(
                        "~ update row {}: {}",
                        update.row_id,
                        struct_values(update.changes.as_ref())
                    ),
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

/// Longest row shown on a card line, in characters.
const ROW_CHARS: usize = 80;

/// A row's values on one line: `Company: Acme, Status: Applied` (cut at
/// [`ROW_CHARS`]), `{}` for none.
fn row_values(values: Option<&serde_json::Value>) -> String {
    let Some(values) = values.and_then(serde_json::Value::as_object) else {
        return "{}".to_owned();
    };
    let line = values
        .iter()
        .map(|(column, value)| {
            let value = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            format!("{column}: {value}")
        })
        .collect::<Vec<_>>()
        .join(", ");
    if line.chars().count() > ROW_CHARS {
        let cut: String = line.chars().take(ROW_CHARS - 1).collect();
        format!("{{{cut}…}}")
    } else {
        format!("{{{line}}}")
    }
}

/// [`row_values`] of a typed proposal's values.
fn struct_values(values: Option<&prost_types::Struct>) -> String {
    row_values(values.map(parley_proto::json::from_struct_value).as_ref())
}

#[cfg(test)]
mod tests;
