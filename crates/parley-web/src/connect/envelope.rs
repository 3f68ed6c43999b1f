//! Length-prefixed messages: one flags byte, a 4-byte big-endian length,
//! the message. gRPC frames its messages this way, and so do Connect's
//! streams (whose flag `0x02` marks the end-of-stream message).

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The flag of a compressed message (neither side here compresses).
pub const COMPRESSED: u8 = 0x01;
/// The flag of Connect's end-of-stream message.
pub const END_STREAM: u8 = 0x02;
/// The prefix's length.
const PREFIX: usize = 5;

/// `message` with its prefix.
pub fn encode(flags: u8, message: &[u8]) -> Bytes {
    let mut framed = BytesMut::with_capacity(PREFIX + message.len());
    framed.put_u8(flags);
    // Messages here are bounded far below 4 GiB (request limits, tonic's
    // own); a longer one is cut to what the prefix can say.
    framed.put_u32(u32::try_from(message.len()).unwrap_or(u32::MAX));
    framed.extend_from_slice(message);
    framed.freeze()
}

/// A message longer than the limit was announced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLong {
    /// The length the prefix announced.
    pub announced: usize,
}

/// Messages out of bytes that arrive in arbitrary pieces.
#[derive(Debug, Default)]
pub struct Deframer {
    buffer: BytesMut,
    max_message: usize,
}

impl Deframer {
    /// A deframer refusing messages longer than `max_message` bytes.
    pub fn new(max_message: usize) -> Self {
        Self {
            buffer: BytesMut::new(),
            max_message,
        }
    }

    /// Appends the next piece.
    pub fn push(&mut self, piece: &[u8]) {
        self.buffer.extend_from_slice(piece);
    }

    /// The next whole message and its flags, if one has fully arrived.
    pub fn next(&mut self) -> Result<Option<(u8, Bytes)>, TooLong> {
        if self.buffer.len() < PREFIX {
            return Ok(None);
        }
        let flags = self.buffer[0];
        let announced = u32::from_be_bytes([
            self.buffer[1],
            self.buffer[2],
            self.buffer[3],
            self.buffer[4],
        ]) as usize;
        if announced > self.max_message {
            return Err(TooLong { announced });
        }
        if self.buffer.len() < PREFIX + announced {
            // Room for the rest, once.
            self.buffer.reserve(PREFIX + announced - self.buffer.len());
            return Ok(None);
        }
        self.buffer.advance(PREFIX);
        Ok(Some((flags, self.buffer.split_to(announced).freeze())))
    }

    /// Whether bytes of an unfinished message are left.
    pub fn has_partial(&self) -> bool {
        !self.buffer.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_come_out_whole_whatever_the_pieces() {
        let mut stream = Vec::new();
        stream.extend_from_slice(&encode(0, b"hello"));
        stream.extend_from_slice(&encode(0, b""));
        stream.extend_from_slice(&encode(END_STREAM, b"{}"));
        for piece in 1..stream.len() {
            let mut deframer = Deframer::new(64);
            let mut out = Vec::new();
            for chunk in stream.chunks(piece) {
                deframer.push(chunk);
                while let Some(message) = deframer.next().expect("within the limit") {
                    out.push(message);
                }
            }
            assert!(!deframer.has_partial());
            assert_eq!(
                out,
                vec![
                    (0, Bytes::from_static(b"hello")),
                    (0, Bytes::new()),
                    (END_STREAM, Bytes::from_static(b"{}")),
                ]
            );
        }
    }

    #[test]
    fn a_message_over_the_limit_is_refused_from_its_prefix() {
        let mut deframer = Deframer::new(4);
        deframer.push(&encode(0, b"12345")[..5]);
        assert_eq!(deframer.next(), Err(TooLong { announced: 5 }));
    }
}
