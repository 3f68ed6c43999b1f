//! For tests only: what a test does when something it needs is missing
//! here (Docker, the images, PostgreSQL, Python with grpcio-tools, the
//! Python MCP servers).
//!
//! Under `CI=true`, where every test must run, it fails. Elsewhere it
//! prints `NOT RUN: <test>: <why>` straight to the process's stderr (the
//! test harness captures `eprintln!` of passing tests, and this line must be
//! seen) and the test returns. Every suite of the workspace uses this one
//! rule.

use std::io::Write;

/// Whether this is a CI run (`CI=true`): every test must run.
pub fn ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Panics under `CI=true`; elsewhere prints the `NOT RUN` line and returns,
/// and the caller returns too.
#[track_caller]
pub fn not_run(test: &str, why: &str) {
    if ci() {
        panic!("{test}: CI=true, so this test must run, but {why}");
    }
    let _ = writeln!(std::io::stderr(), "NOT RUN: {test}: {why}");
}

/// The python of the MCP tests' virtual environment (PyPI `mcp` and
/// `mcp-server-time`): `PARLEY_MCP_PYTHON`, else what `scripts/mcp.sh`
/// installs (it is idempotent); `None` after [`not_run`] when neither works.
pub fn mcp_python(test: &str) -> Option<std::path::PathBuf> {
    if let Some(python) = std::env::var_os("PARLEY_MCP_PYTHON") {
        return Some(python.into());
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let output = std::process::Command::new("bash")
        .arg(root.join("scripts/mcp.sh"))
        .stderr(std::process::Stdio::inherit())
        .output();
    match output {
        Ok(output) if output.status.success() => {
            let path = String::from_utf8_lossy(&output.stdout).trim().to_owned();
            Some(path.into())
        }
        Ok(output) => {
            not_run(
                test,
                &format!(
                    "scripts/mcp.sh could not install the MCP servers ({})",
                    output.status
                ),
            );
            None
        }
        Err(error) => {
            not_run(test, &format!("cannot run scripts/mcp.sh: {error}"));
            None
        }
    }
}

/// Calls over real gRPC with hand-made request bytes: what a client with a
/// broken (or hostile) encoder sends, which no generated client can.
pub mod raw {
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
                .fmt_fields(crate::telemetry::logs::NoSpanFields)
                .event_format(crate::telemetry::logs::JsonLines)
                .with_writer(capture.clone());
            let subscriber = tracing_subscriber::registry()
                .with(crate::telemetry::logs::CorrelationLayer::filtered())
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
}

/// The OpenTelemetry spans a test's code makes, without a collector.
pub mod spans {
    use std::sync::{Arc, Mutex, PoisonError};

    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::{
        error::OTelSdkResult,
        trace::{SdkTracerProvider, SpanData, SpanExporter},
    };
    use tracing_subscriber::layer::SubscriberExt;

    /// One ended span: its name and W3C ids (lowercase hex).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CapturedSpan {
        /// The OpenTelemetry span name (`execute_tool weather`).
        pub name: String,
        /// 32 hex digits.
        pub trace_id: String,
        /// 16 hex digits.
        pub span_id: String,
    }

    impl CapturedSpan {
        /// The `traceparent` a child of this span would be sent with
        /// (sampled).
        pub fn traceparent(&self) -> String {
            format!("00-{}-{}-01", self.trace_id, self.span_id)
        }
    }

    #[derive(Debug, Clone, Default)]
    struct Collect(Arc<Mutex<Vec<CapturedSpan>>>);

    impl SpanExporter for Collect {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            let mut spans = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            spans.extend(batch.into_iter().map(|span| CapturedSpan {
                name: span.name.into_owned(),
                trace_id: span.span_context.trace_id().to_string(),
                span_id: span.span_context.span_id().to_string(),
            }));
            Ok(())
        }
    }

    /// Spans ended on this thread while the guard of [`SpanCapture::install`]
    /// lives: in a current-thread runtime, those of every task, servers
    /// included. Unlike the binaries' telemetry it needs no endpoint and
    /// does not look at `tracing_enabled` (RPC spans, which do, stay off).
    /// Use it in a test binary of its own (or in every test of the
    /// binary): a test thread without a subscriber can register a span's
    /// callsite as never wanted, for this thread's subscriber too.
    #[derive(Debug)]
    pub struct SpanCapture {
        spans: Collect,
        _provider: SdkTracerProvider,
    }

    impl SpanCapture {
        /// Installs the capture on this thread until the guard is dropped.
        pub fn install() -> (Self, tracing::subscriber::DefaultGuard) {
            let spans = Collect::default();
            let provider = SdkTracerProvider::builder()
                .with_simple_exporter(spans.clone())
                .build();
            let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
            let subscriber = tracing_subscriber::registry()
                .with(tracing_subscriber::filter::LevelFilter::INFO)
                .with(layer);
            let guard = tracing::subscriber::set_default(subscriber);
            (
                Self {
                    spans,
                    _provider: provider,
                },
                guard,
            )
        }

        /// The spans ended so far.
        pub fn spans(&self) -> Vec<CapturedSpan> {
            self.spans
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        }
    }
}

