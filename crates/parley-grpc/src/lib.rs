//! Shared plumbing of Parley's gRPC services.
//!
//! Each binary builds its own service and hands it to [`serve::serve`], which
//! adds `grpc.health.v1` and server reflection (v1 and v1alpha), applies the
//! message-size limit and drains in-flight calls on SIGTERM within a bound.
//! [`status`] is the one place where error reasons become `tonic::Status`
//! with `google.rpc` details; [`edge`] gives a request that fails to decode
//! the client's code and logs every rejected call; [`deadline`] reads the caller's `grpc-timeout`;
//! [`telemetry`] is logging, OpenTelemetry tracing and Prometheus metrics;
//! [`config`] is how each binary reads its settings (defaults, file,
//! environment, flags); [`tls`] is TLS and mutual TLS with certificates
//! that rotate; [`unix`] is gRPC over a Unix domain socket (the sidecar
//! hop); [`request_body`] sends a call's last request frame with its end;
//! [`runtime`] is the tokio runtime each binary's `main` runs on;
//! [`secret`] reads secrets from values, variables and files (again on
//! SIGHUP); [`bearer`] is the shared token one service sends another.

pub mod bearer;
pub mod binary;
pub mod codes;
pub mod config;
pub mod deadline;
pub mod duration;
pub mod edge;
pub mod request_body;
pub mod runtime;
pub mod secret;
pub mod serve;
pub mod status;
pub mod telemetry;
pub mod tls;
pub mod unix;

pub use serve::{HttpLayer, HttpService, ServeOptions, serve, shutdown_signal};
