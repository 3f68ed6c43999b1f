//! Builds the cleaned message from kept text and removed regions.
//!
//! Kept text is copied as is, except for the whitespace that touches a
//! removed region (a *joint*). A joint's whitespace collapses to one
//! separator: nothing at the start or the end of the message; otherwise as
//! many line breaks as the larger side had (at most two, so no runs of blank
//! lines), in the text's own style (`\r\n` or `\n`), followed by the
//! indentation of the line that follows; or one space when neither side had
//! a line break. Trailing spaces before a removed element therefore never
//! survive, and the rest of the text is untouched.
//!
//! The builder only ever appends, and it withholds trailing whitespace until
//! it knows whether a joint follows, so a stream can hand out
//! `message[emitted..]` after every delta and the pieces add up to the final
//! message.

use crate::is_ws;

/// What the message grows to when it first outgrows its room: the largest
/// block glibc's allocator hands out from its small bins. A block of 1 KiB
/// or more makes the allocator consolidate its free lists first, which
/// costs more the more small blocks were freed (a parse's or a stream's
/// payload just dropped): a message that fits here never asks for one.
const SMALL_MESSAGE: usize = 1000;

/// More bytes than the text kept that a joint may write: two `\r\n` where
/// the whitespace had fewer bytes.
const JOINT_SLACK: usize = 4;

/// The message under construction.
#[derive(Debug, Default)]
pub(crate) struct MessageBuilder {
    /// The message so far, followed by the whitespace withheld.
    out: String,
    /// How many bytes at the end of `out` are withheld whitespace: seen
    /// since the last kept non-whitespace byte (or the last removal). They
    /// stay in place when text follows and no joint is open, the common
    /// case, so kept text is copied once.
    withheld: usize,
    /// Scratch for a joint's right-hand whitespace (kept for its capacity).
    ws: String,
    joint: Option<Joint>,
    /// The most the message is expected to need, when known (a parse: the
    /// length of its text).
    expected: Option<usize>,
}

/// Whitespace runs around one or more adjacent removed regions.
#[derive(Debug, Default, Clone, Copy)]
struct Joint {
    max_newlines: usize,
    crlf: bool,
    any_ws: bool,
}

impl Joint {
    fn absorb(&mut self, run: &str) {
        if run.is_empty() {
            return;
        }
        self.any_ws = true;
        self.max_newlines = self
            .max_newlines
            .max(run.bytes().filter(|&b| b == b'\n').count());
        self.crlf |= run.contains("\r\n");
    }
}

impl MessageBuilder {
    /// Room for `bytes` of message up front.
    pub(crate) fn reserve(&mut self, bytes: usize) {
        self.out.reserve(bytes);
    }

    /// The message will be about `bytes` long at most (a parse's is at most
    /// as long as its text, but for a joint's line breaks): it is given
    /// that much room at once when it outgrows [`SMALL_MESSAGE`], and no
    /// more than that before.
    pub(crate) fn expect(&mut self, bytes: usize) {
        self.expected = Some(bytes);
    }

    /// Room for `more` bytes after the message so far.
    #[inline(always)]
    fn room(&mut self, more: usize) {
        let need = self.out.len() + more;
        if need > self.out.capacity() {
            self.grow(need);
        }
    }

