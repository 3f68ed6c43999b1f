//! Cleaning the model's text while it streams, and parsing it at the end.
//!
//! Text deltas go through the parser sidecar's `ParseStream`, so no marker
//! or its JSON ever reaches the client. When the sidecar cannot be reached
//! (connect error) or its stream breaks mid-turn, the parser library takes
//! over in-process: it re-reads the raw text received so far and continues
//! exactly where the sidecar's output stopped (both run the same algorithm,
//! and for any split the concatenated deltas equal the final message), and
//! the turn's `complete` carries a `PARSER_FALLBACK` diagnostic.

use std::{collections::VecDeque, sync::Arc};

use futures::FutureExt;
use parley_proto::parser::v1::{
    Diagnostic, DiagnosticKind, ParseProfile, ParseRequest, ParseResponse, ParseStreamRequest,
    ParseStreamResponse, parse_stream_request::Input, parse_stream_response::Output,
};
use payload_parser::{Limits, Profile, ProfileCache, StreamParser};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::clients::Upstreams;

/// Requests buffered towards the sidecar.
const REQUEST_BUFFER: usize = 64;

/// An open `ParseStream` call.
struct Remote {
    tx: mpsc::Sender<ParseStreamRequest>,
    rx: tonic::Streaming<ParseStreamResponse>,
}

enum Mode {
    /// The sidecar cleans.
    Remote(Box<Remote>),
    /// The library cleans, in-process.
    Local(Box<StreamParser>),
    /// Nothing more is cleaned mid-stream (the local parser refused the
    /// text); the final parse still decides the message.
    Stopped,
}

/// The streaming cleaner of one turn.
pub struct TextCleaner {
    profile: ParseProfile,
    /// Where the in-process parser finds the profile compiled.
    compiled: Arc<ProfileCache>,
    mode: Mode,
    /// Every raw delta received.
    raw: String,
    /// Every cleaned delta handed out.
    emitted: String,
    /// Cleaned text ready to hand out.
    ready: VecDeque<String>,
    /// The sidecar's final answer, when it sent one.
    final_response: Option<ParseResponse>,
    /// Why the library took over, when it did.
    fallback: Option<String>,
}

impl std::fmt::Debug for TextCleaner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextCleaner")
            .field("fallback", &self.fallback)
            .finish_non_exhaustive()
    }
}

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

fn local_profile(profile: &ParseProfile, cache: &ProfileCache) -> Result<Arc<Profile>, String> {
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
    payload_parser::parse(text, &profile, &Limits::default())
        .map(payload_parser::Parsed::into_proto)
        .map_err(|error| error.to_string())
}

fn short(status: &tonic::Status) -> String {
    format!("{:?}: {}", status.code(), status.message())
}

impl TextCleaner {
    /// Opens a `ParseStream` on the sidecar, or the library when that fails.
    pub async fn open(upstreams: &Upstreams, profile: ParseProfile) -> Self {
        let mut cleaner = Self {
            profile,
            compiled: upstreams.compiled_profiles.clone(),
            mode: Mode::Stopped,
            raw: String::new(),
            emitted: String::new(),
            ready: VecDeque::new(),
            final_response: None,
            fallback: None,
        };
        let (tx, rx) = mpsc::channel(REQUEST_BUFFER);
        let first = ParseStreamRequest {
            input: Some(Input::Profile(cleaner.profile.clone())),
        };
        if tx.try_send(first).is_err() {
            cleaner.switch_to_local("request channel closed".into());
            return cleaner;
        }
        let mut client = upstreams.parser.clone();
        let call = client.parse_stream(ReceiverStream::new(rx));
        match tokio::time::timeout(upstreams.parse_timeout, call).await {
            Ok(Ok(response)) => {
                cleaner.mode = Mode::Remote(Box::new(Remote {
                    tx,
                    rx: response.into_inner(),
                }))
            }
            Ok(Err(status)) => cleaner.switch_to_local(short(&status)),
            Err(_) => cleaner.switch_to_local("timed out opening ParseStream".into()),
        }
        cleaner
    }

