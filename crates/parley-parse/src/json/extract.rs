//! Balanced extraction of JSON elements from free text.
//!
//! [`Lexer`] finds the bracket that closes an element, respecting JSON strings
//! and escapes, so `{`, `}`, `[`, `]` and `\"` inside strings never end an
//! element early. It is resumable: the streaming parser feeds it as text
//! arrives and never rescans a byte.
//!
//! A scan that reaches the end of the text without closing costs the whole
//! rest of the text. To keep a text full of unclosed openers linear, the first
//! such failure builds a [`CloseIndex`]: one right-to-left pass that records,
//! for every position and lexical state, where the enclosing bracket closes.
//! Every later element is then resolved with one lookup instead of a scan.
//!
//! [`decode`] turns the extracted bytes into a `serde_json::Value` under the
//! depth limit, repairing trailing commas (and only that).

use serde_json::Value;

use super::{
    swar::{splat, zero_bytes},
    value::{read_at, read_whole},
};
use crate::model::DiagnosticKind;

const OUT: u8 = 0;
const IN: u8 = 1;
const ESC: u8 = 2;
const NONE: u32 = u32::MAX;

/// A resumable scan for the bracket that closes the element opened at
/// `opener`. Brackets are counted without regard to their kind; a mismatch
/// is left for the JSON parser to reject.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lexer {
    pos: usize,
    depth: usize,
    max_depth: usize,
    state: u8,
}

/// Bytes that matter outside strings.
const SPECIAL: [bool; 256] = {
    let mut table = [false; 256];
    table[b'"' as usize] = true;
    table[b'{' as usize] = true;
    table[b'[' as usize] = true;
    table[b'}' as usize] = true;
    table[b']' as usize] = true;
    table
};

impl Lexer {
    /// A scan of the element whose opening bracket is at `opener`.
    pub(crate) fn new(opener: usize) -> Self {
        Self {
            pos: opener + 1,
            depth: 1,
            max_depth: 1,
            state: OUT,
        }
    }

    /// The deepest nesting seen so far (the element itself is level 1).
    pub(crate) fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// Continues over `t[pos..]`: the position of the closing bracket, or
    /// `None` when `t` ended first (call again when it has grown).
    pub(crate) fn run(&mut self, t: &[u8]) -> Option<usize> {
        let mut i = self.pos;
        let mut state = self.state;
        let mut depth = self.depth;
        let mut max_depth = self.max_depth;
        while i < t.len() {
            match state {
                OUT => {
                    // The runs between tokens are a few bytes: a byte loop
                    // beats any set-up here.
                    while i < t.len() && !SPECIAL[usize::from(t[i])] {
                        i += 1;
                    }
                    let Some(&b) = t.get(i) else { break };
                    match b {
                        b'"' => state = IN,
                        b'{' | b'[' => {
                            depth += 1;
                            max_depth = max_depth.max(depth);
                        }
                        _ => {
                            depth -= 1;
                            if depth == 0 {
                                self.pos = i + 1;
                                self.state = OUT;
                                self.depth = 0;
                                self.max_depth = max_depth;
                                return Some(i);
                            }
                        }
                    }
                    i += 1;
                }
                IN => {
                    i = string_stop(t, i);
                    let Some(&b) = t.get(i) else { break };
                    state = if b == b'"' { OUT } else { ESC };
                    i += 1;
                }
                _ => {
                    state = IN;
                    i += 1;
                }
            }
        }
        self.pos = i;
        self.state = state;
        self.depth = depth;
        self.max_depth = max_depth;
        None
    }
}

