//! Partial JSON: the value a JSON document has *so far*, while it is still
//! being written.
//!
//! A model writes a payload's JSON a few bytes at a time. [`PartialJson`]
//! takes those bytes as they come ([`PartialJson::feed`]) and says at any
//! point what the value is so far ([`PartialJson::value`]): the JSON written
//! up to now, closed where it is open, so a UI can render a card growing
//! field by field.
//!
//! | written so far | value so far | complete paths |
//! |---|---|---|
//! | `{"title": "Quarterly rev` | `{"title": "Quarterly rev"}` | |
//! | `{"title": "Q", "rows": [12` | `{"title": "Q", "rows": []}` | `/title` |
//! | `{"title": "Q", "rows": [12, {"n` | `{"title": "Q", "rows": [12, {}]}` | `/title`, `/rows/0` |
//! | `{"title": "Q", "rows": [12, {"n": tr` | `{"title": "Q", "rows": [12, {}]}` | `/title`, `/rows/0` |
//! | `{"title": "Q", "rows": [12, {"n": true}]` | `{"title": "Q", "rows": [12, {"n": true}]}` | `/title`, `/rows` |
//! | `{"title": "Q", "rows": [12, {"n": true}]}` | the same | (the root, `""`) |
//!
//! # How an open document is closed
//!
//! - A string is cut after its last whole character: a multi-byte UTF-8
//!   character, a `\uXXXX` escape (or a surrogate pair) or a `\n`-style
//!   escape cut in the middle is left out until it is whole.
//! - A number is shown only once something follows it (`,`, `]`, `}` or
//!   whitespace): `12` at the very end may still become `123`, and `-`,
//!   `1.` and `1e` are not numbers yet. A number that *is* the whole
//!   document is known only at [`PartialJson::finish`].
//! - `true`, `false` and `null` are shown only once whole.
//! - An object member is shown once its value has started (a string, array
//!   or object) or is whole (a number or keyword); a key alone is left out.
//! - Open arrays and objects are closed.
//!
//! # Complete paths
//!
//! [`PartialJson::complete_paths`] lists the values that are final, as JSON
//! Pointers (RFC 6901): `""` is the whole document, `/rows/0/name` the
//! member `name` of the first item of `rows`; a `~` in a key is written
//! `~0` and a `/` is written `~1`. A closed string, a number, a keyword and
//! a closed array or object are final. The list is kept short: when an
//! array or object closes, its own path replaces those of its members, so a
//! path is final when it *or one of its ancestors* is listed
//! ([`is_complete_path`] answers that). Until the document is whole, the
//! list holds the finished members of the arrays and objects still open, in
//! document order.
//!
//! # Guarantees
//!
//! For successive prefixes of one valid document:
//!
//! - each value so far *extends* the one before: objects keep their
//!   members and gain new ones, arrays keep their items and gain new ones,
//!   the one string being written grows at its end, nothing else changes;
//! - a value at a complete path never changes again, and the path stays
//!   complete;
//! - once the whole document has been fed, the value equals what
//!   `serde_json` makes of the document.
//!
//! [`PartialJson::version`] changes exactly when the value or the complete
//! paths do, so a caller can tell cheaply whether there is anything new to
//! show.
//!
//! # What stops it
//!
//! The closer stops at the first byte that cannot continue a valid JSON
//! document, and then keeps the value it had; every later
//! [`PartialJson::feed`] returns the same [`PartialError`]. Besides invalid
//! JSON, that is: nesting deeper than [`Limits::max_depth`], more bytes than
//! [`Limits::max_bytes`], and a key repeated in one object (`serde_json`
//! keeps the last one, so the value shown for the first could otherwise
//! change). A trailing comma before `]` or `}` is accepted, as the parser
//! repairs it. Whatever stops the closer, the final parse of the payload is
//! what counts.
//!
//! # Cost
//!
//! [`PartialJson::feed`] costs time proportional to the bytes fed (it never
//! re-reads earlier ones). [`PartialJson::value`] builds the value so far,
//! in time proportional to its size. The complete paths are bounded by
//! `Limits::max_bytes` bytes in all: a final value whose path would not fit
//! (only absurdly long keys do that) is left out of the list until an
//! enclosing array or object closes.
//!
//! # Example
//!
//! ```
//! use parley_parse::{Limits, partial::PartialJson};
//! use serde_json::json;
//!
//! let mut json = PartialJson::new(Limits::default());
//! json.feed(br#"{"mode": "update", "operations": [{"action": "remo"#)?;
//! assert_eq!(
//!     json.value(),
//!     Some(json!({"mode": "update", "operations": [{"action": "remo"}]}))
//! );
//! assert_eq!(json.complete_paths(), ["/mode"]);
//!
//! json.feed(br#"ve", "column_id": 12"#)?;
//! // `12` might still become `123`: not shown yet.
//! assert_eq!(
//!     json.value(),
//!     Some(json!({"mode": "update", "operations": [{"action": "remove"}]}))
//! );
//! assert_eq!(json.complete_paths(), ["/mode", "/operations/0/action"]);
//!
//! json.feed(b"}]}")?;
//! assert_eq!(json.complete_paths(), [""]);
//! assert!(json.is_complete());
//! # Ok::<(), parley_parse::PartialError>(())
//! ```

