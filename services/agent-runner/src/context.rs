//! A turn's history fitted to each model's context window.
//!
//! The gateway sends a conversation's recent turns (within its own byte
//! budget); only the runner knows which model each call goes to. Before
//! every call, the messages before the turn's own user message are cut,
//! the oldest whole turns first (a user message and what answered it), so
//! that the system prompt, the tools, the messages and the answer's
//! tokens fit the model's window less a margin ([`MARGIN_PERCENT`]). The
//! turn's own message and its tool rounds are never cut: a conversation
//! cannot grow into one whose every turn fails with a context-length error.
//!
//! The window is the route's `context_window` (`[models.NAME]`), else a
//! documented default for the model's name ([`default_window`]); a model
//! with neither is not fitted. Tokens are counted with the model's own
//! encoding where one is known (OpenAI's, through `tiktoken-rs`), else
//! estimated at one token per [`BYTES_PER_TOKEN`] bytes of UTF-8, which
//! over-counts English text by about a quarter. Either count is then
//! scaled by what the provider reported for the previous fitted call of
//! the same model ([`Calibration`]). A history whose bytes alone fit is
//! not counted at all (a token is at least a byte), so a short
//! conversation costs nothing here.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use tiktoken_rs::CoreBPE;

use crate::provider::{Attachment, InputKind, Message, ToolSpec};

/// The share of a window kept free for what the count cannot see (message
/// framing a provider adds, tool-call formatting), in percent.
pub const MARGIN_PERCENT: u64 = 5;

/// The estimate's bytes of UTF-8 per token, for models without a known
/// encoding.
pub const BYTES_PER_TOKEN: u64 = 3;

/// What a message costs besides its text (role, framing).
const MESSAGE_OVERHEAD: u64 = 4;

/// What an image costs a model, estimated: about a 1 000 × 1 000 image on
/// Anthropic's and OpenAI's pricing pages.
const IMAGE_TOKENS: u64 = 1_600;

/// A PDF's bytes per token, estimated (text and a rendered page each).
const PDF_BYTES_PER_TOKEN: u64 = 50;

/// The answer's share of a window when neither the turn nor its route sets
/// an output limit.
const DEFAULT_OUTPUT_TOKENS: u64 = 4_096;

/// The context window of a model without a route that sets one, from its
/// provider's documentation: OpenAI's models as `tiktoken-rs` knows them
/// (`gpt-4o` 128 000, `gpt-4.1` 1 047 576, `o3` 200 000, …), every
/// `claude-*` 200 000, `gemini-1.5-pro*` 2 097 152 and other `gemini-*`
/// 1 048 576; `None` for any other model (the scripted provider's, a
/// local server's), which is then not fitted.
pub fn default_window(system: &str, model: &str) -> Option<u64> {
    match system {
        "openai" => tiktoken_rs::model::get_context_size(model).map(|size| size as u64),
        "anthropic" if model.starts_with("claude") => Some(200_000),
        "gcp.gemini" if model.starts_with("gemini-1.5-pro") => Some(2_097_152),
        "gcp.gemini" if model.starts_with("gemini") => Some(1_048_576),
        _ => None,
    }
}

/// How a model's tokens are counted.
#[derive(Clone, Copy)]
pub enum Counter {
    /// The model's own encoding.
    Encoding(&'static CoreBPE),
    /// One token per [`BYTES_PER_TOKEN`] bytes.
    Estimate,
}

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Encoding(_) => "Encoding",
            Self::Estimate => "Estimate",
        })
    }
}

impl Counter {
    /// The counter of `model` on a provider of `system`: OpenAI's
    /// encoding for the models it has one for, else the estimate.
    pub fn of(system: &str, model: &str) -> Self {
        if system == "openai"
            && let Some(tokenizer) = tiktoken_rs::tokenizer::get_tokenizer(model)
            && let Ok(bpe) = tiktoken_rs::bpe_for_tokenizer(tokenizer)
        {
            return Self::Encoding(bpe);
        }
        Self::Estimate
    }

    /// The tokens of `text`.
    pub fn count(&self, text: &str) -> u64 {
        match self {
            Self::Encoding(bpe) => bpe.count_ordinary(text) as u64,
            Self::Estimate => (text.len() as u64).div_ceil(BYTES_PER_TOKEN),
        }
    }
}

/// One candidate model's window and how its tokens are counted.
#[derive(Debug, Clone)]
pub struct Window {
    /// The model, as the provider names it (the calibration's key).
    pub model: Arc<str>,
    /// Tokens in, and out, per call.
    pub tokens: u64,
    /// How they are counted.
    pub counter: Counter,
}

/// What the providers reported against what was counted, per model: the
/// ratio of the last fitted call's reported input tokens to its count,
/// bounded to 0.5–3, which scales the next count. Shared by the runner's
/// turns; a new runner starts at 1.
#[derive(Debug, Default)]
pub struct Calibration(Mutex<HashMap<Arc<str>, f64>>);

impl Calibration {
    /// The factor counts of `model` are scaled by.
    pub fn factor(&self, model: &str) -> f64 {
        self.0
            .lock()
            .map(|factors| factors.get(model).copied().unwrap_or(1.0))
            .unwrap_or(1.0)
    }

    /// Learns from a call of `model` counted at `counted` tokens (scaled)
    /// that the provider reported `reported` input tokens for.
    pub fn learn(&self, model: &Arc<str>, counted: u64, reported: u64) {
        if counted == 0 || reported == 0 {
            return;
        }
        let Ok(mut factors) = self.0.lock() else {
            return;
        };
        let previous = factors.get(model).copied().unwrap_or(1.0);
        // `counted` was scaled by `previous`: the raw count's ratio.
        let ratio = reported as f64 / (counted as f64 / previous);
        factors.insert(model.clone(), ratio.clamp(0.5, 3.0));
    }
}

