//! An in-test OTLP trace collector: a tonic server implementing
//! `opentelemetry.proto.collector.trace.v1.TraceService` on port 0 that keeps
//! every span it receives, flattened, for the assertions.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
};

use opentelemetry_proto::tonic::{
    collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
        trace_service_server::{TraceService, TraceServiceServer},
    },
    common::v1::{AnyValue, any_value::Value},
};
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Request, Response, Status};

/// One received span.
#[derive(Debug, Clone)]
pub struct SpanRecord {
    /// `service.name` of the resource that sent it.
    pub service: String,
    /// The span name.
    pub name: String,
    /// 32 hex digits.
    pub trace_id: String,
    /// 16 hex digits.
    pub span_id: String,
    /// 16 hex digits, empty for a root span.
    pub parent_span_id: String,
    /// OTLP `SpanKind`: 1 internal, 2 server, 3 client.
    pub kind: i32,
    /// OTLP status code: 0 unset, 1 ok, 2 error.
    pub status: i32,
    /// Attributes, values rendered as text (arrays as `a,b`).
    pub attributes: HashMap<String, String>,
}

impl SpanRecord {
    /// An attribute's text.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// OTLP span kinds.
pub const KIND_INTERNAL: i32 = 1;
/// OTLP span kinds.
pub const KIND_SERVER: i32 = 2;
/// OTLP span kinds.
pub const KIND_CLIENT: i32 = 3;
/// OTLP status code of an error.
pub const STATUS_ERROR: i32 = 2;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(value: &AnyValue) -> String {
    match &value.value {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        Some(Value::ArrayValue(array)) => {
            array.values.iter().map(text).collect::<Vec<_>>().join(",")
        }
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

#[derive(Debug, Default, Clone)]
struct Store(Arc<Mutex<Vec<SpanRecord>>>);

#[tonic::async_trait]
impl TraceService for Store {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let mut spans = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .iter()
                .flat_map(|resource| &resource.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.as_ref())
                .map(text)
                .unwrap_or_default();
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    spans.push(SpanRecord {
                        service: service.clone(),
                        name: span.name,
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                        kind: span.kind,
                        status: span.status.map_or(0, |status| status.code),
                        attributes: span
                            .attributes
                            .iter()
                            .map(|kv| {
                                (
                                    kv.key.clone(),
                                    kv.value.as_ref().map(text).unwrap_or_default(),
                                )
                            })
                            .collect(),
                    });
                }
            }
        }
        Ok(Response::new(ExportTraceServiceResponse::default()))
    }
}

/// A running collector.
#[derive(Debug)]
pub struct Collector {
    /// Where it listens.
    pub addr: SocketAddr,
    store: Store,
}

impl Collector {
    /// Starts a collector on a free port of 127.0.0.1.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the collector");
        let addr = listener.local_addr().expect("collector address");
        let store = Store::default();
        let service = TraceServiceServer::new(store.clone());
        tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(TcpListenerStream::new(listener))
                .await;
        });
        Self { addr, store }
    }

    /// The OTLP endpoint to give exporters.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<SpanRecord> {
        self.store
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
