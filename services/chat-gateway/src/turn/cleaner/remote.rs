//! The cleaner's parser sidecar: opening its `ParseStream`, sending
//! deltas, taking what it answers, and the final parse of the whole text.

use futures::FutureExt;
use parley_proto::parser::v1::{
    ParseResponse, ParseStreamRequest, ParseStreamResponse, parse_stream_request::Input,
};
use tokio::sync::mpsc;
use tokio_stream::{StreamExt, wrappers::ReceiverStream};

use super::{Mode, REQUEST_BUFFER, Remote, TextCleaner};
use crate::turn::parse::{parse_remote, short};

impl TextCleaner {
    /// Opens a `ParseStream` (sending `text` first, when given), or the
    /// library when that fails.
    pub(super) async fn open_remote(&mut self, text: Option<String>) {
        let Some(mut client) = self.parser.clone() else {
            self.switch_to_local("no parser sidecar".into());
            return;
        };
        let (tx, rx) = mpsc::channel(REQUEST_BUFFER);
        let first = ParseStreamRequest {
            input: Some(Input::Profile(self.profile.clone())),
        };
        let mut queued = tx.try_send(Box::new(first)).is_ok();
        if let Some(text) = text.filter(|text| !text.is_empty()) {
            queued &= tx
                .try_send(Box::new(ParseStreamRequest {
                    input: Some(Input::Text(text)),
                }))
                .is_ok();
            self.unsynced = true;
        }
        if !queued {
            self.switch_to_local("request channel closed".into());
            return;
        }
        let call = client.parse_stream(ReceiverStream::new(rx).map(|request| *request));
        match tokio::time::timeout(self.wait, call).await {
            Ok(Ok(response)) => {
                self.mode = Mode::Remote(Box::new(Remote {
                    tx,
                    rx: response.into_inner(),
                }))
            }
            Ok(Err(status)) => self.switch_to_local(short(&status)),
            Err(_) => self.switch_to_local("timed out opening ParseStream".into()),
        }
    }

    pub(super) fn take_remote(&mut self, response: ParseStreamResponse) {
        if let Some(output) = response.output {
            self.take_output(output);
        }
    }

    /// Sends `request` on the sidecar's stream, taking its answers while
    /// waiting for room (so neither side can stall the other). The error is
    /// why the stream is unusable.
    pub(super) async fn send(
        &mut self,
        remote: &mut Remote,
        request: ParseStreamRequest,
    ) -> Result<(), String> {
        let mut request = Box::new(request);
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
    pub(super) fn take_answer(
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

    /// Takes the sidecar's answers that have already arrived, without
    /// waiting (a broken stream is noticed by the next read).
    pub(super) fn take_arrived_answers(&mut self) {
        while let Mode::Remote(remote) = &mut self.mode {
            match remote.rx.message().now_or_never() {
                Some(Ok(Some(response))) => self.take_remote(response),
                _ => return,
            }
        }
    }

    /// The sidecar's `Parse` of the whole raw text (a turn whose stream
    /// never opened); `None`, with the reason noted, when it does not
    /// answer in time.
    pub(super) async fn parse_whole(&mut self) -> Option<ParseResponse> {
        let Some(mut client) = self.parser.clone() else {
            self.fallback
                .get_or_insert_with(|| "no parser sidecar".into());
            return None;
        };
        match parse_remote(&mut client, self.raw.clone(), &self.profile, self.wait).await {
            Ok(response) => Some(response),
            Err(reason) => {
                self.fallback.get_or_insert(reason);
                None
            }
        }
    }

    /// Half-closes the sidecar's stream and waits for its final answer;
    /// `None` (with the reason noted) when it does not come in time.
    pub(super) async fn final_from(&mut self, remote: Remote) -> Option<ParseResponse> {
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
