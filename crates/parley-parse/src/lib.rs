//! Parley's parsing library: turns model text into the typed messages the
//! rest of Parley relies on.
//!
//! [`parse`] takes a complete response and a [`Profile`] (which payload
//! markers and schemas, which actions and which tools are allowed) and
//! returns a [`Parsed`]: the cleaned message plus suggested values and
//! actions, at most one custom payload, text-embedded tool calls and
//! diagnostics for everything skipped or repaired. [`StreamParser`] does the
//! same while the text streams in, handing out message deltas that never
//! contain a marker or its JSON. [`partial::PartialJson`] reads a JSON
//! document while it is written and closes it where it is open, so a
//! payload can be shown growing. [`structured::Accumulator`] collects native
//! structured output. The `payload-parser` service serves it all as the
//! `parley.parser.v1.PayloadParser` gRPC service; the gateway and the
//! runner link it directly.
//!
//! Everything is bounded by [`Limits`]: input size, nesting depth, and time
//! (one linear pass, even over adversarial input).

pub mod compiled_cache;
mod convert;
mod delta;
mod direct;
mod elements;
mod engine;
mod engine_state;
mod error;
mod extract;
mod fence;
mod json_value;
mod limits;
mod list_partials;
mod marker;
mod message;
mod model;
pub mod partial;
mod payload_partials;
mod profile;
pub mod profile_cache;
mod profiles;
mod stream;
pub mod structured;
mod swar;
mod tool_calls;
pub mod typed;

pub use compiled_cache::CompiledCache;
pub use delta::TextDelta;
pub use error::{ParseError, PartialError, ProfileError};
pub use limits::{DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, HARD_MAX_BYTES, HARD_MAX_DEPTH, Limits};
pub use model::{
    ActionHandler, Diagnostic, DiagnosticKind, Parsed, PartialPayload, Payload, StreamItem,
    SuggestedAction, SuggestedValue, TextToolCall,
};
pub use profile::{
    PayloadSpec, Profile, ProfileSpec, SUGGESTED_ACTIONS_MARKER, SUGGESTED_VALUES_MARKER,
};
pub use profile_cache::ProfileCache;
pub use profiles::Profiles;
pub use stream::StreamParser;

/// Parses a complete response.
///
/// Fails only when `text` is larger than `limits.max_bytes`; malformed
/// elements become diagnostics.
pub fn parse(text: &str, profile: &Profile, limits: &Limits) -> Result<Parsed, ParseError> {
    let limit = limits.effective_max_bytes();
    if text.len() > limit {
        return Err(ParseError::TooLarge {
            size: text.len(),
            limit,
        });
    }
    let mut engine = engine::Engine::new(*limits, false);
    // The message is the text less what is removed: one allocation (two
    // for a message longer than `SMALL_MESSAGE`) instead of a string of
    // doublings.
    engine.expect_message(text.len());
    engine.run(text, profile, true);
    Ok(engine.into_parsed())
}
