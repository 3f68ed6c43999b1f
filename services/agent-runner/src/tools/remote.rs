//! Remote tools: a tonic client to `parley.tools.v1.ToolService/Execute`.
//!
//! Channels are cached per endpoint (HTTP/2 multiplexes every call of every
//! turn over one connection) and created lazily, so an unreachable server
//! shows up as an `UNAVAILABLE` tool error for the model rather than a
//! failed turn. The call carries the tool's timeout as its gRPC deadline;
//! dropping the call's future (timeout, cancellation) resets the HTTP/2
//! stream, which the tool server sees as a cancelled call. Each call is a
//! CLIENT span whose context travels in the `traceparent` metadata.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use parley_proto::tools::v1::{
    ToolCall as PbToolCall, tool_service_client::ToolServiceClient, tool_update::Update,
};
use serde_json::Value;
use tonic::{Code, codegen::http::Uri, transport::Channel};

use parley_grpc::{telemetry::rpc::client::RpcClient, tls::ClientTls};

use super::{CallContext, FailureReason, ProgressSender, ToolFailure, ToolOutput, ToolSource};
use parley_proto::json::to_struct_wrapped;

/// How many distinct endpoints keep a cached channel.
pub const MAX_CACHED_CHANNELS: usize = 256;
/// How long connecting to a tool server may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Checks that `address` is an `http://` or `https://` URI with a host.
pub fn check_address(address: &str) -> Result<(), String> {
    if !(address.starts_with("http://") || address.starts_with("https://")) {
        return Err(format!("`{address}` must start with http:// or https://"));
    }
    let uri: Uri = address
        .parse()
        .map_err(|error| format!("`{address}` is not a valid URI: {error}"))?;
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("`{address}` has no host"));
    }
    Ok(())
}

/// A `ToolService` at an address as a turn's tool source; its channel
/// comes from the shared cache at each call.
#[derive(Debug, Clone)]
pub struct RemoteSource {
    /// The server's address.
    pub address: String,
    /// The runner's channel cache.
    pub channels: Arc<Channels>,
}

#[async_trait::async_trait]
impl ToolSource for RemoteSource {
    fn is_remote(&self) -> bool {
        true
    }

    async fn call(
        &self,
        name: &str,
        input: &Value,
        ctx: CallContext,
        progress: ProgressSender,
    ) -> Result<ToolOutput, ToolFailure> {
        let channel = self.channels.get(&self.address)?;
        execute(channel, name, input, ctx, &progress).await
    }
}

/// A traced channel to a tool server (CLIENT spans, `traceparent`).
pub type ToolChannel = RpcClient<Channel>;

/// Channels to tool servers, by address.
#[derive(Debug, Default)]
pub struct Channels {
    cache: Mutex<HashMap<String, ToolChannel>>,
    /// How `https://` tool servers are verified, and the client
    /// certificate they are shown (`[client_tls]`).
    tls: ClientTls,
}

impl Channels {
    /// An empty cache whose `https://` channels use `tls`.
    pub fn with_tls(tls: ClientTls) -> Self {
        Self {
            cache: Mutex::default(),
            tls,
        }
    }

    /// The channel to `address`, created on first use.
    pub fn get(&self, address: &str) -> Result<ToolChannel, ToolFailure> {
        let unavailable = |error: String| ToolFailure::new(FailureReason::Unavailable, error);
        let mut cache = self
            .cache
            .lock()
            .map_err(|_| unavailable("the channel cache is unusable".into()))?;
        if let Some(channel) = cache.get(address) {
            return Ok(channel.clone());
        }
        let endpoint = self
            .tls
            .endpoint(address)
            .map_err(|error| {
                // The address is internal: the log has it, the model and
                // the client do not.
                tracing::warn!(%address, %error, "invalid tool endpoint");
                unavailable("the tool's endpoint is not valid".into())
            })?
            .configure(|endpoint| endpoint.connect_timeout(CONNECT_TIMEOUT).tcp_nodelay(true));
        let uri = endpoint.uri().clone();
        let channel = RpcClient::new(endpoint.connect_lazy(), &uri);
        if cache.len() >= MAX_CACHED_CHANNELS
            && let Some(evicted) = cache.keys().next().cloned()
        {
            cache.remove(&evicted);
        }
        cache.insert(address.to_owned(), channel.clone());
        Ok(channel)
    }
}