    /// An in-process cleaner (the sidecar is not even tried).
    pub fn local(profile: ParseProfile, compiled: Arc<ProfileCache>, reason: &str) -> Self {
        let mut cleaner = Self {
            profile,
            compiled,
            mode: Mode::Stopped,
            raw: String::new(),
            emitted: String::new(),
            ready: VecDeque::new(),
            final_response: None,
            fallback: None,
        };
        cleaner.switch_to_local(reason.to_owned());
        cleaner
    }

    /// Why the library took over, when it did.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// Every raw delta received so far.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// Every cleaned delta handed out so far.
    pub fn emitted(&self) -> &str {
        &self.emitted
    }

    fn hand_out(&mut self, text: String) {
        if !text.is_empty() {
            self.emitted.push_str(&text);
            self.ready.push_back(text);
        }
    }

    /// Re-reads the raw text in-process and continues after what was
    /// already handed out.
    fn switch_to_local(&mut self, reason: String) {
        tracing::warn!(%reason, "payload-parser unavailable, parsing in-process");
        self.fallback.get_or_insert(reason);
        self.mode = Mode::Stopped;
        let Ok(profile) = local_profile(&self.profile, &self.compiled) else {
            return;
        };
        let mut parser = StreamParser::new(profile, Limits::default());
        let mut replayed = String::new();
        match parser.push(&self.raw) {
            Ok(items) => {
                for item in items {
                    if let Some(Output::Text(text)) = item.into_proto().output {
                        replayed.push_str(&text);
                    }
                }
            }
            Err(error) => {
                tracing::warn!(%error, "in-process parser refused the text");
                return;
            }
        }
        // What the sidecar already produced is a prefix of the same output.
        let Some(rest) = replayed.strip_prefix(self.emitted.as_str()) else {
            tracing::warn!(
                "in-process parser output diverged from the sidecar's; final parse decides"
            );
            return;
        };
        let rest = rest.to_owned();
        self.hand_out(rest);
        self.mode = Mode::Local(Box::new(parser));
    }

    fn take_remote(&mut self, response: ParseStreamResponse) {
        match response.output {
            Some(Output::Text(text)) => self.hand_out(text),
            Some(Output::Final(response)) => self.final_response = Some(response),
            // Elements and diagnostics arrive again in the final response.
            _ => {}
        }
    }

    /// Feeds one raw delta; cleaned text becomes available via [`Self::next`].
    pub async fn push(&mut self, delta: &str) {
        self.raw.push_str(delta);
        match &mut self.mode {
            Mode::Stopped => {}
            Mode::Local(parser) => match parser.push(delta) {
                Ok(items) => {
                    let texts: Vec<String> = items
                        .into_iter()
                        .filter_map(|item| match item.into_proto().output {
                            Some(Output::Text(text)) => Some(text),
                            _ => None,
                        })
                        .collect();
                    for text in texts {
                        self.hand_out(text);
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "in-process parser refused the text");
                    self.mode = Mode::Stopped;
                }
            },
            Mode::Remote(remote) => {
                let Remote { tx, rx } = remote.as_mut();
                let mut request = ParseStreamRequest {
                    input: Some(Input::Text(delta.to_owned())),
                };
                // Keep reading responses while waiting for room, so neither
                // side can stall the other.
                let broken = loop {
                    match tx.try_send(request) {
                        Ok(()) => break None,
                        Err(mpsc::error::TrySendError::Closed(_)) => {
                            break Some("ParseStream closed".to_owned());
                        }
                        Err(mpsc::error::TrySendError::Full(back)) => request = back,
                    }
                    tokio::select! {
                        permit = tx.reserve() => match permit {
                            Ok(permit) => {
                                permit.send(request);
                                break None;
                            }
                            Err(_) => break Some("ParseStream closed".to_owned()),
                        },
                        message = rx.message() => match message {
                            Ok(Some(response)) => {
                                match response.output {
                                    Some(Output::Text(text)) if !text.is_empty() => {
                                        self.emitted.push_str(&text);
                                        self.ready.push_back(text);
                                    }
                                    Some(Output::Final(done)) => self.final_response = Some(done),
                                    _ => {}
                                }
                            }
                            Ok(None) => break Some("ParseStream ended early".to_owned()),
                            Err(status) => break Some(short(&status)),
                        },
                    }
                };
                if let Some(reason) = broken {
                    self.switch_to_local(reason);
                }
            }
        }
    }

