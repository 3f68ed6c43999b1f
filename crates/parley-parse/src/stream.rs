//! Streaming parse: text deltas in, cleaned-message deltas and elements out.
//!
//! [`StreamParser`] runs the same engine as [`crate::parse`] over the text
//! received so far and stops wherever a decision needs more text. It holds
//! back only what could still become a marker, an element that has opened
//! and not closed, and whitespace that may turn out to touch a removed
//! element; everything else is handed out at once. For every split of a text
//! into deltas, the `Text` items concatenate to `finish().message`, and
//! `finish()` equals `parse` of the whole text.
//!
//! # Partial payloads
//!
//! Made [`with_partial_payloads`](StreamParser::with_partial_payloads), the
//! parser also shows each custom payload while it is written: as soon as a
//! payload marker is followed by the `{` of its JSON (fenced or not), a
//! [`StreamItem::PartialPayload`] carries the object so far, closed where
//! it is open by a [`PartialJson`](crate::partial::PartialJson) fed the
//! element's bytes as they arrive. The other items are exactly the same
//! with or without it.
//!
//! - At most one partial per payload per [`push`](StreamParser::push) (or
//!   [`end`](StreamParser::end)), only when the value or its complete paths
//!   changed, after the call's other items.
//! - A payload is identified by `offset`, its marker's byte offset; its
//!   revisions count 1, 2, 3... Each partial's `data` extends the one
//!   before (members and items only added, only the string being written
//!   grows), and a value at a complete path never changes.
//! - A payload that closes valid gets a last partial that shows it whole
//!   (`complete_paths == [""]`, `data` equal to the `CustomPayload`).
//! - A payload shown and then found wanting is withdrawn by a partial whose
//!   `data` is `None`, after the diagnostic that says why: when it closes
//!   invalid (`INVALID_JSON`, `SCHEMA_VIOLATION`, `TOO_DEEP`), and at the
//!   end when it never closed (`UNTERMINATED`) or lost to a higher-priority
//!   payload (`DUPLICATE`).
//! - JSON the closer cannot follow although the final parse accepts it (a
//!   key repeated in one object, a comma right after `[` or `{`) stops the
//!   partials growing; the `CustomPayload` and the final result decide.
//!
//! The same parser hands out the suggested values and actions item by
//! item ([`StreamItem::PartialSuggestedValues`],
//! [`StreamItem::PartialSuggestedActions`]): the items closed so far of the
//! first list of each kind, at most one per kind per call and only when
//! there are more, each item checked as the list's items are. A list that
//! closes valid is followed by its whole `SuggestedValues` /
//! `SuggestedActions` item as before; one that fails or never closes gets
//! an empty partial that takes its items down.
//!
//! Feeding costs the bytes of each delta; a partial costs a copy of the
//! value so far (one per payload per call at most).
//!
//! ```
//! use std::sync::Arc;
//!
//! use parley_parse::{Limits, PayloadSpec, Profile, ProfileSpec, StreamItem, StreamParser};
//! use serde_json::{Value, json};
//!
//! let spec = ProfileSpec {
//!     payloads: vec![PayloadSpec {
//!         name: "schema_proposal".into(),
//!         marker: "SCHEMA_PROPOSAL".into(),
//!         schema: None,
//!     }],
//!     ..ProfileSpec::default()
//! };
//! let profile = Arc::new(Profile::new(&spec)?);
//! let mut parser = StreamParser::new(profile, Limits::default()).with_partial_payloads();
//! let mut shown = Vec::new();
//! for delta in [
//!     "Here it is.\n\nSCHEMA_PROPOSAL: {\"mode\": \"upd",
//!     "ate\", \"operations\": [{\"action\": \"remove\", \"column_id\": 7",
//!     "}]}",
//! ] {
//!     for item in parser.push(delta)? {
//!         if let StreamItem::PartialPayload(partial) = item {
//!             let data = partial.data.map(Value::Object);
//!             shown.push((partial.revision, data, partial.complete_paths));
//!         }
//!     }
//! }
//! assert_eq!(
//!     shown,
//!     [
//!         (1, Some(json!({"mode": "upd"})), vec![]),
//!         (
//!             2,
//!             Some(json!({"mode": "update", "operations": [{"action": "remove"}]})),
//!             vec!["/mode".to_owned(), "/operations/0/action".to_owned()],
//!         ),
//!         (
//!             3,
//!             Some(json!({"mode": "update", "operations": [{"action": "remove", "column_id": 7}]})),
//!             vec![String::new()],
//!         ),
//!     ]
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::sync::Arc;

