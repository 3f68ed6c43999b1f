//! A JSON text read straight into a `serde_json::Value`, for the common
//! case, without going through serde's deserializer and visitor.
//!
//! Building a payload's `Value` is most of what a parse costs, and half of
//! that was `serde_json`'s machinery around the tree rather than the tree:
//! a visitor call per value, a scan set up per string, arrays grown by
//! doubling. This reader builds the same tree in one recursive pass, each
//! array allocated once at its size.
//!
//! It only ever answers what `serde_json::from_str::<Value>` accepts and
//! gives the same `Value` for it; anything it does not read itself it
//! either hands to `serde_json` (a string with an escape, a number other
//! than a plain unsigned integer) or gives up on (`None`): malformed
//! JSON, a control character in a string, a member name starting with `$`
//! (`serde_json` may treat some as its own markers), nesting deeper than
//! asked. The caller then takes the `serde_json` route, which decides and
//! words the error as it always has. The tests below hold it to that.
//!
//! [`Reader`] is also a cursor for readers that keep only part of an
//! element (`direct`): it checks a value it skips exactly as it would read
//! it, and hands out strings without escapes borrowed from the text.

use std::borrow::Cow;

use serde_json::{Map, Number, Value};

use super::swar::{bytes_below, splat};

/// Deepest nesting `serde_json` reads (it refuses the 128th level).
const SERDE_MAX_DEPTH: usize = 127;

/// Room for this many pending array items up front: the arrays of a
/// payload rarely hold more between them, and growing the scratch from
/// nothing costs three reallocations per payload.
const SCRATCH_ITEMS: usize = 16;

/// A value read from the text.
#[derive(Debug, PartialEq)]
pub(crate) struct Read {
    pub value: Value,
    /// The position just after the value.
    pub end: usize,
    /// How deep it nests: 0 for a scalar, 1 for an array or object of
    /// scalars.
    pub depth: usize,
}

/// Reads the JSON value that starts at `text[at]` (no whitespace before
/// it), nesting at most `max_depth` levels; `None` when this reader does
/// not answer (see the module documentation). What follows the value is
/// not looked at.
pub(crate) fn read_at(text: &str, at: usize, max_depth: usize) -> Option<Read> {
    let mut reader = Reader {
        s: text,
        t: text.as_bytes(),
        i: at,
        depth: 0,
        deepest: 0,
        max_depth: max_depth.min(SERDE_MAX_DEPTH),
        items: Vec::with_capacity(SCRATCH_ITEMS),
    };
    let value = reader.value()?;
    Some(Read {
        value,
        end: reader.i,
        depth: reader.deepest,
    })
}

/// What `serde_json::from_str::<Value>(json)` gives when it succeeds, or
/// `None` when this reader does not answer.
pub(crate) fn read_whole(json: &str) -> Option<Value> {
    let t = json.as_bytes();
    let start = skip_ws(t, 0);
    let read = read_at(json, start, SERDE_MAX_DEPTH)?;
    (skip_ws(t, read.end) == t.len()).then_some(read.value)
}

/// The first position at or after `i` that is not JSON whitespace.
fn skip_ws(t: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\t' | b'\r') = t.get(i) {
        i += 1;
    }
    i
}

