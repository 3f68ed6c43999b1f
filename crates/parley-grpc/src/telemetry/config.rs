//! What the standard `OTEL_*` variables (and Parley's one switch) ask for.
//!
//! Tracing is on when an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
//! or `OTEL_EXPORTER_OTLP_ENDPOINT`), unless `OTEL_SDK_DISABLED=true` or
//! `OTEL_TRACES_EXPORTER=none`. Only OTLP over gRPC is built in, to an
//! `http://` or an `https://` endpoint (verified against
//! `OTEL_EXPORTER_OTLP_CERTIFICATE` or the system's roots, with the client
//! certificate of `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE` /
//! `_CLIENT_KEY` for mutual TLS; each also in its `_TRACES_` form);
//! anything else stops the binary at start-up with a clear message rather
//! than silently exporting nothing. The remaining
//! variables (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_TRACES_SAMPLER(_ARG)`, `OTEL_BSP_*`, `OTEL_EXPORTER_OTLP_TIMEOUT`,
//! `OTEL_EXPORTER_OTLP_HEADERS`) are read by the OpenTelemetry SDK itself.
//!
//! Content capture (messages, prompts, tool arguments and results on spans)
//! is off unless `PARLEY_OTEL_CAPTURE_CONTENT` or the GenAI standard
//! `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` is `true`.

use super::TelemetryError;

/// Tracing settings read from the environment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TraceSettings {
    /// Where spans go; `None` turns tracing off.
    pub endpoint: Option<String>,
    /// Record message contents, prompts and tool arguments on spans.
    pub capture_content: bool,
    /// Whether the environment names the service (else the binary's name is used).
    pub service_name_set: bool,
    /// The CA and client certificate of an `https://` endpoint.
    pub tls: crate::tls::ClientTlsConfig,
}

fn truthy(value: Option<String>) -> bool {
    value.is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

impl TraceSettings {
    /// Reads the settings through `get` (`std::env::var(..).ok()` in the
    /// binaries; a map in tests).
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Self, TelemetryError> {
        let capture_content = truthy(get("PARLEY_OTEL_CAPTURE_CONTENT"))
            || truthy(get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"));
        let service_name_set = non_empty(get("OTEL_SERVICE_NAME")).is_some()
            || non_empty(get("OTEL_RESOURCE_ATTRIBUTES")).is_some_and(|attrs| {
                attrs
                    .split(',')
                    .any(|pair| pair.trim().starts_with("service.name="))
            });
        let off = Self {
            endpoint: None,
            capture_content,
            service_name_set,
            tls: crate::tls::ClientTlsConfig::default(),
        };
        if truthy(get("OTEL_SDK_DISABLED")) {
            return Ok(off);
        }
        match non_empty(get("OTEL_TRACES_EXPORTER")).as_deref() {
            None | Some("otlp") => {}
            Some("none") => return Ok(off),
            Some(other) => {
                return Err(TelemetryError::Unsupported(format!(
                    "OTEL_TRACES_EXPORTER={other}: only `otlp` (or `none`) is built in"
                )));
            }
        }
        let endpoint = non_empty(get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
            .or_else(|| non_empty(get("OTEL_EXPORTER_OTLP_ENDPOINT")));
        let Some(endpoint) = endpoint else {
            return Ok(off);
        };
        let protocol = non_empty(get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
            .or_else(|| non_empty(get("OTEL_EXPORTER_OTLP_PROTOCOL")));
        if let Some(protocol) = protocol
            && protocol != "grpc"
        {
            return Err(TelemetryError::Unsupported(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: only `grpc` is built in (collector port 4317)"
            )));
        }
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(TelemetryError::Unsupported(format!(
                "OTLP endpoint `{endpoint}` must start with http:// or https://"
            )));
        }
        // The traces-specific variable first, then the general one.
        let file = |name: &str| {
            non_empty(get(&format!("OTEL_EXPORTER_OTLP_TRACES_{name}")))
                .or_else(|| non_empty(get(&format!("OTEL_EXPORTER_OTLP_{name}"))))
                .map(std::path::PathBuf::from)
        };
        Ok(Self {
            endpoint: Some(endpoint),
            tls: crate::tls::ClientTlsConfig {
                ca: file("CERTIFICATE"),
                cert: file("CLIENT_CERTIFICATE"),
                key: file("CLIENT_KEY"),
            },
            ..off
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Result<TraceSettings, TelemetryError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        TraceSettings::from_env(|name| map.get(name).cloned())
    }

    #[test]
    fn off_without_an_endpoint_and_on_with_one() {
        assert_eq!(settings(&[]).expect("ok").endpoint, None);
        let on = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")]).expect("ok");
        assert_eq!(on.endpoint.as_deref(), Some("http://127.0.0.1:4317"));
        let specific = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4317"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:4317"),
        ])
        .expect("ok");
        assert_eq!(specific.endpoint.as_deref(), Some("http://b:4317"));
    }

    #[test]
    fn the_standard_switches_turn_it_off() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317");
        for off in [
            ("OTEL_SDK_DISABLED", "true"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ] {
            assert_eq!(
                settings(&[endpoint, off]).expect("ok").endpoint,
                None,
                "{off:?}"
            );
        }
    }

    #[test]
    fn unsupported_choices_are_refused_not_ignored() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
        assert!(settings(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")]).is_err());
        assert!(settings(&[endpoint, ("OTEL_TRACES_EXPORTER", "zipkin")]).is_err());
        assert!(settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317")]).is_err());
        assert!(settings(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).is_ok());
    }

    #[test]
    fn an_https_endpoint_takes_its_certificates_from_the_standard_variables() {
        let tls = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4317"),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/tls/ca.crt"),
            ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/tls/general.crt"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
                "/tls/traces.crt",
            ),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/tls/tls.key"),
        ])
        .expect("https is supported");
        assert_eq!(tls.endpoint.as_deref(), Some("https://collector:4317"));
        assert_eq!(tls.tls.ca, Some("/tls/ca.crt".into()));
        assert_eq!(
            tls.tls.cert,
            Some("/tls/traces.crt".into()),
            "traces-specific first"
        );
        assert_eq!(tls.tls.key, Some("/tls/tls.key".into()));
    }

    #[test]
    fn content_capture_needs_an_explicit_switch() {
        assert!(!settings(&[]).expect("ok").capture_content);
        assert!(
            settings(&[("PARLEY_OTEL_CAPTURE_CONTENT", "true")])
                .expect("ok")
                .capture_content
        );
        assert!(
            settings(&[("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")])
                .expect("ok")
                .capture_content
        );
        assert!(
            !settings(&[("PARLEY_OTEL_CAPTURE_CONTENT", "no")])
                .expect("ok")
                .capture_content
        );
    }

    #[test]
    fn service_name_from_either_variable() {
        assert!(!settings(&[]).expect("ok").service_name_set);
        assert!(
            settings(&[("OTEL_SERVICE_NAME", "gw")])
                .expect("ok")
                .service_name_set
        );
        assert!(
            settings(&[(
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=prod, service.name=gw"
            )])
            .expect("ok")
            .service_name_set
        );
    }
}
