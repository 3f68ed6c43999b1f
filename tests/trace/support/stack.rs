//! The trace tests' stack: the three real binaries as child processes
//! ([`parley_testkit::stack`]), each on a port it bound itself, with
//! tracing sent to the test's collector, the scripted model and the
//! gateway's registry pointing at the test's ToolService.

use std::{path::Path, time::Duration};

use parley_testkit::{
    process::repo_root,
    stack::{self, Service, ServiceOptions, StackOptions},
};

/// Where the stack sends spans, if anywhere.
#[derive(Debug, Clone)]
pub struct Tracing {
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`; `None` leaves tracing off.
    pub endpoint: Option<String>,
    /// `OTEL_BSP_SCHEDULE_DELAY` in milliseconds.
    pub schedule_delay_ms: u64,
}

/// The running stack.
#[derive(Debug)]
pub struct Stack {
    /// The gateway's URL.
    pub gateway: String,
    stack: stack::Stack,
    _state: tempfile::TempDir,
}

impl Stack {
    /// Starts parser, runner (scripted model playing `script`) and gateway
    /// (SQLite in a temporary directory, `registry`, dev auth), and waits
    /// until all three are healthy.
    pub async fn start(tracing: &Tracing, script: &Path, registry: &Path) -> Self {
        Self::start_with(tracing, script, registry, &["--dev-auth".into()]).await
    }

    /// [`Stack::start`] with the gateway's auth (and any other) flags
    /// `gateway_args` instead of `--dev-auth`.
    pub async fn start_with(
        tracing: &Tracing,
        script: &Path,
        registry: &Path,
        gateway_args: &[std::ffi::OsString],
    ) -> Self {
        let state = tempfile::tempdir().expect("state directory");
        let dir = state.path();
        let mut options = StackOptions::new(dir);
        if let Some(endpoint) = &tracing.endpoint {
            options.env = vec![
                ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), endpoint.into()),
                (
                    "OTEL_BSP_SCHEDULE_DELAY".into(),
                    tracing.schedule_delay_ms.to_string().into(),
                ),
            ];
        }
        let own_port = ["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"];
        options.parser = ServiceOptions::default().args(own_port).args([
            "--profiles".into(),
            repo_root().join("deploy/config/parser-profiles.json"),
        ]);
        // The runner may dial the tool endpoints of the gateway's registry.
        options.runner = ServiceOptions::default()
            .env("PARLEY_TOOLS__REGISTRY", registry)
            .args(own_port)
            .args([Path::new("--script"), script]);
        options.gateway = ServiceOptions::default().args(own_port).args([
            "--registry".into(),
            registry.as_os_str().to_owned(),
            "--database-url".into(),
            format!("sqlite://{}?mode=rwc", dir.join("parley.db").display()).into(),
        ]);
        options.gateway = options.gateway.args(gateway_args.iter().cloned());
        let stack = stack::Stack::start(&options).await;
        Self {
            gateway: stack.url(Service::Gateway),
            stack,
            _state: state,
        }
    }

    /// Sends SIGTERM to every process and waits until all have exited
    /// (each flushes its spans on the way out). Returns how long it took.
    pub async fn stop(&mut self) -> Duration {
        self.stack.stop().await
    }

    /// The logs of the three processes so far, for failure messages.
    pub fn logs(&self) -> String {
        self.stack.logs()
    }
}
