//! A replay HTTP server for provider tests: it answers each connection with
//! the next scripted [`Reply`] (status, headers, body from a fixture file,
//! optionally dribbled in tiny chunks), records every request it received,
//! and records when the client closed each connection — so a test can
//! assert what an adapter sent and that dropping a stream really closed the
//! provider connection.
//!
//! Raw tokio TCP and HTTP/1.1 with chunked bodies and `connection: close`:
//! one connection per request, full control over the bytes on the wire.

use std::{
    collections::VecDeque,
    net::SocketAddr,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use serde_json::Value;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::Notify,
};

/// How long a hanging reply waits for the client before giving up, so a
/// broken test fails instead of hanging.
const HANG_LIMIT: Duration = Duration::from_secs(30);
/// The largest request head accepted.
const MAX_HEAD: usize = 64 * 1024;

/// The bytes of `tests/fixtures/<path>`.
pub fn fixture(path: &str) -> Vec<u8> {
    let full = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path);
    std::fs::read(&full).unwrap_or_else(|e| panic!("fixture {}: {e}", full.display()))
}

/// How a reply's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The terminating chunk is sent: a clean end of the body.
    Complete,
    /// The connection is dropped without the terminating chunk.
    Abort,
    /// Nothing more is sent and the connection stays open until the client
    /// closes it (or [`HANG_LIMIT`]).
    Hang,
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Bytes per written chunk; 0 sends the body in one chunk.
    pub chunk_size: usize,
    /// Pause after each chunk.
    pub chunk_delay: Duration,
    pub end: End,
}

impl Reply {
    /// A 200 `text/event-stream` answer.
    pub fn sse(body: impl Into<Vec<u8>>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            body: body.into(),
            chunk_size: 0,
            chunk_delay: Duration::ZERO,
            end: End::Complete,
        }
    }

    /// A 200 SSE answer from a fixture file.
    pub fn sse_fixture(path: &str) -> Self {
        Self::sse(fixture(path))
    }

    /// A JSON answer with `status`.
    pub fn json(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            ..Self::sse(body)
        }
    }

    /// Adds a response header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Writes the body `size` bytes at a time.
    pub fn chunked(mut self, size: usize) -> Self {
        self.chunk_size = size;
        self
    }

    /// Pauses `delay` after every chunk.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = delay;
        self
    }

    /// Sets how the body ends.
    pub fn end(mut self, end: End) -> Self {
        self.end = end;
        self
    }
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

/// What happened on one connection.
#[derive(Debug, Clone)]
pub struct Connection {
    pub request: Recorded,
    /// When the server saw the client close its side (EOF or reset).
    pub client_closed_at: Option<Instant>,
    /// Whether the whole reply (including its end) was written.
    pub reply_finished: bool,
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    connections: Mutex<Vec<Connection>>,
    changed: Notify,
}

/// The replay server; it stops when dropped.
pub struct ReplayServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ReplayServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ReplayServer {
    /// Starts on 127.0.0.1, port 0; connections get `replies` in order, and
    /// a 500 once they run out.
    pub async fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind port 0");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared {
            replies: Mutex::new(replies.into()),
            ..Shared::default()
        });
        let accept_shared = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let shared = accept_shared.clone();
                tokio::spawn(async move { serve(socket, shared).await });
            }
        });
        Self { addr, shared, task }
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Every connection so far, in arrival order.
    pub fn connections(&self) -> Vec<Connection> {
        self.shared.connections.lock().expect("lock").clone()
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.connections().into_iter().map(|c| c.request).collect()
    }

    /// The only request; fails when there were others.
    pub fn single_request(&self) -> Recorded {
        let mut requests = self.requests();
        assert_eq!(requests.len(), 1, "expected exactly one request");
        requests.remove(0)
    }

    /// Waits until the client closed connection `index` and returns when it
    /// did; `None` if that did not happen within `limit`.
    pub async fn wait_client_closed(&self, index: usize, limit: Duration) -> Option<Instant> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.shared.changed.notified();
            if let Some(at) = self
                .connections()
                .get(index)
                .and_then(|c| c.client_closed_at)
            {
                return Some(at);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }
}

async fn serve(socket: TcpStream, shared: Arc<Shared>) {
    let _ = socket.set_nodelay(true);
    let (mut reader, mut writer) = socket.into_split();
    let Some(request) = read_request(&mut reader).await else {
        return;
    };
    let index = {
        let mut conns = shared.connections.lock().expect("lock");
        conns.push(Connection {
            request,
            client_closed_at: None,
            reply_finished: false,
        });
        conns.len() - 1
    };
    shared.changed.notify_waiters();

    // Watch for the client closing its side while the reply is written.
    let closed = Arc::new(Notify::new());
    let watch_shared = shared.clone();
    let watch_closed = closed.clone();
    let watcher = tokio::spawn(async move {
        let mut buf = [0u8; 1024];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        if let Some(c) = watch_shared
            .connections
            .lock()
            .expect("lock")
            .get_mut(index)
        {
            c.client_closed_at = Some(Instant::now());
        }
        watch_shared.changed.notify_waiters();
        watch_closed.notify_one();
    });

    let reply = shared
        .replies
        .lock()
        .expect("lock")
        .pop_front()
        .unwrap_or_else(|| Reply::json(500, r#"{"error":"replay server: no more replies"}"#));
    let finished = write_reply(&mut writer, &reply, &closed).await;
    if let Some(c) = shared.connections.lock().expect("lock").get_mut(index) {
        c.reply_finished = finished;
    }
    shared.changed.notify_waiters();
    match reply.end {
        End::Hang if finished => {
            let _ = tokio::time::timeout(HANG_LIMIT, closed.notified()).await;
        }
        End::Abort => {}
        _ => {
            let _ = writer.shutdown().await;
            // Give the client time to close so the close is recorded.
            let _ = tokio::time::timeout(HANG_LIMIT, closed.notified()).await;
        }
    }
    drop(writer);
    watcher.abort();
}

/// Writes the reply; false when the client went away first.
async fn write_reply(
    writer: &mut tokio::net::tcp::OwnedWriteHalf,
    reply: &Reply,
    closed: &Notify,
) -> bool {
    let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status));
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    if writer.write_all(head.as_bytes()).await.is_err() {
        return false;
    }
    let size = if reply.chunk_size == 0 {
        reply.body.len().max(1)
    } else {
        reply.chunk_size
    };
    for piece in reply.body.chunks(size) {
        let mut frame = format!("{:x}\r\n", piece.len()).into_bytes();
        frame.extend_from_slice(piece);
        frame.extend_from_slice(b"\r\n");
        if writer.write_all(&frame).await.is_err() || writer.flush().await.is_err() {
            return false;
        }
        if !reply.chunk_delay.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(reply.chunk_delay) => {}
                _ = closed.notified() => {
                    closed.notify_one();
                    return false;
                }
            }
        }
    }
    if reply.end == End::Complete && writer.write_all(b"0\r\n\r\n").await.is_err() {
        return false;
    }
    true
}

async fn read_request(reader: &mut tokio::net::tcp::OwnedReadHalf) -> Option<Recorded> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if data.len() > MAX_HEAD {
            return None;
        }
        let n = reader.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let target = first.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = data[head_end + 4..].to_vec();
    while body.len() < length {
        let n = reader.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&buf[..n]);
    }
    Some(Recorded {
        method,
        target,
        headers,
        body,
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Site Overloaded",
        _ => "Status",
    }
}
