//! What a trigger byte turns out to be (a marker's colon, the start of a
//! text tool call, bare or in a code fence, or plain text), where the next
//! trigger byte is, and what must follow a marker for it to start an
//! element.

use super::state::{Candidate, What};
use crate::{
    elements::tool_calls,
    profile::Profile,
    syntax::{
        fence::{self, MAX_GAP, skip_ws},
        marker::Tri,
    },
};

/// What a trigger byte turned out to be.
pub(super) enum Trigger {
    /// Nothing: plain text.
    Skip,
    /// Undecided until more text arrives; hold back from this position.
    More(usize),
    /// A marker `[start, end)` for marker `index`.
    Marker {
        start: usize,
        end: usize,
        index: usize,
    },
    /// The start of a text tool call.
    Tool(Candidate),
}

/// What the trigger byte at `at` is; a marker may start no earlier than
/// `floor` (everything before it is decided).
#[inline]
pub(super) fn classify(
    t: &[u8],
    at: usize,
    floor: usize,
    profile: &Profile,
    at_end: bool,
) -> Trigger {
    match t[at] {
        b':' => match profile.markers.at_colon(t, at, floor, at_end) {
            None => Trigger::Skip,
            Some((start, Tri::Yes((index, end)))) => Trigger::Marker { start, end, index },
            Some((start, _)) => Trigger::More(start),
        },
        b'{' => match tool_calls::match_prefix(t, at, profile, at_end) {
            Tri::Yes(key) => Trigger::Tool(Candidate {
                start: at,
                opener: at,
                fenced: false,
                what: What::Tool(key),
            }),
            Tri::More => Trigger::More(at),
            Tri::No => Trigger::Skip,
        },
        _ if at > 0 && t[at - 1] == b'`' => Trigger::Skip,
        _ => match fence::open(t, at, b"{", at_end) {
            Tri::Yes(opener) => match tool_calls::match_prefix(t, opener, profile, at_end) {
                Tri::Yes(key) => Trigger::Tool(Candidate {
                    start: at,
                    opener,
                    fenced: true,
                    what: What::Tool(key),
                }),
                Tri::More => Trigger::More(at),
                Tri::No => Trigger::Skip,
            },
            Tri::More => Trigger::More(at),
            Tri::No => Trigger::Skip,
        },
    }
}

/// The first trigger byte at or after `from`.
#[inline]
pub(super) fn find(triggers: &[u8], t: &[u8], from: usize) -> Option<usize> {
    let hay = t.get(from..)?;
    let found = match *triggers {
        [] => None,
        [a] => memchr::memchr(a, hay),
        [a, b] => memchr::memchr2(a, b, hay),
        [a, b, c, ..] => memchr::memchr3(a, b, c, hay),
    };
    found.map(|k| from + k)
}

/// What follows a marker: whitespace, then an opening bracket (or a fence
/// and one): `Yes((opener, fenced))`; anything else makes it a mention.
#[inline]
pub(super) fn after_marker(t: &[u8], end: usize, at_end: bool) -> Tri<(usize, bool)> {
    let j = match skip_ws(t, end, MAX_GAP, at_end) {
        Tri::Yes(j) => j,
        Tri::No => return Tri::No,
        Tri::More => return Tri::More,
    };
    match t[j] {
        b'{' | b'[' => Tri::Yes((j, false)),
        b'`' => match fence::open(t, j, b"{[", at_end) {
            Tri::Yes(opener) => Tri::Yes((opener, true)),
            Tri::No => Tri::No,
            Tri::More => Tri::More,
        },
        _ => Tri::No,
    }
}
