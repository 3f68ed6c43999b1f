//! Helpers to drain a provider stream and look at what it yielded.

use agent_runner::provider::{
    ChatRequest, EventStream, Finish, Message, ProviderError, SamplingParams, StreamEvent,
    ToolCall, ToolResult, ToolSpec, Usage,
};
use futures::StreamExt;
use serde_json::json;

/// Everything a stream yielded before it ended, and the error it ended with.
#[derive(Debug)]
pub struct Drained {
    pub events: Vec<StreamEvent>,
    pub error: Option<ProviderError>,
}

/// Reads `stream` to its end. Fails the test if anything follows an error.
pub async fn drain(mut stream: EventStream) -> Drained {
    let mut events = Vec::new();
    let mut error = None;
    while let Some(item) = stream.next().await {
        assert!(error.is_none(), "stream yielded {item:?} after an error");
        match item {
            Ok(event) => events.push(event),
            Err(e) => error = Some(e),
        }
    }
    Drained { events, error }
}

impl Drained {
    /// The text deltas joined.
    pub fn text(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The reasoning deltas joined.
    pub fn reasoning(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ReasoningDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The reasoning blocks.
    pub fn reasoning_blocks(&self) -> Vec<agent_runner::provider::ReasoningBlock> {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ReasoningBlock(b) => Some(b.clone()),
                _ => None,
            })
            .collect()
    }

    /// The tool calls, in order.
    pub fn tool_calls(&self) -> Vec<ToolCall> {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolCall(c) => Some(c.clone()),
                _ => None,
            })
            .collect()
    }

    /// The usage events.
    pub fn usages(&self) -> Vec<Usage> {
        self.events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::Usage(u) => Some(*u),
                _ => None,
            })
            .collect()
    }

    /// The finish, which must be the last event and come without an error.
    pub fn finish(&self) -> Finish {
        assert!(self.error.is_none(), "stream failed: {:?}", self.error);
        match self.events.last() {
            Some(StreamEvent::Finish(f)) => f.clone(),
            other => panic!("last event is not a finish: {other:?}"),
        }
    }

    /// The error; fails the test when the stream finished and holds no
    /// finish event.
    pub fn error(&self) -> &ProviderError {
        assert!(
            !self
                .events
                .iter()
                .any(|e| matches!(e, StreamEvent::Finish(_))),
            "a failed stream must not finish"
        );
        self.error.as_ref().expect("the stream should have failed")
    }
}

/// A one-message request for `model`.
pub fn request(model: &str) -> ChatRequest {
    ChatRequest {
        model: model.into(),
        system: "You are terse.".into(),
        messages: vec![Message::user("What is the weather in Paris?")].into(),
        tools: vec![].into(),
        output_schema: None,
        max_output_tokens: None,
        params: SamplingParams::default(),
        cache: Default::default(),
    }
}

/// The request after `out`: [`request`] for `model`, then the assistant turn
/// `out` yielded (its reasoning and tool calls, no text) and a `get_weather`
/// result `text` for its first call.
pub fn follow_up(model: &str, out: &Drained, text: &str, is_error: bool) -> ChatRequest {
    let calls = out.tool_calls();
    let mut next = request(model);
    let mut messages = next.messages.to_vec();
    messages.push(Message::Assistant {
        reasoning: out.reasoning_blocks(),
        text: String::new(),
        tool_calls: calls.clone(),
    });
    messages.push(Message::ToolResults(vec![ToolResult {
        call_id: calls[0].id.clone(),
        name: "get_weather".into(),
        text: text.into(),
        is_error,
        attachments: Vec::new(),
    }]));
    next.messages = messages.into();
    next
}

/// The weather tool the fixtures call.
pub fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Current weather for a place.".into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "location": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}
            },
            "required": ["location"],
            "additionalProperties": false
        }),
    }
}

/// The time tool of the parallel-call fixtures.
pub fn time_tool() -> ToolSpec {
    ToolSpec {
        name: "get_time".into(),
        description: "Current time in a time zone.".into(),
        input_schema: json!({
            "type": "object",
            "properties": {"tz": {"type": "string"}},
            "required": ["tz"]
        }),
    }
}
