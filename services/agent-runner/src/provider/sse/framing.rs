//! Server-sent events framing: the `text/event-stream` rules of the WHATWG
//! HTML standard over a body that arrives in reads of any size.
//!
//! Lines end with LF, CR or CRLF (a CR at the end of one read and an LF at
//! the start of the next are one line end). A blank line dispatches the
//! event being built: its `data:` lines joined with `\n`, its `event:` name
//! (`message` when none came). Nothing is dispatched when no `data:` line
//! came. Lines starting with `:` are comments; a field without a colon has
//! an empty value; one space after the colon is dropped; `id:`, `retry:` and
//! unknown fields are ignored (a provider call is never reconnected). A
//! byte-order mark before the first line is dropped. An event still open
//! when the body ends is not dispatched.
//!
//! Each read is scanned once (`memchr2` for the line ends) and only a line
//! split across reads is copied; a line is checked as UTF-8 once it is whole,
//! so a character split across reads is never an error.
//!
//! An event is bounded: a line, or the `event:` and `data:` fields built so
//! far, longer than the framer's `max_event` bytes is
//! [`ProviderError::TooLarge`], and the bytes held are released at once.

use std::{borrow::Cow, collections::VecDeque, mem};

use super::SseEvent;
use crate::provider::{ProviderError, http::truncate_raw};

/// The UTF-8 byte-order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The framing state of one body.
#[derive(Debug)]
pub(super) struct Framer {
    /// The start of a line that has not ended yet: bytes of earlier reads.
    partial: Vec<u8>,
    /// The last read ended with a CR: an LF first in the next one is part of
    /// the same line end.
    after_cr: bool,
    /// No line has ended yet (a byte-order mark is dropped from the first).
    at_start: bool,
    /// The `event:` field of the event being built, empty when none came.
    event: String,
    /// Its `data:` lines, each followed by `\n`.
    data: String,
    /// The most bytes one line, or one event's fields, may hold.
    max_event: usize,
}

impl Default for Framer {
    fn default() -> Self {
        Self::new(usize::MAX)
    }
}

impl Framer {
    /// A framer refusing lines and events longer than `max_event` bytes.
    pub(super) fn new(max_event: usize) -> Self {
        Self {
            partial: Vec::new(),
            after_cr: false,
            at_start: true,
            event: String::new(),
            data: String::new(),
            max_event,
        }
    }

    /// The error for an event past the limit; everything held is released.
    fn too_large(&mut self) -> ProviderError {
        self.partial = Vec::new();
        self.event = String::new();
        self.data = String::new();
        ProviderError::TooLarge {
            what: "event",
            limit: self.max_event,
        }
    }

    /// Frames one read, pushing the events it completes onto `out`. A line
    /// that is not UTF-8 is [`ProviderError::Malformed`] (the events before
    /// it are already in `out`).
    pub(super) fn push(
        &mut self,
        mut bytes: &[u8],
        out: &mut VecDeque<SseEvent>,
    ) -> Result<(), ProviderError> {
        if bytes.is_empty() {
            return Ok(());
        }
        if mem::take(&mut self.after_cr)
            && let Some(rest) = bytes.strip_prefix(b"\n")
        {
            bytes = rest;
        }
        while let Some(end) = memchr::memchr2(b'\n', b'\r', bytes) {
            let ending = match bytes.get(end..end + 2) {
                Some(b"\r\n") => 2,
                None if bytes[end] == b'\r' => {
                    self.after_cr = true;
                    1
                }
                _ => 1,
            };
            if self.partial.is_empty() {
                self.line(&bytes[..end], out)?;
            } else {
                let mut line = mem::take(&mut self.partial);
                line.extend_from_slice(&bytes[..end]);
                // The buffer is kept for the next split line, unless the
                // line failed: then the stream ends and its memory returns.
                self.line(&line, out)?;
                line.clear();
                self.partial = line;
            }
            bytes = &bytes[end + ending..];
        }
        if self.partial.len().saturating_add(bytes.len()) > self.max_event {
            return Err(self.too_large());
        }
        self.partial.extend_from_slice(bytes);
        Ok(())
    }

