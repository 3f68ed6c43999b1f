//! The payload-parser binary (from this build's target directory, see
//! [`crate::process::binary`]) as a test's parser sidecar: on a free port
//! of 127.0.0.1, plain gRPC, no metrics port, no named profiles, its log
//! in a temporary directory; killed when dropped.

use std::{ffi::OsStr, net::SocketAddr, process::ExitStatus, time::Duration};

use crate::process::{self, Process};

/// A running payload-parser.
#[derive(Debug)]
pub struct ParserSidecar {
    process: Process,
    /// Where it listens (TCP).
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl ParserSidecar {
    /// Starts the parser with `args` added to its flags, and waits until it
    /// reports SERVING.
    pub async fn start<I, S>(args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let dir = tempfile::tempdir().expect("the parser's log directory");
        let mut command = process::command(&process::binary("payload-parser"));
        command
            .args(["--listen=127.0.0.1:0", "--metrics-listen=off"])
            .args(args);
        let mut process = Process::spawn(
            "payload-parser",
            command,
            &dir.path().join("payload-parser.log"),
        );
        let addr = process.bound_addr().await;
        process.wait_healthy(&format!("http://{addr}")).await;
        Self {
            process,
            addr,
            _dir: dir,
        }
    }

    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Its log so far.
    pub fn log_text(&self) -> String {
        self.process.log_text()
    }

    /// Sends SIGTERM and waits (10 s at most) for it to exit.
    pub async fn stop(mut self) -> ExitStatus {
        self.process.signal("-TERM");
        self.process.wait_exit(Duration::from_secs(10)).await
    }
}
