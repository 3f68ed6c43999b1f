//! The system prompt, assembled in 8 sections from the registry, the
//! resolved page and the request (docs/output-format.md#the-system-prompt):
//!
//! 1. global preamble (registry `preamble`)
//! 2. page instructions (page, tab, subtab)
//! 3. stream instructions (by `stream_id`)
//! 4. current context (the UI state through the page's context templates,
//!    or readable JSON when there is none)
//! 5. payload manifest (earlier payloads, summarised)
//! 6. capabilities (tools, STRUCTURED RESPONSES, CLIENT ACTIONS, and the
//!    structured-answer note when a response schema is set)
//! 7. help (the app's topics, and how to fail helpfully)
//! 8. format rules (SUGGESTED_VALUES / SUGGESTED_ACTIONS)
//!
//! Sections with nothing to say are left out, sections are separated by one
//! blank line, and the output depends only on the inputs (JSON keys sorted),
//! so the same request always yields the same prompt.

mod context;
mod manifest;
mod sections;

#[cfg(test)]
mod tests;

use crate::registry::{Registry, ResolvedPage};

/// Everything the prompt is built from.
#[derive(Debug, Clone, Copy)]
pub struct PromptInput<'a> {
    /// The registry (preamble, help, templates, stream instructions, limits).
    pub registry: &'a Registry,
    /// What the user's page resolved to.
    pub page: &'a ResolvedPage,
    /// Selects per-stream instructions, if any.
    pub stream_id: Option<&'a str>,
    /// The UI state (`PageContext.state`).
    pub state: Option<&'a serde_json::Value>,
    /// Payloads of earlier turns, oldest first, for the manifest.
    pub history_payloads: &'a [HistoryPayload],
    /// The JSON schema of a structured answer requested for this turn.
    pub response_schema: Option<&'a serde_json::Value>,
    /// The files attached to the new message, listed in the current
    /// context.
    pub attachments: &'a [crate::store::StoredAttachmentRef],
}

/// A payload shown in an earlier turn.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPayload {
    /// The turn it appeared in (0-based, in conversation order).
    pub turn_index: u32,
    /// Its payload type name.
    pub payload_type: String,
    /// The payload's JSON object.
    pub data: serde_json::Value,
    /// What the user did with it; `None` when no decision was recorded.
    pub decision: Option<Decision>,
}

/// What the user did with a proposal (`RecordPayloadDecision`).
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Accepted as proposed.
    Accepted,
    /// Dismissed.
    Dismissed,
    /// Accepted after editing.
    Edited {
        /// What the application applied, when it said.
        applied_data: Option<serde_json::Value>,
        /// The user's note, empty when none.
        note: String,
    },
}

/// A system prompt, and how much of it is the same for every turn of its
/// page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemPrompt {
    /// The prompt.
    pub text: String,
    /// The length in bytes of its stable part: the sections that depend
    /// only on the page (and the request's answer schema), which come
    /// first, so that providers that cache prompt prefixes reuse them from
    /// one turn to the next (docs/output-format.md#the-system-prompt).
    pub stable_bytes: usize,
}

/// Builds the system prompt.
pub fn build_system_prompt(input: &PromptInput) -> String {
    build_system_prompt_parts(input).text
}

/// Builds the system prompt: first the sections that are the same for
/// every turn of the page, byte for byte (preamble, page instructions,
/// capabilities, help, format rules), then those that change from turn to
/// turn (stream instructions, the current UI state, the payload manifest).
pub fn build_system_prompt_parts(input: &PromptInput) -> SystemPrompt {
    let stable = [
        sections::preamble(input),
        sections::page_instructions(input),
        sections::capabilities(input),
        sections::help(input),
        sections::format_rules(input),
    ];
    let per_turn = [
        sections::stream_instructions(input),
        context::current_context(input),
        manifest::payload_manifest(input),
    ];
    let mut text = String::new();
    let push = |text: &mut String, section: String| {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(section.trim_end());
    };
    for section in stable.into_iter().flatten() {
        push(&mut text, section);
    }
    // The separator before the first per-turn section (or the final line
    // break) belongs to the stable part: the same whatever follows.
    text.push_str(if per_turn.iter().any(Option::is_some) {
        "\n\n"
    } else {
        "\n"
    });
    let stable_bytes = text.len();
    let mut rest = String::new();
    for section in per_turn.into_iter().flatten() {
        push(&mut rest, section);
    }
    if !rest.is_empty() {
        text.push_str(&rest);
        text.push('\n');
    }
    SystemPrompt { text, stable_bytes }
}

/// The `prompt_cache_key` of a turn's runner request: the same for the
/// turns of one conversation on one page (hex of a SHA-256 prefix, so
/// neither id reaches the provider).
pub fn prompt_cache_key(page: &str, conversation_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new()
        .chain_update(page.as_bytes())
        .chain_update([0])
        .chain_update(conversation_id.as_bytes())
        .finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("parley-{hex}")
}
