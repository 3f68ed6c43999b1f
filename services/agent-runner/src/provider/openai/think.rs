//! Reasoning written into the content as `<think>…</think>` (llama.cpp and
//! other servers running reasoning models without a reasoning parser).
//!
//! Only a `<think>` that opens the content (after whitespace) counts; any
//! other text passes through untouched. While the tags may still be forming,
//! the few bytes that could be the start of one are held back, so for any
//! split of the content the output is the same.

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

/// Where the splitter is in the content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing but whitespace seen: the content may still open with `<think>`.
    Start,
    /// Inside the think block.
    Thinking,
    /// Just after `</think>`: the whitespace separating it is dropped.
    AfterThink,
    /// After the think block (or content that never had one).
    Text,
}

/// Splits content deltas into (reasoning, text) pieces.
#[derive(Debug)]
pub(crate) struct ThinkSplitter {
    state: State,
    pending: String,
}

impl Default for ThinkSplitter {
    fn default() -> Self {
        Self {
            state: State::Start,
            pending: String::new(),
        }
    }
}

/// What one delta yields.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Split {
    pub reasoning: String,
    pub text: String,
}

impl ThinkSplitter {
    /// Feeds one content delta.
    pub fn push(&mut self, delta: &str) -> Split {
        let mut out = Split::default();
        if self.state == State::AfterThink {
            let rest = delta.trim_start();
            if !rest.is_empty() {
                self.state = State::Text;
                out.text.push_str(rest);
            }
            return out;
        }
        if self.state == State::Text {
            out.text.push_str(delta);
            return out;
        }
        self.pending.push_str(delta);
        if self.state == State::Start {
            let trimmed = self.pending.trim_start();
            if let Some(rest) = trimmed.strip_prefix(OPEN) {
                self.pending = rest.to_owned();
                self.state = State::Thinking;
            } else if OPEN.starts_with(trimmed) {
                return out;
            } else {
                self.state = State::Text;
                out.text = std::mem::take(&mut self.pending);
                return out;
            }
        }
        // Thinking.
        if let Some(at) = self.pending.find(CLOSE) {
            out.reasoning.push_str(&self.pending[..at]);
            let rest = self.pending[at + CLOSE.len()..].trim_start();
            out.text.push_str(rest);
            self.state = if rest.is_empty() {
                State::AfterThink
            } else {
                State::Text
            };
            self.pending.clear();
            return out;
        }
        let keep = partial_suffix(&self.pending, CLOSE);
        let cut = self.pending.len() - keep;
        out.reasoning.push_str(&self.pending[..cut]);
        self.pending.drain(..cut);
        out
    }

    /// The content ended: releases what was held back.
    pub fn finish(&mut self) -> Split {
        let pending = std::mem::take(&mut self.pending);
        match self.state {
            State::Thinking => Split {
                reasoning: pending,
                text: String::new(),
            },
            State::Start | State::AfterThink | State::Text => Split {
                reasoning: String::new(),
                text: pending,
            },
        }
    }
}

/// The length of the longest suffix of `text` that is a proper prefix of
/// `tag` (ASCII tags, so the cut is a character boundary).
fn partial_suffix(text: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&n| text.ends_with(&tag[..n]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pieces: &[&str]) -> (String, String) {
        let mut s = ThinkSplitter::default();
        let (mut r, mut t) = (String::new(), String::new());
        for p in pieces {
            let out = s.push(p);
            r.push_str(&out.reasoning);
            t.push_str(&out.text);
        }
        let out = s.finish();
        r.push_str(&out.reasoning);
        t.push_str(&out.text);
        (r, t)
    }

    #[test]
    fn any_split_gives_the_same_result() {
        let content =
            "\n<think>Let me think: a < b.</think>\n\nThe answer is 4 <think>not this</think>";
        let expected = (
            "Let me think: a < b.".to_owned(),
            "The answer is 4 <think>not this</think>".to_owned(),
        );
        let chars: Vec<String> = content.chars().map(String::from).collect();
        let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(run(&refs), expected);
        for size in 2..12 {
            let pieces: Vec<String> = content
                .as_bytes()
                .chunks(size)
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .collect();
            let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
            assert_eq!(run(&refs), expected, "size {size}");
        }
    }

    #[test]
    fn plain_content_passes_through() {
        assert_eq!(
            run(&["Hello", " <thi", "nk> world"]),
            (String::new(), "Hello <think> world".into())
        );
        assert_eq!(run(&["<thi"]), (String::new(), "<thi".into()));
    }

    #[test]
    fn unclosed_think_is_reasoning() {
        assert_eq!(
            run(&["<think>still going</th"]),
            ("still going</th".into(), String::new())
        );
    }
}
