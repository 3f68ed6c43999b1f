//! Section 5, the payload manifest: one line per payload shown earlier in the
//! conversation, so the model knows what it already proposed and what the
//! user did with it. Each line uses the payload type's `summary_template`;
//! types without one (or no longer registered) fall back to compact JSON.
//! Only the most recent `limits.max_manifest_entries` are listed.

use super::{HistoryPayload, PromptInput};
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
        let summary = truncate(&summary(input, p), limits.max_summary_chars);
        out.push_str(&format!(
            "\n- turn {}, {}: {}",
            p.turn_index, p.payload_type, summary
        ));
        match p.accepted {
            Some(true) => out.push_str(" [accepted]"),
            Some(false) => out.push_str(" [dismissed]"),
            None => {}
        }
    }
    Some(out)
}

/// The payload's summary on one line.
fn summary(input: &PromptInput, p: &HistoryPayload) -> String {
    let text = match input.registry.render_summary(&p.payload_type, &p.data) {
        Ok(Some(text)) if !text.trim().is_empty() => text,
        Ok(_) => compact(&p.data),
        Err(e) => {
            tracing::warn!(payload_type = %p.payload_type, error = %e, "summary template failed, using json");
            compact(&p.data)
        }
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
