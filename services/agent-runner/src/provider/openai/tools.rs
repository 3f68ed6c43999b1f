//! Accumulating streamed tool-call fragments into whole calls.
//!
//! Fragments are keyed by `index`, never by arrival order. A fragment at an
//! index that already holds a call starts a new call when it brings a
//! different non-empty id, a different name, or a fresh `{…` after the
//! current call's arguments are already complete JSON (SGLang and vLLM have
//! given a second parallel call index 0). A repeated identical name
//! (llama.cpp) is not concatenated; a missing or empty id continues the call.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::provider::{ProviderError, ToolCall, http::truncate_raw, sse::synthesize_call_id};

/// One tool-call fragment of a chunk's `delta.tool_calls`.
#[derive(Debug, Deserialize)]
pub(crate) struct WireToolCall {
    pub index: Option<u64>,
    pub id: Option<String>,
    pub function: Option<WireFunction>,
}

/// The `function` of a fragment.
#[derive(Debug, Deserialize)]
pub(crate) struct WireFunction {
    pub name: Option<String>,
    /// A string piece, or (some servers) the whole arguments object.
    pub arguments: Option<Value>,
}

/// One call being assembled.
#[derive(Debug)]
struct Partial {
    index: u64,
    id: Option<String>,
    name: String,
    arguments: String,
}

/// The calls of one streamed answer.
#[derive(Debug, Default)]
pub(crate) struct ToolCalls {
    calls: Vec<Partial>,
    /// index → position in `calls` of the call currently at that index.
    current: HashMap<u64, usize>,
}

impl ToolCalls {
    /// Adds one fragment; `position` is its place in the chunk's list, used
    /// as the index when the server sent none.
    pub fn push(&mut self, position: usize, fragment: WireToolCall) {
        let index = fragment.index.unwrap_or(position as u64);
        let id = fragment.id.filter(|id| !id.is_empty());
        let (name, arguments) = match fragment.function {
            Some(f) => (
                f.name.filter(|n| !n.is_empty()),
                f.arguments.and_then(|a| match a {
                    Value::String(s) => Some(s),
                    Value::Null => None,
                    other => Some(other.to_string()),
                }),
            ),
            None => (None, None),
        };
        let existing = self.current.get(&index).copied();
        let continues = existing.filter(|&at| {
            let call = &self.calls[at];
            let new_id = matches!((&id, &call.id), (Some(a), Some(b)) if a != b);
            let new_name = matches!(&name, Some(n) if !call.name.is_empty() && *n != call.name);
            let restarted = name.is_some()
                && arguments
                    .as_deref()
                    .is_some_and(|a| a.trim_start().starts_with('{'))
                && is_complete_json(&call.arguments);
            !(new_id || new_name || restarted)
        });
        match continues {
            Some(at) => {
                let call = &mut self.calls[at];
                if call.id.is_none() {
                    call.id = id;
                }
                if call.name.is_empty() {
                    call.name = name.unwrap_or_default();
                }
                if let Some(piece) = arguments {
                    call.arguments.push_str(&piece);
                }
            }
            None => {
                self.calls.push(Partial {
                    index,
                    id,
                    name: name.unwrap_or_default(),
                    arguments: arguments.unwrap_or_default(),
                });
                self.current.insert(index, self.calls.len() - 1);
            }
        }
    }

    /// The finished calls, ordered by index (calls that shared an index in
    /// arrival order). `cut` says the token limit ended the answer: a call
    /// whose arguments do not parse then was cut off and is dropped, never
    /// treated as final. Otherwise unparsable arguments are malformed data.
    pub fn finish(&mut self, cut: bool) -> Result<Vec<ToolCall>, ProviderError> {
        let mut calls = std::mem::take(&mut self.calls);
        self.current.clear();
        calls.sort_by_key(|c| c.index);
        let mut out = Vec::with_capacity(calls.len());
        for call in calls {
            let input = match parse_arguments(&call.arguments) {
                Ok(input) => input,
                Err(_) if cut => {
                    tracing::warn!(tool = %call.name, "dropping a tool call cut off by the token limit");
                    continue;
                }
                Err(e) => {
                    return Err(ProviderError::Malformed {
                        reason: format!(
                            "arguments of tool call {:?} are not valid JSON: {e}",
                            call.name
                        ),
                        raw: truncate_raw(&call.arguments),
                    });
                }
            };
            if call.name.is_empty() {
                if cut {
                    continue;
                }
                return Err(ProviderError::Malformed {
                    reason: format!("tool call at index {} has no name", call.index),
                    raw: truncate_raw(&call.arguments),
                });
            }
            out.push(ToolCall {
                id: call.id.unwrap_or_else(synthesize_call_id),
                name: call.name,
                input,
                provider_data: None,
            });
        }
        Ok(out)
    }
}

