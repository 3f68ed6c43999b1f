//! One Parley stack on its own Docker network: the payload-parser, the
//! agent-runner (scripted provider) and the chat-gateway (PostgreSQL, a
//! fresh schema; optionally a second replica on the same schema), each from
//! its image, run as the Kubernetes manifests run them: non-root, read-only
//! root filesystem, every capability dropped, no privilege escalation,
//! configuration files mounted read-only.
//!
//! Readiness is the `listening` log line, then `grpc.health.v1` SERVING on
//! the published port. Containers and the network are removed when the
//! stack is dropped, also when a test panics; [`Stack::run`] prints every
//! container's log when the test body fails.

use std::{
    panic::AssertUnwindSafe,
    path::PathBuf,
    time::{Duration, Instant},
};

use futures::{FutureExt, future::OptionFuture};
use testcontainers::{
    ContainerAsync, GenericImage, ImageExt,
    bollard::query_parameters::KillContainerOptionsBuilder,
    core::{AccessMode, Host, Mount, WaitFor},
    runners::AsyncRunner,
};

use super::{
    chat::{self, Client},
    gate::{Prerequisites, TAG},
    postgres::{HOST_ALIAS, Schema},
};

/// The HS256 secret of the deployed-configuration stack (test only; also
/// in tests/e2e/fixtures/jwt-secret, mounted as the Secret file).
pub const JWT_SECRET: &str = "e2e-secret-that-is-long-enough-for-hs256";

/// The three services.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// payload-parser.
    Parser,
    /// agent-runner.
    Runner,
    /// chat-gateway.
    Gateway,
    /// A second chat-gateway replica on the same schema, runner and parser
    /// ([`StackOptions::second_gateway`]).
    GatewayB,
}

impl Service {
    /// Its image repository.
    pub fn image(self) -> &'static str {
        match self {
            Self::Parser => "parley/payload-parser",
            Self::Runner => "parley/agent-runner",
            Self::Gateway | Self::GatewayB => "parley/chat-gateway",
        }
    }

    /// Its gRPC port inside the container.
    pub fn port(self) -> u16 {
        match self {
            Self::Parser => 50053,
            Self::Runner => 50052,
            Self::Gateway | Self::GatewayB => 50051,
        }
    }

    /// The service name its health endpoint reports.
    pub fn health_name(self) -> &'static str {
        match self {
            Self::Parser => "parley.parser.v1.PayloadParser",
            Self::Runner => "parley.runner.v1.AgentRunner",
            Self::Gateway | Self::GatewayB => "parley.gateway.v1.ChatGateway",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Self::Parser => "parser",
            Self::Runner => "runner",
            Self::Gateway => "gateway",
            Self::GatewayB => "gateway-b",
        }
    }
}

/// How a stack is configured.
#[derive(Debug, Clone)]
pub struct StackOptions {
    /// A script of `tests/e2e/fixtures/` for the runner instead of its
    /// compiled-in demo.
    pub runner_script: Option<&'static str>,
    /// The gateway's `--drain-timeout`, in seconds.
    pub gateway_drain_secs: u64,
    /// Run the services with `deploy/config` exactly as the Kubernetes
    /// ConfigMaps provide it (the gateway then requires a JWT).
    pub deployed_config: bool,
    /// A file of `tests/e2e/fixtures/` as the gateway's `--config` (not
    /// with `deployed_config`).
    pub gateway_config: Option<&'static str>,
    /// Start a second gateway replica ([`Service::GatewayB`]) configured
    /// like the first.
    pub second_gateway: bool,
    /// Give the runner the example registry (`tools.registry`, as
    /// `deployed_config` and the local stacks do), so that it allows the
    /// `grpc:` endpoints of its tools: without it a page with `lookup_rows`
    /// (`table_view`) is refused with TOOL_ENDPOINT_NOT_ALLOWED. Implied by
    /// `deployed_config`.
    pub runner_registry: bool,
}

