//! The explicit bounds every parse runs under.
//!
//! A parse never allocates or scans more than a small multiple of its input,
//! and the input itself is bounded by [`Limits::max_bytes`]; nested JSON is
//! bounded by [`Limits::max_depth`] so neither the extractor nor `serde_json`
//! nor schema validation can be driven into deep recursion.

/// Default largest accepted text: 1 MiB.
pub const DEFAULT_MAX_BYTES: usize = 1 << 20;

/// Default deepest accepted JSON nesting.
pub const DEFAULT_MAX_DEPTH: usize = 64;

/// `serde_json` refuses nesting deeper than this; larger `max_depth` values are
/// clamped to it.
pub const HARD_MAX_DEPTH: usize = 127;

/// The largest `max_bytes` honoured (positions are indexed with 32 bits);
/// larger values are clamped to it.
pub const HARD_MAX_BYTES: usize = 1 << 30;

/// Bounds of one parse (or one stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest text, in bytes, that `parse` accepts (for a stream: the sum of
    /// all deltas). Above it the call fails with `ParseError::TooLarge`.
    pub max_bytes: usize,
    /// Deepest nesting of `{`/`[` an element may have; deeper elements are
    /// reported as `TOO_DEEP` and left out.
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_bytes: DEFAULT_MAX_BYTES,
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }
}

impl Limits {
    /// The size actually enforced: `max_bytes` clamped to `HARD_MAX_BYTES`.
    pub fn effective_max_bytes(&self) -> usize {
        self.max_bytes.min(HARD_MAX_BYTES)
    }

    /// The depth actually enforced: `max_depth` clamped to `1..=HARD_MAX_DEPTH`.
    pub fn effective_depth(&self) -> usize {
        self.max_depth.clamp(1, HARD_MAX_DEPTH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_one_mebibyte_and_sixty_four_levels() {
        let limits = Limits::default();
        assert_eq!(limits.max_bytes, 1_048_576);
        assert_eq!(limits.max_depth, 64);
    }

    #[test]
    fn depth_is_clamped_to_what_serde_json_accepts() {
        assert_eq!(
            Limits {
                max_depth: 10_000,
                ..Limits::default()
            }
            .effective_depth(),
            HARD_MAX_DEPTH
        );
        assert_eq!(
            Limits {
                max_depth: 0,
                ..Limits::default()
            }
            .effective_depth(),
            1
        );
    }
}