/// The first `"`, `\` or control character at or after `i`, or `t.len()`.
fn string_stop(t: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = t.get(i..i + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        // Each term's lowest mark is exact, and a wrong mark only ever sits
        // above a right one of the same term: the lowest of all is exact.
        let found = bytes_below(w ^ splat(b'"'), 1)
            | bytes_below(w ^ splat(b'\\'), 1)
            | bytes_below(w, 0x20);
        if found != 0 {
            return i + (found.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < t.len() && t[i] != b'"' && t[i] != b'\\' && t[i] >= 0x20 {
        i += 1;
    }
    i
}

/// Whether `b` can continue a JSON number.
fn is_number_byte(b: u8) -> bool {
    matches!(b, b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
}

/// A position in a JSON text, read forwards. Every method that reads a
/// value expects the position at its first byte (no whitespace before it)
/// and leaves it just after the value; `None` means this reader does not
/// answer (see the module documentation), and the position is then
/// unspecified.
pub(crate) struct Reader<'a> {
    s: &'a str,
    t: &'a [u8],
    i: usize,
    depth: usize,
    deepest: usize,
    max_depth: usize,
    /// The items of the arrays being read, innermost last: each array is
    /// allocated once, at its length, when it closes.
    items: Vec<Value>,
}

impl<'a> Reader<'a> {
    /// A reader at the first byte of `json` that is not whitespace,
    /// nesting as deep as `serde_json` reads. Allocates nothing until an
    /// array is read into a `Value`.
    pub(crate) fn new(json: &'a str) -> Self {
        let t = json.as_bytes();
        Self {
            s: json,
            t,
            i: skip_ws(t, 0),
            depth: 0,
            deepest: 0,
            max_depth: SERDE_MAX_DEPTH,
            items: Vec::new(),
        }
    }

    /// A reader at `text[at]`, nesting at most `max_depth` levels (and no
    /// deeper than `serde_json` reads).
    pub(crate) fn at(text: &'a str, at: usize, max_depth: usize) -> Self {
        Self {
            s: text,
            t: text.as_bytes(),
            i: at,
            depth: 0,
            deepest: 0,
            max_depth: max_depth.min(SERDE_MAX_DEPTH),
            items: Vec::new(),
        }
    }

    /// The position: just after the last value read.
    pub(crate) fn position(&self) -> usize {
        self.i
    }

    /// How deep what was read so far nests: 1 for an array or object of
    /// scalars.
    pub(crate) fn deepest(&self) -> usize {
        self.deepest
    }

    /// The byte at the position, if any.
    pub(crate) fn peek(&self) -> Option<u8> {
        self.t.get(self.i).copied()
    }

    /// Whether only whitespace is left.
    pub(crate) fn at_end(&self) -> bool {
        skip_ws(self.t, self.i) == self.t.len()
    }

    /// The items of the array at the position, each read by `item` (called
    /// at the item's first byte; it must read the whole item).
    pub(crate) fn items(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        if self.peek()? != b'[' {
            return None;
        }
        self.enter()?;
        self.i = skip_ws(self.t, self.i + 1);
        if self.peek() == Some(b']') {
            self.i += 1;
        } else {
            loop {
                item(self)?;
                match self.next_token()? {
                    b',' => self.i = skip_ws(self.t, self.i),
                    b']' => break,
                    _ => return None,
                }
            }
        }
        self.depth -= 1;
        Some(())
    }

    /// The members of the object at the position, each given to `member`
    /// with its name (called at the value's first byte; it must read the
    /// whole value). A name starting with `$` is not answered, as in
    /// [`Self::value`].
    pub(crate) fn members(
        &mut self,
        mut member: impl FnMut(&mut Self, Cow<'a, str>) -> Option<()>,
    ) -> Option<()> {
        if self.peek()? != b'{' {
            return None;
        }
        self.enter()?;
        self.i += 1;
        let mut b = self.next_token()?;
        if b != b'}' {
            loop {
                if b != b'"' {
                    return None;
                }
                self.i -= 1;
                let name = self.text()?;
                if name.starts_with('$') || self.next_token()? != b':' {
                    return None;
                }
                self.i = skip_ws(self.t, self.i);
                member(self, name)?;
                match self.next_token()? {
                    b',' => b = self.next_token()?,
                    b'}' => break,
                    _ => return None,
                }
            }
        }
        self.depth -= 1;
        Some(())
    }

    /// The string at the position, borrowed from the text unless it has an
    /// escape; `None` for anything but a string.
    pub(crate) fn text(&mut self) -> Option<Cow<'a, str>> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.i + 1;
        let stop = string_stop(self.t, start);
        match self.t.get(stop)? {
            b'"' => {
                self.i = stop + 1;
                Some(Cow::Borrowed(self.s.get(start..stop)?))
            }
            b'\\' => self.escaped_string().map(Cow::Owned),
            _ => None,
        }
    }

    /// The string at the position, owned; `None` for anything but a
    /// string. (What [`Self::text`] gives, copied by the same code that
    /// reads a `Value`'s strings.)
    pub(crate) fn owned_text(&mut self) -> Option<String> {
        if self.peek()? != b'"' {
            return None;
        }
        self.string()
    }

    /// Whether the value at the position is `null` (consumed if so).
    pub(crate) fn null(&mut self) -> bool {
        let null = self.t.get(self.i..self.i + 4) == Some(b"null");
        if null {
            self.i += 4;
        }
        null
    }

    /// Checks the value at the position as [`Self::value`] would read it,
    /// without building it.
    pub(crate) fn skip(&mut self) -> Option<()> {
        match *self.t.get(self.i)? {
            b'{' => self.members(|reader, _| reader.skip()),
            b'[' => self.items(Self::skip),
            b'"' => self.text().map(drop),
            b't' => self.literal(b"true", Value::Null).map(drop),
            b'f' => self.literal(b"false", Value::Null).map(drop),
            b'n' => self.literal(b"null", Value::Null).map(drop),
            b'-' | b'0'..=b'9' => self.number().map(drop),
            _ => None,
        }
    }

    pub(crate) fn value(&mut self) -> Option<Value> {
        match *self.t.get(self.i)? {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => self.string().map(Value::String),
            b't' => self.literal(b"true", Value::Bool(true)),
            b'f' => self.literal(b"false", Value::Bool(false)),
            b'n' => self.literal(b"null", Value::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn enter(&mut self) -> Option<()> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return None;
        }
        self.deepest = self.deepest.max(self.depth);
        Some(())
    }

    /// The byte after the whitespace at the current position, consumed.
    fn next_token(&mut self) -> Option<u8> {
        self.i = skip_ws(self.t, self.i);
        let b = *self.t.get(self.i)?;
        self.i += 1;
        Some(b)
    }

    #[inline(never)]
    fn object(&mut self) -> Option<Value> {
        self.enter()?;
        self.i += 1;
        let mut members = Map::new();
        let mut b = self.next_token()?;
        if b != b'}' {
            loop {
                if b != b'"' {
                    return None;
                }
                self.i -= 1;
                let key = self.string()?;
                if key.starts_with('$') {
                    return None;
                }
                if self.next_token()? != b':' {
                    return None;
                }
                self.i = skip_ws(self.t, self.i);
                // Most members are strings: read without a call through `value`.
                let value = if self.t.get(self.i) == Some(&b'"') {
                    Value::String(self.string()?)
                } else {
                    self.value()?
                };
                members.insert(key, value);
                match self.next_token()? {
                    b',' => b = self.next_token()?,
                    b'}' => break,
                    _ => return None,
                }
            }
        }
        self.depth -= 1;
        Some(Value::Object(members))
    }

    #[inline(never)]
    fn array(&mut self) -> Option<Value> {
        self.enter()?;
        self.i += 1;
        let base = self.items.len();
        self.i = skip_ws(self.t, self.i);
        if self.t.get(self.i) == Some(&b']') {
            self.i += 1;
        } else {
            loop {
                let item = if self.t.get(self.i) == Some(&b'"') {
                    Value::String(self.string()?)
                } else {
                    self.value()?
                };
                self.items.push(item);
                match self.next_token()? {
                    b',' => self.i = skip_ws(self.t, self.i),
                    b']' => break,
                    _ => return None,
                }
            }
        }
        self.depth -= 1;
        Some(Value::Array(self.items.split_off(base)))
    }

    /// The string whose opening quote is at the current position.
    fn string(&mut self) -> Option<String> {
        let start = self.i + 1;
        let stop = string_stop(self.t, start);
        match self.t.get(stop)? {
            b'"' => {
                self.i = stop + 1;
                Some(self.s[start..stop].to_owned())
            }
            b'\\' => self.escaped_string(),
            _ => None,
        }
    }

    /// A string with an escape: found here, unescaped by `serde_json`.
    fn escaped_string(&mut self) -> Option<String> {
        let start = self.i;
        let mut i = start + 1;
        loop {
            i = string_stop(self.t, i);
            match self.t.get(i)? {
                b'"' => break,
                b'\\' => i += 2,
                _ => return None,
            }
        }
        self.i = i + 1;
        serde_json::from_str(self.s.get(start..self.i)?).ok()
    }

    fn literal(&mut self, word: &[u8], value: Value) -> Option<Value> {
        let end = self.i + word.len();
        if self.t.get(self.i..end)? != word {
            return None;
        }
        self.i = end;
        Some(value)
    }

    /// A number: a plain unsigned integer is read here, any other is
    /// handed to `serde_json` (which also refuses what JSON does not allow,
    /// such as a leading zero).
    fn number(&mut self) -> Option<Value> {
        let start = self.i;
        let mut end = start;
        let mut n: u64 = 0;
        while let Some(&b) = self.t.get(end)
            && b.is_ascii_digit()
        {
            n = n.wrapping_mul(10).wrapping_add(u64::from(b - b'0'));
            end += 1;
        }
        let digits = end - start;
        if self.t.get(end).copied().is_some_and(is_number_byte)
            || digits == 0
            || digits > 19
            || (digits > 1 && self.t[start] == b'0')
        {
            while self.t.get(end).copied().is_some_and(is_number_byte) {
                end += 1;
            }
            self.i = end;
            return match serde_json::from_str::<Value>(self.s.get(start..end)?).ok()? {
                number @ Value::Number(_) => Some(number),
                _ => None,
            };
        }
        // At most 19 digits: below 10^19, no overflow.
        self.i = end;
        Some(Value::Number(Number::from(n)))
    }
}

#[cfg(test)]
mod tests;
