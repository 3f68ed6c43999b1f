//! `[web]`: browsers and web front ends. The listener always speaks
//! gRPC-Web and Connect next to gRPC (authenticated like every call);
//! these settings say which other origins' pages may call it from a
//! browser, how large a web request may be, and whether the gateway serves
//! its own chat page.

use parley_grpc::config::{ConfigError, invalid, positive};
use serde::{Deserialize, Serialize};

/// `[web]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebConfig {
    /// Serve the chat page under `/ui/` (off by default: a deployment
    /// that wants it turns it on).
    pub enabled: bool,
    /// The origins (`https://app.example.com`, `http://localhost:3000`)
    /// whose pages may call the API from a browser (CORS). None by
    /// default: only pages the gateway serves itself can.
    pub allowed_origins: Vec<String>,
    /// The largest Connect request message, in bytes of its codec (proto3
    /// JSON is larger than the same message in protobuf, so this is above
    /// the 4 MiB a gRPC request may be).
    pub max_request_bytes: usize,
}

impl Default for WebConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            allowed_origins: Vec::new(),
            max_request_bytes: 8 * 1024 * 1024,
        }
    }
}

impl WebConfig {
    /// Every origin is one a browser sends; the limit is positive.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for origin in &self.allowed_origins {
            parley_web::cors::parse_origin(origin)
                .map_err(|error| invalid("web.allowed_origins", error.to_string()))?;
        }
        positive("web.max_request_bytes", self.max_request_bytes as u64)
    }
}