/// The calibration of this runner's counts.
pub fn calibration() -> &'static Calibration {
    static CALIBRATION: std::sync::LazyLock<Calibration> =
        std::sync::LazyLock::new(Calibration::default);
    &CALIBRATION
}

/// The messages a call sends, fitted.
#[derive(Debug, Clone)]
pub struct Fitted {
    /// The messages.
    pub messages: Arc<[Message]>,
    /// Earlier turns left out (a user message and what answered it, each).
    pub turns_left_out: u32,
    /// What the call's input was counted at (scaled), when it was counted.
    pub counted: Option<u64>,
}

/// Fits `messages` (ending with the turn's own user message and its tool
/// rounds) into `window` beside `system`, `tools` and `max_output` tokens
/// of answer, `factor` scaling each count (see the module documentation).
pub fn fit(
    messages: &Arc<[Message]>,
    system: &str,
    tools: &[ToolSpec],
    max_output: Option<u32>,
    window: &Window,
    factor: f64,
) -> Fitted {
    let unchanged = |counted| Fitted {
        messages: messages.clone(),
        turns_left_out: 0,
        counted,
    };
    // The turn's own message and what follows it stay whole.
    let Some(own) = messages
        .iter()
        .rposition(|message| matches!(message, Message::User { .. }))
    else {
        return unchanged(None);
    };
    let output = max_output.map_or(DEFAULT_OUTPUT_TOKENS, u64::from);
    let room = window
        .tokens
        .saturating_sub(window.tokens * MARGIN_PERCENT / 100)
        .saturating_sub(output);
    // A token is at least a byte: what fits in bytes fits in tokens.
    let bytes = |text: &str| text.len() as u64;
    let upper = bytes(system)
        + tools
            .iter()
            .map(|tool| tool_cost(tool, &bytes))
            .sum::<u64>()
        + messages.iter().map(|m| cost(m, &bytes)).sum::<u64>();
    if (upper as f64 * factor.max(1.0)) as u64 <= room {
        return unchanged(None);
    }
    let counter = window.counter;
    let tokens = |text: &str| counter.count(text);
    let scaled = |count: u64| (count as f64 * factor).ceil() as u64;
    let mut used = scaled(
        tokens(system)
            + tools
                .iter()
                .map(|tool| tool_cost(tool, &tokens))
                .sum::<u64>()
            + messages[own..]
                .iter()
                .map(|m| cost(m, &tokens))
                .sum::<u64>(),
    );
    // The earlier turns, newest first, while they fit.
    let starts: Vec<usize> = messages[..own]
        .iter()
        .enumerate()
        .filter(|(_, message)| matches!(message, Message::User { .. }))
        .map(|(i, _)| i)
        .collect();
    let mut kept = 0;
    let mut end = own;
    for start in starts.iter().rev() {
        let turn = scaled(messages[*start..end].iter().map(|m| cost(m, &tokens)).sum());
        if used + turn > room {
            break;
        }
        used += turn;
        kept += 1;
        end = *start;
    }
    let left_out = starts.len() - kept;
    if left_out == 0 {
        // Messages before the first user message (none the gateway sends)
        // go with the oldest turn.
        return unchanged(Some(used));
    }
    Fitted {
        messages: messages[end..].iter().cloned().collect(),
        turns_left_out: u32::try_from(left_out).unwrap_or(u32::MAX),
        counted: Some(used),
    }
}

/// What `message` costs, its texts measured by `measure`.
fn cost(message: &Message, measure: &dyn Fn(&str) -> u64) -> u64 {
    MESSAGE_OVERHEAD
        + match message {
            Message::User { text, attachments } => {
                measure(text)
                    + attachments
                        .iter()
                        .map(|f| file_cost(f, measure))
                        .sum::<u64>()
            }
            Message::Assistant {
                reasoning,
                text,
                tool_calls,
            } => {
                measure(text)
                    + reasoning
                        .iter()
                        .map(|block| measure(&block.text))
                        .sum::<u64>()
                    + tool_calls
                        .iter()
                        .map(|call| {
                            MESSAGE_OVERHEAD
                                + measure(&call.name)
                                + measure(&call.input.to_string())
                        })
                        .sum::<u64>()
            }
            Message::ToolResults(results) => results
                .iter()
                .map(|result| {
                    MESSAGE_OVERHEAD
                        + measure(&result.text)
                        + result
                            .attachments
                            .iter()
                            .map(|f| file_cost(f, measure))
                            .sum::<u64>()
                })
                .sum(),
        }
}

/// What a file costs: an image a fixed estimate, a PDF by its bytes, a
/// text file its text.
fn file_cost(file: &Attachment, measure: &dyn Fn(&str) -> u64) -> u64 {
    match file.kind() {
        InputKind::Image => IMAGE_TOKENS,
        InputKind::Pdf => (file.data.len() as u64).div_ceil(PDF_BYTES_PER_TOKEN),
        _ => measure(&String::from_utf8_lossy(&file.data)),
    }
}

/// What a tool's definition costs.
fn tool_cost(tool: &ToolSpec, measure: &dyn Fn(&str) -> u64) -> u64 {
    MESSAGE_OVERHEAD
        + measure(&tool.name)
        + measure(&tool.description)
        + measure(&tool.input_schema.to_string())
}

#[cfg(test)]
mod tests;