    /// One whole line, without its line end.
    fn line(&mut self, line: &[u8], out: &mut VecDeque<SseEvent>) -> Result<(), ProviderError> {
        let line = if mem::take(&mut self.at_start) {
            line.strip_prefix(BOM).unwrap_or(line)
        } else {
            line
        };
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line
            .len()
            .saturating_add(self.data.len() + self.event.len())
            > self.max_event
        {
            return Err(self.too_large());
        }
        let line = std::str::from_utf8(line).map_err(|e| ProviderError::Malformed {
            reason: format!("stream is not UTF-8: {e}"),
            raw: truncate_raw(&String::from_utf8_lossy(line)),
        })?;
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            "event" => {
                self.event.clear();
                self.event.push_str(value);
            }
            _ => {}
        }
        Ok(())
    }

    /// The blank line: the event built so far, if it has data.
    fn dispatch(&mut self, out: &mut VecDeque<SseEvent>) {
        if self.data.is_empty() {
            self.event.clear();
            return;
        }
        self.data.pop();
        let event = if self.event.is_empty() {
            Cow::Borrowed("message")
        } else {
            Cow::Owned(mem::take(&mut self.event))
        };
        out.push_back(SseEvent {
            event,
            data: mem::take(&mut self.data),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(reads: &[&[u8]]) -> Result<Vec<(String, String)>, ProviderError> {
        let mut framer = Framer::default();
        let mut out = VecDeque::new();
        for read in reads {
            framer.push(read, &mut out)?;
        }
        Ok(out
            .into_iter()
            .map(|e| (e.event.into_owned(), e.data))
            .collect())
    }

    fn pair(event: &str, data: &str) -> (String, String) {
        (event.to_owned(), data.to_owned())
    }

    #[test]
    fn a_cr_ending_one_read_and_an_lf_starting_the_next_are_one_line_end() {
        // Were the LF a second line end, it would be the blank line that
        // dispatches `a` before `event: x` names it.
        let events = frame(&[b"data: a\r", b"\nevent: x\r\n\r\n"]).expect("framed");
        assert_eq!(events, [pair("x", "a")]);
        let events = frame(&[b"data: a\r", b"\r"]).expect("framed");
        assert_eq!(events, [pair("message", "a")]);
    }

    #[test]
    fn fields_follow_the_standard() {
        let body = b"\xEF\xBB\xBFdata\n\ndata:no space\ndata:  two\nid: 7\nretry: 10\nweird\n\n\
            event: only a name\n\nevent: first\nevent: second\ndata: x\n\n";
        let events = frame(&[body]).expect("framed");
        assert_eq!(
            events,
            [
                pair("message", ""),
                pair("message", "no space\n two"),
                pair("second", "x"),
            ]
        );
    }

    #[test]
    fn a_character_split_across_reads_is_whole_once_its_line_is() {
        let body = "data: é中\n\n".as_bytes();
        let events = frame(&[&body[..7], &body[7..9], &body[9..]]).expect("framed");
        assert_eq!(events, [pair("message", "é中")]);
    }

    proptest::proptest! {
        /// However a body is cut into reads, the same events come out as
        /// from the body in one read.
        #[test]
        fn any_split_of_a_body_frames_as_the_whole(
            lines in proptest::collection::vec(
                (
                    proptest::sample::select(vec![
                        "data: x", "data:é中", "data", "event: e", "event:", ": c",
                        "id: 1", "retry: 5", "", "", "\u{feff}data: bom",
                    ]),
                    proptest::sample::select(vec!["\n", "\r", "\r\n"]),
                ),
                0..24,
            ),
            cuts in proptest::collection::vec(0usize..400, 0..12),
        ) {
            let body: String = lines.iter().map(|(line, end)| format!("{line}{end}")).collect();
            let body = body.as_bytes();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(body.len())).collect();
            cuts.sort_unstable();
            let mut reads = Vec::new();
            let mut from = 0;
            for cut in cuts.into_iter().chain([body.len()]) {
                reads.push(&body[from..cut]);
                from = cut;
            }
            let whole = frame(&[body]).expect("framed whole");
            let split = frame(&reads).expect("framed in pieces");
            proptest::prop_assert_eq!(split, whole);
        }
    }

    #[test]
    fn a_line_that_is_not_utf8_is_malformed_after_the_events_before_it() {
        let mut framer = Framer::default();
        let mut out = VecDeque::new();
        let error = framer
            .push(b"data: ok\n\ndata: \xff\n\n", &mut out)
            .expect_err("not UTF-8");
        assert!(
            matches!(error, ProviderError::Malformed { .. }),
            "{error:?}"
        );
        assert_eq!(out.len(), 1);
    }
}
