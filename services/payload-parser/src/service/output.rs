//! The responses of one `ParseStream` call, produced as the call reads them.
//!
//! The response stream itself reads the request stream and runs the
//! [`StreamParser`]: each time the server asks for the next response it
//! takes whatever deltas have arrived and hands out what they produced.
//! There is no task per call and no channel between the parser and the
//! response, so a delta costs one wake-up of the call instead of two, and a
//! client that stops reading stops the parsing too (HTTP/2 flow control).
//! When the client goes away the server drops the stream, and the parser
//! with it.
//!
//! The idle timer is armed once and moved on only when it fires, so a
//! delta costs a clock read, not a timer re-registration.

use std::{
    collections::VecDeque,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use parley_parse::{StreamItem, StreamParser};
use parley_proto::parser::v1::{
    ParseStreamRequest, ParseStreamResponse, parse_stream_request::Input,
    parse_stream_response::Output,
};
use tokio::time::{Instant, Sleep};
use tokio_stream::Stream;
use tonic::{Status, Streaming};

use super::{count_diagnostics, error::ParserError};

/// What a `ParseStream` call answers, read from its requests as it goes.
pub struct Responses {
    inbound: Streaming<ParseStreamRequest>,
    /// `None` once the text ended (the final response is queued) or the
    /// call failed: nothing more is read.
    parser: Option<StreamParser>,
    /// Responses ready to go, in order; an error is the last.
    ready: VecDeque<Result<ParseStreamResponse, Status>>,
    /// Reused for each delta's items.
    items: Vec<StreamItem>,
    /// Longest pause between two messages.
    idle: Duration,
    /// When the last message arrived.
    last_message: Instant,
    /// Fires at `last_message + idle` or earlier (then it is moved on).
    idle_timer: Pin<Box<Sleep>>,
    /// Fires when the call has lived its longest.
    lifetime: Pin<Box<Sleep>>,
}

impl Responses {
    /// Responses for `inbound`, whose profile message has been read.
    pub(super) fn new(
        inbound: Streaming<ParseStreamRequest>,
        parser: StreamParser,
        idle: Duration,
        deadline: Instant,
    ) -> Self {
        let now = Instant::now();
        Self {
            inbound,
            parser: Some(parser),
            ready: VecDeque::new(),
            items: Vec::new(),
            idle,
            last_message: now,
            idle_timer: Box::pin(tokio::time::sleep_until(now + idle)),
            lifetime: Box::pin(tokio::time::sleep_until(deadline)),
        }
    }

    /// Ends the call with `status` once what is ready has gone.
    fn fail(&mut self, status: Status) {
        self.parser = None;
        self.ready.push_back(Err(status));
    }

    /// Takes one request message.
    fn take(&mut self, message: ParseStreamRequest) {
        let Some(parser) = self.parser.as_mut() else {
            return;
        };
        match message.input {
            Some(Input::Text(delta)) => match parser.push_into(&delta, &mut self.items) {
                Ok(()) => self
                    .ready
                    .extend(self.items.drain(..).map(|item| Ok(item.into_proto()))),
                Err(error) => self.fail(ParserError::from(error).into()),
            },
            Some(Input::Profile(_) | Input::ProfileName(_)) => {
                self.fail(ParserError::ProfileAlreadySet.into())
            }
            // Everything before it is already queued, so it is answered in order.
            Some(Input::Checkpoint(mark)) => self.ready.push_back(Ok(ParseStreamResponse {
                output: Some(Output::Checkpoint(mark)),
            })),
            None => {}
        }
    }

    /// The client half-closed: queues the remaining items and `final`.
    fn finish(&mut self) {
        let Some(mut parser) = self.parser.take() else {
            return;
        };
        let received = parser.received();
        // The last items are converted (and dropped) before `finish`, so a
        // payload among them is moved into the result, not copied.
        let items = parser.end();
        self.ready
            .extend(items.into_iter().map(|item| Ok(item.into_proto())));
        let parsed = parser.finish();
        count_diagnostics(&parsed.diagnostics);
        tracing::debug!(
            bytes = received,
            diagnostics = parsed.diagnostics.len(),
            "parse stream finished"
        );
        self.ready
            .push_back(Ok(StreamItem::Final(Box::new(parsed)).into_proto()));
    }
}

impl Stream for Responses {
    type Item = Result<ParseStreamResponse, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(next) = this.ready.pop_front() {
                return Poll::Ready(Some(next));
            }
            if this.parser.is_none() {
                return Poll::Ready(None);
            }
            if this.lifetime.as_mut().poll(cx).is_ready() {
                this.fail(
                    ParserError::StreamTimeout("the stream exceeded its maximum duration").into(),
                );
                continue;
            }
            match Pin::new(&mut this.inbound).poll_next(cx) {
                Poll::Ready(Some(Ok(message))) => {
                    this.last_message = Instant::now();
                    this.take(message);
                }
                // A message that failed to decode (or a broken stream) ends
                // the call with that status (the edge layer,
                // `parley_grpc::edge`, gives decode failures the client's
                // code), never with OK and no `final`.
                Poll::Ready(Some(Err(status))) => {
                    tracing::debug!(code = ?status.code(), "parse stream input failed");
                    this.fail(status);
                }
                Poll::Ready(None) => this.finish(),
                Poll::Pending => {
                    if this.idle_timer.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    let due = this.last_message + this.idle;
                    if due > Instant::now() {
                        // Messages came since it was armed: move it on.
                        this.idle_timer.as_mut().reset(due);
                        continue;
                    }
                    this.fail(
                        ParserError::StreamTimeout("no message arrived within the idle timeout")
                            .into(),
                    );
                }
            }
        }
    }
}
