//! The script file format of the scripted provider, and how a request picks
//! its turn.
//!
//! A script is TOML. Each `[[turns]]` entry has a `match` (all given
//! conditions must hold) and a list of `[[turns.steps]]`; the first matching
//! turn wins, otherwise `[default]` answers. See `deploy/config/demo-script.toml`
//! for a complete example.
//!
//! ```toml
//! model = "scripted-demo"        # the model name the provider reports by default
//! chunk_chars = 12               # text is streamed in chunks of this many characters
//! chunk_delay = "0s"            # pause between chunks ("15ms")
//! no_structured_output_models = ["scripted-plain"]
//!
//! [[turns]]
//! name = "tracker"
//! match = { contains = "job tracker" }   # also: exact, glob ("*job*"), model, schema = true|false, system
//! [[turns.steps]]
//! text = "Let me check the date."
//! [[turns.steps]]
//! tool_call = { name = "current_time", input = {} }   # ends a model call; the
//! [[turns.steps]]                                      # next call continues here
//! text = "Here is your table."
//!
//! [default]
//! steps = [{ text = "I can help with that." }]
//! ```
//!
//! Steps: `text`, `reasoning`, `tool_call` (`name`, `input`, optional `id`
//! and `provider_data`, a table echoed back with the call like Gemini's
//! thought signature; consecutive calls are parallel calls of one model
//! call), `echo = "tool_results"` (streams, as text, what the last tool
//! results since the user's message told the model: one `NAME: TEXT` line
//! per result, `NAME (error): TEXT` for a failed one; so a test sees what
//! the model saw), `echo = "attachments"` (one line per file the user
//! messages and tool results carried: `NAME (MEDIA_TYPE, N bytes, sha256
//! PREFIX)`, `… from the tool NAME` for a tool's, and each file line a
//! message's text holds in place of a file the model does not take),
//! `echo = "messages"` (`N messages; first: TEXT`: how many messages the
//! model was sent and the first one's text, so a test sees what a history
//! kept), `echo = "system_tail"` (the system prompt's last 200
//! characters), `structured` (a JSON string streamed verbatim, or a
//! TOML value serialised to JSON),
//! `delay` (`"3s"`), `fail` (an HTTP-like error: `status` (absent means a
//! connection error), `message`, `retry_after`, `should_retry`, `times`)
//! and `stream_error` (`kind`, `message`, `retryable`, `times`). A failure
//! before any output of its model call is returned as the call's error, after
//! output as a mid-stream error. `times = N` fails the first N attempts and
//! then lets the step pass (and re-arms it); without `times` it always fails.
//!
//! Durations carry their unit, as in every Parley configuration file.

use std::time::Duration;

use parley_grpc::config::duration;
use serde::Deserialize;
use serde_json::Value;

/// Why a script cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read script {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The TOML does not describe a script.
    #[error("invalid script: {0}")]
    Parse(String),
    /// The script is well-formed but inconsistent.
    #[error("invalid script: {0}")]
    Invalid(String),
}

/// A whole script.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The default model name.
    #[serde(default = "default_model")]
    pub model: String,
    /// Characters per streamed text chunk.
    #[serde(default = "default_chunk_chars")]
    pub chunk_chars: usize,
    /// Pause between two chunks.
    #[serde(default, with = "duration::option")]
    pub chunk_delay: Option<Duration>,
    /// Models that answer a request with a schema as unsupported.
    #[serde(default)]
    pub no_structured_output_models: Vec<String>,
    /// The scripted turns, tried in order.
    #[serde(default)]
    pub turns: Vec<ScriptedTurn>,
    /// The turn used when no other matches.
    pub default: Option<ScriptedTurn>,
}

fn default_model() -> String {
    "scripted-demo".to_owned()
}

fn default_chunk_chars() -> usize {
    12
}

/// One scripted answer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedTurn {
    /// A name, for response ids and error messages.
    #[serde(default)]
    pub name: String,
    /// When this turn answers.
    #[serde(default, rename = "match")]
    pub matcher: Match,
    /// Overrides the script's `chunk_chars`.
    pub chunk_chars: Option<usize>,
    /// Overrides the script's `chunk_delay`.
    #[serde(default, with = "duration::option")]
    pub chunk_delay: Option<Duration>,
    /// What the model does, in order.
    pub steps: Vec<Step>,
}

