//! A local S3 API server for the object-store tests: PyPI's `moto[server]`
//! (`scripts/setup.sh` installs it), started on port 0 by each test that
//! needs it and killed when the test drops it. Without moto a test prints
//! `NOT RUN` (and fails under `CI=true`).
//!
//! Moto checks no signature, so the test reads the bucket with plain
//! requests: the objects it holds and the multipart uploads still open.

use std::{path::PathBuf, process::Stdio, time::Duration};

use tokio::io::{AsyncBufReadExt, BufReader};

/// A running moto server with one bucket.
pub struct Moto {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The bucket the gateway writes to.
    pub bucket: String,
    /// Credential files (moto takes any).
    dir: tempfile::TempDir,
    http: reqwest::Client,
    _server: tokio::process::Child,
}

/// Whether python3 can run moto's server here.
fn moto_installed() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import moto.server, flask, flask_cors"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

impl Moto {
    /// Starts moto and creates the bucket; `None` (after `not_run`) when
    /// moto is not installed.
    pub async fn start(test: &str) -> Option<Self> {
        if !moto_installed() {
            parley_testkit::not_run(
                test,
                "python3 with moto[server] is missing: run scripts/setup.sh (pip install 'moto[server]')",
            );
            return None;
        }
        let mut server = tokio::process::Command::new("python3")
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start moto");
        // Werkzeug names the port it bound; every line after it (one per
        // request) is drained so the pipe never fills.
        let mut lines = BufReader::new(server.stderr.take().expect("stderr")).lines();
        let found = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.expect("moto's log") {
                if let Some(at) = line.find("http://127.0.0.1:") {
                    return Some(line[at..].trim().to_owned());
                }
            }
            None
        })
        .await;
        let endpoint = match found {
            Ok(Some(endpoint)) => endpoint,
            other => panic!("moto did not start: {other:?}"),
        };
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("key-id"), "parley-test-key\n").expect("write");
        std::fs::write(dir.path().join("secret"), "parley-test-secret\n").expect("write");
        // The gateway's TLS provider (reqwest is built without one).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let moto = Self {
            endpoint,
            bucket: "parley-files".into(),
            dir,
            http: reqwest::Client::new(),
            _server: server,
        };
        moto.put(&moto.bucket, "", Vec::new()).await;
        Some(moto)
    }

    /// Creates `bucket` (no `key`) or the object `key` in it.
    pub async fn put(&self, bucket: &str, key: &str, body: Vec<u8>) {
        let url = match key {
            "" => format!("{}/{bucket}", self.endpoint),
            key => format!("{}/{bucket}/{key}", self.endpoint),
        };
        let put = self.http.put(url).body(body).send().await.expect("put");
        assert!(put.status().is_success(), "{put:?}");
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `[attachments.s3]` for this server, the credentials in files.
    pub fn config(&self) -> chat_gateway::config::S3Config {
        chat_gateway::config::S3Config {
            endpoint: Some(self.endpoint.clone()),
            bucket: self.bucket.clone(),
            path_style: true,
            access_key_id_file: Some(self.file("key-id")),
            secret_access_key_file: Some(self.file("secret")),
            ..Default::default()
        }
    }

    /// The same as `PARLEY_ATTACHMENTS__...` variables, for a gateway
    /// process.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("PARLEY_ATTACHMENTS__STORE", "s3".to_owned()),
            ("PARLEY_ATTACHMENTS__S3__ENDPOINT", self.endpoint.clone()),
            ("PARLEY_ATTACHMENTS__S3__BUCKET", self.bucket.clone()),
            ("PARLEY_ATTACHMENTS__S3__PATH_STYLE", "true".to_owned()),
            (
                "PARLEY_ATTACHMENTS__S3__ACCESS_KEY_ID_FILE",
                self.file("key-id").display().to_string(),
            ),
            (
                "PARLEY_ATTACHMENTS__S3__SECRET_ACCESS_KEY_FILE",
                self.file("secret").display().to_string(),
            ),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect()
    }

    async fn list(&self, query: &str, tag: &str) -> usize {
        self.list_in(&self.bucket, query, tag).await
    }

    async fn list_in(&self, bucket: &str, query: &str, tag: &str) -> usize {
        let body = self
            .http
            .get(format!("{}/{bucket}?{query}", self.endpoint))
            .send()
            .await
            .expect("list")
            .text()
            .await
            .expect("listing");
        body.matches(&format!("<{tag}>")).count()
    }

    /// The objects in the bucket.
    pub async fn objects(&self) -> usize {
        self.list("list-type=2", "Key").await
    }

    /// The objects in `bucket`.
    pub async fn objects_in(&self, bucket: &str) -> usize {
        self.list_in(bucket, "list-type=2", "Key").await
    }

    /// The multipart uploads still open.
    pub async fn open_uploads(&self) -> usize {
        self.list("uploads", "UploadId").await
    }
}
