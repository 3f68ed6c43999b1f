//! The `parley.parser.v1.PayloadParser` gRPC service.
//!
//! `Parse` checks the size limit, resolves the profile (inline or by name)
//! and parses. `ParseStream` reads the profile from the first message, then
//! feeds each text delta to a [`StreamParser`] (with partial payloads on,
//! sent as `partial` outputs) as the response stream is read (no task per
//! call: [`output`]), answers each checkpoint once everything before it has
//! been answered, and ends with the `final` response. Streams are bounded
//! in bytes (the same limit as `Parse`), in idle time between messages and in
//! total lifetime. Inline profiles are compiled once and kept
//! ([`ProfileCache`]). Every parse counts its diagnostics by kind
//! (`parley_parser_diagnostics_total`). Refusals are [`ParserError`]s with
//! stable reasons ([`error`]), leaving as `tonic::Status`.

use std::{sync::Arc, time::Duration};

use parley_parse::{Diagnostic, Limits, Profile, ProfileCache, Profiles, StreamParser, parse};
use parley_proto::parser::v1::{
    ParseProfile, ParseRequest, ParseResponse, ParseStreamRequest,
    parse_stream_request::Input,
    payload_parser_server::{PayloadParser, PayloadParserServer},
};
use tonic::{Request, Response, Status, Streaming};

pub use self::{
    error::{
        INVALID_PROFILE, PROFILE_ALREADY_SET, PROFILE_REQUIRED, ParserError, STREAM_TIMEOUT,
        TEXT_TOO_LARGE, UNKNOWN_PROFILE,
    },
    output::Responses,
};

mod error;
mod output;

/// Default longest pause between two messages of a stream.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Default longest lifetime of a stream.
pub const DEFAULT_MAX_STREAM_DURATION: Duration = Duration::from_secs(30 * 60);
/// Default number of inline profiles kept compiled.
pub const DEFAULT_PROFILE_CACHE: usize = parley_parse::profile::cache::DEFAULT_CAPACITY;

/// The parser service. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ParserService {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    profiles: Profiles,
    limits: Limits,
    options: ServiceOptions,
    /// Inline profiles compiled so far.
    cache: ProfileCache,
    /// The profile of requests that send none.
    default_profile: Arc<Profile>,
}

/// How the service bounds streams and keeps compiled profiles.
#[derive(Debug, Clone, Copy)]
pub struct ServiceOptions {
    /// Longest pause between two messages of a stream.
    pub idle_timeout: Duration,
    /// Longest lifetime of a stream.
    pub max_stream_duration: Duration,
    /// Inline profiles kept compiled (0 compiles every request's profile).
    pub profile_cache: usize,
}

impl Default for ServiceOptions {
    fn default() -> Self {
        Self {
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_stream_duration: DEFAULT_MAX_STREAM_DURATION,
            profile_cache: DEFAULT_PROFILE_CACHE,
        }
    }
}

impl ParserService {
    /// A service with named `profiles` and `limits`, and the default
    /// options.
    pub fn new(profiles: Profiles, limits: Limits) -> Self {
        Self::with_options(profiles, limits, ServiceOptions::default())
    }

    /// A service with explicit options.
    pub fn with_options(profiles: Profiles, limits: Limits, options: ServiceOptions) -> Self {
        Self {
            inner: Arc::new(Inner {
                profiles,
                limits,
                options,
                cache: ProfileCache::new(options.profile_cache),
                default_profile: Arc::new(Profile::default()),
            }),
        }
    }

    /// The largest request message accepted: room for a text at the limit
    /// plus a profile, so a text just over the limit still gets the clear
    /// `TEXT_TOO_LARGE` instead of a transport error.
    pub fn max_decoding_bytes(limits: &Limits) -> usize {
        limits
            .effective_max_bytes()
            .saturating_mul(2)
            .saturating_add(1 << 20)
    }

    /// The largest response message: the message, the elements and the raw
    /// text of diagnostics together stay within a few times the input.
    pub fn max_encoding_bytes(limits: &Limits) -> usize {
        limits
            .effective_max_bytes()
            .saturating_mul(4)
            .saturating_add(1 << 20)
    }

    /// The tonic server for this service, with message sizes set from the limits.
    pub fn into_server(self) -> PayloadParserServer<Self> {
        let limits = self.inner.limits;
        PayloadParserServer::new(self)
            .max_decoding_message_size(Self::max_decoding_bytes(&limits))
            .max_encoding_message_size(Self::max_encoding_bytes(&limits))
    }

    fn resolve(
        &self,
        name: &str,
        inline: Option<&ParseProfile>,
        field: &str,
    ) -> Result<Arc<Profile>, Status> {
        if !name.is_empty() {
            return self
                .inner
                .profiles
                .get(name)
                .ok_or_else(|| ParserError::UnknownProfile(name.to_owned()).into());
        }
        match inline {
            None => Ok(self.inner.default_profile.clone()),
            Some(proto) => self.inner.cache.get_or_compile(proto).map_err(|source| {
                ParserError::InvalidProfile {
                    field: field.to_owned(),
                    source,
                }
                .into()
            }),
        }
    }
}

#[tonic::async_trait]
impl PayloadParser for ParserService {
    async fn parse(
        &self,
        request: Request<ParseRequest>,
    ) -> Result<Response<ParseResponse>, Status> {
        let request = request.into_inner();
        let limits = self.inner.limits;
        let limit = limits.effective_max_bytes();
        if request.text.len() > limit {
            return Err(ParserError::TooLarge {
                size: request.text.len(),
                limit,
            }
            .into());
        }
        let profile = self.resolve(&request.profile_name, request.profile.as_ref(), "profile")?;
        let parsed = parse(&request.text, &profile, &limits).map_err(ParserError::from)?;
        count_diagnostics(&parsed.diagnostics);
        tracing::debug!(
            bytes = request.text.len(),
            diagnostics = parsed.diagnostics.len(),
            tool_calls = parsed.tool_calls.len(),
            payload = parsed.custom_payload.is_some(),
            "parsed"
        );
        Ok(Response::new(parsed.into_proto()))
    }

    type ParseStreamStream = Responses;

    async fn parse_stream(
        &self,
        request: Request<Streaming<ParseStreamRequest>>,
    ) -> Result<Response<Self::ParseStreamStream>, Status> {
        let mut inbound = request.into_inner();
        let idle = self.inner.options.idle_timeout;
        let first = match tokio::time::timeout(idle, inbound.message()).await {
            Err(_) => {
                return Err(
                    ParserError::StreamTimeout("no profile message arrived in time").into(),
                );
            }
            Ok(result) => result?,
        };
        let profile = match first.and_then(|m| m.input) {
            Some(Input::Profile(profile)) => self.resolve("", Some(&profile), "input.profile")?,
            Some(Input::ProfileName(name)) if !name.is_empty() => {
                self.resolve(&name, None, "input.profile_name")?
            }
            _ => return Err(ParserError::ProfileRequired.into()),
        };
        let parser = StreamParser::new(profile, self.inner.limits).with_partial_payloads();
        let deadline = tokio::time::Instant::now() + self.inner.options.max_stream_duration;
        Ok(Response::new(Responses::new(
            inbound, parser, idle, deadline,
        )))
    }
}

/// Counts the diagnostics of a parse in `parley_parser_diagnostics_total`.
fn count_diagnostics(diagnostics: &[Diagnostic]) {
    let metrics = parley_grpc::telemetry::metrics();
    for diagnostic in diagnostics {
        let kind = parley_proto::parser::v1::DiagnosticKind::from(diagnostic.kind);
        metrics.count_parser_diagnostic(kind as i32);
    }
}
