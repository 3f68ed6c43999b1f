//! [`LookAhead`]: a request body that knows it has ended when its last
//! frame is read, so the frame goes out with `END_STREAM`.
//!
//! hyper's HTTP/2 client asks a body `is_end_stream()` right after each
//! frame it reads. tonic's request body only finds out that its stream of
//! messages has ended when it is polled once more, so a call with one
//! request message (every unary and server-streaming call) went out as
//! three writes: `HEADERS`, the message's `DATA`, and an empty `DATA` frame
//! with `END_STREAM`. tonic's server reads a single request message to its
//! end before it calls the handler, so that last frame was one more packet,
//! and one more wake-up of the server, on the way to every turn's first
//! token. Looking one frame ahead, when the next one is already there,
//! folds `END_STREAM` into the message's frame.

use std::{
    pin::Pin,
    task::{Context, Poll},
};

use http_body::{Body, Frame, SizeHint};
use prost::bytes::Buf;

/// A body that reads one frame ahead of its reader where it can, so that
/// [`Body::is_end_stream`] is true as soon as the last frame is handed out.
/// Frames, errors and their order are the inner body's.
#[derive(Debug)]
pub struct LookAhead<B: Body> {
    inner: B,
    /// The frame (or error) read ahead, handed out next.
    next: Option<Result<Frame<B::Data>, B::Error>>,
    /// The inner body returned its end.
    ended: bool,
}

impl<B: Body> LookAhead<B> {
    /// Wraps `inner`.
    pub fn new(inner: B) -> Self {
        Self {
            inner,
            next: None,
            ended: false,
        }
    }
}

impl<B: Body + Unpin> Body for LookAhead<B>
where
    B::Data: Unpin,
    B::Error: Unpin,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let current = match this.next.take() {
            Some(current) => current,
            None if this.ended => return Poll::Ready(None),
            None => match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(current)) => current,
                Poll::Ready(None) => {
                    this.ended = true;
                    return Poll::Ready(None);
                }
                Poll::Pending => return Poll::Pending,
            },
        };
        if current.is_ok() {
            // Pending registers the reader's waker with the inner body; the
            // wake-up it may cause later is a poll that finds the frame.
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(next)) => this.next = Some(next),
                Poll::Ready(None) => this.ended = true,
                Poll::Pending => {}
            }
        }
        Poll::Ready(Some(current))
    }

    fn is_end_stream(&self) -> bool {
        self.next.is_none() && (self.ended || self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        let mut hint = self.inner.size_hint();
        let ahead = match &self.next {
            Some(Ok(frame)) => frame.data_ref().map_or(0, |data| data.remaining() as u64),
            _ => 0,
        };
        hint.set_lower(hint.lower().saturating_add(ahead));
        if let Some(upper) = hint.upper() {
            hint.set_upper(upper.saturating_add(ahead));
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use std::{
        collections::VecDeque,
        task::{Context, Poll, Waker},
    };

    use tonic::codegen::Bytes;

    use super::*;

    /// What a scripted body does when polled.
    enum Step {
        Data(&'static str),
        Pending,
        Fail,
    }

    /// A body like tonic's: its end is known only when polled past its
    /// last frame.
    struct Scripted(VecDeque<Step>);

    impl Body for Scripted {
        type Data = Bytes;
        type Error = &'static str;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, &'static str>>> {
            match self.0.pop_front() {
                None => Poll::Ready(None),
                Some(Step::Data(text)) => {
                    Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(text.as_bytes())))))
                }
                Some(Step::Pending) => {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
                Some(Step::Fail) => Poll::Ready(Some(Err("broken"))),
            }
        }
    }

    /// Polls `body` once, with a data frame's bytes as text.
    fn poll(body: &mut LookAhead<Scripted>) -> Poll<Option<Result<String, &'static str>>> {
        let mut cx = Context::from_waker(Waker::noop());
        Pin::new(body).poll_frame(&mut cx).map(|frame| {
            frame.map(|result| {
                result.map(|frame| {
                    let data = frame.into_data().unwrap_or_default();
                    String::from_utf8_lossy(&data).into_owned()
                })
            })
        })
    }

    fn scripted(steps: impl IntoIterator<Item = Step>) -> LookAhead<Scripted> {
        LookAhead::new(Scripted(steps.into_iter().collect()))
    }

    #[test]
    fn the_only_frame_is_read_as_the_last() {
        let mut body = scripted([Step::Data("message")]);
        assert!(!body.is_end_stream());
        assert_eq!(poll(&mut body), Poll::Ready(Some(Ok("message".into()))));
        assert!(body.is_end_stream(), "END_STREAM goes with the frame");
        assert_eq!(poll(&mut body), Poll::Ready(None));
        assert_eq!(poll(&mut body), Poll::Ready(None));
    }

    #[test]
    fn frames_come_in_order_and_only_the_last_ends_the_body() {
        let mut body = scripted([Step::Data("a"), Step::Data("b"), Step::Data("c")]);
        for (text, last) in [("a", false), ("b", false), ("c", true)] {
            assert_eq!(poll(&mut body), Poll::Ready(Some(Ok(text.into()))));
            assert_eq!(body.is_end_stream(), last, "after {text}");
        }
        assert_eq!(poll(&mut body), Poll::Ready(None));
    }

    #[test]
    fn a_frame_not_there_yet_is_waited_for() {
        let mut body = scripted([
            Step::Pending,
            Step::Data("a"),
            Step::Pending,
            Step::Data("b"),
        ]);
        assert_eq!(poll(&mut body), Poll::Pending);
        assert_eq!(poll(&mut body), Poll::Ready(Some(Ok("a".into()))));
        assert!(!body.is_end_stream(), "the next frame was not there yet");
        assert_eq!(poll(&mut body), Poll::Ready(Some(Ok("b".into()))));
        assert!(body.is_end_stream());
        assert_eq!(poll(&mut body), Poll::Ready(None));
    }

    #[test]
    fn an_error_read_ahead_comes_after_the_frame_before_it() {
        let mut body = scripted([Step::Data("a"), Step::Fail, Step::Data("never")]);
        assert_eq!(poll(&mut body), Poll::Ready(Some(Ok("a".into()))));
        assert!(!body.is_end_stream());
        assert_eq!(poll(&mut body), Poll::Ready(Some(Err("broken"))));
        // No look-ahead after an error: the next frame is read when asked.
        assert_eq!(poll(&mut body), Poll::Ready(Some(Ok("never".into()))));
    }

    #[test]
    fn the_size_hint_counts_the_frame_read_ahead() {
        let mut body = scripted([Step::Data("abc"), Step::Data("defgh")]);
        assert_eq!(poll(&mut body), Poll::Ready(Some(Ok("abc".into()))));
        assert_eq!(body.size_hint().lower(), 5);
    }
}
