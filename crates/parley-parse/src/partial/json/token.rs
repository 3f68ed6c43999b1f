//! The tokens [`PartialJson`](super::PartialJson) reads byte by byte: a
//! string (escapes and multi-byte characters kept out until whole) and
//! where a number is in the JSON number grammar.

use super::{Fault, Step};

/// A string being read.
#[derive(Debug, Clone)]
pub(super) struct StringToken {
    /// Whether it is an object key (keys are never shown before the value).
    pub(super) key: bool,
    /// Its whole characters so far.
    pub(super) text: String,
    escape: Escape,
    /// The bytes of a multi-byte character not yet whole.
    utf8: [u8; 4],
    utf8_len: usize,
}

/// Where a string is in an escape sequence.
#[derive(Debug, Clone, Copy)]
enum Escape {
    /// Not in one.
    None,
    /// After `\`.
    Backslash,
    /// In the hex digits of `\u`: the code so far and how many digits were
    /// read; `high` is the high surrogate this one must complete.
    Hex {
        code: u32,
        digits: u8,
        high: Option<u32>,
    },
    /// After a high surrogate: `\` must follow.
    LowBackslash(u32),
    /// After a high surrogate and `\`: `u` must follow.
    LowU(u32),
}

/// Where a number is in the JSON number grammar
/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NumberAt {
    Minus,
    Zero,
    Int,
    Point,
    Fraction,
    E,
    ESign,
    Exponent,
}

impl NumberAt {
    /// Where the grammar is after `b`, or `None` when `b` cannot continue it.
    pub(super) fn next(self, b: u8) -> Option<Self> {
        use NumberAt::*;
        match (self, b) {
            (Minus, b'0') => Some(Zero),
            (Minus, b'1'..=b'9') | (Int, b'0'..=b'9') => Some(Int),
            (Zero | Int, b'.') => Some(Point),
            (Point | Fraction, b'0'..=b'9') => Some(Fraction),
            (Zero | Int | Fraction, b'e' | b'E') => Some(E),
            (E, b'+' | b'-') => Some(ESign),
            (E | ESign | Exponent, b'0'..=b'9') => Some(Exponent),
            _ => None,
        }
    }

    /// Whether the text so far is a whole number.
    pub(super) fn is_whole(self) -> bool {
        matches!(
            self,
            NumberAt::Zero | NumberAt::Int | NumberAt::Fraction | NumberAt::Exponent
        )
    }
}

impl StringToken {
    pub(super) fn new(key: bool) -> Self {
        Self {
            key,
            text: String::new(),
            escape: Escape::None,
            utf8: [0; 4],
            utf8_len: 0,
        }
    }

    /// Reads string bytes: how many it used, and whether the last of them
    /// was the closing quote; or where the offending byte is.
    pub(super) fn read(&mut self, bytes: &[u8]) -> Result<(usize, bool), (usize, Fault)> {
        for (k, &b) in bytes.iter().enumerate() {
            if self.byte(b).map_err(|fault| (k, fault))? {
                return Ok((k + 1, true));
            }
        }
        Ok((bytes.len(), false))
    }

    /// One byte of the string; true when it is the closing quote.
    fn byte(&mut self, b: u8) -> Result<bool, Fault> {
        match self.escape {
            Escape::None if self.utf8_len > 0 || b >= 0x80 => self.utf8_byte(b)?,
            Escape::None => match b {
                b'"' => return Ok(true),
                b'\\' => self.escape = Escape::Backslash,
                0x00..=0x1f => return Err(Fault::Invalid("a control character in a string")),
                _ => self.text.push(char::from(b)),
            },
            Escape::Backslash if b == b'u' => {
                self.escape = Escape::Hex {
                    code: 0,
                    digits: 0,
                    high: None,
                };
            }
            Escape::Backslash => {
                let c = match b {
                    b'"' => '"',
                    b'\\' => '\\',
                    b'/' => '/',
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    b'n' => '\n',
                    b'r' => '\r',
                    b't' => '\t',
                    _ => return Err(Fault::Invalid("unknown escape in a string")),
                };
                self.text.push(c);
                self.escape = Escape::None;
            }
            Escape::Hex { code, digits, high } => {
                let digit = char::from(b)
                    .to_digit(16)
                    .ok_or(Fault::Invalid("expected a hex digit in `\\u`"))?;
                let code = code * 16 + digit;
                self.escape = if digits < 3 {
                    Escape::Hex {
                        code,
                        digits: digits + 1,
                        high,
                    }
                } else {
                    self.code_point(code, high)?
                };
            }
            Escape::LowBackslash(high) if b == b'\\' => self.escape = Escape::LowU(high),
            Escape::LowU(high) if b == b'u' => {
                self.escape = Escape::Hex {
                    code: 0,
                    digits: 0,
                    high: Some(high),
                };
            }
            Escape::LowBackslash(_) | Escape::LowU(_) => {
                return Err(Fault::Invalid("a high surrogate without its low half"));
            }
        }
        Ok(false)
    }

    /// A whole `\uXXXX` escape; `high` is the surrogate it completes.
    fn code_point(&mut self, code: u32, high: Option<u32>) -> Result<Escape, Fault> {
        let scalar = match (high, code) {
            (None, 0xd800..=0xdbff) => return Ok(Escape::LowBackslash(code)),
            (None, 0xdc00..=0xdfff) => {
                return Err(Fault::Invalid("a low surrogate without its high half"));
            }
            (None, code) => code,
            (Some(high), 0xdc00..=0xdfff) => 0x10000 + ((high - 0xd800) << 10) + (code - 0xdc00),
            (Some(_), _) => {
                return Err(Fault::Invalid("a high surrogate without its low half"));
            }
        };
        let c = char::from_u32(scalar).ok_or(Fault::Invalid("not a Unicode scalar value"))?;
        self.text.push(c);
        Ok(Escape::None)
    }

    /// One byte of a multi-byte UTF-8 character.
    fn utf8_byte(&mut self, b: u8) -> Step {
        let lead = if self.utf8_len == 0 { b } else { self.utf8[0] };
        let width = match lead {
            0xc2..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf4 => 4,
            _ => return Err(Fault::Invalid("invalid UTF-8")),
        };
        if self.utf8_len > 0 && b & 0xc0 != 0x80 {
            return Err(Fault::Invalid("invalid UTF-8"));
        }
        self.utf8[self.utf8_len] = b;
        self.utf8_len += 1;
        if self.utf8_len == width {
            let c = std::str::from_utf8(&self.utf8[..width])
                .map_err(|_| Fault::Invalid("invalid UTF-8"))?;
            self.text.push_str(c);
            self.utf8_len = 0;
        }
        Ok(())
    }
}
