//! The `parley.runner.v1.AgentRunner` gRPC service.
//!
//! `Run` converts and checks the request (every problem is a
//! [`RunError`], refused before anything streams), takes
//! a concurrency permit, and runs the turn in its own task, which sends
//! numbered events through a bounded channel. The response stream holds a
//! cancellation guard: when the client goes away tonic drops the stream, the
//! guard cancels the token, and the loop drops the provider request and the
//! running tools at once. The caller's `grpc-timeout` caps the turn.
//!
//! `RunFenced` runs a turn the same way from the first message of its
//! client's stream; the decisions that follow reach the turn's sink, which
//! asks for one before each round of tool calls
//! ([`EventSink::permit_dispatch`]).

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::{Duration, Instant},
};

use futures::Stream;
use parley_proto::runner::v1::{
    ListToolsRequest, ListToolsResponse, RunEvent, RunFencedRequest, RunRequest,
    agent_runner_server::AgentRunner, run_fenced_request,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::{CancellationToken, DropGuard};
use tonic::{Request, Response, Status};
use tracing::Instrument;

use crate::{
    agent_loop::Runner,
    allow::Allowed,
    convert,
    error::RunError,
    events::{DispatchDecision, Event, EventSink},
    prompts::Prompts,
    tool_sets::ToolSets,
    turn::Limits,
};

/// The service: the shared runner plus admission control.
#[derive(Debug, Clone)]
pub struct RunnerService {
    runner: Arc<Runner>,
    defaults: Limits,
    permits: Arc<Semaphore>,
    event_buffer: usize,
    /// System prompts shared by the turns that send the same one.
    prompts: Arc<Prompts>,
    /// Tool sets shared by the turns that declare the same tools.
    tool_sets: Arc<ToolSets>,
    /// The tool endpoints and models requests may name.
    allowed: Arc<Allowed>,
    /// The most bytes of files a `RunFenced` start may have follow it
    /// (the runner's `max_request_bytes`, as if they were inline).
    max_streamed_bytes: usize,
    /// How long a `RunFenced` call may take to send its start and its
    /// files' bytes (`request_read_timeout`).
    read_timeout: Duration,
}

impl RunnerService {
    /// A service running turns on `runner`, with `defaults` for unset
    /// limits, at most `max_concurrent_runs` turns at once and
    /// `event_buffer` events buffered per turn. Requests may name no
    /// ToolService endpoint and only the providers' default models until
    /// [`Self::with_allowed`] says otherwise.
    pub fn new(
        runner: Arc<Runner>,
        defaults: Limits,
        max_concurrent_runs: usize,
        event_buffer: usize,
    ) -> Self {
        Self {
            defaults,
            permits: Arc::new(Semaphore::new(max_concurrent_runs.max(1))),
            event_buffer: event_buffer.max(1),
            prompts: Arc::default(),
            tool_sets: Arc::default(),
            allowed: Arc::new(Allowed::defaults_of(&runner.providers)),
            max_streamed_bytes: crate::config::DEFAULT_MAX_REQUEST_BYTES,
            read_timeout: Duration::from_secs(30),
            runner,
        }
    }

    /// With `max` as the most bytes of files a `RunFenced` start may have
    /// follow it.
    pub fn with_max_streamed_bytes(mut self, max: usize) -> Self {
        self.max_streamed_bytes = max;
        self
    }

    /// With `timeout` as how long a `RunFenced` call may take to send its
    /// start and its files' bytes.
    pub fn with_request_read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = timeout;
        self
    }

    /// With `allowed` as the tool endpoints and models requests may name.
    pub fn with_allowed(mut self, allowed: Allowed) -> Self {
        self.allowed = Arc::new(allowed);
        self
    }
}

/// The stream of one turn's events; dropping it cancels the turn.
pub struct RunEventStream {
    rx: mpsc::Receiver<Box<Event>>,
    _cancel_on_drop: DropGuard,
    /// The turn's admission (`max_concurrent_runs`), shared with its task.
    _admitted: Arc<OwnedSemaphorePermit>,
    /// The currency of the costs in the turn's usage ("" when unpriced).
    currency: Arc<str>,
}

impl Stream for RunEventStream {
    type Item = Result<RunEvent, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx
            .poll_recv(cx)
            .map(|event| event.map(|event| Ok(convert::event::to_proto(*event, &self.currency))))
    }
}

/// The most memory reserved for a streamed file before its bytes arrive.
const RECEIVE_CHUNK: usize = 1 << 20;

