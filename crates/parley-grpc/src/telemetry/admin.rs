//! The admin port: `GET /metrics` in the Prometheus text format, served
//! by axum (already in the tree through tonic). `--metrics-listen off` (or
//! `PARLEY_METRICS_LISTEN=off`) leaves the port closed.

use std::net::SocketAddr;

use axum::{Router, http::header::CONTENT_TYPE, routing::get};
use tokio::net::TcpListener;

use super::metrics::metrics;

/// The value of `--metrics-listen`: `HOST:PORT`, or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsListen(pub Option<SocketAddr>);

impl std::str::FromStr for MetricsListen {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value.trim() {
            "off" | "none" | "" => Ok(Self(None)),
            addr => addr.parse().map(|addr| Self(Some(addr))).map_err(|_| {
                format!("`{addr}` is not HOST:PORT (for example 127.0.0.1:9464) or `off`")
            }),
        }
    }
}

impl MetricsListen {
    /// Serves the metrics when an address is set; returns the bound address.
    pub async fn serve(self) -> std::io::Result<Option<SocketAddr>> {
        match self.0 {
            Some(addr) => serve_metrics(addr).await.map(Some),
            None => Ok(None),
        }
    }
}

/// Binds `addr` and serves the metrics until the process ends. Returns the
/// bound address (useful with port 0).
pub async fn serve_metrics(addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tracing::info!(addr = %bound, "metrics at http://{bound}/metrics");
    let app = Router::new()
        .route(
            "/metrics",
            get(|| async {
                (
                    [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
                    metrics().render(),
                )
            }),
        )
        .route("/", get(|| async { "Parley admin port: GET /metrics\n" }));
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::warn!(%error, "the metrics port stopped");
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        net::TcpStream,
    };

    async fn get(addr: SocketAddr, request: &str) -> String {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut response = String::new();
        stream.read_to_string(&mut response).await.expect("read");
        response
    }

    #[tokio::test]
    async fn serves_metrics_and_refuses_the_rest() {
        metrics()
            .retries
            .with_label_values(&["openai", "HTTP_429"])
            .inc();
        let addr = serve_metrics("127.0.0.1:0".parse().expect("addr"))
            .await
            .expect("bind");
        let ok = get(
            addr,
            "GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        )
        .await;
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
        assert!(
            ok.contains(
                "parley_model_retries_total{gen_ai_provider_name=\"openai\",reason=\"HTTP_429\"}"
            ),
            "{ok}"
        );
        let missing = get(
            addr,
            "GET /nope HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        )
        .await;
        assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
        let post = get(
            addr,
            "POST /metrics HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        )
        .await;
        assert!(post.starts_with("HTTP/1.1 405"), "{post}");
    }

    #[test]
    fn listen_values() {
        assert_eq!("off".parse(), Ok(MetricsListen(None)));
        assert_eq!(
            "127.0.0.1:9464".parse(),
            Ok(MetricsListen(Some("127.0.0.1:9464".parse().expect("addr"))))
        );
        assert!("9464".parse::<MetricsListen>().is_err());
    }
}
