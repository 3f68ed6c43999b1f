//! Calls over real gRPC with hand-made request bytes: what a client with a
//! broken (or hostile) encoder sends, which no generated client can; and the
//! log lines a test's servers write, captured as the binaries write them.

use std::sync::{Arc, Mutex};

use prost::bytes::{Buf, BufMut, Bytes};
use tonic::{
    Status,
    codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder},
    transport::Channel,
};
use tracing_subscriber::layer::SubscriberExt;

/// A codec whose messages are their encoded bytes, unchecked.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawCodec;

/// Writes the bytes as they are.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawEncoder;

/// Reads a message's bytes without decoding them.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawDecoder;

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        RawEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawDecoder
    }
}

impl Encoder for RawEncoder {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// Sends `messages` to `path` (`/package.Service/Method`, any kind of
/// RPC: a unary request is a stream of one) and reads the responses to
/// the end: their bytes, or the status the call ended with.
pub async fn call(
    channel: Channel,
    path: &'static str,
    messages: Vec<Bytes>,
) -> Result<Vec<Bytes>, Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|error| Status::unavailable(error.to_string()))?;
    let request = tonic::Request::new(tokio_stream::iter(messages));
    let path = http::uri::PathAndQuery::from_static(path);
    let mut stream = grpc.streaming(request, path, RawCodec).await?.into_inner();
    let mut responses = Vec::new();
    while let Some(message) = stream.message().await? {
        responses.push(message);
    }
    Ok(responses)
}

/// A varint.
fn varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Field `number` of a message, length-delimited, holding `bytes`.
pub fn field(number: u32, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 8);
    varint(u64::from(number) << 3 | 2, &mut out);
    varint(bytes.len() as u64, &mut out);
    out.extend_from_slice(bytes);
    out
}

/// A `google.protobuf.Struct` nested `depth` deep (`{"k": {"k": ...}}`),
/// encoded by hand: building it as a prost value would overflow the
/// stack long before 10 000 levels.
pub fn deep_struct(depth: usize) -> Vec<u8> {
    // Built innermost first, backwards, and reversed at the end, so
    // each level costs its own few bytes instead of a copy of the rest.
    let mut reversed: Vec<u8> = Vec::new();
    let wrap = |reversed: &mut Vec<u8>, tag: u8| {
        let mut len = Vec::new();
        varint(reversed.len() as u64, &mut len);
        reversed.extend(len.iter().rev());
        reversed.push(tag);
    };
    for level in 0..depth {
        if level > 0 {
            // The Struct so far becomes Value.struct_value (field 5)...
            wrap(&mut reversed, 5 << 3 | 2);
        }
        // ... the value (field 2) of a map entry whose key (field 1) is "k" ...
        wrap(&mut reversed, 2 << 3 | 2);
        reversed.extend([b'k', 1, 1 << 3 | 2]);
        // ... which is an entry of Struct.fields (field 1).
        wrap(&mut reversed, 1 << 3 | 2);
    }
    reversed.reverse();
    reversed
}

/// Log lines written while a [`LogCapture`] is installed, as the
/// binaries write them (`--log-format json`).
#[derive(Debug, Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

/// One write into a [`LogCapture`].
#[derive(Debug)]
pub struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("log capture poisoned"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogCapture {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> Self::Writer {
        LogWriter(self.0.clone())
    }
}

impl LogCapture {
    /// Captures the log lines (INFO and above) of this thread until the
    /// guard is dropped: in a current-thread runtime, those of every
    /// task, servers included. Every test of a binary that uses it
    /// installs one: a test thread without a subscriber can register a
    /// log callsite as never wanted while another thread installs its
    /// capture, and that line would then be lost.
    pub fn install() -> (Self, tracing::subscriber::DefaultGuard) {
        let capture = Self::default();
        let layer = tracing_subscriber::fmt::layer()
            .fmt_fields(parley_grpc::telemetry::logs::NoSpanFields)
            .event_format(parley_grpc::telemetry::logs::JsonLines)
            .with_writer(capture.clone());
        let subscriber = tracing_subscriber::registry()
            .with(parley_grpc::telemetry::logs::CorrelationLayer::filtered())
            .with(tracing_subscriber::filter::LevelFilter::INFO)
            .with(layer);
        let guard = tracing::subscriber::set_default(subscriber);
        (capture, guard)
    }

    /// Every line so far, as JSON.
    pub fn lines(&self) -> Vec<serde_json::Value> {
        let text = self.text();
        text.lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// Everything written so far.
    pub fn text(&self) -> String {
        self.0
            .lock()
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default()
    }
}