use crate::{
    error::ParseError,
    limits::Limits,
    model::{Parsed, StreamItem},
    profile::Profile,
    scan::Engine,
};

/// Bytes reserved for the text of a stream when it starts; it grows to
/// [`SMALL_TEXT`], then to powers of two. A larger reservation (it was
/// 4 KiB) costs every stream, short or held, a large allocation up front:
/// with glibc's allocator one that consolidates its free lists, about
/// 0.5 µs a stream in the parse bench.
const FIRST_TEXT: usize = 256;
/// What the text grows to when it first outgrows [`FIRST_TEXT`]: the
/// largest block glibc's allocator hands out from its small bins. Doubling
/// from 256 bytes costs a copy at 512 and another at 1 KiB, and any block
/// of 1 KiB or more makes the allocator consolidate its free lists first
/// (the largest single cost of a stream of 16-byte deltas after the
/// payload's copy); most responses fit in this one step.
const SMALL_TEXT: usize = 1000;

/// An incremental parser for one response.
#[derive(Debug)]
pub struct StreamParser {
    profile: Arc<Profile>,
    limits: Limits,
    text: String,
    engine: Engine,
    ended: bool,
}

impl StreamParser {
    /// A parser for one response under `profile` and `limits`.
    pub fn new(profile: Arc<Profile>, limits: Limits) -> Self {
        let first = FIRST_TEXT.min(limits.effective_max_bytes());
        let text = String::with_capacity(first);
        let mut engine = Engine::new(limits, true);
        // The message grows with the text: the same start spares it the
        // smallest doublings.
        engine.reserve_message(first);
        Self {
            profile,
            limits,
            text,
            engine,
            ended: false,
        }
    }

    /// Also hands out [`StreamItem::PartialPayload`]s: the value so far of
    /// each custom payload while its JSON object is being written (see
    /// [`PartialPayload`](crate::PartialPayload) and [`crate::partial`]),
    /// and the suggested values and actions item by item
    /// ([`StreamItem::PartialSuggestedValues`]).
    /// Off by default; the other items are the same either way.
    pub fn with_partial_payloads(mut self) -> Self {
        self.engine.enable_partials();
        self
    }

    /// Takes the next delta; returns what can be handed out now. Fails, and
    /// ignores the delta, when the total would exceed `Limits::max_bytes`.
    /// Deltas after [`StreamParser::end`] are ignored.
    pub fn push(&mut self, delta: &str) -> Result<Vec<StreamItem>, ParseError> {
        let mut items = Vec::new();
        self.push_into(delta, &mut items)?;
        Ok(items)
    }

    /// [`StreamParser::push`] appending to a caller-owned vector, so a
    /// caller that reuses it allocates nothing per delta but the text items.
    pub fn push_into(
        &mut self,
        delta: &str,
        items: &mut Vec<StreamItem>,
    ) -> Result<(), ParseError> {
        if self.ended || delta.is_empty() {
            return Ok(());
        }
        let size = self.text.len() + delta.len();
        let limit = self.limits.effective_max_bytes();
        if size > limit {
            return Err(ParseError::TooLarge { size, limit });
        }
        if size > self.text.capacity() {
            self.grow_text(size, limit);
        }
        self.text.push_str(delta);
        self.engine
            .run_into(&self.text, &self.profile, false, items);
        Ok(())
    }

