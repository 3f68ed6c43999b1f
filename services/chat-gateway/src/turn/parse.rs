//! Parsing a whole answer: the sidecar's `Parse`, or the parser library
//! in-process when the sidecar cannot answer (the turn's `complete` then
//! carries a `PARSER_FALLBACK` diagnostic). The streaming side is
//! [`super::cleaner`].

use std::{sync::Arc, time::Duration};

use parley_parse::{Limits, Profile, ProfileCache};
use parley_proto::parser::v1::{
    Diagnostic, DiagnosticKind, ParseProfile, ParseRequest, ParseResponse,
    payload_parser_client::PayloadParserClient,
};

use crate::clients::{Parsing, Traced, Upstreams};

/// The diagnostic that says the in-process parser answered.
pub fn fallback_diagnostic(reason: &str) -> Diagnostic {
    Diagnostic {
        kind: DiagnosticKind::ParserFallback as i32,
        element: String::new(),
        raw: String::new(),
        reason: format!(
            "the payload-parser service was unreachable ({reason}); the in-process parser was used"
        ),
        offset: 0,
    }
}

/// `profile` compiled for the in-process parser (kept in `cache`).
pub(super) fn local_profile(
    profile: &ParseProfile,
    cache: &ProfileCache,
) -> Result<Arc<Profile>, String> {
    cache
        .get_or_compile(profile)
        .map_err(|error| format!("profile refused: {error}"))
}

/// Parses a whole text in-process.
pub fn parse_locally(
    text: &str,
    profile: &ParseProfile,
    cache: &ProfileCache,
) -> Result<ParseResponse, String> {
    let profile = local_profile(profile, cache)?;
    parley_parse::parse(text, &profile, &Limits::default())
        .map(parley_parse::Parsed::into_proto)
        .map_err(|error| error.to_string())
}

/// The answer when not even the library could parse: `message` as it is,
/// and a diagnostic saying why.
pub(super) fn unparsed(message: String, error: &str) -> ParseResponse {
    ParseResponse {
        message,
        diagnostics: vec![Diagnostic {
            kind: DiagnosticKind::Unspecified as i32,
            reason: format!("the answer could not be parsed: {error}"),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A status in a few words, for logs and fallback reasons.
pub(super) fn short(status: &tonic::Status) -> String {
    format!("{:?}: {}", status.code(), status.message())
}

/// Parses a complete text: the sidecar's `Parse`, else the library (the
/// second value says why the library answered); the library alone when
/// `upstream.parsing` is `in_process`.
pub async fn parse_text(
    upstreams: &Upstreams,
    text: &str,
    profile: &ParseProfile,
) -> (ParseResponse, Option<String>) {
    if upstreams.parsing == Parsing::InProcess {
        let parsed = parse_locally(text, profile, &upstreams.compiled_profiles)
            .unwrap_or_else(|error| unparsed(String::new(), &error));
        return (parsed, None);
    }
    let mut client = upstreams.parser.clone();
    let sidecar = parse_remote(
        &mut client,
        text.to_owned(),
        profile,
        upstreams.parse_timeout,
    );
    let reason = match sidecar.await {
        Ok(response) => return (response, None),
        Err(reason) => reason,
    };
    let parsed = parse_locally(text, profile, &upstreams.compiled_profiles)
        .unwrap_or_else(|error| unparsed(String::new(), &error));
    (parsed, Some(reason))
}

/// The sidecar's `Parse` of `text`, answered within `wait`; the error says
/// why it was not.
pub(super) async fn parse_remote(
    client: &mut PayloadParserClient<Traced>,
    text: String,
    profile: &ParseProfile,
    wait: Duration,
) -> Result<ParseResponse, String> {
    let request = ParseRequest {
        text,
        profile: Some(profile.clone()),
        profile_name: String::new(),
    };
    match tokio::time::timeout(wait, client.parse(request)).await {
        Ok(Ok(response)) => Ok(response.into_inner()),
        Ok(Err(status)) => Err(short(&status)),
        Err(_) => Err("timed out waiting for the parse".into()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::registry::{PageRef, Registry};

    #[tokio::test]
    async fn an_unreachable_sidecar_parses_in_process_and_says_why() {
        // Nothing listens there.
        let upstreams = Upstreams::new(
            "http://127.0.0.1:9",
            "http://127.0.0.1:9",
            Duration::from_millis(50),
            Duration::from_millis(50),
            &parley_grpc::tls::ClientTls::default(),
        )
        .expect("valid urls");
        let profile = Registry::example()
            .resolve(&PageRef::new("tables_list", "", ""))
            .parse_profile();
        let text =
            "Sure.\n\nSUGGESTED_VALUES: [{\"label\": \"More\", \"value\": \"Tell me more\"}]";
        let (parsed, reason) = parse_text(&upstreams, text, &profile).await;
        assert!(reason.is_some());
        assert_eq!(parsed.message.trim_end(), "Sure.");
        assert_eq!(parsed.suggested_values.len(), 1);
        assert_eq!(
            fallback_diagnostic("down").kind,
            DiagnosticKind::ParserFallback as i32
        );
    }
}
