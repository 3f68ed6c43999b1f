//! The runner's use of the parsing library (`parley-parse`).
//!
//! Two things of the model's text are the parser's business, not the
//! runner's: tool calls written into the text
//! (docs/output-format.md#tool-calls-in-the-text), recognised only
//! when they name one of the turn's tools and removed from what the user
//! sees, and structured output, accumulated and parsed once at the end with
//! the raw text kept when it does not parse or fails the schema
//! (docs/output-format.md#structured-output).

use std::sync::Arc;

use parley_parse::{Limits, Profile, StreamItem, StreamParser, structured::Accumulator};
use parley_proto::parser::v1::StructuredResult;
use serde_json::Value;

/// A tool call written into the text.
#[derive(Debug, Clone, PartialEq)]
pub struct TextCall {
    /// The registered tool name.
    pub name: String,
    /// The arguments (an object).
    pub arguments: Value,
}

/// What the text-call parser hands out.
#[derive(Debug, Clone, PartialEq)]
pub enum TextItem {
    /// Text for the user, with tool calls removed.
    Text(String),
    /// A recognised tool call.
    Call(TextCall),
}

/// The turn's tool names as a parser profile; cheap to clone.
#[derive(Debug, Clone)]
pub struct ToolProfile(Arc<Profile>);

impl ToolProfile {
    /// A profile recognising calls to `tools` and nothing else.
    pub fn new(tools: &[String]) -> Self {
        Self(Arc::new(Profile::tools_only(tools.iter().cloned())))
    }
}

/// Finds tool calls in one model call's text while it streams. Text is
/// handed out as soon as it cannot be part of a call; the concatenation of
/// the text items is the text with the calls removed.
#[derive(Debug)]
pub struct TextCallParser {
    parser: StreamParser,
    /// Set when the text outgrew the parser's limits: the rest passes through.
    passthrough: bool,
}

impl TextCallParser {
    /// A parser for one model call.
    pub fn new(profile: &ToolProfile) -> Self {
        Self {
            parser: StreamParser::new(profile.0.clone(), Limits::default()),
            passthrough: false,
        }
    }

    /// The next delta of the model's text.
    pub fn push(&mut self, delta: &str) -> Vec<TextItem> {
        if self.passthrough {
            return vec![TextItem::Text(delta.to_owned())];
        }
        match self.parser.push(delta) {
            Ok(items) => convert(items),
            Err(error) => {
                tracing::warn!(%error, "text too large for tool-call parsing; passing the rest through");
                self.passthrough = true;
                let mut items = convert(self.parser.end());
                items.push(TextItem::Text(delta.to_owned()));
                items
            }
        }
    }

    /// The end of the call's text: everything still held back.
    pub fn end(&mut self) -> Vec<TextItem> {
        if self.passthrough {
            return Vec::new();
        }
        convert(self.parser.end())
    }
}

fn convert(items: Vec<StreamItem>) -> Vec<TextItem> {
    items
        .into_iter()
        .filter_map(|item| match item {
            StreamItem::Text(text) => Some(TextItem::Text(text.into_string())),
            // The parser keeps the call for its final result: copy what the
            // loop needs.
            StreamItem::ToolCall(call) => Some(TextItem::Call(TextCall {
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            })),
            _ => None,
        })
        .collect()
}

/// Parses accumulated structured output and validates it against `schema`.
pub fn structured(raw: &str, schema: &Value) -> StructuredResult {
    let mut accumulator = Accumulator::new();
    accumulator.push(raw);
    accumulator.finish(Some(schema)).into_proto()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn finds_calls_to_registered_tools_only() {
        let profile = ToolProfile::new(&["calculator".to_owned()]);
        let text = "Let me compute.\n\n```json\n{\"type\": \"calculator\", \"id\": \"c1\", \"parameters\": {\"expression\": \"2+2\"}}\n```\n\nDone.";
        let mut items = Vec::new();
        let mut parser = TextCallParser::new(&profile);
        for chunk in text.as_bytes().chunks(7) {
            items.extend(parser.push(std::str::from_utf8(chunk).expect("should succeed")));
        }
        items.extend(parser.end());
        let calls: Vec<&TextCall> = items
            .iter()
            .filter_map(|i| match i {
                TextItem::Call(c) => Some(c),
                _ => None,
            })
            .collect();
        assert_eq!(calls.len(), 1, "{items:?}");
        assert_eq!(calls[0].name, "calculator");
        let visible: String = items
            .iter()
            .filter_map(|i| match i {
                TextItem::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert!(!visible.contains("calculator"), "{visible}");

        let mut unregistered = TextCallParser::new(&ToolProfile::new(&["other".to_owned()]));
        let mut items = unregistered.push(text);
        items.extend(unregistered.end());
        assert!(items.iter().all(|i| matches!(i, TextItem::Text(_))));
    }

    #[test]
    fn structured_keeps_the_raw_text_when_invalid() {
        let schema = json!({"type": "object", "required": ["a"]});
        let ok = structured(r#"{"a": 1}"#, &schema);
        assert!(ok.valid && ok.value.is_some());
        let truncated = structured(r#"{"a": 1"#, &schema);
        assert!(!truncated.valid && truncated.value.is_none());
        assert_eq!(truncated.raw, r#"{"a": 1"#);
        let wrong = structured(r#"{"b": 1}"#, &schema);
        assert!(!wrong.valid && !wrong.error.is_empty());
    }
}
