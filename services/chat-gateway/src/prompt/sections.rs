//! The sections that come from the registry and the resolved page as they
//! are: preamble (1), page (2) and stream (3) instructions, capabilities (6),
//! help (7) and the format rules (8) that teach the suggestion markers.

use crate::registry::{ActionDef, Handler};

use super::PromptInput;
use crate::text::compact;

/// Section 1: the registry's preamble.
pub(super) fn preamble(input: &PromptInput) -> Option<String> {
    let text = input.registry.preamble();
    (!text.is_empty()).then(|| text.to_owned())
}

/// Section 2: page, tab and subtab instructions, in that order.
pub(super) fn page_instructions(input: &PromptInput) -> Option<String> {
    if input.page.instructions.is_empty() {
        return None;
    }
    Some(format!(
        "## PAGE INSTRUCTIONS\n{}",
        input.page.instructions.join("\n\n")
    ))
}

/// Section 3: the instructions of the request's stream, when registered.
pub(super) fn stream_instructions(input: &PromptInput) -> Option<String> {
    let id = input.stream_id.filter(|id| !id.is_empty())?;
    match input.registry.stream_instructions(id) {
        Some(text) => Some(format!("## STREAM INSTRUCTIONS\n{text}")),
        None => {
            tracing::debug!(stream_id = %id, "no instructions registered for stream");
            None
        }
    }
}

/// Section 6: tools, structured responses (payload markers), actions, and
/// the structured-answer note.
pub(super) fn capabilities(input: &PromptInput) -> Option<String> {
    let parts: Vec<String> = [
        tools(input),
        structured_responses(input),
        client_actions(input),
        structured_answer(input),
    ]
    .into_iter()
    .flatten()
    .collect();
    if parts.is_empty() {
        return None;
    }
    Some(format!("## CAPABILITIES\n\n{}", parts.join("\n\n")))
}

fn tools(input: &PromptInput) -> Option<String> {
    if input.page.tools.is_empty() {
        return None;
    }
    let mut out =
        String::from("### TOOLS\nCall these through the tool-calling interface when they help:");
    for t in &input.page.tools {
        out.push_str(&format!("\n- {}: {}", t.name, t.description));
        if let Some(pt) = &t.payload_type {
            out.push_str(&format!(
                " (its result is also shown to the user as a {pt} card)"
            ));
        }
    }
    Some(out)
}

fn structured_responses(input: &PromptInput) -> Option<String> {
    let mut payloads = input.page.marker_payload_types().peekable();
    payloads.peek()?;
    let mut out = String::from(
        "### STRUCTURED RESPONSES\n\
         To propose something the user can Accept or Dismiss, write its marker followed by one JSON object, \
         after your explanation. At most one proposal per response. The marker and its JSON are removed \
         from the text the user reads and shown as a card.",
    );
    for p in payloads {
        out.push_str(&format!("\n\n#### {}: {}", p.marker, p.description));
        if !p.llm_instructions.is_empty() {
            out.push('\n');
            out.push_str(&p.llm_instructions);
        }
        let schema = match input.registry.payload_schema_text(&p.name) {
            Some(text) => text.to_owned(),
            None => compact(&p.schema),
        };
        out.push_str(&format!(
            "\nThe object after `{}:` must satisfy this JSON schema:\n{schema}",
            p.marker
        ));
    }
    Some(out)
}

fn client_actions(input: &PromptInput) -> Option<String> {
    if input.page.actions.is_empty() {
        return None;
    }
    let mut out = String::from("### CLIENT ACTIONS\nThe only actions SUGGESTED_ACTIONS may name:");
    for a in &input.page.actions {
        out.push_str(&format!("\n- {}", action_line(input, a)));
    }
    Some(out)
}

