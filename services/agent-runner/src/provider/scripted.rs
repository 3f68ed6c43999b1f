//! The scripted provider: deterministic turns from a script file.
//!
//! It is the runner's offline default and the app teams' test double: the
//! same script always produces the same stream, so a UI or an integration
//! can be tested without a model. It implements [`Provider`] like the HTTP
//! adapters, so the loop, retries, timeouts and cancellation behave exactly
//! as they do against a real provider. The file format is described in
//! [`script`]; the turn is chosen from the last user message, and the model
//! call within the turn from the number of tool rounds since that message,
//! so a scripted turn can call tools and continue after their results.

pub mod script;

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::stream;

use self::script::{Echo, Selected, Step};
pub use self::script::{Script, ScriptError};
use super::{
    Attachment, ChatRequest, EventStream, Finish, FinishReason, Message, Provider, ProviderError,
    ReasoningBlock, StreamEvent, ToolCall, Usage,
};

/// The demo script compiled into the binary, used when no file is found.
pub const EMBEDDED_DEMO_SCRIPT: &str = include_str!("../../../../deploy/config/demo-script.toml");

/// A provider that plays a [`Script`].
#[derive(Debug, Clone)]
pub struct ScriptedProvider {
    name: String,
    script: Arc<Script>,
    /// How often each `times`-limited failure step has failed in a row.
    failures: Arc<Mutex<HashMap<FailureKey, u32>>>,
}

/// Identifies one failure step of one request: (turn, segment, step, user text).
type FailureKey = (Selected, usize, usize, String);

/// One thing the stream does next.
#[derive(Debug)]
enum Action {
    Emit(StreamEvent),
    Sleep(Duration),
    Fail(ProviderError),
}

impl ScriptedProvider {
    /// A provider named `name` playing `script`.
    pub fn new(name: impl Into<String>, script: Script) -> Self {
        Self {
            name: name.into(),
            script: Arc::new(script),
            failures: Arc::default(),
        }
    }

    /// The script's default model name.
    pub fn default_model(&self) -> &str {
        &self.script.model
    }

