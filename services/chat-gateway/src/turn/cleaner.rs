//! Cleaning the model's text while it streams.
//!
//! Text deltas go through the parser sidecar's `ParseStream`, so no marker
//! or its JSON ever reaches the client. When the sidecar cannot be reached
//! (connect error), its stream breaks or it stops answering mid-turn, the
//! parser library takes over in-process: it re-reads the raw text received
//! so far and continues exactly where the sidecar's output stopped (both run
//! the same algorithm, and for any split the concatenated deltas equal the
//! final message), and the turn's `complete` carries a `PARSER_FALLBACK`
//! diagnostic.
//!
//! The sidecar answers a delta whenever it has processed it, so text written
//! just before a tool call could reach the client after the tool's events.
//! [`TextCleaner::sync`] sends a checkpoint and waits for its answer: every
//! output for the text before it has then arrived. The relay syncs before it
//! passes on an event that came after some text.

use std::{collections::VecDeque, sync::Arc, time::Duration};

use futures::FutureExt;
use parley_proto::parser::v1::{
    ParseProfile, ParseResponse, ParseStreamRequest, ParseStreamResponse,
    parse_stream_request::Input, parse_stream_response::Output,
};
use payload_parser::{Limits, ProfileCache, StreamParser};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::parse::{local_profile, parse_locally, short, unparsed};
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

/// The text items of a stream parser's output (elements and diagnostics
/// come again in the final parse).
fn texts(items: Vec<payload_parser::StreamItem>) -> impl Iterator<Item = String> {
    items.into_iter().filter_map(|item| match item {
        payload_parser::StreamItem::Text(text) => Some(text),
        _ => None,
    })
}

/// The streaming cleaner of one turn.
pub struct TextCleaner {
    profile: ParseProfile,
    /// Where the in-process parser finds the profile compiled.
    compiled: Arc<ProfileCache>,
    mode: Mode,
    /// Longest wait for the sidecar: opening the stream, a checkpoint, the
    /// final parse. Past it the library takes over.
    wait: Duration,
    /// Every raw delta received.
    raw: String,
    /// Every cleaned delta handed out.
    emitted: String,
    /// Cleaned text ready to hand out.
    ready: VecDeque<String>,
    /// Whether text went to the sidecar since its last answered checkpoint.
    unsynced: bool,
    /// The last checkpoint sent.
    checkpoint_sent: u64,
    /// The last checkpoint the sidecar answered.
    checkpoint_answered: u64,
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

impl TextCleaner {
    fn new(profile: ParseProfile, compiled: Arc<ProfileCache>, wait: Duration) -> Self {
        Self {
            profile,
            compiled,
            mode: Mode::Stopped,
            wait,
            raw: String::new(),
            emitted: String::new(),
            ready: VecDeque::new(),
            unsynced: false,
            checkpoint_sent: 0,
            checkpoint_answered: 0,
            final_response: None,
            fallback: None,
        }
    }

    /// Opens a `ParseStream` on the sidecar, or the library when that fails.
    pub async fn open(upstreams: &Upstreams, profile: ParseProfile) -> Self {
        let mut cleaner = Self::new(
            profile,
            upstreams.compiled_profiles.clone(),
            upstreams.parse_timeout,
        );
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
        match tokio::time::timeout(cleaner.wait, call).await {
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
        let mut cleaner = Self::new(profile, compiled, Duration::ZERO);
        cleaner.switch_to_local(reason.to_owned());
        cleaner
    }

    /// Why the library took over, when it did.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    fn hand_out(&mut self, text: String) {
        if !text.is_empty() {
            self.emitted.push_str(&text);
            self.ready.push_back(text);
        }
    }

    fn hand_out_items(&mut self, items: Vec<payload_parser::StreamItem>) {
        for text in texts(items) {
            self.hand_out(text);
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
        let replayed: String = match parser.push(&self.raw) {
            Ok(items) => texts(items).collect(),
            Err(error) => {
                tracing::warn!(%error, "in-process parser refused the text");
                return;
            }
        };
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
            Some(Output::Checkpoint(mark)) => {
                self.checkpoint_answered = self.checkpoint_answered.max(mark);
            }
            // Elements and diagnostics arrive again in the final response.
            _ => {}
        }
    }