    /// The cleaned text ready now, as one delta (everything queued up
    /// since the last call). Pending until there is some, so it can sit in
    /// a `select!` beside the runner's stream.
    pub async fn next(&mut self) -> String {
        loop {
            if let Some(mut text) = self.ready.pop_front() {
                while let Some(more) = self.ready.pop_front() {
                    text.push_str(&more);
                }
                return text;
            }
            let Mode::Remote(remote) = &mut self.mode else {
                return std::future::pending().await;
            };
            match remote.rx.message().await {
                Ok(Some(response)) => {
                    self.take_remote(response);
                    self.take_ready_responses();
                }
                Ok(None) => self.switch_to_local("ParseStream ended early".into()),
                Err(status) => self.switch_to_local(short(&status)),
            }
        }
    }

    /// Takes the sidecar's responses that have already arrived, without
    /// waiting (a broken stream is noticed by the next read).
    fn take_ready_responses(&mut self) {
        while let Mode::Remote(remote) = &mut self.mode {
            match remote.rx.message().now_or_never() {
                Some(Ok(Some(response))) => self.take_remote(response),
                _ => return,
            }
        }
    }

    /// Ends the stream: returns the held-back tail of the cleaned text and
    /// the parse of everything received (sidecar's final, else library's).
    pub async fn finish(mut self, upstreams: &Upstreams) -> CleanedText {
        let unsent: usize = self.ready.drain(..).map(|text| text.len()).sum();
        let already = self.emitted.len() - unsent;
        let mode = std::mem::replace(&mut self.mode, Mode::Stopped);
        let mut response = None;
        let mut local = None;
        match mode {
            Mode::Remote(remote) => {
                let Remote { tx, mut rx } = *remote;
                drop(tx);
                let drained = tokio::time::timeout(upstreams.parse_timeout, async {
                    loop {
                        match rx.message().await {
                            Ok(Some(message)) => self.take_remote(message),
                            Ok(None) => return Ok(()),
                            Err(status) => return Err(short(&status)),
                        }
                        if self.final_response.is_some() {
                            return Ok(());
                        }
                    }
                })
                .await;
                match drained {
                    Ok(Ok(())) if self.final_response.is_some() => {
                        parley_grpc::telemetry::rpc::client::finish_in_background(rx);
                        response = self.final_response.take()
                    }
                    Ok(Ok(())) => {
                        self.fallback.get_or_insert_with(|| {
                            "ParseStream ended without a final response".into()
                        });
                    }
                    Ok(Err(reason)) => {
                        self.fallback.get_or_insert(reason);
                    }
                    Err(_) => {
                        self.fallback
                            .get_or_insert_with(|| "timed out waiting for the final parse".into());
                    }
                }
            }
            Mode::Local(parser) => local = Some(parser),
            Mode::Stopped => {}
        }
        let response = match (response, local) {
            (Some(response), _) => response,
            (None, Some(parser)) => parser.finish().into_proto(),
            (None, None) => {
                self.fallback
                    .get_or_insert_with(|| "in-process parser in use".into());
                match parse_locally(&self.raw, &self.profile, &self.compiled) {
                    Ok(response) => response,
                    Err(error) => ParseResponse {
                        message: self.emitted.clone(),
                        diagnostics: vec![Diagnostic {
                            kind: DiagnosticKind::Unspecified as i32,
                            element: String::new(),
                            raw: String::new(),
                            reason: format!("the answer could not be parsed: {error}"),
                            offset: 0,
                        }],
                        ..Default::default()
                    },
                }
            }
        };
        // The final message decides; hand out whatever of it the client has
        // not seen yet.
        let seen = &self.emitted[..already];
        let tail = match response.message.strip_prefix(seen) {
            Some(rest) => rest.to_owned(),
            None => {
                tracing::warn!("final message does not continue the streamed text");
                self.emitted[already..].to_owned()
            }
        };
        CleanedText {
            tail,
            response,
            raw: self.raw,
            fallback: self.fallback,
        }
    }
}

