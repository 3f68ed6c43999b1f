//! The app's `parley.tools.v1.ToolService`, as a Rust app would write it:
//! it continues the runner's trace from the `traceparent` metadata (with
//! `parley_grpc::telemetry::propagation`) and exports its own SERVER span
//! to the test's collector with the OpenTelemetry SDK.
//!
//! `lookup_rows` answers with one row; a query of `please-fail` answers with
//! a tool error.

use std::{net::SocketAddr, pin::Pin};

use opentelemetry::{
    KeyValue,
    trace::{Span as _, SpanKind, Status as SpanStatus, Tracer, TracerProvider as _},
};
use opentelemetry_sdk::{
    Resource,
    trace::{SdkTracer, SdkTracerProvider},
};
use parley_proto::tools::v1::{
    ToolCall, ToolError, ToolResult, ToolUpdate,
    tool_service_server::{ToolService, ToolServiceServer},
    tool_update::Update,
};
use tokio_stream::{Stream, wrappers::TcpListenerStream};
use tonic::{Request, Response, Status};

/// The `service.name` of the tool server's spans.
pub const SERVICE_NAME: &str = "trace-test-tools";
/// The query that makes `lookup_rows` fail.
pub const FAILING_QUERY: &str = "please-fail";

#[derive(Debug, Clone)]
struct Tools {
    tracer: SdkTracer,
}

type Updates = Pin<Box<dyn Stream<Item = Result<ToolUpdate, Status>> + Send>>;

fn query(call: &ToolCall) -> String {
    call.input
        .as_ref()
        .and_then(|input| input.fields.get("query"))
        .and_then(|value| match &value.kind {
            Some(prost_types::value::Kind::StringValue(text)) => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[tonic::async_trait]
impl ToolService for Tools {
    type ExecuteStream = Updates;

    async fn execute(&self, request: Request<ToolCall>) -> Result<Response<Updates>, Status> {
        let parent = parley_grpc::telemetry::propagation::extract(request.metadata().as_ref());
        let call = request.into_inner();
        let mut span = self
            .tracer
            .span_builder("parley.tools.v1.ToolService/Execute")
            .with_kind(SpanKind::Server)
            .with_attributes([
                KeyValue::new("rpc.system.name", "grpc"),
                KeyValue::new("rpc.method", "parley.tools.v1.ToolService/Execute"),
            ])
            .start_with_context(&self.tracer, &parent);
        let result = if query(&call) == FAILING_QUERY {
            span.set_status(SpanStatus::error("the lookup failed"));
            ToolResult {
                text: String::new(),
                payload: None,
                error: Some(ToolError {
                    message: "the lookup failed".into(),
                    code: "LOOKUP_FAILED".into(),
                }),
            }
        } else {
            ToolResult {
                text: "1 row: {\"Company\": \"Walrus Ltd\"}".into(),
                payload: None,
                error: None,
            }
        };
        span.end();
        let update = ToolUpdate {
            update: Some(Update::Result(result)),
        };
        Ok(Response::new(Box::pin(tokio_stream::once(Ok(update)))))
    }
}

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
        let tracer = provider.tracer(SERVICE_NAME);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the tool server");
        let addr = listener.local_addr().expect("tool server address");
        tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(ToolServiceServer::new(Tools { tracer }))
                .serve_with_incoming(TcpListenerStream::new(listener))
                .await;
        });
        Self { addr, provider }
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