    /// Turns the selected segment into the actions of one model call.
    fn plan(&self, request: &ChatRequest) -> Result<VecDeque<Action>, ProviderError> {
        let user = last_user_text(&request.messages);
        let has_schema = request.output_schema.is_some();
        let turn_index = self
            .script
            .select(script::Seen {
                user,
                model: &request.model,
                has_schema,
                system: &request.system,
            })
            .ok_or_else(|| {
                ProviderError::Config(format!(
                    "no scripted turn matches `{}` and the script has no default",
                    preview(user)
                ))
            })?;
        let Some(turn) = self.script.turn(turn_index) else {
            return Err(ProviderError::Config(
                "the selected scripted turn does not exist".into(),
            ));
        };
        let segments = turn.segments();
        let position = tool_rounds_since_user(&request.messages);
        let chunking = Chunking {
            chars: turn.chunk_chars.unwrap_or(self.script.chunk_chars).max(1),
            delay: self.script.chunk_delay(turn),
        };

        let mut actions = VecDeque::new();
        let mut output_chars = 0usize;
        let mut calls = 0usize;
        let steps = segments.get(position).copied().unwrap_or(&[]);
        for (step_index, step) in steps.iter().enumerate() {
            match step {
                Step::Text(text) => {
                    output_chars += chunking.push(&mut actions, text, StreamEvent::TextDelta);
                }
                Step::Structured(body) => {
                    let text = body.text();
                    output_chars += chunking.push(&mut actions, &text, StreamEvent::TextDelta);
                }
                Step::Reasoning(text) => {
                    output_chars += chunking.push(&mut actions, text, StreamEvent::ReasoningDelta);
                    actions.push_back(Action::Emit(StreamEvent::ReasoningBlock(ReasoningBlock {
                        text: text.clone(),
                        signature: Some(format!("scripted-{}", text.len())),
                        redacted: None,
                    })));
                }
                Step::ToolCall(call) => {
                    calls += 1;
                    let id = call
                        .id
                        .clone()
                        .unwrap_or_else(|| format!("call_{position}_{calls}"));
                    actions.push_back(Action::Emit(StreamEvent::ToolCall(ToolCall {
                        id,
                        name: call.name.clone(),
                        input: call.input.clone(),
                        provider_data: call.provider_data.clone(),
                    })));
                }
                Step::Echo(Echo::ToolResults) => {
                    let text = last_tool_results(&request.messages);
                    output_chars += chunking.push(&mut actions, &text, StreamEvent::TextDelta);
                }
                Step::Echo(Echo::SystemTail) => {
                    let chars = request.system.chars().count();
                    let text: String = request
                        .system
                        .chars()
                        .skip(chars.saturating_sub(200))
                        .collect();
                    output_chars += chunking.push(&mut actions, &text, StreamEvent::TextDelta);
                }
                Step::Echo(Echo::Messages) => {
                    let text = messages_seen(&request.messages);
                    output_chars += chunking.push(&mut actions, &text, StreamEvent::TextDelta);
                }
                Step::Echo(Echo::Attachments) => {
                    let text = attachments_seen(&request.messages);
                    output_chars += chunking.push(&mut actions, &text, StreamEvent::TextDelta);
                }
                Step::Delay(pause) => actions.push_back(Action::Sleep(*pause)),
                Step::Fail(fail) => {
                    let key = (turn_index, position, step_index, user.to_owned());
                    if self.should_fail(key, fail.times) {
                        let error = match fail.status {
                            Some(status) => ProviderError::Http {
                                status,
                                body: fail.message.clone(),
                                retry_after: fail.retry_after,
                                should_retry: fail.should_retry,
                            },
                            None => ProviderError::Connection(fail.message.clone()),
                        };
                        actions.push_back(Action::Fail(error));
                        return Ok(actions);
                    }
                }
                Step::StreamError(fail) => {
                    let key = (turn_index, position, step_index, user.to_owned());
                    if self.should_fail(key, fail.times) {
                        let raw = serde_json::json!({
                            "type": "error",
                            "error": { "type": fail.kind, "message": fail.message },
                        })
                        .to_string();
                        actions.push_back(Action::Fail(ProviderError::StreamError {
                            kind: fail.kind.clone(),
                            message: fail.message.clone(),
                            retryable: fail.retryable,
                            raw,
                        }));
                        return Ok(actions);
                    }
                }
            }
        }
        actions.push_back(Action::Emit(StreamEvent::Usage(Usage {
            input_tokens: tokens(request_chars(request)),
            output_tokens: tokens(output_chars),
            ..Usage::default()
        })));
        let (reason, raw) = if calls > 0 {
            (FinishReason::ToolUse, "tool_use")
        } else {
            (FinishReason::EndTurn, "end_turn")
        };
        let turn_name = if turn.name.is_empty() {
            "default"
        } else {
            turn.name.as_str()
        };
        actions.push_back(Action::Emit(StreamEvent::Finish(Finish {
            reason,
            raw_reason: raw.to_owned(),
            response_id: Some(format!("scripted-{turn_name}-{position}")),
            response_model: Some(request.model.clone()),
        })));
        Ok(actions)
    }

    /// Counts a failure step; true while it has failed fewer than `times`.
    fn should_fail(&self, key: FailureKey, times: Option<u32>) -> bool {
        let Some(times) = times else { return true };
        let Ok(mut failures) = self.failures.lock() else {
            return true;
        };
        let count = failures.entry(key.clone()).or_insert(0);
        if *count < times {
            *count += 1;
            true
        } else {
            failures.remove(&key);
            false
        }
    }
}

#[async_trait::async_trait]
impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn system(&self) -> &'static str {
        "parley.scripted"
    }

    fn supports_structured_output(&self, model: &str) -> bool {
        !self
            .script
            .no_structured_output_models
            .iter()
            .any(|m| m == model)
    }

    async fn stream(&self, request: ChatRequest) -> Result<EventStream, ProviderError> {
        if request.output_schema.is_some() && !self.supports_structured_output(&request.model) {
            return Err(ProviderError::Unsupported(format!(
                "model `{}` does not support structured output",
                request.model
            )));
        }
        let mut actions = self.plan(&request)?;
        // Failures before any output are the call's error, like an HTTP status.
        loop {
            match actions.front() {
                Some(Action::Sleep(duration)) => {
                    let duration = *duration;
                    actions.pop_front();
                    tokio::time::sleep(duration).await;
                }
                Some(Action::Fail(_)) => {
                    if let Some(Action::Fail(error)) = actions.pop_front() {
                        return Err(error);
                    }
                }
                _ => break,
            }
        }
        Ok(Box::pin(stream::unfold(
            actions,
            |mut actions| async move {
                loop {
                    match actions.pop_front()? {
                        Action::Sleep(duration) => tokio::time::sleep(duration).await,
                        Action::Emit(event) => return Some((Ok(event), actions)),
                        Action::Fail(error) => {
                            actions.clear();
                            return Some((Err(error), actions));
                        }
                    }
                }
            },
        )))
    }
}

