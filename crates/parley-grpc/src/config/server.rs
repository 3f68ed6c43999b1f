//! `[server]`, the part of the configuration every binary has: where it
//! listens (gRPC, a Unix socket, metrics), TLS, how it stops, and the
//! command-line flags that set them.

use super::*;

/// `[server]`: where a binary listens and how it stops. Every service has
/// one, with its own ports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// The gRPC address (`HOST:PORT`).
    pub listen: String,
    /// Prometheus metrics at `http://ADDR/metrics`, or `off`.
    pub metrics_listen: String,
    /// Longest time in-flight calls get to finish after SIGTERM.
    #[serde(with = "duration")]
    pub drain_timeout: Duration,
    /// A second, plaintext port serving only `grpc.health.v1` (`HOST:PORT`),
    /// or `off`: for probes that cannot speak TLS, such as the kubelet's
    /// gRPC probes, when `listen` serves TLS.
    #[serde(default = "off")]
    pub health_listen: String,
    /// A Unix domain socket serving the same gRPC as `listen` (health and
    /// reflection included), or `off`: for a caller in the same pod or on
    /// the same host. Always plaintext (who may connect is the file's
    /// permissions, 0660); a stale socket file is replaced at start and the
    /// file is removed at exit.
    #[serde(default = "off")]
    pub uds_listen: String,
    /// `[server.tls]`: TLS on `listen` when it names a certificate.
    #[serde(default)]
    pub tls: crate::tls::ServerTlsConfig,
}

fn off() -> String {
    "off".to_owned()
}

impl ServerConfig {
    /// Listens on 127.0.0.1 at `port`, metrics at `metrics_port`, and
    /// drains for 20 s.
    pub fn local(port: u16, metrics_port: u16) -> Self {
        Self {
            listen: format!("127.0.0.1:{port}"),
            metrics_listen: format!("127.0.0.1:{metrics_port}"),
            drain_timeout: Duration::from_secs(20),
            health_listen: off(),
            uds_listen: off(),
            tls: crate::tls::ServerTlsConfig::default(),
        }
    }

    /// `listen` as a socket address.
    pub fn listen_addr(&self) -> Result<SocketAddr, ConfigError> {
        self.listen
            .parse()
            .map_err(|error| invalid("server.listen", format!("`{}`: {error}", self.listen)))
    }

    /// `metrics_listen` parsed.
    pub fn metrics(&self) -> Result<MetricsListen, ConfigError> {
        self.metrics_listen
            .parse()
            .map_err(|message: String| invalid("server.metrics_listen", message))
    }

    /// `health_listen` as a socket address, `None` when `off`.
    pub fn health_addr(&self) -> Result<Option<SocketAddr>, ConfigError> {
        if self.health_listen == "off" {
            return Ok(None);
        }
        self.health_listen.parse().map(Some).map_err(|error| {
            invalid(
                "server.health_listen",
                format!("`{}`: {error} (HOST:PORT or off)", self.health_listen),
            )
        })
    }

    /// `uds_listen` as a socket path, `None` when `off`.
    pub fn uds_path(&self) -> Result<Option<PathBuf>, ConfigError> {
        if self.uds_listen == "off" {
            return Ok(None);
        }
        crate::unix::check_path(&self.uds_listen)
            .map(Some)
            .map_err(|message| {
                invalid(
                    "server.uds_listen",
                    format!("`{}`: {message} (a socket path or off)", self.uds_listen),
                )
            })
    }

    /// Checks the addresses.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.listen_addr()?;
        self.metrics()?;
        self.health_addr()?;
        self.uds_path()?;
        Ok(())
    }
}

/// Whether `listen` (`server.listen`) is reachable only from this host: an
/// IP loopback address or `localhost`.
pub fn is_loopback(listen: &str) -> bool {
    if let Ok(addr) = listen.parse::<std::net::SocketAddr>() {
        return addr.ip().is_loopback();
    }
    listen
        .rsplit_once(':')
        .is_some_and(|(host, _)| host.eq_ignore_ascii_case("localhost"))
}

/// The flags every Parley binary takes (`#[command(flatten)]` and
/// `#[serde(flatten)]` them into its flags): the `[server]` keys, each
/// serialised under its key for [`Layers::flags`], the log format and
/// `--print-config`.
#[derive(Debug, Clone, Default, clap::Args, Serialize)]
pub struct ServerFlags {
    /// Address to listen on (HOST:PORT): server.listen.
    #[arg(long, env = "PARLEY_LISTEN")]
    #[serde(rename = "server.listen")]
    pub listen: Option<String>,
    /// Also serve on this Unix domain socket (plaintext, mode 0660), or `off`:
    /// server.uds_listen.
    #[arg(long, env = "PARLEY_UDS_LISTEN")]
    #[serde(rename = "server.uds_listen")]
    pub uds_listen: Option<String>,
    /// Prometheus metrics at http://ADDR/metrics, or `off`: server.metrics_listen.
    #[arg(long, env = "PARLEY_METRICS_LISTEN")]
    #[serde(rename = "server.metrics_listen")]
    pub metrics_listen: Option<String>,
    /// Time in-flight calls get to finish after SIGTERM (`20s`): server.drain_timeout.
    #[arg(long, env = "PARLEY_DRAIN_TIMEOUT", value_parser = parse_duration)]
    #[serde(rename = "server.drain_timeout", with = "duration::option")]
    pub drain_timeout: Option<Duration>,
    /// Serve TLS with this certificate chain (PEM): server.tls.cert.
    #[arg(long, env = "PARLEY_TLS_CERT")]
    #[serde(rename = "server.tls.cert")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The certificate's private key (PEM): server.tls.key.
    #[arg(long, env = "PARLEY_TLS_KEY")]
    #[serde(rename = "server.tls.key")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Require client certificates signed by this CA (PEM; mutual TLS):
    /// server.tls.client_ca.
    #[arg(long, env = "PARLEY_TLS_CLIENT_CA")]
    #[serde(rename = "server.tls.client_ca")]
    pub tls_client_ca: Option<std::path::PathBuf>,
    /// Log format: `json` or `text`.
    #[arg(long, env = "PARLEY_LOG_FORMAT", default_value = "json")]
    #[serde(skip)]
    pub log_format: LogFormat,
    /// Print the configuration the layers give (TOML, secrets left out) and exit.
    #[arg(long)]
    #[serde(skip)]
    pub print_config: bool,
}

/// Why a binary could not open its ports.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The gRPC address.
    #[error("cannot listen on {addr} (server.listen): {source}")]
    Listen {
        /// The address.
        addr: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The metrics address.
    #[error("cannot open the metrics port (server.metrics_listen): {0}")]
    Metrics(#[source] std::io::Error),
    /// A value that does not parse.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

impl ServerConfig {
    /// Opens the metrics port (unless `off`) and binds the gRPC address.
    pub async fn bind(&self) -> Result<tokio::net::TcpListener, BindError> {
        let metrics = self.metrics()?;
        let listener = tokio::net::TcpListener::bind(&self.listen)
            .await
            .map_err(|source| BindError::Listen {
                addr: self.listen.clone(),
                source,
            })?;
        metrics.serve().await.map_err(BindError::Metrics)?;
        Ok(listener)
    }
}

/// What a binary does with `--print-config`: prints `config` as TOML and
/// says true (the binary then exits).
pub fn print_if_asked<T: Serialize>(flags: &ServerFlags, config: &T) -> bool {
    if flags.print_config {
        print!("{}", defaults_toml(config));
    }
    flags.print_config
}
