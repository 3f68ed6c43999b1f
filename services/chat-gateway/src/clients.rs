//! The gateway's two upstreams: the agent-runner and the payload-parser
//! sidecar, each at an `http://`, `https://` or `unix:` URL (a Unix domain
//! socket: the parser sidecar in the same pod). Channels connect lazily (the gateway starts even when neither is
//! up yet, and reconnects when they come back); a call to a peer that is
//! down fails fast, which is what sends turns to `RUNNER_UNAVAILABLE` or to
//! the in-process parser. Every call is a CLIENT span whose context travels
//! in the `traceparent` metadata. Every call to the runner, streams
//! included, carries `authorization: Bearer <upstream.runner_token_file>`
//! when a token is configured ([`Upstreams::runner_token`], replaced on
//! SIGHUP).

use std::{sync::Arc, time::Duration};

use parley_grpc::{
    bearer::Bearer, secret::SharedSecret, telemetry::rpc::client::RpcClient, tls::ClientTls,
};
use parley_proto::{
    parser::v1::payload_parser_client::PayloadParserClient,
    runner::v1::agent_runner_client::AgentRunnerClient,
};
use tonic::transport::Channel;

pub use crate::config::Parsing;

/// A traced channel (CLIENT spans, `traceparent` in the metadata) sending
/// its bearer token, if any, with every call.
pub type Traced = RpcClient<Bearer<Channel>>;

/// Why an upstream address is unusable.
#[derive(Debug, thiserror::Error)]
#[error("invalid {which} `{url}`: {source}")]
pub struct UpstreamError {
    /// The configuration key: `upstream.runner_url` or `upstream.parser_url`.
    pub which: &'static str,
    /// The URL.
    pub url: String,
    /// The cause.
    #[source]
    pub source: parley_grpc::tls::EndpointError,
}

/// Clients of the runner and the parser sidecar, cheap to clone.
#[derive(Debug, Clone)]
pub struct Upstreams {
    /// The agent-runner.
    pub runner: AgentRunnerClient<Traced>,
    /// The payload-parser sidecar.
    pub parser: PayloadParserClient<Traced>,
    /// Bound on one unary `Parse` call and on opening a `ParseStream`.
    pub parse_timeout: Duration,
    /// Profiles compiled for the in-process parser (the fallback when the
    /// sidecar is unreachable), so a fallback turn does not compile its
    /// page's schemas again.
    pub compiled_profiles: Arc<parley_parse::ProfileCache>,
    /// Whether turns parse through the sidecar or in-process.
    pub parsing: Parsing,
    /// The bearer token every runner call carries (none: no header); set
    /// from `upstream.runner_token_file` / `_env`.
    pub runner_token: SharedSecret,
}

fn channel(
    which: &'static str,
    url: &str,
    connect_timeout: Duration,
    tls: &ClientTls,
    token: SharedSecret,
) -> Result<Traced, UpstreamError> {
    let invalid = |source| UpstreamError {
        which,
        url: url.to_owned(),
        source,
    };
    let endpoint = tls.endpoint(url).map_err(invalid)?.configure(|endpoint| {
        endpoint
            .connect_timeout(connect_timeout)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(30))
            .keep_alive_while_idle(true)
    });
    let uri = endpoint.uri().clone();
    Ok(RpcClient::new(
        Bearer::new(endpoint.connect_lazy(), token),
        &uri,
    ))
}

impl Upstreams {
    /// Lazy channels to the runner and the parser (TLS for an `https://`
    /// URL, as `tls` says; a Unix socket for `unix:/path`).
    pub fn new(
        runner_url: &str,
        parser_url: &str,
        connect_timeout: Duration,
        parse_timeout: Duration,
        tls: &ClientTls,
    ) -> Result<Self, UpstreamError> {
        let runner_token = SharedSecret::default();
        Ok(Self {
            runner: AgentRunnerClient::new(channel(
                "upstream.runner_url",
                runner_url,
                connect_timeout,
                tls,
                runner_token.clone(),
            )?)
            .max_decoding_message_size(16 * 1024 * 1024),
            parser: PayloadParserClient::new(channel(
                "upstream.parser_url",
                parser_url,
                connect_timeout,
                tls,
                SharedSecret::default(),
            )?)
            .max_decoding_message_size(16 * 1024 * 1024),
            parse_timeout,
            compiled_profiles: Arc::default(),
            parsing: Parsing::Sidecar,
            runner_token,
        })
    }

    /// The same upstreams, sending the runner no request larger than
    /// `bytes` (the runner's decode limit): a larger one fails here, not
    /// after the runner has read it.
    pub fn with_runner_max_request(mut self, bytes: usize) -> Self {
        self.runner = self.runner.max_encoding_message_size(bytes);
        self
    }

    /// The same upstreams, parsing as `parsing` says.
    pub fn with_parsing(mut self, parsing: Parsing) -> Self {
        self.parsing = parsing;
        self
    }
}