impl Default for StackOptions {
    fn default() -> Self {
        Self {
            runner_script: None,
            gateway_drain_secs: 20,
            deployed_config: false,
            gateway_config: None,
            second_gateway: false,
            runner_registry: false,
        }
    }
}

/// A running stack.
pub struct Stack {
    /// The network's name, also the prefix of the container names.
    pub name: String,
    parser: ContainerAsync<GenericImage>,
    runner: ContainerAsync<GenericImage>,
    gateway: ContainerAsync<GenericImage>,
    gateway_b: Option<ContainerAsync<GenericImage>>,
    schema: Schema,
    /// The bearer token clients send, when the gateway requires one.
    pub token: Option<String>,
}

fn repo_file(relative: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative);
    let path = path
        .canonicalize()
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    path.display().to_string()
}

/// The runner's bearer token, in the repository and where the containers
/// read it.
const RUNNER_TOKEN_FIXTURE: &str = "tests/e2e/fixtures/runner-token";
const RUNNER_TOKEN_PATH: &str = "/var/run/secrets/parley/runner/token";

fn mount(relative: &str, target: &str) -> Mount {
    Mount::bind_mount(repo_file(relative), target).with_access_mode(AccessMode::ReadOnly)
}

/// The container request every service shares: image, network, name,
/// Kubernetes-like hardening and the readiness log line.
fn container(network: &str, service: Service) -> testcontainers::ContainerRequest<GenericImage> {
    GenericImage::new(service.image(), TAG)
        .with_wait_for(WaitFor::message_on_stderr("\"message\":\"listening\""))
        .with_network(network)
        .with_container_name(format!("{network}-{}", service.short()))
        .with_readonly_rootfs(true)
        .with_cap_drop("ALL")
        .with_security_opt("no-new-privileges")
        .with_startup_timeout(Duration::from_secs(60))
}

/// A JWT for `user`, signed with [`JWT_SECRET`], as the deployed
/// configuration expects (iss, aud, exp).
fn token(user: &str) -> String {
    let expires = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
        + 3600;
    let claims = serde_json::json!({
        "iss": "https://auth.example.com/",
        "aud": "parley",
        "sub": user,
        "exp": expires,
    });
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes()),
    )
    .expect("sign the test token")
}

