//! Marker recognition: `X:`, `**X**:`, `*X*:`, `**X:**` and `X :`.
//!
//! The grammar, matched forwards from a start position `s`:
//! `\*{0,2} NAME \*{0,2} [ \t]{0,8} :` and, when the colon directly follows
//! the name, up to as many trailing `*` as there were leading ones (the
//! `**X:**` form). The byte before `s` must not be a word byte, so
//! `MY_SCHEMA_PROPOSAL:` is not `SCHEMA_PROPOSAL:`. Markers are
//! case-sensitive.
//!
//! Every matcher here is *prefix-consistent*: given a text that may still
//! grow, it answers `Yes`/`No` only when no continuation can change the
//! answer, and `More` otherwise. That is what lets the streaming parser hold
//! back exactly the bytes that could still become a marker and nothing else.

/// Most spaces or tabs allowed between a marker name and its colon.
pub(crate) const MAX_MARKER_SPACES: usize = 8;
/// Longest marker name accepted by a profile.
pub(crate) const MAX_NAME_LEN: usize = 64;

/// The answer of a prefix-consistent matcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tri<T> {
    /// Matches, whatever follows.
    Yes(T),
    /// Cannot match, whatever follows.
    No,
    /// Undecided until more text arrives.
    More,
}

/// What a marker introduces: a suggestion list, or the custom payload
/// type at that index of its profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Element {
    SuggestedValues,
    SuggestedActions,
    Payload(usize),
}

/// The markers of one profile, with byte tables for fast rejection.
#[derive(Debug, Clone)]
pub(crate) struct MarkerSet {
    names: Vec<Box<[u8]>>,
    elements: Vec<Element>,
    first_byte: [bool; 256],
    last_byte: [bool; 256],
    name_byte: [bool; 256],
    max_len: usize,
}

/// Whether `b` can be part of a marker name (and so of a word).
pub(crate) fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl MarkerSet {
    /// A set from validated names (`[A-Za-z0-9_-]{1,64}`), each with the
    /// element it introduces.
    pub(crate) fn new(entries: Vec<(String, Element)>) -> Self {
        let mut set = Self {
            names: Vec::with_capacity(entries.len()),
            elements: Vec::with_capacity(entries.len()),
            first_byte: [false; 256],
            last_byte: [false; 256],
            name_byte: [false; 256],
            max_len: 0,
        };
        for (name, element) in entries {
            let bytes = name.into_bytes().into_boxed_slice();
            if let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) {
                set.first_byte[usize::from(first)] = true;
                set.last_byte[usize::from(last)] = true;
            }
            for &b in bytes.iter() {
                set.name_byte[usize::from(b)] = true;
            }
            set.max_len = set.max_len.max(bytes.len());
            set.names.push(bytes);
            set.elements.push(element);
        }
        set
    }

    /// True when the set has no marker.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The element marker `index` introduces.
    pub(crate) fn element(&self, index: usize) -> Element {
        self.elements[index]
    }

    /// Matches a marker starting exactly at `s`: `Yes((index, end))`.
    pub(crate) fn match_at(&self, t: &[u8], s: usize, at_end: bool) -> Tri<(usize, usize)> {
        if s > 0 && is_word_byte(t[s - 1]) {
            return Tri::No;
        }
        let mut i = s;
        let mut pre = 0;
        while pre < 2 && i < t.len() && t[i] == b'*' {
            i += 1;
            pre += 1;
        }
        if i == t.len() {
            return if at_end { Tri::No } else { Tri::More };
        }
        if !self.first_byte[usize::from(t[i])] {
            return Tri::No;
        }
        let rest = &t[i..];
        let mut more = false;
        for (index, name) in self.names.iter().enumerate() {
            if rest.len() < name.len() {
                more |= name.starts_with(rest);
                continue;
            }
            if !rest.starts_with(name) {
                continue;
            }
            match after_name(t, i + name.len(), pre, at_end) {
                Tri::Yes(end) => return Tri::Yes((index, end)),
                Tri::More => more = true,
                Tri::No => {}
            }
        }
        if more && !at_end { Tri::More } else { Tri::No }
    }

    /// Finds the marker whose colon is at `c`, starting at or after `floor`:
    /// its start and the forward match there (`Yes` or `More`, never `No`).
    ///
    /// Inlined: prose meets a colon every few hundred bytes, and most stop
    /// at the first test (no marker ends in the byte before it).
    #[inline]
    pub(crate) fn at_colon(
        &self,
        t: &[u8],
        c: usize,
        floor: usize,
        at_end: bool,
    ) -> Option<(usize, Tri<(usize, usize)>)> {
        let mut k = c;
        let mut spaces = 0;
        while k > floor && spaces < MAX_MARKER_SPACES && matches!(t[k - 1], b' ' | b'\t') {
            k -= 1;
            spaces += 1;
        }
        let mut stars = 0;
        while k > floor && stars < 2 && t[k - 1] == b'*' {
            k -= 1;
            stars += 1;
        }
        if k == floor || !self.last_byte[usize::from(t[k - 1])] {
            return None;
        }
        for name in self.names.iter() {
            if k - floor < name.len() || !t[..k].ends_with(name) {
                continue;
            }
            let name_start = k - name.len();
            let mut earliest = name_start;
            while earliest > floor && name_start - earliest < 2 && t[earliest - 1] == b'*' {
                earliest -= 1;
            }
            // The earliest start that can match wins, so that the choice
            // agrees with `hold_from`, which also holds from the earliest.
            for s in earliest..=name_start {
                match self.match_at(t, s, at_end) {
                    Tri::No => {}
                    found => return Some((s, found)),
                }
            }
        }
        None
    }

    /// The earliest position at or after `floor` where the end of `t` could
    /// still be the beginning of a marker; `t.len()` when there is none.
    ///
    /// Inlined for its first test, which most deltas of a stream stop at (a
    /// text ending in a byte no marker can end in, before its colon).
    #[inline]
    pub(crate) fn hold_from(&self, t: &[u8], floor: usize) -> usize {
        match t.last() {
            Some(&last) if self.may_continue(last) => self.hold_from_run(t, floor),
            _ => t.len(),
        }
    }

    /// Whether `b` can be part of a marker that is still open.
    fn may_continue(&self, b: u8) -> bool {
        self.name_byte[usize::from(b)] || matches!(b, b'*' | b' ' | b'\t' | b':')
    }

    /// [`MarkerSet::hold_from`] once the last byte may belong to a marker.
    #[inline(never)]
    fn hold_from_run(&self, t: &[u8], floor: usize) -> usize {
        let len = t.len();
        // A marker that is still open consists only of stars, name bytes,
        // spaces and a colon: only the last run of those can hold one.
        let window = self.max_len + 2 + 2 + MAX_MARKER_SPACES + 1 + 2;
        let mut lo = len;
        while lo > floor && len - lo < window && self.may_continue(t[lo - 1]) {
            lo -= 1;
        }
        (lo..len)
            .find(|&s| {
                (t[s] == b'*' || self.first_byte[usize::from(t[s])])
                    && self.match_at(t, s, false) == Tri::More
            })
            .unwrap_or(len)
    }
}

