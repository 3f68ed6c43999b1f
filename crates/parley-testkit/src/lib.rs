//! What Parley's test suites share, for dev-dependencies only: no
//! production binary links it.
//!
//! [`gate`] is the workspace's rule for tests that cannot run here
//! (`NOT RUN`, or a failure under `CI=true`); [`raw`] calls gRPC with
//! hand-made bytes and captures log lines; [`spans`] captures OpenTelemetry
//! spans without a collector; [`pki`] makes TLS and mutual-TLS
//! certificates at test time; [`examples`] reads the repository's example
//! parser profiles and model responses; [`process`] runs one binary as a
//! child process, [`sidecar`] the parser binary as a test's sidecar and
//! [`stack`] the three binaries as one stack; [`tools`]
//! is a test `ToolService`, plain or TLS.

pub mod examples;
pub mod gate;
pub mod pki;
pub mod process;
pub mod raw;
pub mod sidecar;
pub mod spans;
pub mod stack;
pub mod tools;

pub use gate::{ci, mcp_python, not_run};