/// Conditions on the request; all that are given must hold.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Match {
    /// The last user message equals this (both trimmed).
    pub exact: Option<String>,
    /// The last user message contains this (case-insensitive).
    pub contains: Option<String>,
    /// The last user message matches this glob (`*`, `?`; case-insensitive).
    pub glob: Option<String>,
    /// The requested model is this one.
    pub model: Option<String>,
    /// The request has (true) or has not (false) an output schema.
    pub schema: Option<bool>,
    /// The system prompt contains this (case-insensitive): for example
    /// `[accepted]`, what the gateway's payload manifest says of a proposal
    /// the user accepted.
    pub system: Option<String>,
}

/// What a [`Match`] looks at in a request.
#[derive(Debug, Clone, Copy, Default)]
pub struct Seen<'a> {
    /// The last user message.
    pub user: &'a str,
    /// The requested model.
    pub model: &'a str,
    /// Whether the request has an output schema.
    pub has_schema: bool,
    /// The system prompt.
    pub system: &'a str,
}

impl Match {
    /// Whether a request matches.
    pub fn matches(&self, seen: Seen<'_>) -> bool {
        let Seen {
            user,
            model,
            has_schema,
            system,
        } = seen;
        let user = user.trim();
        self.exact.as_ref().is_none_or(|exact| exact.trim() == user)
            && self
                .contains
                .as_ref()
                .is_none_or(|needle| user.to_lowercase().contains(&needle.to_lowercase()))
            && self
                .glob
                .as_ref()
                .is_none_or(|pattern| glob_match(&pattern.to_lowercase(), &user.to_lowercase()))
            && self.model.as_ref().is_none_or(|wanted| wanted == model)
            && self.schema.is_none_or(|wanted| wanted == has_schema)
            && self
                .system
                .as_ref()
                .is_none_or(|needle| system.to_lowercase().contains(&needle.to_lowercase()))
    }
}

/// One thing the scripted model does.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Answer text, streamed in chunks.
    Text(String),
    /// Reasoning, streamed in chunks and kept as a block.
    Reasoning(String),
    /// A tool call; the model call ends after a run of these.
    ToolCall(ToolCallStep),
    /// Streams what the request carries, as text.
    Echo(Echo),
    /// A structured answer: a JSON string, or a value serialised to JSON.
    Structured(StructuredBody),
    /// A pause.
    Delay(#[serde(with = "duration")] Duration),
    /// An HTTP-like failure.
    Fail(FailStep),
    /// An error object inside the stream.
    StreamError(StreamErrorStep),
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallStep {
    /// The tool name.
    pub name: String,
    /// The arguments (an object).
    #[serde(default = "empty_object")]
    pub input: Value,
    /// The call id; synthesized when absent.
    pub id: Option<String>,
    /// Data the provider wants echoed back with the call (a table).
    pub provider_data: Option<Value>,
}

/// What an `echo` step streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Echo {
    /// The request's last tool results: `NAME: TEXT` a line (`NAME (error):
    /// TEXT` for a failed call); nothing when it has none.
    ToolResults,
    /// The files the model was given: one line per file of every user
    /// message and tool result, oldest first, `NAME (MEDIA_TYPE, N bytes,
    /// sha256 PREFIX)` (the first 12 hex digits; a tool's file ends with
    /// `from the tool NAME`), or `no files`; a user's file described
    /// instead reads as the line in its message's text does.
    Attachments,
    /// What the model was sent: `N messages; first: TEXT` (the first
    /// message's text, its first 80 characters), so a test sees what a
    /// history kept.
    Messages,
    /// The end of the system prompt: its last 200 characters (where a
    /// conversation's summary goes).
    SystemTail,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// The text of a structured answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum StructuredBody {
    /// Streamed verbatim (may be invalid JSON, to test the raw fallback).
    Raw(String),
    /// Serialised to compact JSON.
    Value(Value),
}

impl StructuredBody {
    /// The JSON text the model streams.
    pub fn text(&self) -> String {
        match self {
            Self::Raw(text) => text.clone(),
            Self::Value(value) => value.to_string(),
        }
    }
}

/// An HTTP-like failure.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailStep {
    /// The HTTP status; absent means a connection error.
    pub status: Option<u16>,
    /// The error body or message.
    #[serde(default)]
    pub message: String,
    /// The provider's requested delay.
    #[serde(default, with = "duration::option")]
    pub retry_after: Option<Duration>,
    /// `x-should-retry`, when set.
    pub should_retry: Option<bool>,
    /// Fail this many attempts, then pass; absent fails every attempt.
    pub times: Option<u32>,
}