/// Runs one call on a remote tool server, forwarding its progress.
pub async fn execute(
    channel: ToolChannel,
    name: &str,
    input: &Value,
    ctx: CallContext,
    progress: &ProgressSender,
) -> Result<ToolOutput, ToolFailure> {
    let call = PbToolCall {
        call_id: ctx.call_id.clone(),
        name: name.to_owned(),
        input: Some(to_struct_wrapped(input)),
        conversation_id: ctx.conversation_id.clone(),
        user_id: ctx.user_id.clone(),
        user_issuer: ctx.user_issuer.clone(),
        tenant: ctx.tenant.clone(),
        timeout: prost_types::Duration::try_from(ctx.timeout).ok(),
        context: ctx.context.as_ref().map(to_struct_wrapped),
    };
    let mut request = tonic::Request::new(call);
    request.set_timeout(ctx.timeout);
    let mut client = ToolServiceClient::new(channel);
    let mut updates = client
        .execute(request)
        .await
        .map_err(status_failure)?
        .into_inner();
    loop {
        match updates.message().await.map_err(status_failure)? {
            None => {
                return Err(ToolFailure::new(
                    FailureReason::ToolError,
                    "the tool server ended the call without a result",
                ));
            }
            Some(update) => match update.update {
                Some(Update::Progress(p)) => progress.report(&p.stage, p.message, p.fraction).await,
                Some(Update::Result(result)) => {
                    parley_grpc::telemetry::rpc::client::finish_in_background(updates);
                    if let Some(error) = result.error {
                        let message = if error.code.is_empty() {
                            error.message
                        } else {
                            format!("{} ({})", error.message, error.code)
                        };
                        return Err(ToolFailure::new(FailureReason::ToolError, message));
                    }
                    return Ok(ToolOutput {
                        text: result.text,
                        payload: result.payload,
                        attachments: Vec::new(),
                    });
                }
                None => {}
            },
        }
    }
}

fn status_failure(status: tonic::Status) -> ToolFailure {
    match status.code() {
        // A transport failure's text can name the server's address: it
        // goes to the log only.
        Code::Unavailable => {
            tracing::warn!(message = status.message(), "tool server unavailable");
            ToolFailure::new(
                FailureReason::Unavailable,
                "the tool server could not be reached",
            )
        }
        Code::DeadlineExceeded => {
            ToolFailure::new(FailureReason::Timeout, "the tool did not finish in time")
        }
        Code::Cancelled => {
            ToolFailure::new(FailureReason::Cancelled, "the tool call was cancelled")
        }
        Code::Unimplemented => ToolFailure::new(
            FailureReason::Unavailable,
            "the server does not implement parley.tools.v1.ToolService",
        ),
        code => ToolFailure::new(
            FailureReason::ToolError,
            format!("the tool server failed ({code:?}): {}", status.message()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_must_be_http_uris_with_a_host() {
        assert!(check_address("http://tools:7000").is_ok());
        assert!(check_address("https://tools.example.com").is_ok());
        assert!(check_address("tools:7000").is_err());
        assert!(check_address("http://").is_err());
        assert!(check_address("http://exa mple").is_err());
    }

    #[test]
    fn an_unreachable_tool_server_is_reported_without_its_address() {
        let status = tonic::Status::unavailable(
            "tcp connect error: 10.0.0.7:7000: Connection refused (os error 111)",
        );
        let failure = status_failure(status);
        assert_eq!(failure.reason, FailureReason::Unavailable);
        assert!(
            !failure.message.contains("10.0.0.7") && !failure.message.contains("7000"),
            "{}",
            failure.message
        );
        let Err(invalid) = Channels::default().get("http://in valid:7000") else {
            panic!("an invalid endpoint is refused");
        };
        assert!(!invalid.message.contains("in valid"), "{}", invalid.message);
    }

    #[tokio::test]
    async fn channels_are_cached_per_address() {
        let channels = Channels::default();
        channels.get("http://127.0.0.1:1").expect("should succeed");
        channels.get("http://127.0.0.1:1").expect("should succeed");
        channels.get("http://127.0.0.1:2").expect("should succeed");
        assert_eq!(channels.cache.lock().expect("should succeed").len(), 2);
    }
}
