//! Telemetry shared by the three binaries: logs, traces and metrics.
//!
//! [`init`] installs the `tracing` subscriber once, at the top of `main`,
//! inside the tokio runtime: log lines ([`logs`]), and, when an OTLP endpoint
//! is configured ([`config`]), the OpenTelemetry layer that turns `tracing`
//! spans into OpenTelemetry spans and a batch exporter that sends them over
//! OTLP/gRPC. The exporter never blocks a turn: spans wait in a bounded
//! queue (`OTEL_BSP_MAX_QUEUE_SIZE`, default 2048) that a background thread
//! drains; when the collector is slow or down the queue fills and spans are
//! dropped. [`Telemetry::shutdown`] flushes what is queued, within a bound.
//!
//! With no endpoint, tracing is off: no exporter, no OpenTelemetry layer,
//! no RPC spans, nothing injected into outgoing calls. Metrics ([`metrics`])
//! are always recorded and served on the admin port ([`admin`]).
//!
//! The other pieces: [`propagation`] (W3C trace context in headers),
//! [`rpc`] (server and client spans of every gRPC call), [`semconv`] (every
//! attribute and metric name).

pub mod admin;
pub mod config;
pub mod logs;
pub mod metrics;
pub mod propagation;
pub mod rpc;
pub mod semconv;

use std::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use opentelemetry::{KeyValue, trace::TracerProvider as _};
use opentelemetry_otlp::{WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::{Resource, trace::SdkTracerProvider};
use tracing::Level;
use tracing_subscriber::{
    EnvFilter, Layer,
    filter::{LevelFilter, dynamic_filter_fn},
    layer::{Identity, SubscriberExt},
    util::SubscriberInitExt,
};

pub use admin::{MetricsListen, serve_metrics};
pub use config::TraceSettings;
pub use logs::LogFormat;
pub use metrics::metrics;

static TRACING: AtomicBool = AtomicBool::new(false);
static CAPTURE_CONTENT: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported (an OTLP endpoint is configured).
pub fn tracing_enabled() -> bool {
    TRACING.load(Ordering::Relaxed)
}

/// Whether message contents, prompts and tool arguments may go on spans.
/// Off unless explicitly switched on, and meaningless with tracing off.
pub fn capture_content() -> bool {
    CAPTURE_CONTENT.load(Ordering::Relaxed) && tracing_enabled()
}

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The environment asks for something not built in.
    #[error("telemetry: {0}")]
    Unsupported(String),
    /// The OTLP exporter could not be built.
    #[error("telemetry: cannot build the OTLP exporter: {0}")]
    Exporter(String),
    /// A subscriber was already installed.
    #[error("telemetry: a tracing subscriber is already installed")]
    AlreadyInstalled,
}

/// Who is reporting.
#[derive(Debug, Clone, Copy)]
pub struct TelemetryOptions {
    /// The default `service.name` (when `OTEL_SERVICE_NAME` is unset).
    pub service_name: &'static str,
    /// `service.version`.
    pub service_version: &'static str,
    /// How log lines are written.
    pub log_format: LogFormat,
    /// The log filter when `RUST_LOG` is unset (`info` in the binaries).
    pub default_log_filter: &'static str,
}

impl TelemetryOptions {
    /// The options of a binary: its name and version, `info` logs unless
    /// `RUST_LOG` says otherwise.
    pub fn binary(name: &'static str, version: &'static str, log_format: LogFormat) -> Self {
        Self {
            service_name: name,
            service_version: version,
            log_format,
            default_log_filter: "info",
        }
    }
}

/// Runs a binary's `main` with telemetry installed first and its spans
/// flushed however `main` ends (the shape of each binary's `main`).
pub async fn run_main<T, E>(
    options: TelemetryOptions,
    main: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E>
where
    E: From<TelemetryError>,
{
    let telemetry = init(options)?;
    let result = main.await;
    telemetry.shutdown().await;
    result
}

/// The installed telemetry; [`Telemetry::shutdown`] flushes the spans.
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

/// How long the final flush may take at shutdown.
const SHUTDOWN_FLUSH: Duration = Duration::from_secs(5);

/// Builds the tracer provider: batch exporter over OTLP/gRPC. Must run
/// inside the tokio runtime (the exporter's channel lives there).
fn provider(
    settings: &TraceSettings,
    endpoint: &str,
    options: &TelemetryOptions,
) -> Result<SdkTracerProvider, TelemetryError> {
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint);
    if endpoint.starts_with("https://") {
        let tls = crate::tls::ClientTls::from_config(&settings.tls)
            .map_err(|error| TelemetryError::Exporter(error.to_string()))?;
        builder = builder.with_tls_config(tls.tonic_config());
    }
    let exporter = builder
        .build()
        .map_err(|error| TelemetryError::Exporter(error.to_string()))?;
    let mut resource = Resource::builder()
        .with_attribute(KeyValue::new("service.version", options.service_version));
    if !settings.service_name_set {
        resource = resource.with_service_name(options.service_name);
    }
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build())
}