use serde_json::{Map, Number, Value};

use crate::{error::PartialError, limits::Limits};

/// The value of a JSON document being written, read incrementally.
///
/// See the [module documentation](self) for the rules and guarantees.
#[derive(Debug, Clone)]
pub struct PartialJson {
    max_depth: usize,
    max_bytes: usize,
    /// Bytes accepted so far.
    received: usize,
    /// The arrays and objects still open, outermost first.
    stack: Vec<Frame>,
    /// What may come next, between tokens.
    expect: Expect,
    /// The token being read.
    token: Token,
    /// The whole document's value, once it is complete.
    root: Option<Value>,
    /// The complete paths (see the module documentation).
    complete: Vec<String>,
    /// The total length of `complete`, in bytes.
    complete_bytes: usize,
    /// Changes whenever `value()` or `complete_paths()` would.
    version: u64,
    /// Why the closer stopped, once it has.
    error: Option<PartialError>,
}

/// An open array or object.
#[derive(Debug, Clone)]
struct Frame {
    container: Container,
    /// Its JSON Pointer.
    path: String,
    /// Length and byte size of the complete paths when it opened: the paths
    /// of its members come after.
    mark: (usize, usize),
}

#[derive(Debug, Clone)]
enum Container {
    Array(Vec<Value>),
    /// The members so far, and the key whose value is being read (from the
    /// end of the key to the end of its value).
    Object(Map<String, Value>, Option<String>),
}

/// What may come next, outside any token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// A value; with `or_close`, the enclosing array may close instead
    /// (right after `[`, or after a comma: a trailing comma).
    Value { or_close: bool },
    /// A key; with `or_close`, the enclosing object may close instead.
    Key { or_close: bool },
    /// The colon after a key.
    Colon,
    /// A comma, or the bracket that closes the enclosing array or object.
    CommaOrClose,
    /// Nothing but whitespace: the document is complete.
    End,
}

