//! The gRPC codec of every generated client and server: prost, with a
//! small first buffer per call.
//!
//! tonic's own prost codec gives each call an 8 KiB encode buffer and an
//! 8 KiB decode buffer as it starts, and keeps them for the call's life. A
//! Parley stream holds one or two of each on every hop (the gateway holds
//! the client's response, the runner's response and both halves of the
//! parser stream), and its messages are small: a text delta is tens of
//! bytes, a whole turn's events a few KiB. So calls start at
//! [`BUFFER_SIZE`] (256 bytes, which a text delta's message fits) and grow
//! when a message needs it (a large request reserves what it needs, as
//! before). A stream held open keeps about 7 KiB of these buffers over the
//! three services with 1 KiB, 2 KiB with 256 bytes; CPU per turn did not
//! move beyond the noise (docs/performance.md). The batching of ready
//! messages into one write (tonic's yield threshold, 32 KiB) is unchanged.

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// The first encode and decode buffer of a call, in bytes.
pub const BUFFER_SIZE: usize = 256;

/// How much ready output one write may batch (tonic's default).
const YIELD_THRESHOLD: usize = 32 * 1024;

fn settings() -> BufferSettings {
    BufferSettings::new(BUFFER_SIZE, YIELD_THRESHOLD)
}

/// prost encoding and decoding with [`BUFFER_SIZE`] first buffers.
#[derive(Debug, Clone, Copy)]
pub struct LeanCodec<T, U>(std::marker::PhantomData<(T, U)>);

impl<T, U> Default for LeanCodec<T, U> {
    fn default() -> Self {
        Self(std::marker::PhantomData)
    }
}

impl<T, U> Codec for LeanCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(settings())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstCodec::<T, U>::raw_decoder(settings())
    }
}

#[cfg(test)]
mod tests {
    use tonic::codec::{Decoder, Encoder};

    use super::*;

    #[test]
    fn calls_start_with_the_small_buffers() {
        // BufferSettings keeps its fields private; its Debug shows them.
        let expected = format!("buffer_size: {BUFFER_SIZE},");
        let mut codec = LeanCodec::<prost_types::Duration, prost_types::Duration>::default();
        let encoder = format!("{:?}", codec.encoder().buffer_settings());
        let decoder = format!("{:?}", codec.decoder().buffer_settings());
        assert!(encoder.contains(&expected), "{encoder}");
        assert!(decoder.contains(&expected), "{decoder}");
    }
}