/// Matches what follows a marker name at `j`: stars, spaces, the colon and,
/// for the `**X:**` form, the closing stars. `Yes(end)`.
fn after_name(t: &[u8], j: usize, pre: usize, at_end: bool) -> Tri<usize> {
    let undecided = if at_end { Tri::No } else { Tri::More };
    let mut k = j;
    let mut post = 0;
    while post < 2 && k < t.len() && t[k] == b'*' {
        k += 1;
        post += 1;
    }
    let mut spaces = 0;
    while k < t.len() && matches!(t[k], b' ' | b'\t') {
        if spaces == MAX_MARKER_SPACES {
            return Tri::No;
        }
        k += 1;
        spaces += 1;
    }
    if k == t.len() {
        return undecided;
    }
    if t[k] != b':' {
        return Tri::No;
    }
    k += 1;
    if post == 0 && spaces == 0 && pre > 0 {
        let mut closing = 0;
        while closing < pre && k < t.len() && t[k] == b'*' {
            k += 1;
            closing += 1;
        }
        if closing < pre && k == t.len() && !at_end {
            return Tri::More;
        }
    }
    Tri::Yes(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> MarkerSet {
        MarkerSet::new(vec![
            ("SUGGESTED_VALUES".into(), Element::SuggestedValues),
            ("SCHEMA_PROPOSAL".into(), Element::Payload(0)),
        ])
    }

    fn hit(text: &str) -> Option<(usize, usize, usize)> {
        let t = text.as_bytes();
        let c = t.iter().position(|&b| b == b':')?;
        match set().at_colon(t, c, 0, true) {
            Some((start, Tri::Yes((index, end)))) => Some((index, start, end)),
            _ => None,
        }
    }

    #[test]
    fn every_decoration_form_matches() {
        assert_eq!(hit("SCHEMA_PROPOSAL: {"), Some((1, 0, 16)));
        assert_eq!(hit("**SCHEMA_PROPOSAL**: {"), Some((1, 0, 20)));
        assert_eq!(hit("*SCHEMA_PROPOSAL*: {"), Some((1, 0, 18)));
        assert_eq!(hit("**SCHEMA_PROPOSAL:** {"), Some((1, 0, 20)));
        assert_eq!(hit("SCHEMA_PROPOSAL : {"), Some((1, 0, 17)));
        assert_eq!(hit("x **SUGGESTED_VALUES**:["), Some((0, 2, 23)));
    }

    #[test]
    fn word_boundary_case_and_spacing_are_enforced() {
        assert_eq!(hit("MY_SCHEMA_PROPOSAL: {"), None);
        assert_eq!(hit("schema_proposal: {"), None);
        assert_eq!(hit("SCHEMA_PROPOSALS: {"), None);
        assert_eq!(hit("SCHEMA_PROPOSAL          : {"), None);
    }

    #[test]
    fn undecided_tails_ask_for_more() {
        let s = set();
        assert_eq!(s.match_at(b"SUGG", 0, false), Tri::More);
        assert_eq!(s.match_at(b"**", 0, false), Tri::More);
        assert_eq!(s.match_at(b"**SCHEMA_PROPOSAL:", 0, false), Tri::More);
        assert_eq!(
            s.match_at(b"**SCHEMA_PROPOSAL:", 0, true),
            Tri::Yes((1, 18))
        );
        assert_eq!(s.match_at(b"SUGGESTED_VALUES  ", 0, false), Tri::More);
        assert_eq!(s.match_at(b"Sure", 0, false), Tri::No);
    }

    #[test]
    fn hold_from_finds_the_earliest_possible_marker_start() {
        let s = set();
        assert_eq!(s.hold_from(b"hello **SUGG", 0), 6);
        assert_eq!(s.hold_from(b"hello world", 0), 11);
        assert_eq!(s.hold_from(b"ok SCHEMA_PROPOSAL ", 0), 3);
        assert_eq!(s.hold_from(b"XSUGG", 0), 5);
    }
}