/// The token being read.
#[derive(Debug, Clone)]
enum Token {
    /// None: between tokens.
    Between,
    /// A string (a key or a value).
    Str(StringToken),
    /// A number: its text and where its grammar is.
    Number(String, NumberAt),
    /// `true`, `false` or `null`: the word and how many of its bytes matched.
    Keyword(&'static [u8], usize),
}

/// A string being read.
#[derive(Debug, Clone)]
struct StringToken {
    /// Whether it is an object key (keys are never shown before the value).
    key: bool,
    /// Its whole characters so far.
    text: String,
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
enum NumberAt {
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
    fn next(self, b: u8) -> Option<Self> {
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
    fn is_whole(self) -> bool {
        matches!(
            self,
            NumberAt::Zero | NumberAt::Int | NumberAt::Fraction | NumberAt::Exponent
        )
    }
}

/// Why a byte was refused (the offset is added by `feed`).
enum Fault {
    Invalid(&'static str),
    TooDeep,
}

type Step = Result<(), Fault>;

impl PartialJson {
    /// An empty document, bounded by `limits` (nesting depth and bytes).
    pub fn new(limits: Limits) -> Self {
        Self {
            max_depth: limits.effective_depth(),
            max_bytes: limits.effective_max_bytes(),
            received: 0,
            stack: Vec::new(),
            expect: Expect::Value { or_close: false },
            token: Token::Between,
            root: None,
            complete: Vec::new(),
            complete_bytes: 0,
            version: 0,
            error: None,
        }
    }

    /// Reads the next bytes of the document. They may end anywhere, even
    /// inside a multi-byte character.
    ///
    /// Fails when the bytes cannot continue a valid JSON document, nest
    /// deeper than `max_depth`, or take the document past `max_bytes`. The
    /// closer then stops: the value stays what it was before the offending
    /// byte, and every later call returns the same error.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), PartialError> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        let size = self.received.saturating_add(bytes.len());
        if size > self.max_bytes {
            return Err(self.stop(PartialError::TooLarge {
                size,
                limit: self.max_bytes,
            }));
        }
        let mut i = 0;
        while i < bytes.len() {
            let step = match self.token {
                Token::Between => self.between(bytes[i]).map(|()| 1).map_err(|f| (0, f)),
                Token::Str(_) => self.string(&bytes[i..]),
                Token::Number(..) => self.number(bytes[i]).map_err(|f| (0, f)),
                Token::Keyword(..) => self.keyword(bytes[i]).map(|()| 1).map_err(|f| (0, f)),
            };
            match step {
                Ok(used) => i += used,
                Err((at, fault)) => {
                    let offset = self.received + i + at;
                    let error = match fault {
                        Fault::Invalid(reason) => PartialError::Invalid { offset, reason },
                        Fault::TooDeep => PartialError::TooDeep {
                            offset,
                            limit: self.max_depth,
                        },
                    };
                    return Err(self.stop(error));
                }
            }
        }
        self.received = size;
        Ok(())
    }

    /// Ends the document: the whole value, or why there is none. Only here
    /// can a number that is the whole document (`12`) be known complete.
    pub fn finish(mut self) -> Result<Value, PartialError> {
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        let token = std::mem::replace(&mut self.token, Token::Between);
        if let Token::Number(text, at) = token
            && self.stack.is_empty()
            && at.is_whole()
            && let Err(Fault::Invalid(reason)) = self.commit_number(&text)
        {
            return Err(PartialError::Invalid {
                offset: self.received,
                reason,
            });
        }
        self.root.ok_or(PartialError::Incomplete {
            received: self.received,
        })
    }

    /// The value so far, closed where it is open; `None` while nothing can
    /// be shown (no bytes yet, or a document that is one unfinished number
    /// or keyword). Costs time proportional to the value's size.
    pub fn value(&self) -> Option<Value> {
        if let Some(root) = &self.root {
            return Some(root.clone());
        }
        let mut inner = match &self.token {
            Token::Str(string) if !string.key => Some(Value::String(string.text.clone())),
            _ => None,
        };
        for frame in self.stack.iter().rev() {
            inner = Some(match &frame.container {
                Container::Array(items) => {
                    let mut items = items.clone();
                    items.extend(inner);
                    Value::Array(items)
                }
                Container::Object(members, key) => {
                    let mut members = members.clone();
                    if let (Some(key), Some(value)) = (key, inner) {
                        members.insert(key.clone(), value);
                    }
                    Value::Object(members)
                }
            });
        }
        inner
    }

