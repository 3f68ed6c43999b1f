//! System prompts shared by the turns that send the same one.
//!
//! A gateway sends its page's system prompt (a few KB) with every turn, and
//! the turns of a page mostly send the same text; each running turn kept
//! its own copy for as long as it streamed. Prompts are kept in a
//! [`CompiledCache`] by their text, at most [`CAPACITY`] of them, the oldest
//! forgotten first, and a turn whose prompt is kept points at that copy.

use std::{convert::Infallible, sync::Arc};

use parley_parse::CompiledCache;

/// The most distinct prompts kept.
pub const CAPACITY: usize = 256;

/// Prompts by their text.
#[derive(Debug)]
pub struct Prompts {
    kept: CompiledCache<Arc<str>>,
}

impl Default for Prompts {
    fn default() -> Self {
        Self {
            kept: CompiledCache::new(CAPACITY),
        }
    }
}

impl Prompts {
    /// The kept copy of `prompt`'s text; `prompt` itself is kept from now on
    /// when its text is not.
    pub fn share(&self, prompt: &Arc<str>) -> Arc<str> {
        if prompt.is_empty() {
            return prompt.clone();
        }
        let kept = self
            .kept
            .get_or_compile(prompt.as_bytes(), || Ok::<_, Infallible>(prompt.clone()));
        match kept {
            Ok(kept) => Arc::clone(&kept),
            Err(never) => match never {},
        }
    }

    /// How many prompts are kept.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_with_the_same_prompt_share_one_copy() {
        let prompts = Prompts::default();
        let first: Arc<str> = "You are a table assistant.".into();
        let again: Arc<str> = "You are a table assistant.".into();
        let other: Arc<str> = "You are a chart assistant.".into();
        assert!(Arc::ptr_eq(&prompts.share(&first), &first));
        let shared = prompts.share(&again);
        assert!(
            Arc::ptr_eq(&shared, &first),
            "the kept copy, not the new one"
        );
        assert!(!Arc::ptr_eq(&prompts.share(&other), &first));
        assert_eq!(prompts.len(), 2);
    }

    #[test]
    fn an_empty_prompt_is_not_kept() {
        let prompts = Prompts::default();
        let empty: Arc<str> = "".into();
        assert_eq!(&*prompts.share(&empty), "");
        assert!(prompts.is_empty());
    }
}
