//! Section 5, the payload manifest: one line per payload shown earlier in the
//! conversation, so the model knows what it already proposed and what the
//! user did with it. Each line uses the payload type's `summary_template`;
//! types without one (or no longer registered) fall back to compact JSON.
//! Only the most recent `limits.max_manifest_entries` are listed.

use super::{Decision, HistoryPayload, PromptInput};
use crate::text::{compact, truncate};

/// The section, or `None` when the conversation has no earlier payloads.
pub(super) fn payload_manifest(input: &PromptInput) -> Option<String> {
    if input.history_payloads.is_empty() {
        return None;
    }
    let limits = input.registry.limits();
    let mut payloads: Vec<&HistoryPayload> = input.history_payloads.iter().collect();
    payloads.sort_by_key(|p| p.turn_index);
    let skipped = payloads.len().saturating_sub(limits.max_manifest_entries);

    let mut out = String::from(
        "## PAYLOAD MANIFEST\nPayloads shown earlier in this conversation, oldest first:",
    );
    if skipped > 0 {
        out.push_str(&format!("\n- ({skipped} earlier payload(s) not listed)"));
    }
    for p in &payloads[skipped..] {
        let max = limits.max_summary_chars;
        let shown = truncate(&summary(input, &p.payload_type, &p.data), max);
        out.push_str(&format!(
            "\n- turn {}, {}: {}",
            p.turn_index, p.payload_type, shown
        ));
        match &p.decision {
            Some(Decision::Accepted) => out.push_str(" [accepted]"),
            Some(Decision::Dismissed) => out.push_str(" [dismissed]"),
            Some(Decision::Edited { applied_data, note }) => {
                let mut what = Vec::new();
                let note = one_line(note);
                if !note.is_empty() {
                    what.push(truncate(&note, max));
                }
                if let Some(data) = applied_data {
                    let applied = summary(input, &p.payload_type, data);
                    what.push(format!("applied {}", truncate(&applied, max)));
                }
                if what.is_empty() {
                    out.push_str(" [edited]");
                } else {
                    out.push_str(&format!(" [edited: {}]", what.join("; ")));
                }
            }
            None => {}
        }
    }
    Some(out)
}

/// A payload's summary on one line.
fn summary(input: &PromptInput, payload_type: &str, data: &serde_json::Value) -> String {
    let text = match input.registry.render_summary(payload_type, data) {
        Ok(Some(text)) if !text.trim().is_empty() => text,
        Ok(_) => compact(data),
        Err(e) => {
            tracing::warn!(%payload_type, error = %e, "summary template failed, using json");
            compact(data)
        }
    };
    one_line(&text)
}

/// `text` with its runs of whitespace (line breaks too) made one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