    /// Sends `request` on the sidecar's stream, taking its answers while
    /// waiting for room (so neither side can stall the other). The error is
    /// why the stream is unusable.
    async fn send(
        &mut self,
        remote: &mut Remote,
        request: ParseStreamRequest,
    ) -> Result<(), String> {
        let mut request = request;
        loop {
            match remote.tx.try_send(request) {
                Ok(()) => return Ok(()),
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    return Err("ParseStream closed".into());
                }
                Err(mpsc::error::TrySendError::Full(back)) => request = back,
            }
            tokio::select! {
                permit = remote.tx.reserve() => return match permit {
                    Ok(permit) => {
                        permit.send(request);
                        Ok(())
                    }
                    Err(_) => Err("ParseStream closed".into()),
                },
                message = remote.rx.message() => self.take_answer(message)?,
            }
        }
    }

    /// Takes one read of the sidecar's stream; the error says why it ended.
    fn take_answer(
        &mut self,
        message: Result<Option<ParseStreamResponse>, tonic::Status>,
    ) -> Result<(), String> {
        match message {
            Ok(Some(response)) => {
                self.take_remote(response);
                Ok(())
            }
            Ok(None) => Err("ParseStream ended early".into()),
            Err(status) => Err(short(&status)),
        }
    }

    /// Feeds one raw delta; cleaned text becomes available via [`Self::next`].
    pub async fn push(&mut self, delta: &str) {
        self.raw.push_str(delta);
        match std::mem::replace(&mut self.mode, Mode::Stopped) {
            Mode::Stopped => {}
            Mode::Local(mut parser) => match parser.push(delta) {
                Ok(items) => {
                    self.hand_out_items(items);
                    self.mode = Mode::Local(parser);
                }
                Err(error) => tracing::warn!(%error, "in-process parser refused the text"),
            },
            Mode::Remote(mut remote) => {
                let request = ParseStreamRequest {
                    input: Some(Input::Text(delta.to_owned())),
                };
                match self.send(&mut remote, request).await {
                    Ok(()) => {
                        self.unsynced = true;
                        self.mode = Mode::Remote(remote);
                    }
                    Err(reason) => self.switch_to_local(reason),
                }
            }
        }
    }

    /// Waits until the sidecar has answered for every delta pushed so far,
    /// so the cleaned text written before an event can be handed out before
    /// it. Immediate when nothing was pushed since the last sync, and for
    /// the in-process parser, which answers as it is fed. A sidecar that
    /// does not answer within the wait is replaced by the library.
    pub async fn sync(&mut self) {
        if !std::mem::take(&mut self.unsynced) {
            return;
        }
        let Mode::Remote(mut remote) = std::mem::replace(&mut self.mode, Mode::Stopped) else {
            return;
        };
        self.checkpoint_sent += 1;
        let mark = self.checkpoint_sent;
        let wait = self.wait;
        let synced = tokio::time::timeout(wait, async {
            let request = ParseStreamRequest {
                input: Some(Input::Checkpoint(mark)),
            };
            self.send(&mut remote, request).await?;
            while self.checkpoint_answered < mark {
                let message = remote.rx.message().await;
                self.take_answer(message)?;
            }
            Ok::<(), String>(())
        })
        .await;
        match synced {
            Ok(Ok(())) => self.mode = Mode::Remote(remote),
            Ok(Err(reason)) => self.switch_to_local(reason),
            Err(_) => self.switch_to_local("timed out waiting for a checkpoint".into()),
        }
    }

    /// The cleaned text ready now, as one delta; `None` when there is none.
    pub fn take_ready(&mut self) -> Option<String> {
        let mut text = self.ready.pop_front()?;
        while let Some(more) = self.ready.pop_front() {
            text.push_str(&more);
        }
        Some(text)
    }

    /// The cleaned text ready now, as one delta (everything queued up
    /// since the last call). Pending until there is some, so it can sit in
    /// a `select!` beside the runner's stream.
    pub async fn next(&mut self) -> String {
        loop {
            if let Some(text) = self.take_ready() {
                return text;
            }
            let Mode::Remote(remote) = &mut self.mode else {
                return std::future::pending().await;
            };
            let message = remote.rx.message().await;
            match self.take_answer(message) {
                Ok(()) => self.take_arrived_answers(),
                Err(reason) => self.switch_to_local(reason),
            }
        }
    }

    /// Takes the sidecar's answers that have already arrived, without
    /// waiting (a broken stream is noticed by the next read).
    fn take_arrived_answers(&mut self) {
        while let Mode::Remote(remote) = &mut self.mode {
            match remote.rx.message().now_or_never() {
                Some(Ok(Some(response))) => self.take_remote(response),
                _ => return,
            }
        }
    }

