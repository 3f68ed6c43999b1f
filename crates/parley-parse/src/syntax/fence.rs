//! Small prefix-consistent matchers for the syntax around elements:
//! whitespace gaps and Markdown code fences (```` ```json ````).
//!
//! Gaps are bounded ([`MAX_GAP`] bytes) so a stream never holds back an
//! unbounded run of whitespace waiting to learn whether JSON follows.

use super::marker::Tri;
use crate::is_ws;

/// Longest whitespace gap between a marker (or fence) and its JSON.
pub(crate) const MAX_GAP: usize = 256;

/// The first non-whitespace position at or after `i`, within `limit` bytes.
pub(crate) fn skip_ws(t: &[u8], i: usize, limit: usize, at_end: bool) -> Tri<usize> {
    let mut k = i;
    while k < t.len() && is_ws(t[k]) {
        if k - i == limit {
            return Tri::No;
        }
        k += 1;
    }
    if k < t.len() {
        Tri::Yes(k)
    } else if at_end {
        Tri::No
    } else {
        Tri::More
    }
}

/// `t[i..]` starts with `lit`: `Yes(end)`.
pub(crate) fn literal(t: &[u8], i: usize, lit: &[u8], at_end: bool) -> Tri<usize> {
    let rest = &t[i.min(t.len())..];
    if rest.starts_with(lit) {
        Tri::Yes(i + lit.len())
    } else if !at_end && lit.starts_with(rest) {
        Tri::More
    } else {
        Tri::No
    }
}

/// An opening fence at `i` (```` ``` ````, optionally `json`, then
/// whitespace) followed by one of `openers`: `Yes(position of the opener)`.
pub(crate) fn open(t: &[u8], i: usize, openers: &[u8], at_end: bool) -> Tri<usize> {
    let k = match literal(t, i, b"```", at_end) {
        Tri::Yes(k) => k,
        Tri::No => return Tri::No,
        Tri::More => return Tri::More,
    };
    let k = match literal(t, k, b"json", at_end) {
        Tri::Yes(k) => k,
        Tri::No => k,
        Tri::More => return Tri::More,
    };
    match skip_ws(t, k, MAX_GAP, at_end) {
        Tri::Yes(j) if openers.contains(&t[j]) => Tri::Yes(j),
        Tri::Yes(_) | Tri::No => Tri::No,
        Tri::More => Tri::More,
    }
}

/// A closing fence after whitespace from `i`: `Yes(end of the fence)`.
pub(crate) fn close(t: &[u8], i: usize, at_end: bool) -> Tri<usize> {
    match skip_ws(t, i, MAX_GAP, at_end) {
        Tri::Yes(j) => literal(t, j, b"```", at_end),
        Tri::No => Tri::No,
        Tri::More => Tri::More,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_open_and_close() {
        assert_eq!(open(b"```json\n{", 0, b"{", false), Tri::Yes(8));
        assert_eq!(open(b"```\n  [", 0, b"{[", false), Tri::Yes(6));
        assert_eq!(open(b"```js", 0, b"{", false), Tri::More);
        assert_eq!(open(b"```python\n{", 0, b"{", false), Tri::No);
        assert_eq!(open(b"``", 0, b"{", false), Tri::More);
        assert_eq!(open(b"``", 0, b"{", true), Tri::No);
        assert_eq!(close(b"\n```\nx", 0, false), Tri::Yes(4));
        assert_eq!(close(b"\n``", 0, false), Tri::More);
        assert_eq!(close(b"\nok", 0, false), Tri::No);
    }

    #[test]
    fn gaps_are_bounded() {
        let long = vec![b' '; MAX_GAP + 1];
        assert_eq!(skip_ws(&long, 0, MAX_GAP, false), Tri::No);
        assert_eq!(skip_ws(b"  ", 0, MAX_GAP, false), Tri::More);
        assert_eq!(skip_ws(b"  x", 0, MAX_GAP, true), Tri::Yes(2));
    }
}