/// How a turn's text is streamed: pieces of `chars` characters, `delay`
/// apart.
struct Chunking {
    chars: usize,
    delay: Duration,
}

impl Chunking {
    /// Queues `text` as events made by `make`, one a piece; returns its
    /// length in characters.
    fn push(
        &self,
        actions: &mut VecDeque<Action>,
        text: &str,
        make: fn(String) -> StreamEvent,
    ) -> usize {
        let chars: Vec<char> = text.chars().collect();
        for (i, piece) in chars.chunks(self.chars).enumerate() {
            if i > 0 && !self.delay.is_zero() {
                actions.push_back(Action::Sleep(self.delay));
            }
            actions.push_back(Action::Emit(make(piece.iter().collect())));
        }
        chars.len()
    }
}

/// The text of the last user message.
fn last_user_text(messages: &[Message]) -> &str {
    messages
        .iter()
        .rev()
        .find_map(|message| match message {
            Message::User { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .unwrap_or("")
}

/// How many messages the model was sent and the first one's text (see
/// [`Echo::Messages`]).
fn messages_seen(messages: &[Message]) -> String {
    let first = match messages.first() {
        Some(Message::User { text, .. } | Message::Assistant { text, .. }) => text.as_str(),
        Some(Message::ToolResults(results)) => results.first().map_or("", |r| r.text.as_str()),
        None => "",
    };
    let first: String = first.chars().take(80).collect();
    format!("{} messages; first: {first}", messages.len())
}

/// The files the user messages gave the model, a line each (see
/// [`Echo::Attachments`]).
fn attachments_seen(messages: &[Message]) -> String {
    use sha2::Digest as _;
    let line = |file: &Attachment| {
        let digest = format!("{:x}", sha2::Sha256::digest(&file.data));
        format!(
            "{} ({}, {} bytes, sha256 {})",
            file.name,
            file.media_type,
            file.data.len(),
            &digest[..12]
        )
    };
    let mut lines = Vec::new();
    for message in messages {
        let (text, attachments) = match message {
            Message::User { text, attachments } => (text, attachments),
            Message::ToolResults(results) => {
                for result in results {
                    lines.extend(
                        result
                            .attachments
                            .iter()
                            .map(|file| format!("{} from the tool {}", line(file), result.name)),
                    );
                }
                continue;
            }
            Message::Assistant { .. } => continue,
        };
        lines.extend(attachments.iter().map(|file| line(file)));
        lines.extend(
            text.lines()
                .filter(|line| {
                    line.starts_with("[file ") && line.ends_with("not shown to this model]")
                })
                .map(str::to_owned),
        );
    }
    if lines.is_empty() {
        "no files".into()
    } else {
        lines.join("\n")
    }
}

/// What the last tool results since the last user message told the model:
/// `NAME: TEXT` a line, `NAME (error): TEXT` for a failed call; empty
/// without any.
fn last_tool_results(messages: &[Message]) -> String {
    let last = messages
        .iter()
        .rev()
        .take_while(|message| !matches!(message, Message::User { .. }))
        .find_map(|message| match message {
            Message::ToolResults(results) => Some(results),
            _ => None,
        });
    let Some(results) = last else {
        return String::new();
    };
    results
        .iter()
        .map(|result| {
            let error = if result.is_error { " (error)" } else { "" };
            format!("{}{error}: {}", result.name, result.text)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// How many tool rounds happened since the last user message.
fn tool_rounds_since_user(messages: &[Message]) -> usize {
    messages
        .iter()
        .rev()
        .take_while(|message| !matches!(message, Message::User { .. }))
        .filter(|message| matches!(message, Message::ToolResults(_)))
        .count()
}

fn request_chars(request: &ChatRequest) -> usize {
    let messages: usize = request
        .messages
        .iter()
        .map(|message| match message {
            Message::User { text, .. } => text.len(),
            Message::Assistant {
                text, tool_calls, ..
            } => {
                text.len()
                    + tool_calls
                        .iter()
                        .map(|c| c.input.to_string().len())
                        .sum::<usize>()
            }
            Message::ToolResults(results) => results.iter().map(|r| r.text.len()).sum(),
        })
        .sum();
    request.system.len() + messages
}

/// A rough token count: four characters per token, rounded up.
fn tokens(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}

fn preview(text: &str) -> String {
    let mut preview: String = text.chars().take(60).collect();
    if preview.len() < text.len() {
        preview.push('…');
    }
    preview
}

#[cfg(test)]
mod tests;