/// Parses a call's arguments: empty means no arguments (`{}`); a JSON string
/// holding an object (double-encoded arguments) is unwrapped.
pub(crate) fn parse_arguments(text: &str) -> Result<Value, serde_json::Error> {
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    match serde_json::from_str(text)? {
        Value::Null => Ok(json!({})),
        Value::String(inner) => match serde_json::from_str::<Value>(&inner) {
            Ok(object @ Value::Object(_)) => Ok(object),
            _ => Ok(Value::String(inner)),
        },
        other => Ok(other),
    }
}

fn is_complete_json(text: &str) -> bool {
    !text.trim().is_empty() && serde_json::from_str::<Value>(text).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frag(
        index: Option<u64>,
        id: Option<&str>,
        name: Option<&str>,
        args: Option<Value>,
    ) -> WireToolCall {
        WireToolCall {
            index,
            id: id.map(Into::into),
            function: Some(WireFunction {
                name: name.map(Into::into),
                arguments: args,
            }),
        }
    }

    fn s(text: &str) -> Option<Value> {
        Some(Value::String(text.into()))
    }

    #[test]
    fn fragments_accumulate_by_index_not_arrival() {
        let mut calls = ToolCalls::default();
        calls.push(0, frag(Some(1), Some("b"), Some("two"), s("")));
        calls.push(0, frag(Some(0), Some("a"), Some("one"), s("{\"x\"")));
        calls.push(0, frag(Some(1), None, None, s("{}")));
        calls.push(0, frag(Some(0), None, None, s(":1}")));
        let out = calls.finish(false).expect("valid calls");
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].id.as_str(), out[0].name.as_str()), ("a", "one"));
        assert_eq!(out[0].input, json!({"x": 1}));
        assert_eq!(out[1].input, json!({}));
    }

    #[test]
    fn repeated_names_are_not_concatenated() {
        let mut calls = ToolCalls::default();
        for piece in ["{\"a\":", "\"b\"", "}"] {
            calls.push(0, frag(Some(0), None, Some("lookup"), s(piece)));
        }
        let out = calls.finish(false).expect("valid calls");
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].name, "lookup");
        assert_eq!(out[0].input, json!({"a": "b"}));
        assert!(out[0].id.starts_with("call_"));
    }

    #[test]
    fn a_new_id_or_name_at_a_used_index_starts_a_new_call() {
        let mut calls = ToolCalls::default();
        calls.push(0, frag(Some(0), Some("x1"), Some("a"), s("{}")));
        calls.push(0, frag(Some(0), Some("x2"), Some("a"), s("{\"n\":2}")));
        calls.push(0, frag(Some(0), None, Some("b"), s("{}")));
        let out = calls.finish(false).expect("valid calls");
        let names: Vec<_> = out
            .iter()
            .map(|c| (c.name.as_str(), c.input.clone()))
            .collect();
        assert_eq!(
            names,
            vec![("a", json!({})), ("a", json!({"n": 2})), ("b", json!({}))]
        );
    }

    #[test]
    fn same_name_restarting_after_complete_arguments_is_a_new_call() {
        let mut calls = ToolCalls::default();
        calls.push(0, frag(Some(0), None, Some("a"), s("{\"n\":1}")));
        calls.push(0, frag(Some(0), None, Some("a"), s("{\"n\":2}")));
        let out = calls.finish(false).expect("valid calls");
        assert_eq!(out.len(), 2);
        assert_ne!(out[0].id, out[1].id);
    }

    #[test]
    fn object_arguments_and_double_encoding() {
        let mut calls = ToolCalls::default();
        calls.push(0, frag(None, Some("o"), Some("a"), Some(json!({"k": [1]}))));
        calls.push(1, frag(None, Some("d"), Some("b"), s("\"{\\\"k\\\":2}\"")));
        let out = calls.finish(false).expect("valid calls");
        assert_eq!(out[0].input, json!({"k": [1]}));
        assert_eq!(out[1].input, json!({"k": 2}));
    }

    #[test]
    fn broken_arguments_are_malformed_unless_cut() {
        let mut calls = ToolCalls::default();
        calls.push(0, frag(Some(0), Some("i"), Some("a"), s("{\"k\": ")));
        match calls.finish(false) {
            Err(ProviderError::Malformed { raw, .. }) => assert_eq!(raw, "{\"k\": "),
            other => panic!("expected malformed, got {other:?}"),
        }
        let mut calls = ToolCalls::default();
        calls.push(0, frag(Some(0), Some("i"), Some("a"), s("{\"k\": ")));
        assert_eq!(calls.finish(true).expect("cut calls are dropped"), vec![]);
    }
}