/// The first `"` or `\` at or after `i` (inside a string), or `t.len()`.
///
/// The lexer runs over every byte of every element, and a stream calls it
/// again for each delta. JSON strings are short (a member name, a word or
/// two): eight bytes at a time with integer arithmetic costs less there
/// than `memchr2`'s set-up (measured: 8k fewer instructions per corpus pass
/// of `parse`, 15k fewer for a stream of 16-byte deltas). The runs between
/// tokens are shorter still, and a byte loop does best on them.
fn string_stop(t: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = t.get(i..i + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        // The lowest marked byte is exact (see `crate::json::swar`).
        let found = zero_bytes(w ^ splat(b'"')) | zero_bytes(w ^ splat(b'\\'));
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < t.len() && t[i] != b'"' && t[i] != b'\\' {
        i += 1;
    }
    i
}

/// Where each bracket closes, for every opener at or after `base`, computed in
/// one right-to-left pass over a complete text (12 bytes per byte).
#[derive(Debug)]
pub(crate) struct CloseIndex {
    base: usize,
    /// `table[(i - base) * 3 + state]`: the first position at or after `i`
    /// where a scan in `state` at depth 0 meets an unmatched closing bracket.
    table: Vec<u32>,
}

impl CloseIndex {
    /// Builds the index of `t[base..]`. `t` must be shorter than 4 GiB.
    pub(crate) fn build(t: &[u8], base: usize) -> Self {
        let n = t.len() - base;
        let mut table = vec![NONE; (n + 1) * 3];
        for rel in (0..n).rev() {
            let next = (rel + 1) * 3;
            let at = |table: &[u32], pos: u32, state: usize| -> u32 {
                if pos == NONE {
                    NONE
                } else {
                    table[(pos as usize - base) * 3 + state]
                }
            };
            let i = base + rel;
            let out = match t[i] {
                // Positions fit in u32: the caller bounds the text.
                b'}' | b']' => i as u32,
                b'{' | b'[' => {
                    let close = table[next + usize::from(OUT)];
                    if close == NONE {
                        NONE
                    } else {
                        at(&table, close + 1, usize::from(OUT))
                    }
                }
                b'"' => table[next + usize::from(IN)],
                _ => table[next + usize::from(OUT)],
            };
            let inside = match t[i] {
                b'"' => table[next + usize::from(OUT)],
                b'\\' => table[next + usize::from(ESC)],
                _ => table[next + usize::from(IN)],
            };
            let escaped = table[next + usize::from(IN)];
            table[rel * 3 + usize::from(OUT)] = out;
            table[rel * 3 + usize::from(IN)] = inside;
            table[rel * 3 + usize::from(ESC)] = escaped;
        }
        Self { base, table }
    }

    /// The first position the index covers.
    pub(crate) fn base(&self) -> usize {
        self.base
    }

    /// The bracket closing the element opened at `opener` (`opener >= base`).
    pub(crate) fn closer_of(&self, opener: usize) -> Option<usize> {
        let close = self.table[(opener + 1 - self.base) * 3 + usize::from(OUT)];
        (close != NONE).then_some(close as usize)
    }
}

/// True when the element `json` (starting with its opener) nests deeper than
/// `limit`.
pub(crate) fn exceeds_depth(json: &[u8], limit: usize) -> bool {
    let mut depth = 0usize;
    let mut state = OUT;
    for &b in json {
        match state {
            OUT => match b {
                b'"' => state = IN,
                b'{' | b'[' => {
                    depth += 1;
                    if depth > limit {
                        return true;
                    }
                }
                b'}' | b']' => depth = depth.saturating_sub(1),
                _ => {}
            },
            IN => match b {
                b'"' => state = OUT,
                b'\\' => state = ESC,
                _ => {}
            },
            _ => state = IN,
        }
    }
    false
}

/// `json` without the commas that directly precede a `}` or `]` (outside
/// strings), or `None` when it has none.
pub(crate) fn strip_trailing_commas(json: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(json.len());
    let mut state = OUT;
    let mut stripped = false;
    for (i, &b) in json.iter().enumerate() {
        match state {
            OUT => match b {
                b'"' => state = IN,
                b',' => {
                    let next = json[i + 1..]
                        .iter()
                        .find(|c| !matches!(c, b' ' | b'\t' | b'\r' | b'\n'));
                    if matches!(next, Some(b'}' | b']')) {
                        stripped = true;
                        continue;
                    }
                }
                _ => {}
            },
            IN => match b {
                b'"' => state = OUT,
                b'\\' => state = ESC,
                _ => {}
            },
            _ => state = IN,
        }
        out.push(b);
    }
    stripped.then_some(out)
}

/// A decoded element, and whether trailing commas had to be removed.
pub(crate) type Decoded = Result<(Value, bool), (DiagnosticKind, String)>;

/// Parses the extracted element under the depth limit (`depth` is its
/// nesting when already known), repairing trailing commas when that is the
/// only problem.
#[cfg(test)]
pub(crate) fn decode(json: &str, depth: Option<usize>, max_depth: usize) -> Decoded {
    check_depth(json, depth, max_depth)?;
    decode_within_depth(json)
}

/// `TooDeep` when the element `json` nests deeper than `max_depth` (`depth`
/// is its nesting when already known).
pub(crate) fn check_depth(
    json: &str,
    depth: Option<usize>,
    max_depth: usize,
) -> Result<(), (DiagnosticKind, String)> {
    let too_deep = match depth {
        Some(depth) => depth > max_depth,
        None => exceeds_depth(json.as_bytes(), max_depth),
    };
    if too_deep {
        return Err((
            DiagnosticKind::TooDeep,
            format!("nests deeper than {max_depth} levels"),
        ));
    }
    Ok(())
}

/// [`decode`] of an element already checked with [`check_depth`].
pub(crate) fn decode_within_depth(json: &str) -> Decoded {
    if let Some(value) = read_whole(json) {
        return Ok((value, false));
    }
    match serde_json::from_str::<Value>(json) {
        Ok(value) => Ok((value, false)),
        Err(error) => {
            let repaired = strip_trailing_commas(json.as_bytes())
                .and_then(|fixed| serde_json::from_slice::<Value>(&fixed).ok());
            match repaired {
                Some(value) => Ok((value, true)),
                None => Err((DiagnosticKind::InvalidJson, error.to_string())),
            }
        }
    }
}

/// A custom payload's object read by `serde_json` straight from its opening
/// brace at `opener`, when the whole text is at hand: the value, the
/// position of its closing brace and its nesting, or `None` when it is not
/// valid JSON or nests deeper than `max_depth` (the lexer then finds the
/// element and the decoder words the diagnostic, as for any element).
///
/// For valid JSON the closing brace is the one the lexer finds (it counts
/// brackets outside strings, as JSON nests them), and the nesting is the
/// lexer's: so this gives what the lexer and [`decode_within_depth`] give,
/// without the lexer's pass over the payload, the largest element of a
/// response.
pub(crate) fn decode_whole(
    text: &str,
    opener: usize,
    max_depth: usize,
) -> Option<(Value, usize, usize)> {
    let rest = text.get(opener..)?;
    if !rest.starts_with('{') {
        return None;
    }
    if let Some(read) = read_at(text, opener, max_depth) {
        return Some((read.value, read.end - 1, read.depth));
    }
    let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
    let value = values.next()?.ok()?;
    let close = opener + values.byte_offset().checked_sub(1)?;
    let depth = depth_of(&value);
    (depth <= max_depth).then_some((value, close, depth))
}

/// How deep `value` nests: 1 for an array or object of scalars.
/// (`serde_json` stops at 128 levels, so the recursion is bounded.)
fn depth_of(value: &Value) -> usize {
    let mut deepest = 0;
    let mut visit = |child: &Value| {
        if matches!(child, Value::Array(_) | Value::Object(_)) {
            deepest = deepest.max(depth_of(child));
        }
    };
    match value {
        Value::Array(items) => items.iter().for_each(&mut visit),
        Value::Object(members) => members.values().for_each(&mut visit),
        _ => return 0,
    }
    1 + deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(text: &str) -> Option<usize> {
        let opener = text.find(['{', '['])?;
        Lexer::new(opener).run(text.as_bytes())
    }

    proptest::proptest! {
        #[test]
        fn string_stop_is_the_first_quote_or_backslash(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just(b'"'),
                    proptest::strategy::Just(b'\\'),
                    proptest::strategy::Just(b'a'),
                    proptest::num::u8::ANY,
                ],
                0..40,
            ),
            from in 0usize..40,
        ) {
            let from = from.min(bytes.len());
            let naive = bytes[from..]
                .iter()
                .position(|&b| b == b'"' || b == b'\\')
                .map_or(bytes.len(), |k| from + k);
            proptest::prop_assert_eq!(string_stop(&bytes, from), naive);
        }
    }

    #[test]
    fn decode_whole_agrees_with_the_lexer_and_the_decoder() {
        let cases = [
            r#"P: {"a": "}]{[", "b": [1, {"c": "\\\""}]} tail {"#,
            r#"P: {"a": [[[1]]]} and more"#,
            r#"P: {"a": 1,} trailing comma"#,
            r#"P: {"a": 1"#,
            r#"P: {"a": [1}] mismatched"#,
            r#"P: {} "#,
        ];
        for text in cases {
            let opener = text.find('{').unwrap_or(0);
            let lexed = Lexer::new(opener).run(text.as_bytes());
            for max_depth in [1, 2, 3, 4, 64] {
                let by_lexer = lexed.and_then(|close| {
                    let mut lexer = Lexer::new(opener);
                    lexer.run(text.as_bytes());
                    match decode(&text[opener..=close], Some(lexer.max_depth()), max_depth) {
                        Ok((value, false)) => Some((value, close, lexer.max_depth())),
                        _ => None,
                    }
                });
                assert_eq!(
                    decode_whole(text, opener, max_depth),
                    by_lexer,
                    "{text} {max_depth}"
                );
            }
        }
    }

    #[test]
    fn brackets_in_strings_and_escaped_quotes_do_not_close() {
        let text = r#"{"a": "}]{[", "b": "say \"}\" now", "c": [1, {"d": "\\"}]} tail"#;
        assert_eq!(close(text), Some(text.rfind('}').unwrap_or(0)));
        assert_eq!(close(r#"{"a": "\\\"}"}"#), Some(13));
    }

    #[test]
    fn resumes_across_chunks_without_rescanning() {
        let text = r#"[{"label": "a\"]", "value": "b"}] rest"#;
        let mut lexer = Lexer::new(0);
        for end in 1..text.len() {
            if let Some(c) = lexer.run(&text.as_bytes()[..end]) {
                assert_eq!(c, 32);
                return;
            }
        }
        panic!("never closed");
    }

    #[test]
    fn close_index_agrees_with_the_lexer_everywhere() {
        let text = r#"{ "x {" [ {"a": [1, "\"]"]} \ "q\"" { ] } {{ [ "#;
        let t = text.as_bytes();
        let index = CloseIndex::build(t, 0);
        for (i, &b) in t.iter().enumerate() {
            if b == b'{' || b == b'[' {
                assert_eq!(index.closer_of(i), Lexer::new(i).run(t), "opener at {i}");
            }
        }
    }

    #[test]
    fn depth_limit_and_trailing_commas() {
        assert!(exceeds_depth(b"[[[[1]]]]", 3));
        assert!(!exceeds_depth(b"[[[\"[[[[\"]]]", 3));
        assert_eq!(
            strip_trailing_commas(br#"[1, 2, ] "#).as_deref(),
            Some(&br#"[1, 2 ] "#[..])
        );
        assert_eq!(strip_trailing_commas(br#"["a,]", 1]"#), None);
        assert!(matches!(decode(r#"{"a": [1,],}"#, None, 8), Ok((_, true))));
        assert!(matches!(decode(r#"{"a": 1}"#, Some(1), 8), Ok((_, false))));
        assert!(matches!(
            decode(r#"{'a': 1}"#, None, 8),
            Err((DiagnosticKind::InvalidJson, _))
        ));
        assert!(matches!(
            decode("[[[1]]]", None, 2),
            Err((DiagnosticKind::TooDeep, _))
        ));
        assert!(matches!(
            decode("[[[1]]]", Some(3), 2),
            Err((DiagnosticKind::TooDeep, _))
        ));
        let mut lexer = Lexer::new(0);
        assert_eq!(lexer.run(br#"[[1], [["[[[["]]]"#), Some(16));
        assert_eq!(lexer.max_depth(), 3);
    }
}