impl Stack {
    /// Starts the three containers and waits until each is SERVING.
    pub async fn start(prerequisites: &Prerequisites, options: StackOptions) -> Self {
        let name = format!(
            "parley-e2e-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..10]
        );
        let schema = Schema::create(&prerequisites.postgres_url).await;

        let mut parser = container(&name, Service::Parser).with_cmd(["--drain-timeout=5s"]);
        // The runner listens on 0.0.0.0 in its container, so it needs its
        // bearer token (auth.token_file), which the gateways send
        // (upstream.runner_token_file): a file mounted as Kubernetes mounts
        // a Secret.
        let mut runner = container(&name, Service::Runner)
            .with_mount(mount(RUNNER_TOKEN_FIXTURE, RUNNER_TOKEN_PATH))
            .with_env_var("PARLEY_AUTH__TOKEN_FILE", RUNNER_TOKEN_PATH);
        let mut runner_args = vec!["--drain-timeout=5s".to_owned()];
        if options.deployed_config {
            parser = parser
                .with_mount(mount(
                    "deploy/config/parser-profiles.json",
                    "/etc/parley-parser/parser-profiles.json",
                ))
                .with_cmd([
                    "--drain-timeout=5s",
                    "--profiles=/etc/parley-parser/parser-profiles.json",
                ]);
            runner = runner
                .with_mount(mount(
                    "deploy/config/runner.toml",
                    "/etc/parley/runner.toml",
                ))
                .with_mount(mount(
                    "deploy/config/demo-script.toml",
                    "/etc/parley/demo-script.toml",
                ))
                // runner.toml's tools.registry, as in the ConfigMap.
                .with_mount(mount(
                    "deploy/config/registry.yaml",
                    "/etc/parley/registry.yaml",
                ));
            runner_args.push("--config=/etc/parley/runner.toml".into());
        } else if options.runner_registry {
            runner = runner
                .with_mount(mount(
                    "deploy/config/registry.yaml",
                    "/etc/parley/registry.yaml",
                ))
                .with_env_var("PARLEY_TOOLS__REGISTRY", "/etc/parley/registry.yaml");
        }
        if let Some(script) = options.runner_script {
            runner = runner.with_mount(mount(
                &format!("tests/e2e/fixtures/{script}"),
                "/etc/parley/script.toml",
            ));
            runner_args.push("--script=/etc/parley/script.toml".into());
        }
        let runner = runner.with_cmd(runner_args);

        assert!(
            !(options.deployed_config && options.gateway_config.is_some()),
            "gateway_config replaces the deployed configuration's gateway.toml"
        );
        let mut gateway_args = vec![
            format!("--runner=http://{name}-runner:50052"),
            format!("--parser=http://{name}-parser:50053"),
            format!("--drain-timeout={}s", options.gateway_drain_secs),
        ];
        let mut mounts = vec![(RUNNER_TOKEN_FIXTURE.to_owned(), RUNNER_TOKEN_PATH)];
        let mut env = vec![
            ("PARLEY_DATABASE_URL", schema.container_url()),
            (
                "PARLEY_UPSTREAM__RUNNER_TOKEN_FILE",
                RUNNER_TOKEN_PATH.to_owned(),
            ),
        ];
        let mut token_for = None;
        if options.deployed_config {
            mounts.push((
                "deploy/config/gateway.kubernetes.toml".to_owned(),
                "/etc/parley/gateway.toml",
            ));
            mounts.push((
                "deploy/config/registry.yaml".to_owned(),
                "/etc/parley/registry.yaml",
            ));
            // The Secret as deploy/base/gateway.yaml mounts it (the same
            // value as JWT_SECRET).
            mounts.push((
                "tests/e2e/fixtures/jwt-secret".to_owned(),
                "/var/run/secrets/parley/auth/jwt-secret",
            ));
            gateway_args.push("--config=/etc/parley/gateway.toml".into());
            gateway_args.push("--registry=/etc/parley/registry.yaml".into());
            token_for = Some(token("e2e-user"));
        } else {
            // The container listens on 0.0.0.0 (the image's PARLEY_LISTEN):
            // dev auth there needs its second switch.
            gateway_args.push("--dev-auth".into());
            env.push(("PARLEY_AUTH__DEV_ALLOW_REMOTE", "true".to_owned()));
        }
        if let Some(config) = options.gateway_config {
            mounts.push((
                format!("tests/e2e/fixtures/{config}"),
                "/etc/parley/gateway.toml",
            ));
            gateway_args.push("--config=/etc/parley/gateway.toml".into());
        }
        let gateway = |service| {
            let mut request = container(&name, service).with_host(HOST_ALIAS, Host::HostGateway);
            for (source, target) in &mounts {
                request = request.with_mount(mount(source, target));
            }
            for (key, value) in &env {
                request = request.with_env_var(*key, value);
            }
            request.with_cmd(gateway_args.clone())
        };

        let (parser, runner) = tokio::join!(parser.start(), runner.start());
        let parser = parser.expect("the payload-parser container starts");
        let runner = runner.expect("the agent-runner container starts");
        let gateway_b = options
            .second_gateway
            .then(|| gateway(Service::GatewayB).start());
        let (gateway, gateway_b) = tokio::join!(
            gateway(Service::Gateway).start(),
            OptionFuture::from(gateway_b)
        );
        let gateway = gateway.expect("the chat-gateway container starts");
        let gateway_b =
            gateway_b.map(|started| started.expect("the second chat-gateway container starts"));
        let stack = Self {
            name,
            parser,
            runner,
            gateway,
            gateway_b,
            schema,
            token: token_for,
        };
        for service in stack.services() {
            stack.wait_serving(service).await;
        }
        stack
    }