    /// Room for `size` bytes of text (at most `limit`): [`SMALL_TEXT`]
    /// first, then the usual doubling, kept to powers of two (a 64 KiB text
    /// fits its 64 KiB block). Out of line, so that `push_into`, called for
    /// every delta, stays small enough to inline.
    #[cold]
    #[inline(never)]
    fn grow_text(&mut self, size: usize, limit: usize) {
        let grown = if size <= SMALL_TEXT {
            SMALL_TEXT
        } else {
            size.max(2 * self.text.capacity()).next_power_of_two()
        };
        let grown = grown.min(limit);
        if grown <= SMALL_TEXT {
            // A new block and a copy rather than `realloc`: glibc's
            // `realloc` never takes a block from the per-thread cache,
            // where the last stream's text of this size usually waits.
            let mut text = String::with_capacity(grown);
            text.push_str(&self.text);
            self.text = text;
        } else {
            self.text.reserve_exact(grown - self.text.len());
        }
    }

    /// Marks the end of the text and returns everything still held back:
    /// the remaining text and elements, and the diagnostics only the end can
    /// decide (unterminated elements, payloads that lost to a higher-priority
    /// one). Call it before [`StreamParser::finish`] when streaming, or the
    /// last piece of text is never handed out.
    pub fn end(&mut self) -> Vec<StreamItem> {
        if !self.ended {
            self.ended = true;
            self.engine.run(&self.text, &self.profile, true);
        }
        self.engine.take_items()
    }

    /// The complete result (ending the text first if needed); equal to
    /// `parse` of all pushed text.
    ///
    /// Its custom payload is the one last handed out as a
    /// [`StreamItem::CustomPayload`], moved out of the shared handle: a copy
    /// is made only if the caller still holds that handle.
    pub fn finish(mut self) -> Parsed {
        self.end();
        self.engine.into_parsed()
    }

    /// [`StreamParser::end`] and [`StreamParser::finish`] in one call. When
    /// the last items include the custom payload, the result gets a copy of
    /// it (the items hold it); calling `end`, dropping its items, then
    /// `finish` makes none.
    pub fn finish_with_items(mut self) -> (Vec<StreamItem>, Parsed) {
        let items = self.end();
        (items, self.engine.into_parsed())
    }

