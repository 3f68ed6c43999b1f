//! Section 4, the current context: where the user is and what their screen
//! shows. The UI state goes through the page's context templates (page, tab,
//! subtab); without a template — or when a template fails on an unexpected
//! state — it is shown as indented JSON, which models read well. The result
//! is bounded by `limits.max_context_chars`.

use super::PromptInput;
use crate::text::{pretty, truncate};

/// The section, or `None` when there is neither a page nor a state.
pub(super) fn current_context(input: &PromptInput) -> Option<String> {
    let location = location(input);
    let state = input.state.filter(|s| has_content(s));
    let body = state.map(|state| render_state(input, state));
    if location.is_none() && body.is_none() && input.attachments.is_empty() {
        return None;
    }
    let mut out = String::from("## CURRENT CONTEXT");
    if let Some(location) = location {
        out.push('\n');
        out.push_str(&location);
    }
    if let Some(body) = body.filter(|b| !b.is_empty()) {
        out.push('\n');
        out.push_str(&bounded(&body, input.registry.limits().max_context_chars));
    }
    if !input.attachments.is_empty() {
        out.push_str("\nFiles attached to this message (the model gets them with it):");
        for file in input.attachments {
            out.push_str(&format!(
                "\n- {} ({}, {} bytes)",
                truncate(&file.name, 120),
                file.media_type,
                file.size_bytes
            ));
        }
    }
    Some(out)
}

/// `Page: table_view, tab: rows, subtab: selection`, empty parts left out.
fn location(input: &PromptInput) -> Option<String> {
    let r = &input.page.page_ref;
    if r.page.is_empty() {
        return None;
    }
    let mut out = format!("Page: {}", r.page);
    if !r.tab.is_empty() {
        out.push_str(&format!(", tab: {}", r.tab));
        if !r.subtab.is_empty() {
            out.push_str(&format!(", subtab: {}", r.subtab));
        }
    }
    Some(out)
}

/// Whether the state says anything (not null, not an empty object).
fn has_content(state: &serde_json::Value) -> bool {
    match state {
        serde_json::Value::Null => false,
        serde_json::Value::Object(map) => !map.is_empty(),
        _ => true,
    }
}

fn render_state(input: &PromptInput, state: &serde_json::Value) -> String {
    match input.registry.render_context(input.page, state) {
        Ok(Some(text)) => text,
        Ok(None) => json_fallback(state),
        Err(e) => {
            tracing::warn!(page = %input.page.page_ref.page, error = %e, "context template failed, showing the ui state as json");
            json_fallback(state)
        }
    }
}

fn json_fallback(state: &serde_json::Value) -> String {
    format!("UI state (JSON):\n{}", pretty(state))
}

/// `text` within `max` characters, saying how much was cut.
fn bounded(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_owned();
    }
    format!(
        "{}\n[context truncated: {max} of {total} characters shown]",
        truncate(text, max)
    )
}