    fn container(&self, service: Service) -> &ContainerAsync<GenericImage> {
        match service {
            Service::Parser => &self.parser,
            Service::Runner => &self.runner,
            Service::Gateway => &self.gateway,
            Service::GatewayB => self
                .gateway_b
                .as_ref()
                .expect("no second gateway: set StackOptions::second_gateway"),
        }
    }

    /// The services this stack runs.
    fn services(&self) -> Vec<Service> {
        let mut services = vec![Service::Parser, Service::Runner, Service::Gateway];
        services.extend(self.gateway_b.is_some().then_some(Service::GatewayB));
        services
    }

    /// `127.0.0.1:PORT` of a service's published port (it changes when a
    /// container restarts).
    pub async fn addr(&self, service: Service) -> String {
        let port = self
            .container(service)
            .get_host_port_ipv4(service.port())
            .await
            .unwrap_or_else(|error| panic!("{service:?} has no published port: {error}"));
        format!("127.0.0.1:{port}")
    }

    /// Waits until a service reports SERVING on its health endpoint.
    pub async fn wait_serving(&self, service: Service) -> Duration {
        let addr = self.addr(service).await;
        chat::wait_serving(&addr, service.health_name(), Duration::from_secs(30)).await
    }

    /// A client of the gateway (with the stack's token, if any).
    pub async fn client(&self) -> Client {
        self.client_of(Service::Gateway).await
    }

    /// A client of one gateway replica (with the stack's token, if any).
    pub async fn client_of(&self, gateway: Service) -> Client {
        Client::connect(&self.addr(gateway).await, self.token.clone()).await
    }

    /// Sends a signal to a service's process (`SIGKILL`, `SIGTERM`).
    pub async fn signal(&self, service: Service, signal: &str) {
        let docker = testcontainers::core::client::docker_client_instance()
            .await
            .expect("docker client");
        docker
            .kill_container(
                self.container(service).id(),
                Some(KillContainerOptionsBuilder::new().signal(signal).build()),
            )
            .await
            .unwrap_or_else(|error| panic!("cannot send {signal} to {service:?}: {error}"));
    }

    /// Waits until a service's container has exited; returns its exit code
    /// and how long the wait took. Panics after `limit`.
    pub async fn wait_exit(&self, service: Service, limit: Duration) -> (i64, Duration) {
        let started = Instant::now();
        let container = self.container(service);
        while started.elapsed() < limit {
            if let Ok(Some(code)) = container.exit_code().await
                && !container.is_running().await.unwrap_or(true)
            {
                return (code, started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{service:?} still running after {limit:?}")
    }

    /// Kills a service at once (SIGKILL) and waits for the container to stop.
    pub async fn kill(&self, service: Service) {
        self.signal(service, "SIGKILL").await;
        self.wait_exit(service, Duration::from_secs(10)).await;
    }

    /// Starts a stopped service's container again and waits until it is
    /// SERVING; returns how long that took.
    pub async fn restart(&self, service: Service) -> Duration {
        let started = Instant::now();
        self.container(service)
            .start()
            .await
            .unwrap_or_else(|error| panic!("cannot start {service:?} again: {error}"));
        self.wait_serving(service).await;
        started.elapsed()
    }

    /// Every container's log (stderr: the services log JSON lines there).
    pub async fn logs(&self) -> String {
        let mut all = String::new();
        for service in self.services() {
            let log = self
                .container(service)
                .stderr_to_vec()
                .await
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .unwrap_or_else(|error| format!("(no log: {error})"));
            all.push_str(&format!("----- {} {service:?}\n{log}\n", self.name));
        }
        all
    }

    /// Runs a test body on the stack; when it fails, prints every
    /// container's log before failing. The containers, the network and the
    /// schema are removed either way.
    pub async fn run(mut self, body: impl AsyncFnOnce(&mut Stack)) {
        let outcome = AssertUnwindSafe(body(&mut self)).catch_unwind().await;
        if outcome.is_err() {
            eprintln!("{}", self.logs().await);
        }
        self.schema.drop_schema().await;
        drop(self);
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    }
}
