//! A controllable `AgentRunner`: each call plays the next scripted reply,
//! records the request (and its grpc-timeout), and notices when the
//! gateway drops the stream (that is how a cancel reaches the runner).

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use parley_proto::runner::v1::{
    self as runner, RunEvent, RunRequest,
    agent_runner_server::{AgentRunner, AgentRunnerServer},
    run_event::Event,
};
use tokio::sync::{Notify, mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

/// One step of a scripted reply.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // test scripts: a few steps each
pub enum Step {
    /// Send this event.
    Send(Event),
    /// Wait until the test opens the gate.
    Gate(Arc<Notify>),
    /// Wait until the gateway drops the stream.
    Hang,
    /// Pause, like a model before its first token.
    Sleep(Duration),
}

/// What one `Run` call does.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Stream these steps.
    Steps(Vec<Step>),
    /// Refuse the call.
    Fail(Status),
}

/// A text answer split into the given deltas, then `finished`.
pub fn text_reply(deltas: &[&str]) -> Reply {
    let mut steps: Vec<Step> = deltas
        .iter()
        .map(|delta| Step::Send(Event::TextDelta((*delta).to_owned())))
        .collect();
    steps.push(Step::Send(finished(&deltas.concat())));
    Reply::Steps(steps)
}

/// `text` cut into deltas of `size` characters, so markers straddle them.
pub fn chunks(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size)
        .map(|chunk| chunk.iter().collect())
        .collect()
}

/// `text` streamed in deltas of `size` characters, a millisecond apart like
/// a model's, so each delta travels to the parser on its own (deltas that
/// queue up in the gateway are batched).
pub fn deltas(text: &str, size: usize) -> Reply {
    let pieces = chunks(text, size);
    let Reply::Steps(steps) = text_reply(&pieces.iter().map(String::as_str).collect::<Vec<_>>())
    else {
        unreachable!("text_reply streams")
    };
    let mut paced = Vec::with_capacity(steps.len() * 2);
    for step in steps {
        if !paced.is_empty() {
            paced.push(Step::Sleep(std::time::Duration::from_millis(1)));
        }
        paced.push(step);
    }
    Reply::Steps(paced)
}

/// A `finished` event for `text`.
pub fn finished(text: &str) -> Event {
    Event::Finished(Box::new(runner::Finished {
        stop_reason: runner::StopReason::EndTurn as i32,
        raw_stop_reason: "end_turn".into(),
        text: text.to_owned(),
        structured: None,
        usage: Some(runner::Usage {
            input_tokens: 120,
            output_tokens: 30,
            ..Default::default()
        }),
        iterations: 1,
        response_model: "scripted-test".into(),
        response_id: "resp_1".into(),
        history_turns_left_out: 0,
    }))
}

/// A request the runner received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The request.
    pub request: RunRequest,
    /// Its grpc-timeout.
    pub timeout: Option<Duration>,
    /// When it arrived.
    pub at: Instant,
}

#[derive(Debug, Default)]
struct Inner {
    replies: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<Seen>>,
    dropped_at: Mutex<Vec<Instant>>,
    /// When each turn's request arrived and its first text delta was sent,
    /// by turn id (the benchmark's clocks).
    clocks: Mutex<HashMap<String, TurnClock>>,
}

/// When a turn reached the runner and when the runner sent its first text.
#[derive(Debug, Clone, Copy)]
pub struct TurnClock {
    /// The `Run` request arrived.
    pub arrived: Instant,
    /// The first text delta was handed to the stream.
    pub first_text: Option<Instant>,
}

/// The fake runner; clones share state.
#[derive(Debug, Clone)]
pub struct FakeRunner {
    inner: Arc<Inner>,
    drops: watch::Sender<usize>,
}

impl Default for FakeRunner {
    fn default() -> Self {
        Self {
            inner: Arc::default(),
            drops: watch::channel(0).0,
        }
    }
}

impl FakeRunner {
    /// Queues the reply of the next call.
    pub fn push(&self, reply: Reply) {
        self.inner.replies.lock().expect("lock").push_back(reply);
    }

    /// The requests received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.inner.seen.lock().expect("lock").clone()
    }

    /// Waits until `count` streams were dropped by the gateway; returns
    /// when the last of them was noticed.
    pub async fn dropped(&self, count: usize) -> Instant {
        let mut rx = self.drops.subscribe();
        tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|n| *n >= count))
            .await
            .expect("the runner stream was not dropped within 10 s")
            .expect("watch open");
        self.inner.dropped_at.lock().expect("lock")[count - 1]
    }

    /// When a turn's request arrived and its first text was sent.
    pub fn clock(&self, turn_id: &str) -> Option<TurnClock> {
        self.inner
            .clocks
            .lock()
            .expect("lock")
            .get(turn_id)
            .copied()
    }

    /// Forgets the requests and clocks recorded so far.
    pub fn forget(&self) {
        self.inner.seen.lock().expect("lock").clear();
        self.inner.clocks.lock().expect("lock").clear();
    }

    /// How many streams were dropped so far.
    pub fn drop_count(&self) -> usize {
        *self.drops.borrow()
    }

    /// The tonic service.
    pub fn server(&self) -> AgentRunnerServer<Self> {
        AgentRunnerServer::new(self.clone())
    }

    fn record_drop(&self) {
        self.inner
            .dropped_at
            .lock()
            .expect("lock")
            .push(Instant::now());
        self.drops.send_modify(|n| *n += 1);
    }
}

