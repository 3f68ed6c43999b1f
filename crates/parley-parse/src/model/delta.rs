//! [`TextDelta`], the text a stream hands out with each `push`.

use std::{fmt, ops::Deref};

use compact_str::CompactString;

/// The next piece of the cleaned message, as a
/// [`StreamItem::Text`](crate::StreamItem::Text) carries it.
///
/// Up to 24 bytes are kept inline, without an allocation: most model
/// deltas are a token or a few (a string per delta was the largest cost a
/// stream of 16-byte deltas paid beyond `parse`). Longer text is kept in a
/// heap block, which [`TextDelta::into_string`] hands over without a copy.
/// Reads as a `&str` (`Deref`, [`TextDelta::as_str`]).
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct TextDelta(CompactString);

impl TextDelta {
    /// The text.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The text as a `String`: the heap block itself when the text has
    /// one, a new `String` when it was kept inline.
    pub fn into_string(self) -> String {
        self.0.into_string()
    }
}

impl Deref for TextDelta {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for TextDelta {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for TextDelta {
    fn from(text: &str) -> Self {
        Self(CompactString::new(text))
    }
}

impl From<String> for TextDelta {
    fn from(text: String) -> Self {
        Self(CompactString::from(text))
    }
}

impl From<TextDelta> for String {
    fn from(delta: TextDelta) -> Self {
        delta.into_string()
    }
}

impl PartialEq<str> for TextDelta {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for TextDelta {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Debug for TextDelta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for TextDelta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_and_long_text_read_and_convert_back_the_same() {
        for text in ["", "é", "a token or two", &"long ".repeat(20)] {
            let delta = TextDelta::from(text);
            assert_eq!(delta, text);
            assert_eq!(&*delta, text);
            assert_eq!(delta.to_string(), text);
            assert_eq!(format!("{delta:?}"), format!("{text:?}"));
            assert_eq!(delta.into_string(), text);
        }
    }

    #[test]
    fn a_long_text_hands_its_block_over() {
        let text = "more than twenty-four bytes of text".to_owned();
        let at = text.as_ptr();
        let delta = TextDelta::from(text);
        assert_eq!(delta.as_ptr(), at);
        let back = delta.into_string();
        assert_eq!(back.as_ptr(), at);
    }
}
