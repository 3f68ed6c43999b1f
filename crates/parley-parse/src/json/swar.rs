//! Byte searches eight bytes at a time in one `u64` ("SIMD within a
//! register"), for the short runs a parser meets most: JSON strings. On
//! runs this short they cost less than `memchr`'s vector set-up (a
//! stream's trigger search over a delta's few new bytes, tried the same
//! way for three bytes, cost more: 100 instructions a call against 65).
//!
//! The trick: subtracting `0x01` from every byte of `x` borrows through a
//! byte that is zero, so `x - splat(1) & !x & splat(0x80)` marks each zero
//! byte's high bit. A borrow can also mark the byte above a zero byte
//! wrongly, but never one below, so the lowest mark is always right: only
//! the lowest may be used. The same holds for an OR of several such terms
//! (each term's wrong marks sit above one of its right ones).

/// Copies of byte `b` in every byte of a word.
pub(crate) const fn splat(b: u8) -> u64 {
    u64::from_ne_bytes([b; 8])
}

/// The high bit of each byte of `x` below `n` (`n <= 0x80`), exact for the
/// lowest such byte (see the module documentation).
pub(crate) fn bytes_below(x: u64, n: u8) -> u64 {
    x.wrapping_sub(splat(n)) & !x & splat(0x80)
}

/// The high bit of each byte of `x` that is zero, exact for the lowest.
pub(crate) fn zero_bytes(x: u64) -> u64 {
    bytes_below(x, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_mark_is_exact_even_where_a_borrow_marks_the_byte_above() {
        // 0x00 then 0x01: the borrow out of the zero byte marks the 0x01
        // above it too; the lowest mark is the zero byte's.
        let word = u64::from_le_bytes([b'a', 0x00, 0x01, b'b', b'c', b'd', b'e', b'f']);
        let marks = zero_bytes(word);
        assert_eq!(marks.trailing_zeros() / 8, 1);
        assert_eq!(zero_bytes(splat(b'x')), 0);
        let marks = bytes_below(u64::from_le_bytes(*b"abc\\ndef"), 0x20);
        assert_eq!(marks, 0, "no control byte in an escape");
        let marks = bytes_below(u64::from_le_bytes(*b"abc\tdefg"), 0x20);
        assert_eq!(marks.trailing_zeros() / 8, 3);
    }
}