/// An error object inside the stream.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamErrorStep {
    /// The provider's error type, for example `overloaded_error`.
    #[serde(default = "default_stream_error_kind")]
    pub kind: String,
    /// The message.
    #[serde(default)]
    pub message: String,
    /// Whether the error is transient.
    #[serde(default = "yes")]
    pub retryable: bool,
    /// Fail this many attempts, then pass; absent fails every attempt.
    pub times: Option<u32>,
}

fn default_stream_error_kind() -> String {
    "api_error".to_owned()
}

fn yes() -> bool {
    true
}

impl Script {
    /// Parses and checks a TOML script.
    pub fn from_toml(text: &str) -> Result<Self, ScriptError> {
        let script: Script =
            toml::from_str(text).map_err(|error| ScriptError::Parse(error.to_string()))?;
        script.check()?;
        Ok(script)
    }

    /// Reads, parses and checks a script file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_toml(&text)
    }

    /// The pause between two chunks of `turn`.
    pub fn chunk_delay(&self, turn: &ScriptedTurn) -> Duration {
        turn.chunk_delay.or(self.chunk_delay).unwrap_or_default()
    }

    fn check(&self) -> Result<(), ScriptError> {
        if self.chunk_chars == 0 {
            return Err(ScriptError::Invalid(
                "chunk_chars must be at least 1".into(),
            ));
        }
        let named = self
            .turns
            .iter()
            .enumerate()
            .map(|(i, turn)| (format!("turns[{i}]"), turn));
        let all = named.chain(self.default.iter().map(|turn| ("default".to_owned(), turn)));
        for (label, turn) in all {
            if turn.chunk_chars == Some(0) {
                return Err(ScriptError::Invalid(format!(
                    "{label}: chunk_chars must be at least 1"
                )));
            }
            if turn.steps.is_empty() {
                return Err(ScriptError::Invalid(format!(
                    "{label}: a turn needs at least one step"
                )));
            }
            for step in &turn.steps {
                if let Step::ToolCall(call) = step {
                    if call.name.is_empty() {
                        return Err(ScriptError::Invalid(format!(
                            "{label}: a tool call needs a name"
                        )));
                    }
                    if !call.input.is_object() {
                        return Err(ScriptError::Invalid(format!(
                            "{label}: the input of tool call `{}` must be a table",
                            call.name
                        )));
                    }
                    if call
                        .provider_data
                        .as_ref()
                        .is_some_and(|data| !data.is_object())
                    {
                        return Err(ScriptError::Invalid(format!(
                            "{label}: the provider_data of tool call `{}` must be a table",
                            call.name
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// The turn answering this request, if any does.
    pub fn select(&self, seen: Seen<'_>) -> Option<Selected> {
        if let Some(index) = self
            .turns
            .iter()
            .position(|turn| turn.matcher.matches(seen))
        {
            return Some(Selected::Turn(index));
        }
        self.default.as_ref().map(|_| Selected::Default)
    }

    /// The selected turn.
    pub fn turn(&self, selected: Selected) -> Option<&ScriptedTurn> {
        match selected {
            Selected::Turn(index) => self.turns.get(index),
            Selected::Default => self.default.as_ref(),
        }
    }
}

/// Which turn of a script answers a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Selected {
    /// `turns[i]`.
    Turn(usize),
    /// `[default]`.
    Default,
}

impl ScriptedTurn {
    /// The steps split into model calls: each call ends after a run of tool calls.
    pub fn segments(&self) -> Vec<&[Step]> {
        let mut segments = Vec::new();
        let mut start = 0;
        for (i, step) in self.steps.iter().enumerate() {
            let is_call = matches!(step, Step::ToolCall(_));
            let next_is_call = matches!(self.steps.get(i + 1), Some(Step::ToolCall(_)));
            if is_call && !next_is_call {
                segments.push(&self.steps[start..=i]);
                start = i + 1;
            }
        }
        if start < self.steps.len() {
            segments.push(&self.steps[start..]);
        }
        segments
    }
}

/// A glob with `*` (any run of characters) and `?` (one character).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((star_p, star_t)) = star {
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_carry_their_unit() {
        let script = Script::from_toml(
            r#"
            chunk_delay = "15ms"
            [[turns]]
            chunk_delay = "40ms"
            steps = [{ delay = "2s" }]
            [default]
            steps = [{ fail = { status = 503, retry_after = "3s" } }]
            "#,
        )
        .expect("valid");
        assert_eq!(
            script.chunk_delay(&script.turns[0]),
            Duration::from_millis(40)
        );
        let default = script.default.as_ref().expect("default");
        assert_eq!(script.chunk_delay(default), Duration::from_millis(15));
        assert_eq!(
            script.turns[0].steps[..],
            [Step::Delay(Duration::from_secs(2))]
        );
        let Step::Fail(fail) = &default.steps[0] else {
            panic!("a fail step")
        };
        assert_eq!(fail.retry_after, Some(Duration::from_secs(3)));

        let bare = Script::from_toml("[default]\nsteps = [{ delay = 5 }]").expect_err("no unit");
        assert!(bare.to_string().contains("has no unit"), "{bare}");
        let old = Script::from_toml("[default]\nsteps = [{ delay_ms = 5 }]")
            .expect_err("durations carry their unit");
        assert!(old.to_string().contains("delay_ms"), "{old}");
        Script::from_toml(super::super::EMBEDDED_DEMO_SCRIPT).expect("demo");
    }

    #[test]
    fn globs_match_like_shells() {
        assert!(glob_match("*job*tracker*", "create a job tracker please"));
        assert!(glob_match("h?llo", "hello"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("h?llo", "hllo"));
        assert!(!glob_match("*job", "job tracker"));
        assert!(glob_match("a*b*c", "axxbyyc"));
    }

    #[test]
    fn all_given_conditions_must_hold() {
        let matcher = Match {
            contains: Some("Tracker".into()),
            schema: Some(false),
            ..Match::default()
        };
        let seen = |user, model, has_schema| Seen {
            user,
            model,
            has_schema,
            system: "## PAYLOAD MANIFEST\n- turn 0, schema_proposal: … [Accepted]",
        };
        assert!(matcher.matches(seen("create a job tracker", "m", false)));
        assert!(!matcher.matches(seen("create a job tracker", "m", true)));
        assert!(!matcher.matches(seen("hello", "m", false)));
        let exact = Match {
            exact: Some("hi".into()),
            model: Some("a".into()),
            ..Match::default()
        };
        assert!(exact.matches(seen("  hi ", "a", false)));
        assert!(!exact.matches(seen("hi", "b", false)));
        let decided = Match {
            system: Some("[accepted]".into()),
            ..Match::default()
        };
        assert!(decided.matches(seen("what now?", "m", false)));
        assert!(!decided.matches(Seen {
            system: "",
            ..seen("what now?", "m", false)
        }));
    }

    #[test]
    fn segments_end_after_runs_of_tool_calls() {
        let script = Script::from_toml(
            r#"
            [[turns]]
            steps = [
              { text = "a" },
              { tool_call = { name = "x" } },
              { tool_call = { name = "y" } },
              { text = "b" },
              { tool_call = { name = "z" } },
            ]
            "#,
        )
        .expect("should succeed");
        let segments = script.turns[0].segments();
        assert_eq!(segments.len(), 2);
        assert_eq!(segments[0].len(), 3);
        assert_eq!(segments[1].len(), 2);
    }

    #[test]
    fn rejects_inconsistent_scripts() {
        assert!(Script::from_toml("chunk_chars = 0").is_err());
        assert!(Script::from_toml("[[turns]]\nsteps = []").is_err());
        assert!(
            Script::from_toml("[[turns]]\nsteps = [{ tool_call = { name = \"x\", input = 3 } }]")
                .is_err()
        );
        assert!(Script::from_toml("[[turns]]\nsteps = [{ shell = \"rm -rf /\" }]").is_err());
    }

    #[test]
    fn structured_bodies_accept_text_or_values() {
        let script = Script::from_toml(
            r#"
            [[turns]]
            steps = [{ structured = '{"a": 1' }, { structured = { a = 1 } }]
            "#,
        )
        .expect("should succeed");
        let texts: Vec<String> = script.turns[0]
            .steps
            .iter()
            .filter_map(|step| match step {
                Step::Structured(body) => Some(body.text()),
                _ => None,
            })
            .collect();
        assert_eq!(
            texts,
            vec![r#"{"a": 1"#.to_owned(), r#"{"a":1}"#.to_owned()]
        );
    }
}
