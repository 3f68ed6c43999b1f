//! Structured output accumulation (docs/output-format.md#structured-output).
//!
//! A provider's native structured-output mode streams JSON in chunks. The
//! [`Accumulator`] collects them; on flush it parses the text once. When it
//! does not parse (a response cut short by a token limit, say) the raw text
//! is kept and flagged rather than lost; when it parses, it is validated
//! against the request's schema.

use parley_proto::parser::v1 as pb;
use serde_json::Value;

use parley_proto::json::to_value;

use crate::{json::extract::exceeds_depth, limits::Limits};

/// Collects structured-output chunks.
#[derive(Debug)]
pub struct Accumulator {
    raw: String,
    limits: Limits,
    overflowed: bool,
}

impl Default for Accumulator {
    fn default() -> Self {
        Self::new()
    }
}

/// The accumulated result.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The parsed value; `None` when the text does not parse.
    pub value: Option<Value>,
    /// The raw accumulated text, always kept (up to the byte limit).
    pub raw: String,
    /// True when `raw` parsed and satisfied the schema (if one was given).
    pub valid: bool,
    /// Why it is not valid.
    pub error: Option<String>,
}

impl Accumulator {
    /// An accumulator with the default limits.
    pub fn new() -> Self {
        Self::with_limits(Limits::default())
    }

    /// An accumulator that keeps at most `limits.max_bytes` bytes and
    /// accepts nesting up to `limits.max_depth`.
    pub fn with_limits(limits: Limits) -> Self {
        Self {
            raw: String::new(),
            limits,
            overflowed: false,
        }
    }

    /// Appends a chunk. Chunks beyond the byte limit are dropped and the
    /// outcome reports the overflow.
    pub fn push(&mut self, chunk: &str) {
        if self.overflowed {
            return;
        }
        if self.raw.len() + chunk.len() > self.limits.effective_max_bytes() {
            self.overflowed = true;
            return;
        }
        self.raw.push_str(chunk);
    }

    /// Parses what was accumulated and validates it against `schema`.
    pub fn finish(self, schema: Option<&Value>) -> Outcome {
        let raw = self.raw;
        let invalid = |raw: String, value: Option<Value>, error: String| Outcome {
            value,
            raw,
            valid: false,
            error: Some(error),
        };
        if self.overflowed {
            let error = format!(
                "structured output exceeds {} bytes",
                self.limits.effective_max_bytes()
            );
            return invalid(raw, None, error);
        }
        let depth = self.limits.effective_depth();
        if exceeds_depth(raw.as_bytes(), depth) {
            return invalid(
                raw,
                None,
                format!("structured output nests deeper than {depth} levels"),
            );
        }
        let value = match serde_json::from_str::<Value>(&raw) {
            Ok(value) => value,
            Err(error) => return invalid(raw, None, format!("not valid JSON: {error}")),
        };
        let Some(schema) = schema else {
            return Outcome {
                value: Some(value),
                raw,
                valid: true,
                error: None,
            };
        };
        let validator = match jsonschema::validator_for(schema) {
            Ok(validator) => validator,
            Err(error) => return invalid(raw, Some(value), format!("invalid schema: {error}")),
        };
        if let Err(error) = validator.validate(&value) {
            let error = format!("does not satisfy the schema: {error}");
            return invalid(raw, Some(value), error);
        }
        Outcome {
            value: Some(value),
            raw,
            valid: true,
            error: None,
        }
    }
}

impl Outcome {
    /// The value, or (the fallback when it does not parse) the raw text as a
    /// JSON string.
    pub fn into_value(self) -> Value {
        self.value.unwrap_or(Value::String(self.raw))
    }

    /// The `StructuredResult` message.
    pub fn into_proto(self) -> pb::StructuredResult {
        pb::StructuredResult {
            value: self.value.as_ref().map(to_value),
            raw: self.raw,
            valid: self.valid,
            error: self.error.unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn accumulate(chunks: &[&str], schema: Option<&Value>) -> Outcome {
        let mut acc = Accumulator::new();
        for chunk in chunks {
            acc.push(chunk);
        }
        acc.finish(schema)
    }

    #[test]
    fn chunks_parse_on_flush_and_validate() {
        let schema = json!({"type": "object", "required": ["name"]});
        let ok = accumulate(&["{\"name", "\": \"", "Alice\"}"], Some(&schema));
        assert_eq!(ok.value, Some(json!({"name": "Alice"})));
        assert!(ok.valid);
        let wrong = accumulate(&["{\"nom\": 1}"], Some(&schema));
        assert!(!wrong.valid);
        assert_eq!(wrong.value, Some(json!({"nom": 1})));
        assert!(wrong.error.as_deref().is_some_and(|e| e.contains("name")));
    }

    #[test]
    fn malformed_json_keeps_the_raw_string() {
        let out = accumulate(&["{\"truncated"], None);
        assert!(!out.valid);
        assert_eq!(out.value, None);
        assert_eq!(
            out.clone().into_value(),
            Value::String("{\"truncated".into())
        );
        let proto = out.into_proto();
        assert!(proto.value.is_none());
        assert_eq!(proto.raw, "{\"truncated");
    }

    #[test]
    fn limits_are_enforced() {
        let mut acc = Accumulator::with_limits(Limits {
            max_bytes: 4,
            max_depth: 2,
        });
        acc.push("[1]");
        acc.push("[2]");
        let out = acc.finish(None);
        assert!(
            out.error
                .as_deref()
                .is_some_and(|e| e.contains("exceeds 4 bytes"))
        );
        assert_eq!(out.raw, "[1]");
        let mut deep = Accumulator::with_limits(Limits {
            max_bytes: 100,
            max_depth: 2,
        });
        deep.push("[[[1]]]");
        assert!(
            deep.finish(None)
                .error
                .as_deref()
                .is_some_and(|e| e.contains("deeper"))
        );
    }
}
