//! What the JSON stream decoders share around their own event mapping.
//!
//! Every model API sends one JSON document per server-sent event. A
//! [`JsonDecoder`] maps one document; the [`Decoder`] of every
//! `JsonDecoder` does the rest once: it trims the data, ends the stream at
//! the protocol's end marker (`[DONE]`), skips blank keep-alives, and parses
//! the document (borrowing from the event's data where the protocol's chunk
//! type does), naming the provider when the data is not JSON.
//!
//! [`Answer`] is what a decoder learns about the answer as a whole (its id,
//! its model, how many tool calls it yielded) and pushes its ending: the
//! usage and the [`Finish`], with an end of turn after tool calls counted as
//! [`FinishReason::ToolUse`]. [`push_reasoning`] yields the reasoning
//! gathered over an answer as one block.

use serde::Deserialize;

use crate::provider::{
    Finish, FinishReason, ProviderError, ReasoningBlock, StreamEvent, Usage,
    sse::{Decoder, Flow, SseEvent, json_data},
};

/// What one JSON document of the stream leads to.
pub type Step = Result<Flow, ProviderError>;

/// One event of a JSON stream, for errors and for protocols that name their
/// events.
#[derive(Debug, Clone, Copy)]
pub struct JsonEvent<'a> {
    /// The `event:` field (`message` when the server sent none).
    pub name: &'a str,
    /// The `data:` field, trimmed: the raw text of the document.
    pub data: &'a str,
}

/// A provider's stream protocol, one JSON document at a time.
pub trait JsonDecoder: Send + 'static {
    /// The provider named in the error for data that is not JSON.
    const PROVIDER: &'static str;

    /// The data of the event that ends the stream, when the protocol has one
    /// (`[DONE]`); it is not JSON.
    const END_MARKER: Option<&'static str> = None;

    /// One event's document, borrowed from the event's data where it can be.
    type Chunk<'a>: Deserialize<'a>;

    /// Handles one document, pushing the events it yields onto `out`.
    fn on_chunk(
        &mut self,
        chunk: Self::Chunk<'_>,
        event: JsonEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Step;

    /// The end marker arrived: push the final events, or fail. By default
    /// the same as a clean end of the body.
    fn on_end_marker(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        self.on_close(out)
    }

    /// The body ended cleanly before the stream's end: push the final
    /// events, or fail with [`ProviderError::Truncated`].
    fn on_close(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError>;
}

impl<D: JsonDecoder> Decoder for D {
    fn on_event(&mut self, event: &SseEvent, out: &mut Vec<StreamEvent>) -> Step {
        let data = event.data.trim();
        if D::END_MARKER == Some(data) {
            self.on_end_marker(out)?;
            return Ok(Flow::Done);
        }
        let Some(chunk) = json_data::<D::Chunk<'_>>(D::PROVIDER, data)? else {
            return Ok(Flow::Continue);
        };
        let event = JsonEvent {
            name: &event.event,
            data,
        };
        self.on_chunk(chunk, event, out)
    }

    fn on_end(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        self.on_close(out)
    }
}

/// What a decoder learns about the answer as a whole.
#[derive(Debug, Default)]
pub struct Answer {
    /// The provider's response id, when given.
    pub response_id: Option<String>,
    /// The model the provider says answered, when given.
    pub response_model: Option<String>,
    /// How many tool calls the answer yielded.
    pub tool_calls: usize,
}

impl Answer {
    /// Pushes `usage` (when the provider reported any), then the finish:
    /// `reason`, or [`FinishReason::ToolUse`] for an end of turn after tool
    /// calls, with the provider's own value `raw`.
    pub fn finish(
        &self,
        usage: Option<Usage>,
        raw: String,
        reason: FinishReason,
        out: &mut Vec<StreamEvent>,
    ) {
        if let Some(usage) = usage {
            out.push(StreamEvent::Usage(usage));
        }
        let reason = if reason == FinishReason::EndTurn && self.tool_calls > 0 {
            FinishReason::ToolUse
        } else {
            reason
        };
        out.push(StreamEvent::Finish(Finish {
            reason,
            raw_reason: raw,
            response_id: self.response_id.clone(),
            response_model: self.response_model.clone(),
        }));
    }
}

/// Pushes the reasoning gathered over an answer (`text`, emptied) as one
/// unsigned [`ReasoningBlock`], when there is any.
pub fn push_reasoning(text: &mut String, out: &mut Vec<StreamEvent>) {
    if !text.is_empty() {
        out.push(StreamEvent::ReasoningBlock(ReasoningBlock {
            text: std::mem::take(text),
            signature: None,
            redacted: None,
        }));
    }
}