#[tonic::async_trait]
impl AgentRunner for FakeRunner {
    type RunStream = ReceiverStream<Result<RunEvent, Status>>;
    type RunFencedStream = ReceiverStream<Result<RunEvent, Status>>;

    /// Plays the next reply like `Run`; it starts no tools, so it never
    /// asks for a decision.
    async fn run_fenced(
        &self,
        request: Request<tonic::Streaming<runner::RunFencedRequest>>,
    ) -> Result<Response<Self::RunFencedStream>, Status> {
        let metadata = request.metadata().clone();
        let mut messages = request.into_inner();
        let Some(runner::RunFencedRequest {
            message: Some(runner::run_fenced_request::Message::Start(mut start)),
        }) = messages.message().await?
        else {
            return Err(Status::invalid_argument("the first message is the request"));
        };
        // The files whose bytes follow, filled in order as the runner does
        // (what `seen` records is what a runner would have).
        let mut parts: Vec<u8> = Vec::new();
        for file in start
            .messages
            .iter_mut()
            .flat_map(|message| message.attachments.iter_mut())
            .filter(|file| file.data.is_empty() && file.size_bytes > 0)
        {
            let size = usize::try_from(file.size_bytes).expect("a size");
            while parts.len() < size {
                match messages.message().await? {
                    Some(runner::RunFencedRequest {
                        message: Some(runner::run_fenced_request::Message::AttachmentData(part)),
                    }) => parts.extend_from_slice(&part.data),
                    _ => return Err(Status::invalid_argument("a file's bytes ended early")),
                }
            }
            let rest = parts.split_off(size);
            file.data = std::mem::replace(&mut parts, rest);
        }
        let mut call = Request::new(start);
        *call.metadata_mut() = metadata;
        self.run(call).await
    }

    async fn list_tools(
        &self,
        _request: Request<parley_proto::runner::v1::ListToolsRequest>,
    ) -> Result<Response<parley_proto::runner::v1::ListToolsResponse>, Status> {
        Ok(Response::new(Default::default()))
    }

    async fn run(&self, request: Request<RunRequest>) -> Result<Response<Self::RunStream>, Status> {
        let timeout = parley_grpc::deadline::grpc_timeout(request.metadata());
        let request = request.into_inner();
        let turn_id = request.turn_id.clone();
        let arrived = Instant::now();
        self.inner.clocks.lock().expect("lock").insert(
            turn_id.clone(),
            TurnClock {
                arrived,
                first_text: None,
            },
        );
        self.inner.seen.lock().expect("lock").push(Seen {
            request,
            timeout,
            at: arrived,
        });
        let reply = self
            .inner
            .replies
            .lock()
            .expect("lock")
            .pop_front()
            .unwrap_or_else(|| text_reply(&["OK."]));
        let steps = match reply {
            Reply::Fail(status) => return Err(status),
            Reply::Steps(steps) => steps,
        };
        let (tx, rx) = mpsc::channel(16);
        let this = self.clone();
        tokio::spawn(async move {
            let mut seq = 0;
            let mut texted = false;
            for step in steps {
                match step {
                    Step::Send(event) => {
                        seq += 1;
                        if !texted && matches!(event, Event::TextDelta(_)) {
                            texted = true;
                            if let Some(clock) =
                                this.inner.clocks.lock().expect("lock").get_mut(&turn_id)
                            {
                                clock.first_text = Some(Instant::now());
                            }
                        }
                        if tx
                            .send(Ok(RunEvent {
                                seq,
                                event: Some(event),
                            }))
                            .await
                            .is_err()
                        {
                            this.record_drop();
                            return;
                        }
                    }
                    Step::Gate(gate) => {
                        tokio::select! {
                            () = gate.notified() => {}
                            () = tx.closed() => {
                                this.record_drop();
                                return;
                            }
                        }
                    }
                    Step::Sleep(pause) => {
                        tokio::select! {
                            () = tokio::time::sleep(pause) => {}
                            () = tx.closed() => {
                                this.record_drop();
                                return;
                            }
                        }
                    }
                    Step::Hang => {
                        tx.closed().await;
                        this.record_drop();
                        return;
                    }
                }
            }
            // Every step played: the stream ends with OK, as the real
            // runner's does after `finished` (dropping `tx` ends it).
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}
