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
//!
//! # Layout
//!
//! - `syntax/`: the matchers for markers and code fences;
//! - `json/`: reading JSON text (whole values, elements in free text);
//! - `profile/`: profiles, compiled ([`Profile`]), named ([`Profiles`]) and
//!   kept by content ([`ProfileCache`]);
//! - `elements/`: typed elements read from their JSON (suggestions,
//!   payloads, text tool calls);
//! - `partial/`: values so far ([`partial::PartialJson`], a stream's partial
//!   lists and payloads);
//! - `scan/`: the one pass over the text that `parse` and [`StreamParser`]
//!   share;
//! - `model/` and `proto/`: the results, and their `parley.parser.v1` form.

pub mod cache;
mod elements;
mod error;
mod json;
mod limits;
mod model;
pub mod partial;
pub mod profile;
mod proto;
mod scan;
mod stream;
pub mod structured;
mod syntax;

pub use cache::CompiledCache;
pub use error::{ParseError, PartialError, ProfileError};
pub use limits::{DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, HARD_MAX_BYTES, HARD_MAX_DEPTH, Limits};
pub use model::{
    ActionHandler, Diagnostic, DiagnosticKind, Parsed, PartialPayload, Payload, StreamItem,
    SuggestedAction, SuggestedValue, TextToolCall, delta::TextDelta,
};
pub use profile::{
    PayloadSpec, Profile, ProfileCache, ProfileSpec, Profiles, SUGGESTED_ACTIONS_MARKER,
    SUGGESTED_VALUES_MARKER,
};
pub use proto::typed;
pub use stream::StreamParser;

/// Whitespace as the parser reads it: the four ASCII bytes JSON and the
/// message trimming know (a marker ends at none of the others).
pub(crate) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

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
    let mut engine = scan::Engine::new(*limits, false);
    // The message is the text less what is removed: one allocation (two
    // for a message longer than `SMALL_MESSAGE`) instead of a string of
    // doublings.
    engine.expect_message(text.len());
    engine.run(text, profile, true);
    Ok(engine.into_parsed())
}