    /// Grows the message to hold `need` bytes: to the expected size (at
    /// most [`SMALL_MESSAGE`] until it needs more), else to
    /// [`SMALL_MESSAGE`], then by doubling, kept to powers of two (the
    /// stream's text grows the same way). Out of line: rare.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, need: usize) {
        let grown = match self.expected {
            Some(expected) if need <= expected.min(SMALL_MESSAGE) => expected.min(SMALL_MESSAGE),
            Some(expected) if need > SMALL_MESSAGE && need <= expected => expected,
            _ if need <= SMALL_MESSAGE => SMALL_MESSAGE,
            _ => need.max(2 * self.out.capacity()).next_power_of_two(),
        };
        if grown <= SMALL_MESSAGE {
            // A new block and a copy rather than `realloc`, which never
            // takes a block from glibc's per-thread cache (a stream's
            // message outgrowing its first 256 bytes).
            let mut out = String::with_capacity(grown);
            out.push_str(&self.out);
            self.out = out;
        } else {
            self.out.reserve_exact(grown - self.out.len());
        }
    }

    /// Appends kept text.
    pub(crate) fn keep(&mut self, text: &str) {
        let bytes = text.as_bytes();
        let Some(last) = bytes.iter().rposition(|&b| !is_ws(b)) else {
            self.room(text.len());
            self.out.push_str(text);
            self.withheld += text.len();
            return;
        };
        // Whitespace never splits a UTF-8 sequence, so these are char boundaries.
        if let Some(joint) = self.joint.take() {
            let first = bytes.iter().position(|&b| !is_ws(b)).unwrap_or(last);
            let kept = self.out.len() - self.withheld;
            let mut right = std::mem::take(&mut self.ws);
            right.push_str(&self.out[kept..]);
            right.push_str(&text[..first]);
            self.out.truncate(kept);
            self.room(right.len() + text.len() + JOINT_SLACK);
            self.separate(joint, &right);
            right.clear();
            self.ws = right;
            self.out.push_str(&text[first..]);
        } else {
            // No joint: the withheld and the leading whitespace stay as
            // they are (the common case, once per delta of a stream).
            self.room(text.len());
            self.out.push_str(text);
        }
        self.withheld = text.len() - (last + 1);
    }

    /// Records that a region was removed at the current end.
    pub(crate) fn remove(&mut self) {
        let kept = self.out.len() - self.withheld;
        self.joint
            .get_or_insert_with(Joint::default)
            .absorb(&self.out[kept..]);
        self.out.truncate(kept);
        self.withheld = 0;
    }

    /// The message so far (everything before the withheld whitespace).
    pub(crate) fn as_str(&self) -> &str {
        &self.out[..self.out.len() - self.withheld]
    }

    /// Ends the message: trailing whitespace stays unless a region was
    /// removed at the end.
    pub(crate) fn finish(&mut self) {
        if self.joint.take().is_some() {
            self.out.truncate(self.out.len() - self.withheld);
        }
        self.withheld = 0;
    }

    /// Consumes the builder, returning the message.
    pub(crate) fn into_string(mut self) -> String {
        self.out.truncate(self.out.len() - self.withheld);
        self.out
    }

    /// Writes the one separator a joint collapses to, given the whitespace
    /// on its right (`right`).
    fn separate(&mut self, mut joint: Joint, right: &str) {
        joint.absorb(right);
        if self.out.is_empty() {
            return;
        }
        let newlines = joint.max_newlines.min(2);
        if newlines == 0 {
            if joint.any_ws {
                self.out.push(' ');
            }
            return;
        }
        let unit = if joint.crlf { "\r\n" } else { "\n" };
        for _ in 0..newlines {
            self.out.push_str(unit);
        }
        if let Some(nl) = right.rfind('\n') {
            self.out.push_str(&right[nl + 1..]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a message from pieces; `None` marks a removed region.
    fn build(pieces: &[Option<&str>]) -> String {
        let mut b = MessageBuilder::default();
        for piece in pieces {
            match piece {
                Some(text) => b.keep(text),
                None => b.remove(),
            }
        }
        b.finish();
        b.into_string()
    }

    #[test]
    fn a_reserved_message_grows_to_the_small_block_then_doubles() {
        let mut b = MessageBuilder::default();
        b.reserve(256);
        let first = "a".repeat(200);
        b.keep(&first);
        b.keep(&"b".repeat(100));
        assert_eq!(b.out.capacity(), SMALL_MESSAGE);
        assert_eq!(b.as_str(), format!("{first}{}", "b".repeat(100)));
        b.keep(&"c".repeat(800));
        assert_eq!(b.out.capacity(), 2048);
        assert_eq!(b.as_str().len(), 1100);
    }

    #[test]
    fn withheld_whitespace_shows_only_once_text_follows() {
        let mut b = MessageBuilder::default();
        b.keep("Hi \n");
        assert_eq!(b.as_str(), "Hi");
        b.keep("  ");
        assert_eq!(b.as_str(), "Hi");
        b.keep("there ");
        assert_eq!(b.as_str(), "Hi \n  there");
        b.remove();
        b.keep(" \n");
        assert_eq!(b.as_str(), "Hi \n  there");
        b.keep("\n  end\t");
        assert_eq!(b.as_str(), "Hi \n  there\n\n  end");
        b.finish();
        assert_eq!(b.into_string(), "Hi \n  there\n\n  end\t");
    }

    #[test]
    fn joints_collapse_to_one_separator() {
        assert_eq!(
            build(&[Some("Intro\n\n"), None, Some("\n\nOutro")]),
            "Intro\n\nOutro"
        );
        assert_eq!(
            build(&[Some("Intro\n"), None, Some("\nOutro")]),
            "Intro\nOutro"
        );
        assert_eq!(
            build(&[Some("Intro\n\n\n\n"), None, Some("\n\n\n\nOutro")]),
            "Intro\n\nOutro"
        );
        assert_eq!(build(&[Some("See "), None, Some(" now")]), "See now");
        assert_eq!(build(&[Some("a"), None, Some("b")]), "ab");
        assert_eq!(
            build(&[Some("Pick one.\n"), None, Some(" Let me know!")]),
            "Pick one.\nLet me know!"
        );
    }

    #[test]
    fn start_and_end_are_trimmed_only_around_removals() {
        assert_eq!(build(&[Some("Text.  \n\n"), None, Some("\n")]), "Text.");
        assert_eq!(build(&[None, Some("\n\nHello")]), "Hello");
        assert_eq!(build(&[Some("  Hello\n")]), "  Hello\n");
    }

    #[test]
    fn crlf_and_indentation_are_kept() {
        assert_eq!(
            build(&[Some("A\r\n\r\n"), None, Some("\r\n\r\nB")]),
            "A\r\n\r\nB"
        );
        assert_eq!(
            build(&[Some("- item\n  "), None, Some("\n  - sub")]),
            "- item\n  - sub"
        );
    }

    #[test]
    fn adjacent_removals_form_one_joint() {
        assert_eq!(
            build(&[Some("Intro\n"), None, Some("\n\n"), None, Some("\nOutro")]),
            "Intro\n\nOutro"
        );
        assert_eq!(build(&[Some("Intro\n"), None, Some("\n"), None]), "Intro");
    }

    #[test]
    fn grows_to_the_expected_size_without_large_blocks_first() {
        let mut b = MessageBuilder::default();
        b.expect(300);
        b.keep("hello");
        assert_eq!(b.out.capacity(), 300);
        let mut b = MessageBuilder::default();
        b.expect(5000);
        b.keep("hello");
        assert_eq!(b.out.capacity(), SMALL_MESSAGE);
        b.keep(&"x".repeat(2000));
        assert_eq!(b.out.capacity(), 5000);
        // A stream's: no expectation, the text's steps.
        let mut b = MessageBuilder::default();
        b.reserve(256);
        b.keep(&"x".repeat(300));
        assert_eq!(b.out.capacity(), SMALL_MESSAGE);
        b.keep(&"x".repeat(800));
        assert_eq!(b.out.capacity(), 2048);
        b.keep(" \r\n");
        b.remove();
        b.keep("\r\n\r\n  y");
        b.finish();
        assert_eq!(&b.into_string()[1100..], "\r\n\r\n  y");
    }

    #[test]
    fn chunking_does_not_matter() {
        let whole = build(&[Some("Hi there \n\n"), None, Some(" \n\nBye \n")]);
        let split = build(&[
            Some("Hi "),
            Some("there "),
            Some("\n"),
            Some("\n"),
            None,
            Some(" \n"),
            Some("\nBy"),
            Some("e \n"),
        ]);
        assert_eq!(whole, split);
    }
}
