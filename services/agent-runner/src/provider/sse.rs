//! The one server-sent-events reader of every SSE provider, and the driver
//! that turns its events into [`StreamEvent`]s through a provider's
//! [`Decoder`].
//!
//! Framing is [`framing`]'s (the standard's rules: blank-line separated
//! events with LF, CR or CRLF line ends, `:` comment lines dropped,
//! multi-line `data:` joined with `\n`, the `event:` name kept; UTF-8 split
//! across reads is reassembled). A decoder is a plain synchronous state
//! machine: it sees one event at a time and pushes what it yields, which
//! keeps the protocol logic testable without HTTP. The driver stops reading
//! as soon as the decoder reports the provider's finish signal, and asks the
//! decoder what a clean end of the body means (a finish, or
//! [`ProviderError::Truncated`]). [`stream_sse`] puts the three together for
//! an HTTP adapter: POST, frame, decode.

mod framing;

use std::{borrow::Cow, collections::VecDeque, fmt::Display, pin::Pin};

use futures::{Stream, StreamExt};
use rand::{Rng, distr::Alphanumeric};
use reqwest::header::HeaderMap;
use serde_json::Value;

use super::{
    EventStream, ProviderError, StreamEvent,
    http::{self, ResponseLimits, truncate_raw},
};

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field; `message` when the server sent none.
    pub event: Cow<'static, str>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Frames a byte stream into [`SseEvent`]s. A transport failure becomes
/// [`ProviderError::Connection`]; bytes that are not UTF-8 become
/// [`ProviderError::Malformed`]; an event or a body past `limits` becomes
/// [`ProviderError::TooLarge`]. Nothing follows an error, and the body (the
/// HTTP response, so the connection) is dropped as soon as one happens.
pub fn sse_events<S, B, E>(
    body: S,
    limits: ResponseLimits,
) -> impl Stream<Item = Result<SseEvent, ProviderError>> + Send
where
    S: Stream<Item = Result<B, E>> + Send,
    B: AsRef<[u8]> + Send,
    E: Display + Send,
{
    let state = Framing {
        body: Some(Box::pin(body)),
        framer: framing::Framer::new(limits.max_event_bytes),
        max_response_bytes: limits.max_response_bytes,
        received: 0,
        ready: VecDeque::new(),
        failed: None,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.ready.pop_front() {
                return Some((Ok(event), state));
            }
            if let Some(error) = state.failed.take() {
                return Some((Err(error), state));
            }
            let body = state.body.as_mut()?;
            match body.next().await {
                Some(Ok(bytes)) => {
                    let bytes = bytes.as_ref();
                    state.received = state.received.saturating_add(bytes.len());
                    state.failed = if state.received > state.max_response_bytes {
                        Some(ProviderError::TooLarge {
                            what: "response",
                            limit: state.max_response_bytes,
                        })
                    } else {
                        state.framer.push(bytes, &mut state.ready).err()
                    };
                }
                Some(Err(e)) => {
                    state.failed = Some(ProviderError::Connection(format!(
                        "reading the stream: {e}"
                    )));
                }
                None => state.body = None,
            }
            if state.failed.is_some() {
                // Close the connection and free what the framer holds now,
                // not when the consumer drops the stream.
                state.body = None;
                state.framer = framing::Framer::new(0);
            }
        }
    })
}

/// [`sse_events`]' state between reads.
struct Framing<S> {
    /// The body; `None` once it ended or failed (nothing more is read).
    body: Option<Pin<Box<S>>>,
    framer: framing::Framer,
    /// The limit on the body's bytes.
    max_response_bytes: usize,
    /// The body's bytes so far.
    received: usize,
    /// Events framed and not yet handed out.
    ready: VecDeque<SseEvent>,
    /// The error to hand out after them.
    failed: Option<ProviderError>,
}

/// Whether the decoder wants more events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep reading.
    Continue,
    /// The provider's finish signal arrived: stop reading.
    Done,
}

