//! The app's `parley.tools.v1.ToolService`, as a Rust app would write it:
//! `parley_testkit::tools` continuing the runner's trace from the
//! `traceparent` metadata, exporting its own SERVER spans to the test's
//! collector with the OpenTelemetry SDK.
//!
//! `lookup_rows` answers with one row; a query of
//! `parley_testkit::tools::FAILING_QUERY` answers with a tool error.

use std::net::SocketAddr;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::{Resource, trace::SdkTracerProvider};
use parley_testkit::tools::{ToolOptions, ToolServer as Tools};

/// The `service.name` of the tool server's spans.
pub const SERVICE_NAME: &str = "trace-test-tools";

/// A running tool server and its span pipeline.
#[derive(Debug)]
pub struct ToolServer {
    /// Where it listens.
    pub addr: SocketAddr,
    provider: SdkTracerProvider,
}

impl ToolServer {
    /// Starts the server on a free port, exporting spans to `collector`.
    /// Must run inside the tokio runtime (the exporter's channel lives there).
    pub async fn start(collector: &str) -> Self {
        use opentelemetry_otlp::WithExportConfig;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(collector)
            .build()
            .expect("the test's OTLP exporter");
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(Resource::builder().with_service_name(SERVICE_NAME).build())
            .build();
        let tools = Tools::start(ToolOptions {
            tracer: Some(provider.tracer(SERVICE_NAME)),
            ..ToolOptions::default()
        })
        .await;
        Self {
            addr: tools.addr,
            provider,
        }
    }

    /// Exports the spans still queued (the SDK blocks: off the runtime).
    pub async fn flush(&self) {
        let provider = self.provider.clone();
        tokio::task::spawn_blocking(move || provider.force_flush())
            .await
            .expect("flush task")
            .expect("the tool server's spans reach the collector");
    }
}
