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

/// Builds the system prompt.
pub fn build_system_prompt(input: &PromptInput) -> String {
    let sections = [
        sections::preamble(input),
        sections::page_instructions(input),
        sections::stream_instructions(input),
        context::current_context(input),
        manifest::payload_manifest(input),
        sections::capabilities(input),
        sections::help(input),
        sections::format_rules(input),
    ];
    let mut out = String::new();
    for section in sections.into_iter().flatten() {
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(section.trim_end());
    }
    out.push('\n');
    out
}
