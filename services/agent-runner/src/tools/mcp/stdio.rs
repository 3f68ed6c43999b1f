//! A stdio server's process and pipes: the child leads its own process
//! group (ending it ends the whole group), its stdout fails once one
//! message grows past the limit, and its stderr is logged line by line
//! within a bounded buffer.

use std::{
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll, ready},
};

use tokio::{
    io::{AsyncRead, AsyncReadExt, ReadBuf},
    process::Child,
};

/// The longest stderr line of a child that is logged.
const MAX_STDERR_LINE: usize = 2048;

/// A stdio server's output that fails once a line (one JSON-RPC message)
/// grows past `max` bytes: the connection closes, its calls fail at once,
/// and the server is started again.
pub(super) struct LineLimit<R> {
    inner: R,
    max: usize,
    line: usize,
    oversized: Arc<AtomicBool>,
}

impl<R> LineLimit<R> {
    /// `inner` failing past `max` bytes a line, setting `oversized` then.
    pub(super) fn new(inner: R, max: usize, oversized: Arc<AtomicBool>) -> Self {
        Self {
            inner,
            max,
            line: 0,
            oversized,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineLimit<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        for &byte in &buf.filled()[before..] {
            if byte == b'\n' {
                this.line = 0;
            } else {
                this.line += 1;
                if this.line > this.max {
                    this.oversized.store(true, Ordering::Relaxed);
                    return Poll::Ready(Err(std::io::Error::other(format!(
                        "a message longer than {} bytes",
                        this.max
                    ))));
                }
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// Logs a child's stderr line by line without holding more than
/// `MAX_STDERR_LINE` bytes of a line: it reads bounded chunks, logs a line's
/// first bytes (invalid UTF-8 replaced) and drops the rest, and keeps
/// draining until the pipe closes, so a server writing without newlines or
/// writing bytes that are not UTF-8 neither grows the runner nor dies on a
/// broken pipe.
pub(super) async fn log_stderr<R: AsyncRead + Unpin>(server: String, mut stderr: R) {
    let mut chunk = vec![0_u8; 8192];
    let mut line = StderrLine::default();
    loop {
        let read = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        line.push(&chunk[..read], |text, dropped| {
            if dropped > 0 {
                tracing::info!(server = %server, line = %text, dropped, "MCP server stderr (truncated)");
            } else {
                tracing::info!(server = %server, line = %text, "MCP server stderr");
            }
        });
    }
    line.finish(|text, dropped| {
        tracing::info!(server = %server, line = %text, dropped, "MCP server stderr");
    });
}

/// The line of stderr being read: its first `MAX_STDERR_LINE` bytes and how
/// many more were dropped.
#[derive(Default)]
struct StderrLine {
    kept: Vec<u8>,
    dropped: u64,
}

impl StderrLine {
    /// Adds `bytes`, calling `emit(text, dropped)` for every line they end.
    fn push(&mut self, mut bytes: &[u8], mut emit: impl FnMut(&str, u64)) {
        while !bytes.is_empty() {
            let (part, ended) = match memchr::memchr(b'\n', bytes) {
                Some(at) => (&bytes[..at], Some(at + 1)),
                None => (bytes, None),
            };
            let room = MAX_STDERR_LINE.saturating_sub(self.kept.len());
            let take = room.min(part.len());
            self.kept.extend_from_slice(&part[..take]);
            self.dropped += (part.len() - take) as u64;
            match ended {
                Some(next) => {
                    self.emit(&mut emit);
                    bytes = &bytes[next..];
                }
                None => break,
            }
        }
    }

    /// Emits a last line that no newline ended.
    fn finish(&mut self, mut emit: impl FnMut(&str, u64)) {
        if !self.kept.is_empty() || self.dropped > 0 {
            self.emit(&mut emit);
        }
    }

    fn emit(&mut self, emit: &mut impl FnMut(&str, u64)) {
        let text = String::from_utf8_lossy(&self.kept);
        emit(text.trim_end_matches('\r'), self.dropped);
        self.kept.clear();
        self.dropped = 0;
    }
}

/// A stdio server's process, leader of its own process group: ending it
/// ends the whole group (grandchildren such as those `npx` or `uvx` start
/// included), whether the connection ended by cancel, time-out, shutdown
/// or a crash, and whenever the value is dropped.
pub(super) struct GroupChild(Child, Option<rustix::process::Pid>);

impl GroupChild {
    pub(super) fn new(child: Child) -> Self {
        let group = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(rustix::process::Pid::from_raw);
        Self(child, group)
    }

    /// Sends SIGKILL to every process of the group, also after the leader
    /// has exited (its grandchildren keep the group, and so its id, alive);
    /// the leader's status is still there for `wait`.
    pub(super) fn kill_group(&mut self) {
        let Some(group) = self.1 else {
            let _ = self.0.start_kill();
            return;
        };
        if rustix::process::kill_process_group(group, rustix::process::Signal::KILL).is_err() {
            // No group left (every member gone); the leader itself still
            // goes with `kill_on_drop`.
            let _ = self.0.start_kill();
        }
    }
}

impl std::ops::Deref for GroupChild {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for GroupChild {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for GroupChild {
    fn drop(&mut self) {
        self.kill_group();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stderr_line_keeps_its_first_bytes_and_replaces_invalid_utf8() {
        let mut line = StderrLine::default();
        let mut seen = Vec::new();
        let long = vec![b'a'; MAX_STDERR_LINE + 10];
        line.push(&long, |t, d| seen.push((t.to_owned(), d)));
        line.push(b"\nbad \xff\r\nta", |t, d| seen.push((t.to_owned(), d)));
        line.finish(|t, d| seen.push((t.to_owned(), d)));
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[0].0.len(), MAX_STDERR_LINE);
        assert_eq!(seen[0].1, 10);
        assert_eq!(seen[1], ("bad \u{fffd}".to_owned(), 0));
        assert_eq!(seen[2], ("ta".to_owned(), 0));
    }
}
