//! An in-process OTLP trace collector for the latency benchmark with
//! tracing on: a tonic `TraceService` on port 0 that counts the spans it
//! receives (the benchmark checks that spans really were exported).

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
    trace_service_server::{TraceService, TraceServiceServer},
};
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Request, Response, Status};

#[derive(Debug, Default, Clone)]
pub struct Counter(Arc<AtomicUsize>);

impl Counter {
    /// Spans received so far.
    pub fn spans(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

#[tonic::async_trait]
impl TraceService for Counter {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let spans: usize = request
            .into_inner()
            .resource_spans
            .iter()
            .flat_map(|resource| &resource.scope_spans)
            .map(|scope| scope.spans.len())
            .sum();
        self.0.fetch_add(spans, Ordering::Relaxed);
        Ok(Response::new(ExportTraceServiceResponse::default()))
    }
}

/// Starts the collector; returns its address and its span counter.
pub async fn start() -> (SocketAddr, Counter) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the collector");
    let addr = listener.local_addr().expect("collector address");
    let counter = Counter::default();
    let service = TraceServiceServer::new(counter.clone());
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(TcpListenerStream::new(listener))
            .await;
    });
    (addr, counter)
}