    /// Ends the stream: returns the held-back tail of the cleaned text and
    /// the parse of everything received (sidecar's final, else library's).
    pub async fn finish(mut self) -> CleanedText {
        let unsent: usize = self.ready.drain(..).map(|text| text.len()).sum();
        let already = self.emitted.len() - unsent;
        let mut response = None;
        let mut local = None;
        match std::mem::replace(&mut self.mode, Mode::Stopped) {
            Mode::Remote(remote) => response = self.final_from(*remote).await,
            Mode::Local(parser) => local = Some(parser),
            Mode::Stopped => {}
        }
        let response = match (response, local) {
            (Some(response), _) => response,
            (None, Some(parser)) => parser.finish().into_proto(),
            (None, None) => {
                self.fallback
                    .get_or_insert_with(|| "in-process parser in use".into());
                parse_locally(&self.raw, &self.profile, &self.compiled)
                    .unwrap_or_else(|error| unparsed(self.emitted.clone(), &error))
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

    /// Half-closes the sidecar's stream and waits for its final answer;
    /// `None` (with the reason noted) when it does not come in time.
    async fn final_from(&mut self, remote: Remote) -> Option<ParseResponse> {
        let Remote { tx, mut rx } = remote;
        drop(tx);
        let drained = tokio::time::timeout(self.wait, async {
            while self.final_response.is_none() {
                match rx.message().await {
                    Ok(Some(response)) => self.take_remote(response),
                    Ok(None) => return Err("ParseStream ended without a final response".into()),
                    Err(status) => return Err(short(&status)),
                }
            }
            Ok::<(), String>(())
        })
        .await;
        let reason = match drained {
            Ok(Ok(())) => {
                parley_grpc::telemetry::rpc::client::finish_in_background(rx);
                return self.final_response.take();
            }
            Ok(Err(reason)) => reason,
            Err(_) => "timed out waiting for the final parse".into(),
        };
        self.fallback.get_or_insert(reason);
        None
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{PageRef, Registry};

    fn profile() -> ParseProfile {
        Registry::example()
            .resolve(&PageRef::new("tables_list", "", ""))
            .parse_profile()
    }

    fn upstreams(parser: &str) -> Upstreams {
        Upstreams::new(
            "http://127.0.0.1:9",
            parser,
            Duration::from_millis(500),
            Duration::from_millis(500),
        )
        .expect("valid urls")
    }

    /// The real payload-parser service on port 0.
    async fn sidecar() -> String {
        let service = payload_parser::service::ParserService::new(
            payload_parser::Profiles::empty(),
            Limits::default(),
        )
        .into_server();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
        format!("http://{addr}")
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
                while let Some(text) = cleaner.take_ready() {
                    assert!(
                        !text.contains("SUGGESTED") && !text.contains('['),
                        "{text:?} leaks"
                    );
                    seen.push_str(&text);
                }
            }
            let done = cleaner.finish().await;
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
        let mut cleaner = TextCleaner::open(&upstreams("http://127.0.0.1:9"), profile()).await;
        assert!(cleaner.fallback_reason().is_some());
        cleaner.push(TEXT).await;
        let done = cleaner.finish().await;
        assert_eq!(done.response.suggested_values.len(), 1);
    }

    #[tokio::test]
    async fn after_a_sync_the_sidecar_has_answered_everything_pushed() {
        let upstreams = upstreams(&sidecar().await);
        let mut cleaner = TextCleaner::open(&upstreams, profile()).await;
        let mut seen = String::new();
        for (n, delta) in ["Let me check ", "the time. ", "One moment."]
            .into_iter()
            .enumerate()
        {
            cleaner.push(delta).await;
            // As before a tool event: everything written so far is out
            // (but the trailing space, which may still touch a removed
            // element), without waiting on `next`.
            cleaner.sync().await;
            seen.push_str(&cleaner.take_ready().unwrap_or_default());
            let expected = [
                "Let me check",
                "Let me check the time.",
                "Let me check the time. One moment.",
            ][n];
            assert_eq!(seen, expected);
        }
        cleaner.sync().await; // nothing pushed since: returns at once
        let done = cleaner.finish().await;
        assert_eq!(done.fallback, None, "the sidecar answered every checkpoint");
        assert_eq!(seen + &done.tail, done.response.message);
    }
}