/// Fills the files `start` sent without their bytes
/// (`Attachment.size_bytes`) from the `attachment_data` messages that
/// follow it: in order, each exactly its size, all of them together within
/// `max` bytes.
async fn receive_files(
    start: &mut RunRequest,
    incoming: &mut tonic::Streaming<RunFencedRequest>,
    max: usize,
) -> Result<(), Status> {
    let invalid = |field: String, description: String| {
        Status::from(RunError::Invalid(vec![crate::turn::Violation {
            field,
            description,
        }]))
    };
    let mut total: u64 = 0;
    let mut pending: Option<Vec<u8>> = None;
    for (i, message) in start.messages.iter_mut().enumerate() {
        for (j, file) in message.attachments.iter_mut().enumerate() {
            if !file.data.is_empty() || file.size_bytes == 0 {
                continue;
            }
            let field = format!("messages[{i}].attachments[{j}].size_bytes");
            total = total.saturating_add(file.size_bytes);
            if total > max as u64 {
                return Err(invalid(
                    field,
                    format!(
                        "the files that follow the request add up to more than max_request_bytes ({max})"
                    ),
                ));
            }
            let size = usize::try_from(file.size_bytes).unwrap_or(usize::MAX);
            // Grown as the bytes arrive: a size claimed is not yet memory owed.
            let mut data = Vec::with_capacity(size.min(RECEIVE_CHUNK));
            while data.len() < size {
                let part = match pending.take() {
                    Some(part) => part,
                    None => match incoming.message().await? {
                        Some(RunFencedRequest {
                            message: Some(run_fenced_request::Message::AttachmentData(part)),
                        }) => part.data,
                        _ => {
                            return Err(invalid(
                                field,
                                format!(
                                    "the file's bytes ended after {} of {size}: attachment_data must follow the start",
                                    data.len()
                                ),
                            ));
                        }
                    },
                };
                let room = size - data.len();
                if part.len() > room {
                    // The rest begins the next file.
                    data.extend_from_slice(&part[..room]);
                    pending = Some(part[room..].to_vec());
                } else {
                    data.extend_from_slice(&part);
                }
            }
            file.data = data;
        }
    }
    if pending.is_some_and(|rest| !rest.is_empty()) {
        return Err(invalid(
            "attachment_data".into(),
            "more bytes than the files' size_bytes".into(),
        ));
    }
    Ok(())
}

/// Decisions a fenced turn's client may send ahead of the turn reading
/// them (it sends one per announced round).
const DECISIONS_AHEAD: usize = 4;

impl RunnerService {
    /// Starts a turn of `request` (after its admission `permit`) whose
    /// events go to the returned stream; `decisions`, when given, must
    /// allow each round of tool calls.
    fn start(
        &self,
        permit: Arc<OwnedSemaphorePermit>,
        deadline: Option<Duration>,
        mut request: RunRequest,
        decisions: Option<mpsc::Receiver<DispatchDecision>>,
    ) -> Result<RunEventStream, Status> {
        // Nothing the runner may not reach: refused before the tools are
        // prepared, so no tool server is dialled and no model called.
        self.allowed.check_tools(&request.tools)?;
        // The tools first: a page's turns mostly declare the same ones, and
        // a kept set skips their conversion (see `tool_sets`).
        let tools = self
            .tool_sets
            .prepare(std::mem::take(&mut request.tools), &self.runner.tools);
        let describe_unsupported = request.describe_unsupported_attachments;
        let turn = convert::request::turn_from_request(request, &self.defaults, deadline);
        let (mut turn, tools) = match (turn, tools) {
            (Ok(turn), Ok(tools)) => (turn, tools),
            (Err(mut violations), Err(more)) => {
                violations.extend(more);
                return Err(RunError::Invalid(violations).into());
            }
            (Err(violations), Ok(_)) | (Ok(_), Err(violations)) => {
                return Err(RunError::Invalid(violations).into());
            }
        };
        // A route's name becomes its models (`[models.NAME]`).
        self.allowed.routes.expand(&mut turn);
        self.allowed.check_models(
            &self.runner.providers,
            std::iter::once(&turn.model).chain(&turn.fallbacks),
        )?;
        // Files only to models that take them (before any call).
        crate::attachments::fit(
            &mut turn,
            &self.allowed.routes,
            &self.runner.providers,
            describe_unsupported,
        )?;
        // Of the models as called (the default provider and model filled in).
        let called: Vec<_> = std::iter::once(&turn.model)
            .chain(&turn.fallbacks)
            .map(|model| {
                self.runner
                    .providers
                    .resolve(model.clone())
                    .unwrap_or_else(|_| model.clone())
            })
            .collect();
        turn.windows = self
            .allowed
            .routes
            .windows(called.iter(), &self.runner.providers);
        turn.system = self.prompts.share(&turn.system);
        let turn_id = turn.turn_id.clone();
        let prepared = self.runner.prepare_with(turn, tools)?;
        let (tx, rx) = mpsc::channel(self.event_buffer);
        let sink = match decisions {
            Some(decisions) => EventSink::fenced(tx, decisions),
            None => EventSink::new(tx),
        };
        let cancel = CancellationToken::new();
        let runner = self.runner.clone();
        let task_cancel = cancel.clone();
        tracing::info!(turn_id = %turn_id, model = %prepared.candidates()[0].model, "turn started");
        // In the call's span, so the turn's spans are children of the RPC's.
        // The turn moves in boxed: the task keeps what it captured for the
        // turn's whole life, and a pointer costs 8 bytes where the prepared
        // turn costs about 600 (its storage is freed once the turn takes it).
        let prepared = Box::new(prepared);
        tokio::spawn(
            {
                let permit = permit.clone();
                async move {
                    let _admitted = permit;
                    runner.run(*prepared, sink, task_cancel).await;
                }
            }
            .in_current_span(),
        );
        Ok(RunEventStream {
            rx,
            _cancel_on_drop: cancel.drop_guard(),
            _admitted: permit,
            currency: self.runner.prices.wire_currency(),
        })
    }