/// A provider's stream protocol, one event at a time.
pub trait Decoder: Send + 'static {
    /// Handles one event, pushing the events it yields onto `out`.
    fn on_event(
        &mut self,
        event: &SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<Flow, ProviderError>;

    /// The body ended cleanly before [`Flow::Done`]: push the final events,
    /// or fail with [`ProviderError::Truncated`].
    fn on_end(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError>;
}

struct Driver<S, D> {
    events: Pin<Box<S>>,
    decoder: D,
    queue: VecDeque<Result<StreamEvent, ProviderError>>,
    finished: bool,
}

/// Runs `decoder` over `events`. Events the decoder pushed before an error
/// are yielded first; nothing follows an error or the final event. Dropping
/// the returned stream drops `events` (and so the HTTP response).
pub fn decode<S, D>(events: S, decoder: D) -> EventStream
where
    S: Stream<Item = Result<SseEvent, ProviderError>> + Send + 'static,
    D: Decoder,
{
    let driver = Driver {
        events: Box::pin(events),
        decoder,
        queue: VecDeque::new(),
        finished: false,
    };
    Box::pin(futures::stream::unfold(driver, |mut d| async move {
        loop {
            if let Some(item) = d.queue.pop_front() {
                return Some((item, d));
            }
            if d.finished {
                return None;
            }
            let mut out = Vec::new();
            let step = match d.events.next().await {
                Some(Ok(event)) => d.decoder.on_event(&event, &mut out),
                Some(Err(error)) => Err(error),
                None => d.decoder.on_end(&mut out).map(|()| Flow::Done),
            };
            d.queue.extend(out.into_iter().map(Ok));
            match step {
                Ok(Flow::Continue) => {}
                Ok(Flow::Done) => d.finished = true,
                Err(error) => {
                    d.queue.push_back(Err(error));
                    d.finished = true;
                }
            }
        }
    }))
}

/// One streaming call of an HTTP adapter: the JSON body POSTed to `url`.
#[derive(Debug)]
pub struct SseRequest<'a> {
    /// The adapter's HTTP client.
    pub client: &'a reqwest::Client,
    /// The configured provider name, for logs.
    pub provider: &'a str,
    /// The model called, for logs.
    pub model: &'a str,
    /// The endpoint.
    pub url: &'a str,
    /// The adapter's headers (key, version); `post_json` adds the rest.
    pub headers: HeaderMap,
    /// The request body (kept by the caller: a request refused for its key
    /// goes out again with the next one).
    pub body: &'a Value,
    /// How much the answer may hold.
    pub limits: ResponseLimits,
}

/// Sends `request` and decodes the answer's events with `decoder`: the
/// `stream` of every SSE adapter. Errors before the stream starts (HTTP
/// status, connection, a JSON answer) are returned; later ones are items.
pub async fn stream_sse(
    request: SseRequest<'_>,
    decoder: impl Decoder,
) -> Result<EventStream, ProviderError> {
    tracing::debug!(provider = %request.provider, model = %request.model, "starting provider stream");
    let response =
        http::post_json(request.client, request.url, request.headers, request.body).await?;
    Ok(decode(
        sse_events(response.bytes_stream(), request.limits),
        decoder,
    ))
}

/// A tool call id for a provider that gave none: `call_` and 24 random
/// alphanumerics (OpenAI's own shape), unique across turns and restarts.
pub fn synthesize_call_id() -> String {
    let suffix: String = rand::rng()
        .sample_iter(&Alphanumeric)
        .take(24)
        .map(char::from)
        .collect();
    format!("call_{suffix}")
}

/// An event's `data` (already trimmed) as JSON, or `None` when it is blank
/// (a keep-alive): the first step of every JSON decoder. Data that is not
/// JSON is [`ProviderError::Malformed`] naming `provider`.
pub fn json_data<'a, T: serde::Deserialize<'a>>(
    provider: &str,
    data: &'a str,
) -> Result<Option<T>, ProviderError> {
    if data.is_empty() {
        return Ok(None);
    }
    serde_json::from_str(data)
        .map(Some)
        .map_err(|e| malformed_json(provider, &e, data))
}

