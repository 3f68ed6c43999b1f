//! The admin port: `GET /metrics` in the Prometheus text format.
//!
//! A deliberately tiny HTTP/1.1 responder on tokio (no web framework for
//! one read-only page): it reads one request head (at most 8 KiB, within
//! 5 s), answers and closes the connection. `--metrics-listen off` (or
//! `PARLEY_METRICS_LISTEN=off`) leaves the port closed.

use std::{net::SocketAddr, time::Duration};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use super::metrics::metrics;

/// Largest request head read.
const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

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
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(answer(stream));
                }
                Err(error) => {
                    tracing::warn!(%error, "metrics listener accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    Ok(bound)
}

async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0_u8; 1024];
    let read = async {
        loop {
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            head.extend_from_slice(&chunk[..n]);
            if head.windows(4).any(|w| w == b"\r\n\r\n") || head.len() >= MAX_HEAD {
                return Some(());
            }
        }
    };
    tokio::time::timeout(READ_TIMEOUT, read).await.ok()??;
    Some(String::from_utf8_lossy(&head).into_owned())
}

async fn answer(mut stream: TcpStream) {
    let Some(head) = read_head(&mut stream).await else {
        return;
    };
    let mut words = head.lines().next().unwrap_or_default().split_whitespace();
    let (method, path) = (
        words.next().unwrap_or_default(),
        words.next().unwrap_or_default(),
    );
    let path = path.split('?').next().unwrap_or_default();
    let (status, content_type, body) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            metrics().render(),
        ),
        ("GET" | "HEAD", "/") => (
            "200 OK",
            "text/plain; charset=utf-8",
            "Parley admin port: GET /metrics\n".to_owned(),
        ),
        ("GET" | "HEAD", _) => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "not found\n".to_owned(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            "only GET\n".to_owned(),
        ),
    };
    let mut response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if method != "HEAD" {
        response.extend_from_slice(body.as_bytes());
    }
    let _ = stream.write_all(&response).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let ok = get(addr, "GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n").await;
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
        assert!(
            ok.contains(
                "parley_model_retries_total{gen_ai_provider_name=\"openai\",reason=\"HTTP_429\"}"
            ),
            "{ok}"
        );
        let missing = get(addr, "GET /nope HTTP/1.1\r\n\r\n").await;
        assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
        let post = get(addr, "POST /metrics HTTP/1.1\r\n\r\n").await;
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