/// Installs logging and, when configured, tracing. Call once, at the top of
/// `main`, inside the tokio runtime.
pub fn init(options: TelemetryOptions) -> Result<Telemetry, TelemetryError> {
    let settings = TraceSettings::from_env(|name| std::env::var(name).ok())?;
    init_with(options, &settings)
}

/// The logging (and, given a provider, tracing) subscriber [`init`]
/// installs.
fn subscriber(
    options: &TelemetryOptions,
    provider: Option<&SdkTracerProvider>,
) -> impl tracing::Subscriber + Send + Sync + 'static {
    let otel = provider.map(|provider| {
        let tracer = provider.tracer(options.service_name);
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            // Spans at INFO and above; warnings and errors become span events;
            // nothing while exporting is paused (`Telemetry::set_exporting`).
            // A dynamic filter: asked on every span, never cached per
            // callsite, so pausing takes effect at once.
            .with_filter(
                dynamic_filter_fn(|meta, _| {
                    if !tracing_enabled() {
                        false
                    } else if meta.is_span() {
                        *meta.level() <= Level::INFO
                    } else {
                        *meta.level() <= Level::WARN
                    }
                })
                // DEBUG and TRACE callsites are never asked.
                .with_max_level_hint(LevelFilter::INFO),
            )
            .boxed()
    });
    // No OpenTelemetry layer is a layer that wants nothing. Not `None`:
    // an absent `Option` layer wants *every* span and event, so every
    // library's trace-level span (h2 opens some around each frame) would
    // be created and closed although no layer records it.
    let otel = otel.unwrap_or_else(|| Identity::new().with_filter(LevelFilter::OFF).boxed());
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(options.default_log_filter));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = match options.log_format {
        LogFormat::Json => fmt
            .fmt_fields(logs::NoSpanFields)
            .event_format(logs::JsonLines)
            .with_filter(filter)
            .boxed(),
        LogFormat::Text => fmt.with_filter(filter).boxed(),
    };
    tracing_subscriber::registry()
        .with(logs::CorrelationLayer::filtered())
        .with(fmt)
        .with(otel)
}

/// [`init`] with explicit settings.
pub fn init_with(
    options: TelemetryOptions,
    settings: &TraceSettings,
) -> Result<Telemetry, TelemetryError> {
    let provider = match &settings.endpoint {
        Some(endpoint) => Some(provider(settings, endpoint, &options)?),
        None => None,
    };
    TRACING.store(provider.is_some(), Ordering::Relaxed);
    subscriber(&options, provider.as_ref())
        .try_init()
        .map_err(|_| TelemetryError::AlreadyInstalled)?;
    CAPTURE_CONTENT.store(settings.capture_content, Ordering::Relaxed);
    if let Some(endpoint) = &settings.endpoint {
        tracing::info!(
            endpoint = %endpoint,
            capture_content = settings.capture_content,
            "tracing on: spans exported over OTLP/gRPC"
        );
    }
    Ok(Telemetry { provider })
}

impl Telemetry {
    /// Pauses (`false`) or resumes span export: the benchmark measures
    /// tracing on and off in one process. No effect with tracing off.
    pub fn set_exporting(&self, on: bool) {
        TRACING.store(on && self.provider.is_some(), Ordering::Relaxed);
    }

    /// Exports the spans still queued, waiting at most a few seconds (an
    /// unreachable collector must not hold the process).
    pub async fn shutdown(self) {
        let Some(provider) = self.provider else {
            return;
        };
        TRACING.store(false, Ordering::Relaxed);
        // The SDK's shutdown blocks; the export it waits for runs on this
        // runtime, so it gets a thread of its own.
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let _ = done_tx.send(provider.shutdown_with_timeout(SHUTDOWN_FLUSH));
        });
        match tokio::time::timeout(SHUTDOWN_FLUSH + Duration::from_secs(1), done_rx).await {
            Ok(Ok(Ok(()))) => tracing::debug!("spans flushed"),
            Ok(Ok(Err(error))) => tracing::warn!(%error, "spans not flushed at shutdown"),
            _ => tracing::warn!("span flush did not finish in time"),
        }
    }
}