    /// The JSON Pointers of the values that are final, in document order;
    /// the members of a closed array or object are covered by its own path
    /// (see the module documentation).
    pub fn complete_paths(&self) -> &[String] {
        &self.complete
    }

    /// Whether the whole document has been read.
    pub fn is_complete(&self) -> bool {
        self.root.is_some()
    }

    /// A counter that changes whenever [`PartialJson::value`] or
    /// [`PartialJson::complete_paths`] would return something new, and only
    /// then.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Bytes read so far.
    pub fn received(&self) -> usize {
        self.received
    }

    /// Why the closer stopped, if it has.
    pub fn error(&self) -> Option<&PartialError> {
        self.error.as_ref()
    }

    fn stop(&mut self, error: PartialError) -> PartialError {
        self.error = Some(error.clone());
        error
    }

    /// A byte between tokens.
    fn between(&mut self, b: u8) -> Step {
        if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            return Ok(());
        }
        match self.expect {
            Expect::Value { or_close } => match b {
                b'"' => {
                    self.token = Token::Str(StringToken::new(false));
                    // An empty string appears where the value goes.
                    self.version += 1;
                    Ok(())
                }
                b'[' => self.open(Container::Array(Vec::new())),
                b'{' => self.open(Container::Object(Map::new(), None)),
                b'-' => {
                    self.token = Token::Number("-".into(), NumberAt::Minus);
                    Ok(())
                }
                b'0' => {
                    self.token = Token::Number("0".into(), NumberAt::Zero);
                    Ok(())
                }
                b'1'..=b'9' => {
                    self.token = Token::Number(char::from(b).into(), NumberAt::Int);
                    Ok(())
                }
                b't' => self.start_keyword(b"true"),
                b'f' => self.start_keyword(b"false"),
                b'n' => self.start_keyword(b"null"),
                b']' if or_close => self.close(b),
                _ => Err(Fault::Invalid("expected a value")),
            },
            Expect::Key { or_close } => match b {
                b'"' => {
                    self.token = Token::Str(StringToken::new(true));
                    Ok(())
                }
                b'}' if or_close => self.close(b),
                _ => Err(Fault::Invalid("expected a key")),
            },
            Expect::Colon if b == b':' => {
                self.expect = Expect::Value { or_close: false };
                Ok(())
            }
            Expect::Colon => Err(Fault::Invalid("expected `:` after a key")),
            Expect::CommaOrClose => match (b, self.stack.last().map(|f| &f.container)) {
                (b',', Some(Container::Array(_))) => {
                    self.expect = Expect::Value { or_close: true };
                    Ok(())
                }
                (b',', Some(Container::Object(..))) => {
                    self.expect = Expect::Key { or_close: true };
                    Ok(())
                }
                (b']', Some(Container::Array(_))) | (b'}', Some(Container::Object(..))) => {
                    self.close(b)
                }
                _ => Err(Fault::Invalid("expected `,` or a closing bracket")),
            },
            Expect::End => Err(Fault::Invalid("text after the end of the document")),
        }
    }

    fn start_keyword(&mut self, word: &'static [u8]) -> Step {
        self.token = Token::Keyword(word, 1);
        Ok(())
    }

    /// The next byte of `true`, `false` or `null`.
    fn keyword(&mut self, b: u8) -> Step {
        let Token::Keyword(word, matched) = &mut self.token else {
            return Ok(());
        };
        if word.get(*matched) != Some(&b) {
            return Err(Fault::Invalid("expected `true`, `false` or `null`"));
        }
        *matched += 1;
        if *matched < word.len() {
            return Ok(());
        }
        let value = match *word {
            b"true" => Value::Bool(true),
            b"false" => Value::Bool(false),
            _ => Value::Null,
        };
        self.token = Token::Between;
        self.done(value);
        Ok(())
    }