/// Certificates made at test time (feature `test-pki`, for dev-dependencies
/// only): a CA and the `localhost` certificates it signs, as PEM text or
/// files. Each certificate gets a name of its own: OpenSSL (a Python test
/// server, for one) takes a certificate whose subject equals its issuer's
/// for a self-signed one.
#[cfg(feature = "test-pki")]
pub mod pki {
    use std::path::{Path, PathBuf};

    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

    /// A certificate and its private key, as PEM files.
    #[derive(Debug, Clone)]
    pub struct PemFiles {
        /// The certificate.
        pub cert: PathBuf,
        /// Its private key (PKCS#8).
        pub key: PathBuf,
    }

    /// A test certificate authority.
    pub struct TestCa {
        pem: String,
        issuer: Issuer<'static, KeyPair>,
    }

    impl std::fmt::Debug for TestCa {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("TestCa").finish_non_exhaustive()
        }
    }

    impl TestCa {
        /// A new CA named `name`.
        pub fn new(name: &str) -> Self {
            let key = KeyPair::generate().expect("a CA key");
            let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.distinguished_name.push(DnType::CommonName, name);
            let cert = params.self_signed(&key).expect("the CA certificate");
            Self {
                pem: cert.pem(),
                issuer: Issuer::new(params, key),
            }
        }

        /// The CA's certificate, PEM.
        pub fn pem(&self) -> &str {
            &self.pem
        }

        /// A certificate for `localhost` named `name`, and its key: PEM.
        pub fn leaf(&self, name: &str) -> (String, String) {
            let key = KeyPair::generate().expect("a key");
            let mut params =
                CertificateParams::new(vec!["localhost".to_owned()]).expect("leaf params");
            params.distinguished_name.push(DnType::CommonName, name);
            let cert = params
                .signed_by(&key, &self.issuer)
                .expect("a leaf certificate");
            (cert.pem(), key.serialize_pem())
        }

        /// Writes the CA's certificate to `dir/file`.
        pub fn write_ca(&self, dir: &Path, file: &str) -> PathBuf {
            let path = dir.join(file);
            std::fs::write(&path, &self.pem).expect("write the CA certificate");
            path
        }

        /// Writes a [`TestCa::leaf`] to `dir/NAME.crt` and `dir/NAME.key`.
        pub fn write_leaf(&self, dir: &Path, name: &str) -> PemFiles {
            let (cert, key) = self.leaf(name);
            let files = PemFiles {
                cert: dir.join(format!("{name}.crt")),
                key: dir.join(format!("{name}.key")),
            };
            std::fs::write(&files.cert, cert).expect("write a certificate");
            std::fs::write(&files.key, key).expect("write a key");
            files
        }
    }
}
