//! The three binaries as one stack of child processes: payload-parser,
//! then agent-runner, then chat-gateway (dialing the other two), each
//! started with the caller's flags and environment, its log in the stack's
//! directory, its address read from its `listening` log line and waited on
//! until `grpc.health.v1` reports SERVING. [`Stack::stop`] sends SIGTERM
//! and waits for clean exits; a dropped stack kills what still runs.
//!
//! The suites that run the three binaries (the trace, clients and
//! mutual-TLS tests of `tests/`) start them here.

use std::{
    ffi::OsString,
    net::SocketAddr,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use parley_grpc::tls::ClientTls;

use crate::process::{self, Process};

/// The three services, in the order they start.
pub const SERVICES: [Service; 3] = [Service::Parser, Service::Runner, Service::Gateway];

/// One of the three services.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// payload-parser.
    Parser,
    /// agent-runner.
    Runner,
    /// chat-gateway.
    Gateway,
}

impl Service {
    /// Its binary's name.
    pub fn binary(self) -> &'static str {
        match self {
            Self::Parser => "payload-parser",
            Self::Runner => "agent-runner",
            Self::Gateway => "chat-gateway",
        }
    }

    /// Its short name: its log is `<short>.log`.
    pub fn short(self) -> &'static str {
        match self {
            Self::Parser => "parser",
            Self::Runner => "runner",
            Self::Gateway => "gateway",
        }
    }
}

/// The flags and environment of one service.
#[derive(Debug, Clone, Default)]
pub struct ServiceOptions {
    /// Its command-line arguments (`--listen 127.0.0.1:0` for a port of
    /// its own; without `--listen` it binds its default port).
    pub args: Vec<OsString>,
    /// Variables set for it (on top of a clean environment, see
    /// [`process::command`]).
    pub env: Vec<(OsString, OsString)>,
}

impl ServiceOptions {
    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets a variable.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
}

/// How a stack is started.
#[derive(Debug, Clone)]
pub struct StackOptions {
    /// Where the binaries are (default: [`process::bin_dir`]).
    pub bin_dir: PathBuf,
    /// Where the logs go (`parser.log`, `runner.log`, `gateway.log`).
    pub dir: PathBuf,
    /// Variables set for all three.
    pub env: Vec<(OsString, OsString)>,
    /// The parser's flags.
    pub parser: ServiceOptions,
    /// The runner's flags.
    pub runner: ServiceOptions,
    /// The gateway's flags. Unless they name `--runner` or `--parser`, the
    /// stack adds them with the URLs the two bound.
    pub gateway: ServiceOptions,
    /// Health checks and upstream URLs over TLS with this client
    /// (`https://localhost:PORT`); plain `http://` when `None`.
    pub tls: Option<ClientTls>,
}

impl StackOptions {
    /// Nothing set, logs in `dir`, binaries from [`process::bin_dir`].
    pub fn new(dir: &Path) -> Self {
        Self {
            bin_dir: process::bin_dir(),
            dir: dir.to_path_buf(),
            env: Vec::new(),
            parser: ServiceOptions::default(),
            runner: ServiceOptions::default(),
            gateway: ServiceOptions::default(),
            tls: None,
        }
    }

    fn service(&self, service: Service) -> &ServiceOptions {
        match service {
            Service::Parser => &self.parser,
            Service::Runner => &self.runner,
            Service::Gateway => &self.gateway,
        }
    }
}

/// The running stack.
#[derive(Debug)]
pub struct Stack {
    processes: Vec<(Service, Process, SocketAddr)>,
    tls: bool,
}

impl Stack {
    /// Starts parser, runner and gateway in turn, each waited on until it
    /// is SERVING.
    pub async fn start(options: &StackOptions) -> Self {
        let mut stack = Self {
            processes: Vec::new(),
            tls: options.tls.is_some(),
        };
        for service in SERVICES {
            let binary = options.bin_dir.join(service.binary());
            assert!(
                binary.is_file(),
                "{} is missing: build the services first with `cargo build --bins` \
                 (cargo test --workspace builds them too)",
                binary.display()
            );
            let mut command = process::command(&binary);
            let own = options.service(service);
            command.envs(options.env.iter().chain(&own.env).cloned());
            if service == Service::Gateway {
                let named = |flag: &str| {
                    own.args
                        .iter()
                        .any(|arg| arg.to_string_lossy().starts_with(flag))
                };
                if !named("--runner") {
                    command.arg("--runner").arg(stack.url(Service::Runner));
                }
                if !named("--parser") {
                    command.arg("--parser").arg(stack.url(Service::Parser));
                }
            }
            command.args(&own.args);
            let log = options.dir.join(format!("{}.log", service.short()));
            let mut process = Process::spawn(service.binary(), command, &log);
            let addr = process.bound_addr().await;
            let url = stack.url_of(addr);
            match &options.tls {
                None => process.wait_healthy(&url).await,
                Some(tls) => {
                    process
                        .wait_serving(&url, || async {
                            tls.endpoint(&url)
                                .ok()?
                                .configure(|endpoint| {
                                    endpoint.connect_timeout(Duration::from_secs(2))
                                })
                                .connect()
                                .await
                                .ok()
                        })
                        .await
                }
            }
            stack.processes.push((service, process, addr));
        }
        stack
    }

    fn url_of(&self, addr: SocketAddr) -> String {
        if self.tls {
            format!("https://localhost:{}", addr.port())
        } else {
            format!("http://{addr}")
        }
    }

    fn entry(&self, service: Service) -> &(Service, Process, SocketAddr) {
        self.processes
            .iter()
            .find(|(started, ..)| *started == service)
            .unwrap_or_else(|| panic!("{service:?} is not running"))
    }

    /// The address a service bound.
    pub fn addr(&self, service: Service) -> SocketAddr {
        self.entry(service).2
    }

    /// The URL of a service (`http://ADDR`, or `https://localhost:PORT`
    /// over TLS).
    pub fn url(&self, service: Service) -> String {
        self.url_of(self.addr(service))
    }

    /// A service's process.
    pub fn process(&self, service: Service) -> &Process {
        &self.entry(service).1
    }

    /// Sends SIGTERM to every process and waits until all have exited
    /// cleanly (each flushes its spans on the way out); panics on a failed
    /// exit or after [`process::STARTUP_LIMIT`]. Returns how long it took.
    pub async fn stop(&mut self) -> Duration {
        let started = Instant::now();
        for (_, process, _) in &self.processes {
            process.signal("-TERM");
        }
        for (_, process, _) in &mut self.processes {
            let exit = process.wait_exit(process::STARTUP_LIMIT).await;
            assert!(exit.success(), "{} exited with {exit}", process.name());
        }
        self.processes.clear();
        started.elapsed()
    }

    /// The logs of the processes so far, for failure messages.
    pub fn logs(&self) -> String {
        self.processes
            .iter()
            .map(|(service, process, _)| {
                format!("---- {}.log\n{}", service.short(), process.log_text())
            })
            .collect()
    }
}