    /// The next byte of a number: 1 when it continues the number, 0 when it
    /// ends it (the byte is read again between tokens).
    fn number(&mut self, b: u8) -> Result<usize, Fault> {
        let may_end = self.may_follow_value(b);
        let Token::Number(text, at) = &mut self.token else {
            return Ok(0);
        };
        if let Some(next) = at.next(b) {
            *at = next;
            text.push(char::from(b));
            return Ok(1);
        }
        if !(at.is_whole() && may_end) {
            return Err(Fault::Invalid("malformed number"));
        }
        let text = std::mem::take(text);
        self.token = Token::Between;
        self.commit_number(&text)?;
        Ok(0)
    }

    /// Whether `b` may follow a complete value here: checked before a
    /// number is committed, so a byte that stops the closer never changes
    /// the value first.
    fn may_follow_value(&self, b: u8) -> bool {
        matches!(
            (b, self.stack.last().map(|frame| &frame.container)),
            (b' ' | b'\t' | b'\n' | b'\r', _)
                | (b',', Some(_))
                | (b']', Some(Container::Array(_)))
                | (b'}', Some(Container::Object(..)))
        )
    }

    fn commit_number(&mut self, text: &str) -> Step {
        // The same conversion `serde_json` applies to a whole document.
        let number: Number = text
            .parse()
            .map_err(|_| Fault::Invalid("number out of range"))?;
        self.done(Value::Number(number));
        Ok(())
    }

    /// String bytes from the start of `bytes`: how many were used, or
    /// where in `bytes` the offending one is and what is wrong with it.
    fn string(&mut self, bytes: &[u8]) -> Result<usize, (usize, Fault)> {
        let Token::Str(string) = &mut self.token else {
            return Ok(0);
        };
        let before = string.text.len();
        let read = string.read(bytes);
        if string.text.len() > before && !string.key {
            self.version += 1;
        }
        let used = match read {
            Ok((used, false)) => return Ok(used),
            Ok((used, true)) => used,
            Err(refused) => return Err(refused),
        };
        let (key, text) = (string.key, std::mem::take(&mut string.text));
        self.token = Token::Between;
        if key {
            // The closing quote is the offending byte.
            self.key(text).map_err(|fault| (used - 1, fault))?;
        } else {
            self.done(Value::String(text));
        }
        Ok(used)
    }

    /// A key has been read.
    fn key(&mut self, key: String) -> Step {
        let Some(Frame {
            container: Container::Object(members, pending),
            ..
        }) = self.stack.last_mut()
        else {
            return Err(Fault::Invalid("a key outside an object"));
        };
        if members.contains_key(&key) {
            return Err(Fault::Invalid("a key repeated in one object"));
        }
        *pending = Some(key);
        self.expect = Expect::Colon;
        Ok(())
    }

    /// The path of the value that starts now.
    fn next_path(&self) -> String {
        let Some(frame) = self.stack.last() else {
            return String::new();
        };
        let mut path = String::with_capacity(frame.path.len() + 8);
        path.push_str(&frame.path);
        path.push('/');
        match &frame.container {
            Container::Array(items) => path.push_str(&items.len().to_string()),
            Container::Object(_, key) => {
                for c in key.as_deref().unwrap_or_default().chars() {
                    match c {
                        '~' => path.push_str("~0"),
                        '/' => path.push_str("~1"),
                        c => path.push(c),
                    }
                }
            }
        }
        path
    }

    fn open(&mut self, container: Container) -> Step {
        if self.stack.len() >= self.max_depth {
            return Err(Fault::TooDeep);
        }
        self.expect = match container {
            Container::Array(_) => Expect::Value { or_close: true },
            Container::Object(..) => Expect::Key { or_close: true },
        };
        let path = self.next_path();
        let mark = (self.complete.len(), self.complete_bytes);
        self.stack.push(Frame {
            container,
            path,
            mark,
        });
        // An empty array or object appears where the value goes.
        self.version += 1;
        Ok(())
    }