/// A JSON chunk that does not parse, as [`ProviderError::Malformed`].
pub fn malformed_json(provider: &str, error: &serde_json::Error, raw: &str) -> ProviderError {
    ProviderError::Malformed {
        reason: format!("{provider} sent a chunk that is not valid JSON: {error}"),
        raw: truncate_raw(raw),
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use super::*;

    fn chunks(text: &str, size: usize) -> Vec<Result<Vec<u8>, Infallible>> {
        text.as_bytes()
            .chunks(size)
            .map(|c| Ok(c.to_vec()))
            .collect()
    }

    async fn read_all(text: &str, size: usize) -> Vec<Result<SseEvent, ProviderError>> {
        sse_events(
            futures::stream::iter(chunks(text, size)),
            ResponseLimits::DEFAULT,
        )
        .collect()
        .await
    }

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.to_owned().into(),
            data: data.into(),
        }
    }

    fn ok(items: Vec<Result<SseEvent, ProviderError>>) -> Vec<SseEvent> {
        items
            .into_iter()
            .map(|r| r.expect("no error expected"))
            .collect()
    }

    const MIXED: &str = ": OPENROUTER PROCESSING\n\n\
        data: {\"a\":1}\n\n\
        : OPENROUTER PROCESSING\ndata: {\"b\":\"é中\"}\n\n\
        event: message_start\ndata: {\"type\":\"message_start\"}\n\n\
        data: line one\ndata: line two\n\n\
        data: [DONE]\n\n";

    fn mixed_expected() -> Vec<SseEvent> {
        vec![
            ev("message", "{\"a\":1}"),
            ev("message", "{\"b\":\"é中\"}"),
            ev("message_start", "{\"type\":\"message_start\"}"),
            ev("message", "line one\nline two"),
            ev("message", "[DONE]"),
        ]
    }

    #[tokio::test]
    async fn comments_event_names_and_multiline_data() {
        assert_eq!(ok(read_all(MIXED, MIXED.len()).await), mixed_expected());
    }

    #[tokio::test]
    async fn every_fragmentation_gives_the_same_events() {
        for size in [1, 2, 3, 5, 7, 13, 64] {
            assert_eq!(
                ok(read_all(MIXED, size).await),
                mixed_expected(),
                "chunk size {size}"
            );
        }
    }

    #[tokio::test]
    async fn one_huge_read_is_sliced_without_losing_events_or_characters() {
        let text: String = (0..500)
            .map(|i| format!("data: {{\"n\":{i},\"t\":\"é中ü\"}}\r\n\r\n"))
            .collect();
        assert!(text.len() > 16 * 1024);
        let events = ok(read_all(&text, text.len()).await);
        assert_eq!(events.len(), 500);
        for (i, event) in events.iter().enumerate() {
            assert_eq!(event.data, format!("{{\"n\":{i},\"t\":\"é中ü\"}}"));
        }
    }

    #[tokio::test]
    async fn crlf_framing_byte_by_byte() {
        let text = "data: {\"x\":1}\r\n\r\ndata: {\"y\":2}\r\n\r\n";
        let expected = vec![ev("message", "{\"x\":1}"), ev("message", "{\"y\":2}")];
        assert_eq!(ok(read_all(text, 1).await), expected);
        assert_eq!(ok(read_all(text, text.len()).await), expected);
    }

    #[tokio::test]
    async fn an_unterminated_last_event_is_not_delivered() {
        let events = ok(read_all("data: {\"x\":1}\n\ndata: {\"y\"", 1).await);
        assert_eq!(events, vec![ev("message", "{\"x\":1}")]);
    }

    #[tokio::test]
    async fn invalid_utf8_is_malformed_not_a_panic() {
        let body: Vec<Result<Vec<u8>, Infallible>> =
            vec![Ok(b"data: ok\n\ndata: \xff\xfe\n\n".to_vec())];
        let items: Vec<_> = sse_events(futures::stream::iter(body), ResponseLimits::DEFAULT)
            .collect()
            .await;
        assert!(
            items
                .iter()
                .any(|r| matches!(r, Err(ProviderError::Malformed { .. }))),
            "{items:?}"
        );
    }

    #[tokio::test]
    async fn transport_errors_become_connection_errors() {
        let body: Vec<Result<Vec<u8>, String>> =
            vec![Ok(b"data: a\n\n".to_vec()), Err("reset by peer".into())];
        let items: Vec<_> = sse_events(futures::stream::iter(body), ResponseLimits::DEFAULT)
            .collect()
            .await;
        assert_eq!(items.len(), 2);
        assert!(
            matches!(&items[1], Err(ProviderError::Connection(m)) if m.contains("reset by peer"))
        );
    }

    /// Counts events, finishes on `[DONE]`, truncates otherwise.
    struct Counting(usize);

    impl Decoder for Counting {
        fn on_event(
            &mut self,
            e: &SseEvent,
            out: &mut Vec<StreamEvent>,
        ) -> Result<Flow, ProviderError> {
            if e.data == "[DONE]" {
                return Ok(Flow::Done);
            }
            if e.data == "bad" {
                return Err(ProviderError::Malformed {
                    reason: "bad".into(),
                    raw: e.data.clone(),
                });
            }
            self.0 += 1;
            out.push(StreamEvent::TextDelta(e.data.clone()));
            Ok(Flow::Continue)
        }

        fn on_end(&mut self, _out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
            Err(ProviderError::Truncated)
        }
    }

    async fn drive(text: &str) -> Vec<Result<StreamEvent, ProviderError>> {
        decode(
            sse_events(
                futures::stream::iter(chunks(text, 1)),
                ResponseLimits::DEFAULT,
            ),
            Counting(0),
        )
        .collect()
        .await
    }

    #[tokio::test]
    async fn driver_stops_at_done_and_ignores_the_rest() {
        let items = drive("data: a\n\ndata: [DONE]\n\ndata: after\n\n").await;
        assert_eq!(items.len(), 1);
        assert!(matches!(&items[0], Ok(StreamEvent::TextDelta(t)) if t == "a"));
    }

    #[tokio::test]
    async fn driver_reports_truncation_and_errors_last() {
        let items = drive("data: a\n\n").await;
        assert!(matches!(items.last(), Some(Err(ProviderError::Truncated))));
        let items = drive("data: a\n\ndata: bad\n\ndata: c\n\n").await;
        assert_eq!(items.len(), 2);
        assert!(matches!(&items[1], Err(ProviderError::Malformed { raw, .. }) if raw == "bad"));
    }

    #[test]
    fn synthesized_ids_are_distinct() {
        let a = synthesize_call_id();
        let b = synthesize_call_id();
        assert!(a.starts_with("call_") && a.len() == 29);
        assert_ne!(a, b);
    }
}