    /// The admission of a new turn: refused at once when the runner is
    /// full. It is held by the turn's task and by its stream, so it counts
    /// until the turn has ended and its client is done reading.
    fn admit(&self) -> Result<Arc<OwnedSemaphorePermit>, RunError> {
        Ok(Arc::new(
            self.permits
                .clone()
                .try_acquire_owned()
                .map_err(|_| RunError::Busy)?,
        ))
    }
}

#[tonic::async_trait]
impl AgentRunner for RunnerService {
    type RunStream = RunEventStream;
    type RunFencedStream = RunEventStream;

    async fn run(&self, request: Request<RunRequest>) -> Result<Response<Self::RunStream>, Status> {
        // A full runner refuses first, before converting the request.
        let permit = self.admit()?;
        let deadline = parley_grpc::deadline::grpc_timeout(request.metadata());
        Ok(Response::new(self.start(
            permit,
            deadline,
            request.into_inner(),
            None,
        )?))
    }

    async fn run_fenced(
        &self,
        request: Request<tonic::Streaming<RunFencedRequest>>,
    ) -> Result<Response<Self::RunFencedStream>, Status> {
        let permit = self.admit()?;
        let deadline = parley_grpc::deadline::grpc_timeout(request.metadata());
        let mut incoming = request.into_inner();
        // The admission is held from here: a client that stalls before its
        // start or inside its files' bytes gives it back at this bound.
        let bound = deadline.map_or(self.read_timeout, |d| d.min(self.read_timeout));
        let called = Instant::now();
        let start = tokio::time::timeout(bound, async {
            let Some(RunFencedRequest {
                message: Some(run_fenced_request::Message::Start(mut start)),
            }) = incoming.message().await?
            else {
                return Err(Status::from(RunError::Invalid(vec![crate::turn::Violation {
                    field: "start".into(),
                    description: "the first message must be the RunRequest".into(),
                }])));
            };
            receive_files(&mut start, &mut incoming, self.max_streamed_bytes).await?;
            Ok(start)
        })
        .await
        .map_err(|_| {
            Status::deadline_exceeded(format!(
                "the request and its files' bytes did not arrive within {bound:?} (request_read_timeout or the call's deadline)"
            ))
        })??;
        // The turn has what is left of the call's deadline.
        let deadline = deadline.map(|d| d.saturating_sub(called.elapsed()));
        let (decided, decisions) = mpsc::channel(DECISIONS_AHEAD);
        // Until the client closes its side or the turn no longer reads.
        tokio::spawn(async move {
            while let Ok(Some(message)) = incoming.message().await {
                if let Some(run_fenced_request::Message::Decision(decision)) = message.message {
                    let decision = DispatchDecision {
                        iteration: decision.iteration,
                        allowed: decision.allowed,
                    };
                    if decided.send(decision).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Response::new(self.start(
            permit,
            deadline,
            start,
            Some(decisions),
        )?))
    }

    async fn list_tools(
        &self,
        _request: Request<ListToolsRequest>,
    ) -> Result<Response<ListToolsResponse>, Status> {
        Ok(Response::new(self.runner.tools.mcp.list()))
    }
}