/// What [`TextCleaner::finish`] returns.
#[derive(Debug)]
pub struct CleanedText {
    /// Cleaned text not yet sent to the client.
    pub tail: String,
    /// The parse of the whole raw text.
    pub response: ParseResponse,
    /// The whole raw text.
    pub raw: String,
    /// Why the library took over, when it did.
    pub fallback: Option<String>,
}

/// Parses a complete text: the sidecar's `Parse`, else the library (the
/// second value says why the library answered).
pub async fn parse_text(
    upstreams: &Upstreams,
    text: &str,
    profile: &ParseProfile,
) -> (ParseResponse, Option<String>) {
    let mut client = upstreams.parser.clone();
    let request = ParseRequest {
        text: text.to_owned(),
        profile: Some(profile.clone()),
        profile_name: String::new(),
    };
    let reason = match tokio::time::timeout(upstreams.parse_timeout, client.parse(request)).await {
        Ok(Ok(response)) => return (response.into_inner(), None),
        Ok(Err(status)) => short(&status),
        Err(_) => "timed out".to_owned(),
    };
    match parse_locally(text, profile, &upstreams.compiled_profiles) {
        Ok(response) => (response, Some(reason)),
        Err(error) => (
            ParseResponse {
                diagnostics: vec![Diagnostic {
                    kind: DiagnosticKind::Unspecified as i32,
                    reason: format!("the answer could not be parsed: {error}"),
                    ..Default::default()
                }],
                ..Default::default()
            },
            Some(reason),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::registry::{PageRef, Registry};

    fn profile() -> ParseProfile {
        Registry::example()
            .resolve(&PageRef::new("tables_list", "", ""))
            .parse_profile()
    }

    fn upstreams() -> Upstreams {
        // Nothing listens there; only the in-process path is exercised.
        Upstreams::new(
            "http://127.0.0.1:9",
            "http://127.0.0.1:9",
            Duration::from_millis(50),
            Duration::from_millis(50),
        )
        .expect("valid urls")
    }

    const TEXT: &str = "Sure, here it is.\n\n**SUGGESTED_VALUES:** [{\"label\": \"More\", \"value\": \"Tell me more\"}]";

    #[tokio::test]
    async fn the_local_cleaner_never_leaks_and_adds_up_for_any_split() {
        for size in [1, 2, 5, 13, TEXT.len()] {
            let mut cleaner = TextCleaner::local(profile(), Arc::default(), "test");
            let mut seen = String::new();
            let chars: Vec<char> = TEXT.chars().collect();
            for chunk in chars.chunks(size) {
                cleaner.push(&chunk.iter().collect::<String>()).await;
                while let Some(text) = cleaner.ready.pop_front() {
                    assert!(
                        !text.contains("SUGGESTED") && !text.contains('['),
                        "{text:?} leaks"
                    );
                    seen.push_str(&text);
                }
            }
            let done = cleaner.finish(&upstreams()).await;
            seen.push_str(&done.tail);
            assert_eq!(seen, done.response.message, "split {size}");
            assert_eq!(done.response.message.trim_end(), "Sure, here it is.");
            assert_eq!(done.response.suggested_values.len(), 1);
            assert_eq!(done.raw, TEXT);
            assert_eq!(done.fallback.as_deref(), Some("test"));
        }
    }

    #[tokio::test]
    async fn an_unreachable_sidecar_falls_back_at_open() {
        let mut cleaner = TextCleaner::open(&upstreams(), profile()).await;
        assert!(cleaner.fallback_reason().is_some());
        cleaner.push(TEXT).await;
        let done = cleaner.finish(&upstreams()).await;
        assert_eq!(done.response.suggested_values.len(), 1);
        let (parsed, reason) = parse_text(&upstreams(), TEXT, &profile()).await;
        assert!(reason.is_some());
        assert_eq!(parsed, done.response);
        assert_eq!(
            fallback_diagnostic("down").kind,
            DiagnosticKind::ParserFallback as i32
        );
    }
}