    /// Bytes received so far.
    pub fn received(&self) -> usize {
        self.text.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    fn stream(text: &str, split: usize) -> (String, Parsed) {
        let profile = Arc::new(Profile::default());
        let mut parser = StreamParser::new(profile, Limits::default());
        let mut streamed = String::new();
        let mut rest = text;
        let mut items = Vec::new();
        while !rest.is_empty() {
            let cut = rest.ceil_char_boundary(split.min(rest.len()));
            items.extend(parser.push(&rest[..cut]).expect("within limits"));
            rest = &rest[cut..];
        }
        let (tail, parsed) = parser.finish_with_items();
        items.extend(tail);
        for item in items {
            if let StreamItem::Text(delta) = item {
                assert!(!delta.contains("SUGGESTED"), "leaked {delta:?}");
                streamed.push_str(&delta);
            }
        }
        (streamed, parsed)
    }

    #[test]
    fn every_split_gives_the_parse_result_and_never_leaks_a_marker() {
        let text = "Here are options. \n\n**SUGGESTED_VALUES**:\n[{\"label\": \"A ]\", \"value\": \"a\"}]\n\nBye é!";
        let whole = parse(text, &Profile::default(), &Limits::default()).expect("within limits");
        assert_eq!(whole.message, "Here are options.\n\nBye é!");
        for split in 1..text.len() {
            let (streamed, parsed) = stream(text, split);
            assert_eq!(streamed, parsed.message, "split {split}");
            assert_eq!(parsed, whole, "split {split}");
        }
    }

    #[test]
    fn a_marker_split_over_plain_text_deltas_is_found() {
        let profile = Arc::new(Profile::default());
        let list = "[{\"label\": \"A\", \"value\": \"a\"}]";
        let splits: [&[&str]; 3] = [
            &[
                "Pick one ",
                "**SUGG",
                "ESTED_VAL",
                "UES** ",
                ":",
                " ",
                list,
                " Bye",
            ],
            &[
                "Pick one **SUGGESTED_VALUES**",
                " ",
                ": [{\"label\": \"A\"",
                ", \"value\": \"a\"}]",
                " Bye",
            ],
            &["Pick one SUGGESTED_VALUES", ":", list, " Bye"],
        ];
        for deltas in splits {
            let text = deltas.concat();
            let whole = parse(&text, &profile, &Limits::default()).expect("within limits");
            assert_eq!(whole.suggested_values.len(), 1, "{text}");
            let mut parser = StreamParser::new(Arc::clone(&profile), Limits::default());
            let mut items = Vec::new();
            for delta in deltas {
                parser.push_into(delta, &mut items).expect("within limits");
            }
            let (tail, parsed) = parser.finish_with_items();
            items.extend(tail);
            let streamed: String = items
                .iter()
                .filter_map(|item| match item {
                    StreamItem::Text(delta) => Some(delta.as_str()),
                    _ => None,
                })
                .collect();
            assert!(!streamed.contains("SUGG"), "leaked {streamed:?}");
            assert_eq!(streamed, parsed.message, "{deltas:?}");
            assert_eq!(parsed, whole, "{deltas:?}");
        }
    }

    #[test]
    fn the_text_outgrows_its_first_block_in_one_step_within_the_limit() {
        let profile = Arc::new(Profile::default());
        let mut parser = StreamParser::new(Arc::clone(&profile), Limits::default());
        parser.push(&"a".repeat(300)).expect("within limits");
        assert_eq!(parser.text.capacity(), SMALL_TEXT);
        parser.push(&"b".repeat(800)).expect("within limits");
        assert!(parser.text.capacity() >= 2 * SMALL_TEXT);
        let limits = Limits {
            max_bytes: 400,
            ..Limits::default()
        };
        let mut parser = StreamParser::new(profile, limits);
        parser.push(&"a".repeat(300)).expect("within limits");
        assert_eq!(parser.text.capacity(), 400);
    }

    /// `text` (ASCII) streamed in 16-byte deltas with the profile `spec`:
    /// the parser, ended, and every item it handed out.
    fn stream_in_16_bytes(spec: crate::ProfileSpec, text: &str) -> (StreamParser, Vec<StreamItem>) {
        let profile = Arc::new(Profile::new(&spec).expect("valid profile"));
        let mut parser = StreamParser::new(profile, Limits::default());
        let mut items = Vec::new();
        for chunk in text.as_bytes().chunks(16) {
            let delta = std::str::from_utf8(chunk).expect("ASCII");
            parser.push_into(delta, &mut items).expect("within limits");
        }
        items.extend(parser.end());
        (parser, items)
    }

    /// A payload text in 16-byte deltas, with its stream items.
    fn payload_stream() -> (StreamParser, Vec<StreamItem>) {
        let spec = crate::ProfileSpec {
            payloads: vec![crate::PayloadSpec {
                name: "schema_proposal".into(),
                marker: "SCHEMA_PROPOSAL".into(),
                schema: None,
            }],
            ..crate::ProfileSpec::default()
        };
        let text =
            "Here.\n\nSCHEMA_PROPOSAL: {\"mode\": \"update\", \"operations\": [1, 2]}\n\nDone.";
        stream_in_16_bytes(spec, text)
    }

    fn shared_payload(items: &[StreamItem]) -> Arc<crate::Payload> {
        let mut payloads = items.iter().filter_map(|item| match item {
            StreamItem::CustomPayload(payload) => Some(Arc::clone(payload)),
            _ => None,
        });
        let payload = payloads.next().expect("one payload handed out");
        assert!(payloads.next().is_none());
        payload
    }

    #[test]
    fn a_payload_whose_handles_were_dropped_is_moved_into_the_result() {
        let (parser, items) = payload_stream();
        let shared = shared_payload(&items);
        // Where the payload's strings live: a copy would put them elsewhere.
        let type_at = shared.payload_type.as_ptr();
        let expected = crate::Payload::clone(&shared);
        drop((shared, items));
        let payload = parser.finish().custom_payload.expect("a payload");
        assert_eq!(payload, expected);
        assert_eq!(payload.payload_type.as_ptr(), type_at);
    }

    #[test]
    fn a_payload_still_held_is_copied_into_the_result() {
        let (parser, items) = payload_stream();
        let shared = shared_payload(&items);
        drop(items);
        let payload = parser.finish().custom_payload.expect("a payload");
        assert_eq!(payload, *shared);
        assert_ne!(payload.payload_type.as_ptr(), shared.payload_type.as_ptr());
    }

    /// A text with suggested values, actions and a tool call, streamed in
    /// 16-byte deltas: the parser and its items.
    fn elements_stream() -> (StreamParser, Vec<StreamItem>) {
        let spec = crate::ProfileSpec {
            client_actions: vec!["close_chat".into()],
            tools: vec!["search_rows".into()],
            ..crate::ProfileSpec::default()
        };
        let text = "Ready.\n\nSUGGESTED_VALUES: [{\"label\": \"More\", \"value\": \"Show more\"}]\n\n\
            SUGGESTED_ACTIONS: [{\"label\": \"Close\", \"action\": \"close_chat\"}]\n\n\
            {\"tool\": \"search_rows\", \"input\": {\"query\": \"open\"}}\n\nDone.";
        stream_in_16_bytes(spec, text)
    }

    /// Where the strings of the lists and the tool call the stream handed
    /// out live (their first label, action and name).
    fn handed_out_at(items: &[StreamItem]) -> [*const u8; 3] {
        let mut at = [std::ptr::null(); 3];
        for item in items {
            match item {
                StreamItem::SuggestedValues(values) => at[0] = values[0].label.as_ptr(),
                StreamItem::SuggestedActions(actions) => at[1] = actions[0].action.as_ptr(),
                StreamItem::ToolCall(call) => at[2] = call.name.as_ptr(),
                _ => {}
            }
        }
        assert!(at.iter().all(|p| !p.is_null()), "every element handed out");
        at
    }

    fn result_at(parsed: &Parsed) -> [*const u8; 3] {
        [
            parsed.suggested_values[0].label.as_ptr(),
            parsed.suggested_actions[0].action.as_ptr(),
            parsed.tool_calls[0].name.as_ptr(),
        ]
    }

    #[test]
    fn lists_and_tool_calls_whose_handles_were_dropped_are_moved_into_the_result() {
        let (parser, items) = elements_stream();
        let at = handed_out_at(&items);
        drop(items);
        let parsed = parser.finish();
        assert_eq!(parsed.suggested_values[0].value, "Show more");
        assert_eq!(parsed.suggested_actions[0].label, "Close");
        assert_eq!(parsed.tool_calls[0].arguments["query"], "open");
        assert_eq!(result_at(&parsed), at);
    }

    #[test]
    fn lists_and_tool_calls_still_held_are_copied_into_the_result() {
        let (parser, items) = elements_stream();
        let at = handed_out_at(&items);
        let parsed = parser.finish();
        let moved = result_at(&parsed);
        for (held, result) in at.iter().zip(moved) {
            assert_ne!(*held, result);
        }
        let values = items.iter().find_map(|item| match item {
            StreamItem::SuggestedValues(values) => Some(values),
            _ => None,
        });
        assert_eq!(
            values.map(|v| v.as_slice()),
            Some(parsed.suggested_values.as_slice())
        );
    }

    #[test]
    fn the_limit_counts_all_deltas() {
        let limits = Limits {
            max_bytes: 10,
            ..Limits::default()
        };
        let mut parser = StreamParser::new(Arc::new(Profile::default()), limits);
        assert!(parser.push("hello").is_ok());
        assert_eq!(
            parser.push("world!"),
            Err(ParseError::TooLarge {
                size: 11,
                limit: 10
            })
        );
        assert_eq!(parser.received(), 5);
        assert_eq!(parser.finish().message, "hello");
    }
}
