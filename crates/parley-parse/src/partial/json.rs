//! [`PartialJson`], the closer: reads a JSON document byte by byte and
//! keeps the value it has so far (the rules are in [`crate::partial`]).

use serde_json::{Map, Number, Value};

use self::token::{NumberAt, StringToken};
use crate::{error::PartialError, limits::Limits};

mod token;

/// The value of a JSON document being written, read incrementally.
///
/// See the [module documentation](crate::partial) for the rules and guarantees.
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
    /// The complete paths (see [`crate::partial`]).
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
    /// (see [`crate::partial`]).
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

/// Whether `path` is final according to `complete_paths` (as returned by
/// [`PartialJson::complete_paths`]): it or one of its ancestors is listed.
pub fn is_complete_path(complete_paths: &[String], path: &str) -> bool {
    complete_paths.iter().any(|done| {
        path.strip_prefix(done.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

#[cfg(test)]
mod tests;