fn action_line(input: &PromptInput, a: &ActionDef) -> String {
    let mut line = format!(
        "{} (handler \"{}\"): {}",
        a.action,
        a.handler.as_str(),
        a.description
    );
    if let Some(schema) = &a.params_schema {
        let text = match input.registry.params_schema_text(&a.action) {
            Some(text) => text.to_owned(),
            None => compact(schema),
        };
        line.push_str(&format!(" Params (JSON schema): {text}"));
    }
    line
}

fn structured_answer(input: &PromptInput) -> Option<String> {
    let schema = input.response_schema?;
    Some(format!(
        "### STRUCTURED ANSWER\n\
         This message must be answered with a single JSON value that satisfies the schema below, and nothing \
         else: no prose, no markers, no suggestions. For this answer this overrides STRUCTURED RESPONSES and \
         FORMAT RULES.\n{}",
        compact(schema)
    ))
}

/// What the model does when it cannot help: a helpful message and
/// suggestions instead of a dead end.
const FAILING_HELPFULLY: &str = "When you cannot do what the user asks (it is outside this app, a tool failed, or \
information is missing), do not stop at a dead end: say in one sentence what is not possible and why, say what \
the user can do instead, and offer 2-4 SUGGESTED_VALUES with concrete next steps.";

/// Section 7: the app's help topics, then how to fail helpfully.
pub(super) fn help(input: &PromptInput) -> Option<String> {
    let app = input.registry.help();
    let mut out = String::from("## HELP\n");
    if !app.is_empty() {
        out.push_str(app);
        out.push_str("\n\n");
    }
    out.push_str(FAILING_HELPFULLY);
    Some(out)
}

const SUGGESTED_VALUES_FORMAT: &str = "SUGGESTED_VALUES:
[
  {\"label\": \"Display Text\", \"value\": \"text to send as next message\"},
  {\"label\": \"Another Option\", \"value\": \"another thing to send\"}
]
- Clickable chips: clicking one sends its value as the user's next message. Labels have 2-6 words; give 2-4 chips.
- Include them after creating a table, after a schema change, after populating data, after answering a question, \
and when the user seems unsure.
- Leave them out when the conversation is clearly finished.";

const SUGGESTED_ACTIONS_FORMAT: &str = "SUGGESTED_ACTIONS:
[
  {\"label\": \"Button Text\", \"action\": \"action_identifier\", \"handler\": \"client\"}
]
- Buttons that trigger an action. \"action\" must be one of the CLIENT ACTIONS listed above and \"handler\" the \
handler listed with it; never invent an action. Add \"params\": {...} when the action lists params.";

/// Section 8: the suggestion formats and the rules around them.
pub(super) fn format_rules(input: &PromptInput) -> Option<String> {
    let has_actions = !input.page.actions.is_empty();
    let has_proposals = input.page.marker_payload_types().next().is_some();
    let mut out = String::from(
        "## FORMAT RULES\n\
         Write your answer as plain text (markdown is fine). After it you may add suggestions in exactly \
         these formats; they are removed from the text and shown as clickable elements.",
    );
    out.push_str("\n\n");
    out.push_str(SUGGESTED_VALUES_FORMAT);
    if has_actions {
        out.push_str("\n\n");
        out.push_str(SUGGESTED_ACTIONS_FORMAT);
    }
    out.push_str("\n\nRules:");
    out.push_str(if has_actions {
        "\n- Write each marker exactly as shown, followed by one JSON array, at most once per response."
    } else {
        "\n- Write the marker exactly as shown, followed by one JSON array, at most once per response."
    });
    if has_proposals {
        out.push_str(
            "\n- Never add suggestions to a response that contains a proposal (STRUCTURED RESPONSES): the user \
             must accept or dismiss the proposal first.",
        );
    }
    if input
        .page
        .actions
        .iter()
        .any(|a| a.handler == Handler::Server)
    {
        out.push_str(
            "\n- An action with handler \"server\" sends its request back to you as the next message; use it for \
             work the user should start with one click.",
        );
    }
    Some(out)
}
