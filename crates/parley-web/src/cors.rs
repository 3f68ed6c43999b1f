//! CORS for the origins a deployment allows (`web.allowed_origins`).
//!
//! A browser sends a page's cross-origin call only when the server answers
//! that origin by name: without a list nothing is allowed, and there is no
//! wildcard, so a deployment opens its API to exactly the front ends it
//! names. The headers allowed are the ones the three web protocols and
//! authentication use; the ones exposed are what a gRPC-Web or Connect
//! client reads from a response.

use std::time::Duration;

use http::{HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::WebError;

/// Request headers a cross-origin page may send.
const ALLOWED_HEADERS: [&str; 11] = [
    "authorization",
    "content-type",
    "accept",
    "x-grpc-web",
    "x-user-agent",
    "grpc-timeout",
    "connect-protocol-version",
    "connect-timeout-ms",
    "connect-content-encoding",
    "connect-accept-encoding",
    "last-event-id",
];

/// Response headers a cross-origin page may read.
const EXPOSED_HEADERS: [&str; 5] = [
    "grpc-status",
    "grpc-message",
    "grpc-status-details-bin",
    "x-vercel-ai-ui-message-stream",
    "content-type",
];

/// How long a browser may keep a preflight's answer.
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(600);

/// The CORS layer that allows exactly `origins`.
pub fn layer(origins: &[String]) -> Result<CorsLayer, WebError> {
    let origins = origins
        .iter()
        .map(|origin| parse_origin(origin))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins))
        .allow_methods([Method::GET, Method::POST, Method::OPTIONS])
        .allow_headers(ALLOWED_HEADERS.map(HeaderName::from_static))
        .expose_headers(EXPOSED_HEADERS.map(HeaderName::from_static))
        .max_age(PREFLIGHT_MAX_AGE))
}

/// One configured origin: `http(s)://host[:port]`, as a browser sends it in
/// `Origin` (no path, no trailing slash, no wildcard).
pub fn parse_origin(origin: &str) -> Result<HeaderValue, WebError> {
    let refuse = |reason| WebError::Origin {
        origin: origin.chars().take(100).collect(),
        reason,
    };
    if origin == "*" || origin.contains('*') {
        return Err(refuse(
            "wildcards are not allowed; name each front end's origin",
        ));
    }
    let uri: http::Uri = origin
        .parse()
        .map_err(|_| refuse("it does not parse as a URL"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(refuse("the scheme must be http or https")),
    }
    let authority = uri.authority().ok_or_else(|| refuse("it has no host"))?;
    if authority.as_str().contains('@') {
        return Err(refuse("it carries user information"));
    }
    if !matches!(uri.path(), "" | "/") || origin.ends_with('/') || uri.query().is_some() {
        return Err(refuse(
            "an origin has no path, query or trailing slash (browsers send none)",
        ));
    }
    HeaderValue::from_str(origin).map_err(|_| refuse("it is not a valid header value"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_scheme_host_and_port_only() {
        for good in [
            "https://app.example.com",
            "http://localhost:3000",
            "http://127.0.0.1:8080",
        ] {
            assert!(parse_origin(good).is_ok(), "{good}");
        }
        for (bad, says) in [
            ("*", "wildcards"),
            ("https://*.example.com", "wildcards"),
            ("app.example.com", "scheme"),
            ("ftp://example.com", "scheme"),
            ("https://example.com/", "trailing slash"),
            ("https://example.com/app", "no path"),
            ("https://user@example.com", "user information"),
            ("https://example.com?x=1", "query"),
        ] {
            let error = parse_origin(bad).expect_err(bad).to_string();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }
}