    /// The bracket `b` closes the innermost array or object.
    fn close(&mut self, b: u8) -> Step {
        let matches = match self.stack.last().map(|frame| &frame.container) {
            Some(Container::Array(_)) => b == b']',
            Some(Container::Object(_, key)) => b == b'}' && key.is_none(),
            None => false,
        };
        let Some(frame) = self.stack.pop().filter(|_| matches) else {
            return Err(Fault::Invalid("a closing bracket that closes nothing open"));
        };
        let value = match frame.container {
            Container::Array(items) => Value::Array(items),
            Container::Object(members, _) => Value::Object(members),
        };
        // The members' paths give way to the container's own.
        let (len, bytes) = frame.mark;
        if bytes + frame.path.len() <= self.max_bytes {
            self.complete.truncate(len);
            self.complete_bytes = bytes;
            self.list(frame.path);
        }
        self.attach(value);
        Ok(())
    }

    /// A string, number or keyword is complete.
    fn done(&mut self, value: Value) {
        let path = self.next_path();
        if self.complete_bytes + path.len() <= self.max_bytes {
            self.list(path);
        }
        self.attach(value);
    }

    fn list(&mut self, path: String) {
        self.complete_bytes += path.len();
        self.complete.push(path);
    }

    /// Puts a complete value where it belongs.
    fn attach(&mut self, value: Value) {
        match self.stack.last_mut() {
            None => {
                self.root = Some(value);
                self.expect = Expect::End;
            }
            Some(frame) => {
                match &mut frame.container {
                    Container::Array(items) => items.push(value),
                    Container::Object(members, key) => {
                        if let Some(key) = key.take() {
                            members.insert(key, value);
                        }
                    }
                }
                self.expect = Expect::CommaOrClose;
            }
        }
        self.version += 1;
    }
}

impl StringToken {
    fn new(key: bool) -> Self {
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
    fn read(&mut self, bytes: &[u8]) -> Result<(usize, bool), (usize, Fault)> {
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

/// Whether `path` is final according to `complete_paths` (as returned by
/// [`PartialJson::complete_paths`]): it or one of its ancestors is listed.
pub fn is_complete_path(complete_paths: &[String], path: &str) -> bool {
    complete_paths.iter().any(|done| {
        path.strip_prefix(done.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The value and complete paths after feeding `prefix` in one piece.
    fn close(prefix: &str) -> (Option<Value>, Vec<String>) {
        let mut json = PartialJson::new(Limits::default());
        let fed = json.feed(prefix.as_bytes());
        assert!(fed.is_ok(), "{prefix:?}: {fed:?}");
        (json.value(), json.complete_paths().to_vec())
    }

    #[test]
    fn open_documents_are_closed_where_they_are_open() {
        let cases: &[(&str, Option<Value>, &[&str])] = &[
            ("", None, &[]),
            ("  ", None, &[]),
            ("{", Some(json!({})), &[]),
            (r#"{"ti"#, Some(json!({})), &[]),
            (r#"{"title""#, Some(json!({})), &[]),
            (r#"{"title": "#, Some(json!({})), &[]),
            (r#"{"title": ""#, Some(json!({"title": ""})), &[]),
            (r#"{"title": "Q1 re"#, Some(json!({"title": "Q1 re"})), &[]),
            (
                r#"{"title": "Q1", "#,
                Some(json!({"title": "Q1"})),
                &["/title"],
            ),
            (r#"{"n": 12"#, Some(json!({})), &[]),
            (r#"{"n": 12 "#, Some(json!({"n": 12})), &["/n"]),
            (r#"{"n": -"#, Some(json!({})), &[]),
            (r#"{"n": 1."#, Some(json!({})), &[]),
            (r#"{"n": 1.5e"#, Some(json!({})), &[]),
            (r#"{"n": 1.5e-3}"#, Some(json!({"n": 0.0015})), &[""]),
            (r#"[tr"#, Some(json!([])), &[]),
            (r#"[true"#, Some(json!([true])), &["/0"]),
            (r#"[null, fals"#, Some(json!([null])), &["/0"]),
            (r#"[[1, 2], [3"#, Some(json!([[1, 2], []])), &["/0"]),
            (
                r#"[[1, 2], [3,"#,
                Some(json!([[1, 2], [3]])),
                &["/0", "/1/0"],
            ),
            (r#"{"a": {"b": [{"#, Some(json!({"a": {"b": [{}]}})), &[]),
            (r#""abc"#, Some(json!("abc")), &[]),
            (r#""abc""#, Some(json!("abc")), &[""]),
            ("12", None, &[]),
            ("[1,", Some(json!([1])), &["/0"]),
            ("[1,]", Some(json!([1])), &[""]),
            (
                r#"{"a/b": 1, "c~d": 2, "#,
                Some(json!({"a/b": 1, "c~d": 2})),
                &["/a~1b", "/c~0d"],
            ),
        ];
        for (prefix, value, paths) in cases {
            assert_eq!(
                close(prefix),
                (
                    value.clone(),
                    paths.iter().map(|p| (*p).to_owned()).collect()
                ),
                "{prefix:?}"
            );
        }
    }

    #[test]
    fn characters_and_escapes_cut_in_the_middle_are_left_out() {
        let cases: &[(&str, &str)] = &[
            (r#"["a\"#, "a"),
            (r#"["a\n"#, "a\n"),
            (r#"["a\u00"#, "a"),
            (r#"["a\u00e9"#, "aé"),
            (r#"["a\ud83c"#, "a"),
            (r#"["a\ud83c\"#, "a"),
            (r#"["a\ud83c\udf"#, "a"),
            (r#"["a\ud83c\udf89"#, "a🎉"),
        ];
        for (prefix, text) in cases {
            assert_eq!(close(prefix).0, Some(json!([text])), "{prefix:?}");
        }
        let whole = "[\"日本\"]".as_bytes();
        for cut in 2..=8 {
            let mut json = PartialJson::new(Limits::default());
            assert!(json.feed(&whole[..cut]).is_ok());
            let shown = if cut < 5 {
                ""
            } else if cut < 8 {
                "日"
            } else {
                "日本"
            };
            assert_eq!(json.value(), Some(json!([shown])), "cut at {cut}");
        }
    }

    #[test]
    fn version_changes_exactly_with_what_is_shown() {
        let mut json = PartialJson::new(Limits::default());
        let mut seen = (json.value(), json.complete_paths().to_vec(), json.version());
        for b in br#" { "k" : [ 12 , "x\u00e9" , tru"#.iter().chain(b"e ] }") {
            assert!(json.feed(&[*b]).is_ok());
            let now = (json.value(), json.complete_paths().to_vec(), json.version());
            let changed = (&now.0, &now.1) != (&seen.0, &seen.1);
            assert_eq!(changed, now.2 != seen.2, "after {:?}", char::from(*b));
            seen = now;
        }
        assert!(json.is_complete());
    }

    #[test]
    fn a_number_alone_is_known_at_the_end() {
        let mut json = PartialJson::new(Limits::default());
        assert!(json.feed(b"-12.5e3").is_ok());
        assert_eq!(json.value(), None);
        assert_eq!(json.finish(), Ok(json!(-12500.0)));
        let mut json = PartialJson::new(Limits::default());
        assert!(json.feed(b"[1").is_ok());
        assert_eq!(json.finish(), Err(PartialError::Incomplete { received: 2 }));
    }

    #[test]
    fn what_is_not_json_stops_it_and_the_value_stays() {
        let cases: &[&[u8]] = &[
            b"[1,,",
            b"{\"a\" 1",
            b"[01",
            b"[1.]",
            b"[-]",
            b"[\"\\x\"]",
            b"[\"\\ud83c\\u0041\"]",
            b"[\"\\ude00\"]",
            b"[\"a\x01\"]",
            b"[\"\xff\"]",
            b"[\"\xc3\x28\"]",
            b"[\"\xed\xa0\x80\"]",
            b"[1}",
            b"{\"a\": 1]",
            b"{,",
            b"[1] x",
            b"[trux]",
            b"[1e999]",
            b"}",
        ];
        for bytes in cases {
            let mut json = PartialJson::new(Limits::default());
            let mut stopped = None;
            let mut before = None;
            for (k, b) in bytes.iter().enumerate() {
                let shown = json.value();
                if let Err(error) = json.feed(&[*b]) {
                    stopped = Some((k, error));
                    before = Some(shown);
                    break;
                }
            }
            let Some((k, error)) = stopped else {
                panic!("{:?} was accepted", String::from_utf8_lossy(bytes));
            };
            assert!(
                matches!(error, PartialError::Invalid { offset, .. } if offset == k),
                "{error:?}"
            );
            assert_eq!(Some(json.value()), before, "the value stays");
            assert_eq!(json.feed(b" "), Err(error), "the error stays");
            let whole = serde_json::from_slice::<Value>(bytes);
            assert!(
                whole.is_err(),
                "serde_json accepts {:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn a_repeated_key_stops_it_though_serde_json_keeps_the_last() {
        let text = r#"{"a": 1, "a": 2}"#;
        let mut json = PartialJson::new(Limits::default());
        assert!(matches!(
            json.feed(text.as_bytes()),
            Err(PartialError::Invalid { offset: 11, .. })
        ));
        // The value shown for `/a` never changes to serde_json's 2.
        assert_eq!(json.value(), Some(json!({"a": 1})));
        assert_eq!(json.complete_paths(), ["/a"]);
        assert_eq!(
            serde_json::from_str::<Value>(text).ok(),
            Some(json!({"a": 2}))
        );
    }

    #[test]
    fn limits_bound_depth_bytes_and_listed_paths() {
        let limits = Limits {
            max_bytes: 16,
            max_depth: 2,
        };
        let mut json = PartialJson::new(limits);
        assert!(json.feed(b"[[").is_ok());
        assert_eq!(
            json.feed(b"["),
            Err(PartialError::TooDeep {
                offset: 2,
                limit: 2
            })
        );
        let mut json = PartialJson::new(limits);
        assert!(json.feed(b"[1, 2, 3, 4, ").is_ok());
        assert_eq!(
            json.feed(b"5, 6]"),
            Err(PartialError::TooLarge {
                size: 18,
                limit: 16
            })
        );
        assert_eq!(json.value(), Some(json!([1, 2, 3, 4])));
        // Paths over the budget are left out until their container closes.
        let mut json = PartialJson::new(Limits {
            max_bytes: 64,
            max_depth: 4,
        });
        assert!(
            json.feed(br#"{"abcdefgh": [1, 2, 3, 4, 5, 6, 7, 8,"#)
                .is_ok()
        );
        assert_eq!(
            json.complete_paths().len(),
            5,
            "five of eleven bytes fit in 64"
        );
        assert!(json.feed(b" 9]").is_ok());
        assert_eq!(json.complete_paths(), ["/abcdefgh"]);
    }

    #[test]
    fn complete_paths_cover_their_descendants() {
        let paths = ["/mode".to_owned(), "/rows/0".to_owned()];
        assert!(is_complete_path(&paths, "/mode"));
        assert!(is_complete_path(&paths, "/rows/0/name"));
        assert!(!is_complete_path(&paths, "/rows/01"));
        assert!(!is_complete_path(&paths, "/rows"));
        assert!(!is_complete_path(&paths, ""));
        assert!(is_complete_path(&[String::new()], "/anything"));
    }
}
