//! One turn, end to end, in its own task: rebuild the history, build the
//! prompt for the page the request resolved to, run the model through the
//! runner while relaying its events, parse the answer, store it, send
//! `complete`.
//!
//! The user message was stored before this task started. Whatever happens
//! here (success, runner error, cancel, deadline, shutdown) the turn ends
//! with a stored assistant message and a `complete` event; it never just
//! stops. Its events go to its [`Journal`], which stores them as its
//! followers deliver them; the last ones (`error`, `complete`) are stored
//! with the answer in one transaction, so `complete` with `success = true`
//! reaches a client only once the turn is committed. When the store fails,
//! the turn ends with a retryable `STORE_UNAVAILABLE` instead.
//!
//! The turn's task lives as long as the turn, and a future is as large as
//! the largest state it can be in: the steps that run once (the history
//! read, opening the runner and parser calls, the final parse, storing the
//! answer) are boxed, so their large tonic and sqlx futures take memory
//! only while they run, not for the whole stream. What such a step
//! consumes (the runner request) is built inside it: a future keeps room
//! for a local until its scope ends, even after the value moved out.

use std::sync::Arc;

use parley_proto::{
    gateway::v1::{self as gw, chat_event::Event},
    json,
    parser::v1::StructuredResult,
    runner::v1 as runner,
};
use tokio::time::Instant;
use tracing::Instrument;

use super::{
    Shared, TurnSpec, after,
    cleaner::TextCleaner,
    history::{self, History},
    observe,
    outcome::{self, CompleteParts, Ending, Failure},
    parse,
    pause::{self, Continuation, Resume},
    recover,
    relay::{self, Fence, RunEnd},
    usage::{add_runs, take_run_total},
};
use crate::{
    convert::{self, TurnIds},
    durable::{
        journal::{Fault, Journal},
        manager::{StopCause, TurnSlot},
    },
    prompt::{PromptInput, build_system_prompt_parts, prompt_cache_key},
    store::{EventBody, FinishTurn, Pause, TurnState, millis},
};

/// What the model call produced, however it ended.
struct Produced {
    ending: Ending,
    parsed: parley_proto::parser::v1::ParseResponse,
    fallback: Option<String>,
    reasoning: String,
    tools: Vec<gw::ToolRecord>,
    structured: Option<StructuredResult>,
    usage: Option<gw::Usage>,
    /// The model's raw text of this run.
    raw: String,
    /// Set when the runner paused the turn instead of ending it.
    paused: Option<Box<runner::InputRequired>>,
    /// What the work after the turn needs ([`after`]).
    after: after::Earlier,
}

impl Produced {
    /// A turn that ended before the model produced anything.
    fn empty(ending: Ending) -> Self {
        Self {
            ending,
            parsed: Default::default(),
            fallback: None,
            reasoning: String::new(),
            tools: Vec::new(),
            structured: None,
            usage: None,
            raw: String::new(),
            paused: None,
            after: after::Earlier::default(),
        }
    }

    /// What a paused turn had produced before its pause, ended as
    /// `ending` without another model call: its waiting calls are recorded
    /// as not run, for `why`.
    fn closed(continuation: &Continuation, ending: Ending, why: &str) -> Self {
        let before = continuation.before();
        let mut tools = before.tools;
        tools.extend(pause::unanswered(continuation.pending(), why));
        Self {
            ending,
            parsed: before.parsed,
            fallback: None,
            reasoning: before.reasoning,
            tools,
            structured: None,
            usage: before.usage,
            raw: before.raw_text,
            paused: None,
            after: after::Earlier::default(),
        }
    }
}

/// Why a stopped turn stopped: its events could not be stored, or it was
/// asked to.
fn stopped(slot: &TurnSlot, journal: &Journal) -> Ending {
    match journal.fault() {
        Some(Fault::Store) => return Ending::Failed(recover::store_unavailable()),
        Some(Fault::Lost) => return Ending::Failed(recover::replica_lost()),
        None => {}
    }
    match slot.stop_cause() {
        Some(StopCause::Cancelled | StopCause::Superseded | StopCause::Abandoned) => {
            Ending::Cancelled
        }
        Some(StopCause::Shutdown) | None => Ending::Failed(Failure::new(
            "SHUTDOWN",
            "the gateway shut down while the turn was running",
            true,
        )),
    }
}

fn deadline_failure() -> Failure {
    Failure::new(
        "DEADLINE_EXCEEDED",
        "the turn's deadline passed before the answer was complete",
        true,
    )
}

/// Runs the turn and always ends it with a stored answer and `complete`,
/// or with a stored pause.
pub async fn run(shared: Arc<Shared>, spec: TurnSpec, slot: TurnSlot, journal: Arc<Journal>) {
    let ids = TurnIds {
        conversation_id: spec.start.conversation_id.clone(),
        turn_id: spec.turn_id.clone(),
    };
    journal.stop_on_fault(slot.cancel_token().clone());
    let started = if spec.resume.is_some() {
        "Turn continued"
    } else {
        "Turn started"
    };
    journal.push(ids.status(gw::TurnPhase::Started, started));
    let mut produced = produce(&shared, &spec, &slot, &journal, &ids).await;
    if let Some(resume) = &spec.resume {
        produced = Box::pin(after_pause(&shared, &spec, resume, produced)).await;
    }
    let ended = Ended {
        slot,
        journal: &journal,
    };
    match produced.paused.take() {
        Some(input) => Box::pin(store_pause(&shared, &spec, ended, produced, *input)).await,
        None => Box::pin(finish(&shared, &spec, ended, produced)).await,
    }
}

/// Ends a paused turn that this replica took back without running it
/// again (it expired, the user moved on or cancelled it): stored and
/// `complete` like any end.
pub async fn close(
    shared: Arc<Shared>,
    spec: TurnSpec,
    ended: (TurnSlot, Arc<Journal>),
    continuation: Continuation,
    closing: (Ending, &str),
) {
    let (slot, journal) = ended;
    let (ending, why) = closing;
    let produced = Produced::closed(&continuation, ending, why);
    let ended = Ended {
        slot,
        journal: &journal,
    };
    Box::pin(finish(&shared, &spec, ended, produced)).await;
}

/// A continued turn's answer: what it produced before its pause, then
/// this run's. A text written on both sides is parsed again whole.
async fn after_pause(
    shared: &Shared,
    spec: &TurnSpec,
    resume: &Resume,
    mut produced: Produced,
) -> Produced {
    let before = &resume.before;
    if !before.raw_text.is_empty() {
        let whole = format!("{}{}", before.raw_text, produced.raw);
        let profile = spec.start.resolved.parse_profile();
        let (parsed, fallback) =
            Box::pin(parse::parse_text(&shared.upstreams, &whole, &profile)).await;
        produced.parsed = parsed;
        produced.fallback = fallback.or(produced.fallback);
        produced.raw = whole;
    }
    let mut tools = before.tools.clone();
    tools.append(&mut produced.tools);
    produced.tools = tools;
    produced.reasoning = format!("{}{}", before.reasoning, produced.reasoning);
    produced.usage = add_runs(before.usage.clone(), produced.usage);
    produced
}

/// Everything up to the parsed answer.
async fn produce(
    shared: &Shared,
    spec: &TurnSpec,
    slot: &TurnSlot,
    sink: &Journal,
    ids: &TurnIds,
) -> Produced {
    let stop = slot.cancel_token().clone();
    let page = &spec.start.resolved;
    // A continued turn sends the request of its pause.
    let history = if spec.resume.is_some() {
        None
    } else {
        match Box::pin(load_history(shared, spec))
            .instrument(tracing::info_span!("store.load_history"))
            .await
        {
            Ok(history) => Some(history),
            Err(failure) => return Produced::empty(Ending::Failed(failure)),
        }
    };
    let mut after = history
        .as_ref()
        .map(|history| history.after.clone())
        .unwrap_or_default();
    let profile = page.parse_profile();
    // Boxed, like the other once-only steps; the request is built inside,
    // so no moved-from copy of it stays in this future's state while the
    // turn streams (about 900 bytes per turn).
    let opened = Box::pin(open_calls(shared, spec, &stop, history, profile.clone())).await;
    let (cleaner, stream, fence) = match opened {
        None => return Produced::empty(stopped(slot, sink)),
        Some(Err(failure)) => return Produced::empty(Ending::Failed(failure)),
        Some(Ok(opened)) => opened,
    };

    let relayed = relay::relay(
        stream,
        cleaner,
        sink,
        ids,
        &stop,
        relay::Bounds {
            deadline: spec.start.deadline,
            max_answer_bytes: shared.config.max_answer_bytes,
        },
        fence.as_ref(),
    )
    .await;
    let mut cleaned = Box::pin(relayed.cleaner.finish()).await;
    for event in std::mem::take(&mut cleaned.events) {
        sink.push(event);
    }
    let partial_structured = (!relayed.structured.is_empty()).then(|| StructuredResult {
        value: None,
        raw: relayed.structured.clone(),
        valid: false,
        error: "the structured answer is incomplete".into(),
    });
    let mut usage = relayed.usage;
    if let RunEnd::Finished(finished) = &relayed.end {
        after.left_out = finished.history_turns_left_out;
    }
    let (ending, structured) = match relayed.end {
        RunEnd::Finished(finished) => {
            if let Some(total) = &finished.usage {
                take_run_total(&mut usage, total);
            }
            usage.model_calls = usage.model_calls.max(finished.iterations);
            if !finished.response_model.is_empty() {
                usage.model = finished.response_model.clone();
            }
            let stop_reason = outcome::stop_reason(&finished);
            // `finished.text` is the concatenation of the deltas, so the
            // stream's final parse is already the parse of the whole answer;
            // only when they differ is it parsed again.
            if finished.text != cleaned.raw {
                let (parsed, fallback) = Box::pin(parse::parse_text(
                    &shared.upstreams,
                    &finished.text,
                    &profile,
                ))
                .await;
                for event in cleaned.shown.settle(&parsed) {
                    sink.push(event);
                }
                return Produced {
                    ending: Ending::Completed { stop_reason },
                    parsed,
                    fallback: fallback.or(cleaned.fallback),
                    reasoning: relayed.reasoning,
                    tools: relayed.tools,
                    structured: finished.structured,
                    usage: Some(usage),
                    raw: finished.text,
                    paused: None,
                    after,
                };
            }
            (Ending::Completed { stop_reason }, finished.structured)
        }
        RunEnd::Paused(input) => {
            if let Some(total) = &input.usage {
                take_run_total(&mut usage, total);
            }
            usage.model_calls = usage.model_calls.max(1);
            return Produced {
                // Until the pause is stored.
                ending: Ending::Completed {
                    stop_reason: "awaiting_input".into(),
                },
                parsed: cleaned.response,
                fallback: cleaned.fallback,
                reasoning: relayed.reasoning,
                tools: relayed.tools,
                structured: None,
                usage: (usage.model_calls > 0 || usage.input_tokens > 0).then_some(usage),
                raw: cleaned.raw,
                paused: Some(input),
                after: after::Earlier::default(),
            };
        }
        RunEnd::Failed(error) => (
            Ending::Failed(Failure::from_runner(&error)),
            partial_structured,
        ),
        RunEnd::Broken(detail) => {
            tracing::warn!(%detail, "the runner's stream broke mid-turn");
            (
                Ending::Failed(Failure::new(
                    "RUNNER_UNAVAILABLE",
                    "the agent-runner stopped answering during the turn",
                    true,
                )),
                partial_structured,
            )
        }
        RunEnd::Stopped => (stopped(slot, sink), partial_structured),
        RunEnd::DeadlineExceeded => (Ending::Failed(deadline_failure()), partial_structured),
        RunEnd::AnswerTooLarge => (
            Ending::Failed(Failure::answer_too_large(shared.config.max_answer_bytes)),
            partial_structured,
        ),
        RunEnd::LeaseLost => (
            Ending::Failed(Failure::new(
                "LEASE_LOST",
                "this gateway replica lost the turn before its next tool calls, which did not start",
                true,
            )),
            partial_structured,
        ),
    };
    Produced {
        ending,
        parsed: cleaned.response,
        fallback: cleaned.fallback,
        reasoning: relayed.reasoning,
        tools: relayed.tools,
        structured,
        usage: (usage.model_calls > 0 || usage.input_tokens > 0).then_some(usage),
        raw: cleaned.raw,
        paused: None,
        after,
    }
}

/// Messages of a `RunFenced` call that may wait to be sent: the request and
/// a decision (the runner asks for one at a time).
const FENCE_MESSAGES: usize = 2;

/// The runner call of a turn and, for a turn with tools, its fence.
type Opened = (
    Box<TextCleaner>,
    tonic::Streaming<runner::RunEvent>,
    Option<Fence>,
);

/// The system prompt and the runner request for the turn; opens the parser
/// stream and the runner call together: `Run` for a turn without tools or
/// with built-in tools only, `RunFenced` (the runner asks before each round
/// of tool calls, see [`relay::Fence`]) for one with tools that can have
/// effects (gRPC, MCP). `None` when the turn was stopped
/// first.
async fn open_calls(
    shared: &Shared,
    spec: &TurnSpec,
    stop: &tokio_util::sync::CancellationToken,
    history: Option<History>,
    profile: parley_proto::parser::v1::ParseProfile,
) -> Option<Result<Opened, Failure>> {
    let (request, locations) = match (history, &spec.resume) {
        (Some(mut history), _) => {
            let locations = std::mem::take(&mut history.locations);
            (first_request(shared, spec, history), locations)
        }
        (None, Some(resume)) => (resume.request.clone(), Default::default()),
        (None, None) => (
            first_request(
                shared,
                spec,
                History::first_message(&spec.start.message, &[]),
            ),
            Default::default(),
        ),
    };
    open(shared, spec, stop, request, &locations, profile).await
}

/// The runner request of a turn's first run: the system prompt for its
/// page, its history and tools.
fn first_request(shared: &Shared, spec: &TurnSpec, history: History) -> runner::RunRequest {
    let page = &spec.start.resolved;
    let stream_id = Some(spec.start.page.stream_id.as_str()).filter(|id| !id.is_empty());
    let system_prompt = tracing::info_span!("prompt.build").in_scope(|| {
        build_system_prompt_parts(&PromptInput {
            registry: &shared.registry,
            page,
            stream_id,
            state: spec.start.page.state.as_ref(),
            history_payloads: &history.payloads,
            response_schema: spec.start.response_schema.as_ref(),
            attachments: &spec.start.attachments,
        })
    });
    let mut system_prompt = system_prompt;
    if let Some(summary) = &history.after.summary {
        after::add_summary(&mut system_prompt.text, summary);
    }
    let mut tools = page.runner_tools();
    tools.extend(spec.start.client_tools.iter().cloned());
    runner::RunRequest {
        system_prompt_stable_bytes: u32::try_from(system_prompt.stable_bytes).unwrap_or(0),
        prompt_cache_key: prompt_cache_key(&spec.start.page.page, &spec.start.conversation_id),
        system_prompt: system_prompt.text,
        messages: history.messages,
        tools,
        model: spec.start.model.clone(),
        fallbacks: Vec::new(),
        output_schema: spec
            .start
            .response_schema
            .as_ref()
            .map(json::to_struct_wrapped),
        output_schema_name: String::new(),
        limits: None,
        conversation_id: spec.start.conversation_id.clone(),
        turn_id: spec.turn_id.clone(),
        user_id: spec.start.principal.subject.clone(),
        user_issuer: spec.start.principal.issuer.clone(),
        tenant: spec.start.principal.tenant.clone().unwrap_or_default(),
        text_tool_calls: shared.config.text_tool_calls,
        context: spec.start.page.state.as_ref().map(json::to_struct_wrapped),
        // The request or the page turns it on.
        mid_answer_failover: spec.start.mid_answer_failover || page.mid_answer_failover,
        describe_unsupported_attachments: page.describe_unsupported_attachments,
        decisions: Vec::new(),
        iterations_done: 0,
    }
}

/// Opens the parser stream and the runner call for `request`.
async fn open(
    shared: &Shared,
    spec: &TurnSpec,
    stop: &tokio_util::sync::CancellationToken,
    request: runner::RunRequest,
    locations: &std::collections::HashMap<String, Option<String>>,
    profile: parley_proto::parser::v1::ParseProfile,
) -> Option<Result<Opened, Failure>> {
    let page = &spec.start.resolved;
    // The parser stream and the runner call open together.
    let timeout = spec
        .start
        .deadline
        .saturating_duration_since(Instant::now());
    let mut runner_client = shared.upstreams.runner.clone();
    // Files go after the request, over the fenced call.
    let files = streamed_files(&request, locations);
    // A fence costs a bidirectional call and a task on the runner: only a
    // turn whose tools can have effects, or that sends files, pays for it.
    let (fence, call) = if !page.has_tools_with_effects() && files.is_empty() {
        let mut call = tonic::Request::new(request);
        call.set_timeout(timeout);
        (
            None,
            futures::future::Either::Left(async move { runner_client.run(call).await }),
        )
    } else {
        let (decisions, messages) = tokio::sync::mpsc::channel(FENCE_MESSAGES);
        // The channel is new: there is room for the request.
        let _ = decisions.try_send(runner::RunFencedRequest {
            message: Some(runner::run_fenced_request::Message::Start(request)),
        });
        if !files.is_empty() {
            let sender = decisions.clone();
            let (blobs, stop) = (shared.blobs.clone(), stop.clone());
            tokio::spawn(async move {
                if let Err(error) = stream_files(&blobs, files, &sender).await {
                    tracing::error!(%error, "cannot send a file to the runner; the turn stops");
                    stop.cancel();
                }
            });
        }
        let mut call = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(messages));
        call.set_timeout(timeout);
        let fence = Fence {
            decisions,
            store: shared.store.clone(),
            replica: shared.replica.clone(),
            lease_ttl_ms: millis(shared.config.lease_ttl),
        };
        (
            Some(fence),
            futures::future::Either::Right(async move { runner_client.run_fenced(call).await }),
        )
    };
    tokio::select! {
        biased;
        () = stop.cancelled() => None,
        () = tokio::time::sleep_until(spec.start.deadline) => Some(Err(deadline_failure())),
        (cleaner, response) = async {
            tokio::join!(TextCleaner::open(&shared.upstreams, profile), call)
        } => Some(match response {
            // Boxed: the cleaner (about 1 KB) moves through the relay and
            // its result, and the turn's task need only hold a pointer.
            Ok(response) => Ok((Box::new(cleaner), response.into_inner(), fence)),
            Err(status) => {
                tracing::warn!(code = ?status.code(), detail = %status.message(), "runner call failed");
                Err(Failure::from_runner_status(&status))
            }
        }),
    }
}

async fn load_history(shared: &Shared, spec: &TurnSpec) -> Result<History, Failure> {
    let mut history = earlier_turns(shared, spec).await?;
    if !history.files.is_empty() {
        attach_files(shared, &mut history).await?;
    }
    Ok(history)
}

/// Gives the user messages the files the history sends with them (the new
/// message's, and the latest earlier turns'), without their bytes: the
/// runner call streams those after the request ([`stream_files`]), so
/// the gateway never holds a file whole. A file deleted since (with the
/// conversation it was first sent in) is named instead.
async fn attach_files(shared: &Shared, history: &mut History) -> Result<(), Failure> {
    let ids: Vec<&str> = history
        .files
        .iter()
        .flat_map(|(_, refs)| refs.iter().map(|file| file.id.as_str()))
        .collect();
    let locations = shared
        .store
        .attachment_locations(&ids)
        .await
        .map_err(store_failure)?;
    for (index, refs) in std::mem::take(&mut history.files) {
        let mut files = Vec::with_capacity(refs.len());
        let mut gone = String::new();
        for file in refs {
            if !locations.contains_key(&file.id) || file.size_bytes == 0 {
                gone.push_str(&format!(
                    "\n[attached: {}, {}, no longer stored]",
                    file.name, file.media_type
                ));
                continue;
            }
            files.push(runner::Attachment {
                name: file.name,
                media_type: file.media_type,
                data: Vec::new(),
                size_bytes: file.size_bytes,
                id: file.id,
            });
        }
        if let Some(message) = history.messages.get_mut(index) {
            message.attachments = files;
            message.text.push_str(&gone);
        }
    }
    history.locations = locations;
    Ok(())
}

/// A file `request` sends without its bytes: its id, its size, and where
/// its bytes are when the history already asked the store.
struct StreamedFile {
    id: String,
    size: u64,
    location: Option<Option<String>>,
}

/// The files `request` sends without their bytes, in order, with their
/// `locations` as far as known.
fn streamed_files(
    request: &runner::RunRequest,
    locations: &std::collections::HashMap<String, Option<String>>,
) -> Vec<StreamedFile> {
    request
        .messages
        .iter()
        .flat_map(|message| &message.attachments)
        .filter(|file| file.data.is_empty() && file.size_bytes > 0)
        .map(|file| StreamedFile {
            id: file.id.clone(),
            size: file.size_bytes,
            location: locations.get(&file.id).cloned(),
        })
        .collect()
}

/// Sends the bytes of `files` to the runner after the fenced call's start,
/// a stored chunk at a time (the channel and HTTP/2 flow control hold the
/// pace): `attachment_data` messages, in order. Ends early, without error,
/// when the call is gone.
async fn stream_files(
    blobs: &crate::blobs::Blobs,
    files: Vec<StreamedFile>,
    sender: &tokio::sync::mpsc::Sender<runner::RunFencedRequest>,
) -> Result<(), crate::store::StoreError> {
    use futures::StreamExt as _;
    for file in files {
        // A continued turn's request did not come from a history just read.
        let location = match file.location {
            Some(location) => location,
            None => blobs
                .store()
                .attachment_location(&file.id)
                .await?
                .ok_or_else(|| crate::store::StoreError::AttachmentGone(file.id.clone()))?,
        };
        let mut chunks = blobs.read(&file.id, location.as_deref(), file.size).await?;
        while let Some(chunk) = chunks.next().await {
            let message = runner::RunFencedRequest {
                message: Some(runner::run_fenced_request::Message::AttachmentData(
                    runner::AttachmentData { data: chunk? },
                )),
            };
            if sender.send(message).await.is_err() {
                return Ok(());
            }
        }
    }
    Ok(())
}

fn store_failure(error: crate::store::StoreError) -> Failure {
    tracing::error!(%error, "cannot read the conversation history");
    Failure::new(
        "STORE_UNAVAILABLE",
        "the conversation history could not be read",
        true,
    )
}

/// The history the model sees before the new message, and the message.
async fn earlier_turns(shared: &Shared, spec: &TurnSpec) -> Result<History, Failure> {
    if spec.new_conversation {
        return Ok(History::first_message(
            &spec.start.message,
            &spec.start.attachments,
        ));
    }
    let owner = spec.start.principal.owner();
    let conversation = &spec.start.conversation_id;
    let max_turns = shared.config.history_max_turns;
    let (turns, events) = if spec.branched {
        // The turn's own branch, up from it: no sibling, no other branch.
        shared
            .store
            .branch_history(owner, conversation, &spec.turn_id, max_turns)
            .await
            .map_err(store_failure)?
    } else {
        let events = shared
            .store
            .recent_events(owner, conversation, max_turns)
            .await
            .map_err(store_failure)?;
        let turns = shared
            .store
            .recent_turns(owner, conversation, max_turns)
            .await
            .map_err(store_failure)?;
        (turns, events)
    };
    if shared.config.history_strategy != crate::config::HistoryStrategy::Summarize {
        return Ok(rebuild(shared, &events, &turns));
    }
    // The newest summary of this branch stands for the turns it covers.
    let (turns, events, summary) = match branch_summary(shared, spec, &turns).await? {
        Some(summary) => {
            let turns: Vec<_> = turns
                .into_iter()
                .filter(|turn| turn.turn_index > summary.turn_index)
                .collect();
            let kept: std::collections::HashSet<&str> =
                turns.iter().map(|turn| turn.id.as_str()).collect();
            let events: Vec<_> = events
                .into_iter()
                .filter(|event| kept.contains(event.turn_id.as_str()))
                .collect();
            (turns, events, Some(summary.text))
        }
        None => (turns, events, None),
    };
    let mut history = rebuild(shared, &events, &turns);
    history.after = after::Earlier {
        turns: turns
            .iter()
            .filter(|turn| turn.id != spec.turn_id)
            .map(|turn| (turn.id.clone(), turn.turn_index))
            .collect(),
        summary,
        left_out: 0,
    };
    Ok(history)
}

/// The history of `turns` and their `events`, within the byte budget.
fn rebuild(
    shared: &Shared,
    events: &[crate::store::StoredEvent],
    turns: &[crate::store::TurnRecord],
) -> History {
    history::rebuild_with(
        events,
        turns,
        shared.config.history_max_bytes,
        history::FileWindow {
            turns: shared.config.history_attachment_turns as usize,
            max_bytes: shared.attachments.max_message_bytes,
        },
    )
}

/// The newest stored summary on the branch of `spec`'s turn (`turns`, its
/// latest turns, read), if any.
async fn branch_summary(
    shared: &Shared,
    spec: &TurnSpec,
    turns: &[crate::store::TurnRecord],
) -> Result<Option<crate::store::summaries::Summary>, Failure> {
    let owner = spec.start.principal.owner();
    let conversation = &spec.start.conversation_id;
    let summaries = shared
        .store
        .summaries(owner, conversation)
        .await
        .map_err(store_failure)?;
    if summaries.is_empty() {
        return Ok(None);
    }
    let own = turns
        .iter()
        .find(|turn| turn.id == spec.turn_id)
        .map_or(u32::MAX, |turn| turn.turn_index);
    if !spec.branched {
        // One branch: every older turn is on it.
        return Ok(summaries.into_iter().find(|s| s.turn_index < own));
    }
    let tree = shared
        .store
        .turn_tree(owner, conversation)
        .await
        .map_err(store_failure)?;
    let Some(position) = tree.position(&spec.turn_id) else {
        return Ok(None);
    };
    let branch: std::collections::HashSet<&str> = tree
        .branch(position)
        .into_iter()
        .map(|p| tree.turn(p).id.as_str())
        .collect();
    Ok(summaries
        .into_iter()
        .find(|summary| branch.contains(summary.turn_id.as_str())))
}

/// What `finish` needs of the running turn.
struct Ended<'a> {
    /// Released once the turn is stored, before its last events are: a
    /// client that sends its next message as soon as it reads `complete`
    /// finds the conversation free.
    slot: TurnSlot,
    journal: &'a Journal,
}

/// Pauses the turn: stores its continuation with the events that announce
/// the waiting calls and the `AWAITING_INPUT` status, in one transaction,
/// then releases them; the stream then ends. A user who already has
/// `turns.per_user.awaiting` paused turns gets an error instead.
async fn store_pause(
    shared: &Shared,
    spec: &TurnSpec,
    ended: Ended<'_>,
    mut produced: Produced,
    input: runner::InputRequired,
) {
    let owner = spec.start.principal.owner();
    let tenant = spec.start.principal.tenant_key();
    let limits = (
        shared.config.per_user.awaiting,
        shared.config.per_tenant.awaiting,
    );
    match shared.store.paused_count(owner, tenant.as_deref()).await {
        Ok((user, tenant))
            if (limits.0 == 0 || user < limits.0) && (limits.1 == 0 || tenant < limits.1) => {}
        Ok(_) => {
            produced.ending = Ending::Failed(Failure::new(
                "TOO_MANY_PAUSED_TURNS",
                "too many turns of this user (or tenant) wait for decisions; answer or close one first",
                false,
            ));
            produced.tools.extend(pause::unanswered(
                &input.pending,
                "not run: too many turns wait for decisions",
            ));
            return finish(shared, spec, ended, produced).await;
        }
        Err(error) => {
            tracing::error!(%error, "cannot count the user's paused turns");
            produced.ending = Ending::Failed(recover::store_unavailable());
            return finish(shared, spec, ended, produced).await;
        }
    }
    let Ended { slot, journal } = ended;
    let ids = TurnIds {
        conversation_id: spec.start.conversation_id.clone(),
        turn_id: spec.turn_id.clone(),
    };
    // In whole ms, as stored: the requests read back say the same.
    let expires_at = pause::from_unix_ms(pause::unix_ms(
        std::time::SystemTime::now() + shared.config.input_ttl,
    ));
    let mut last = pause::requests(&input.pending, expires_at);
    last.push(ids.status(gw::TurnPhase::AwaitingInput, "Waiting for your decision"));
    let request = match &spec.resume {
        Some(resume) => {
            let mut request = resume.request.clone();
            request.decisions.clear();
            request
        }
        None => {
            // The first run's request, as sent: built again from what the
            // turn read (a pause is rare; the runner call did not keep it).
            let history = load_history(shared, spec).await;
            match history {
                Ok(history) => first_request(shared, spec, history),
                Err(failure) => {
                    produced.ending = Ending::Failed(failure);
                    produced.paused = None;
                    let ended = Ended { slot, journal };
                    return finish(shared, spec, ended, produced).await;
                }
            }
        }
    };
    let continuation = Continuation {
        request: Some(request),
        input: Some(input),
        message: spec.start.message.clone(),
        page: serde_json::to_string(&spec.start.page).unwrap_or_default(),
        response_schema: spec
            .start
            .response_schema
            .as_ref()
            .map(serde_json::Value::to_string)
            .unwrap_or_default(),
        mid_answer_failover: spec.start.mid_answer_failover,
        parsed: Some(produced.parsed),
        raw_text: produced.raw,
        tools: produced.tools,
        reasoning: produced.reasoning,
        usage: produced.usage,
        expires_at_ms: pause::unix_ms(expires_at),
        action: spec.start.action.clone().unwrap_or_default(),
    };
    let tail = journal.close().await;
    let stored = shared
        .store
        .finish_turn(FinishTurn {
            owner,
            conversation_id: &spec.start.conversation_id,
            turn_id: &spec.turn_id,
            replica: &shared.replica,
            state: TurnState::AwaitingInput,
            retryable: false,
            outcome: None,
            events: Vec::new(),
            wire: journal.final_batch(tail.stored, &last),
            pause: Some(Pause {
                continuation: continuation.encode_base64(),
                wait_ms: millis(shared.config.input_ttl),
            }),
        })
        .instrument(tracing::info_span!("store.pause_turn"))
        .await;
    drop(slot);
    let state = match stored {
        Ok(true) => {
            journal.finish(last);
            "awaiting_input"
        }
        Ok(false) => {
            journal.hand_to_store();
            "lost"
        }
        Err(error) => {
            // Nothing is committed: its lease runs out and a replica ends
            // it as stored so far.
            tracing::error!(%error, turn = %spec.turn_id, "cannot store the turn's pause");
            let failure = recover::store_unavailable();
            journal.finish(vec![
                Event::Error(failure.to_event()),
                Event::Complete(Box::new(gw::TurnComplete {
                    success: false,
                    conversation_id: spec.start.conversation_id.clone(),
                    turn_id: spec.turn_id.clone(),
                    state: gw::TurnState::Failed as i32,
                    ..Default::default()
                })),
            ]);
            "unstored"
        }
    };
    tracing::info!(
        conversation = %spec.start.conversation_id,
        turn = %spec.turn_id,
        state,
        "turn paused for input"
    );
}

/// Stores the answer with the turn's last wire events (`error` if any,
/// `complete`) in one transaction, then releases them to the followers.
async fn finish(shared: &Shared, spec: &TurnSpec, ended: Ended<'_>, produced: Produced) {
    let Ended { slot, journal } = ended;
    let Produced {
        ending,
        parsed,
        fallback,
        reasoning,
        tools,
        structured,
        usage,
        after: history,
        ..
    } = produced;
    let mut diagnostics = parsed.diagnostics.clone();
    if let Some(reason) = &fallback {
        diagnostics.push(parse::fallback_diagnostic(reason));
    }
    observe::turn_ended(
        &tracing::Span::current(),
        &ending,
        &diagnostics,
        fallback.is_some(),
    );
    if let Some(usage) = &usage {
        observe::turn_usage(
            &tracing::Span::current(),
            usage,
            spec.start.principal.tenant.as_deref(),
        );
    }
    observe::tenant_turn(
        spec.start.principal.tenant.as_deref(),
        &ending,
        usage
            .as_ref()
            .map_or(0, |u| u.input_tokens.saturating_add(u.output_tokens)),
        slot.stop_cause() == Some(StopCause::Abandoned),
    );
    let stored_text = parsed.message.clone();
    let parts = CompleteParts {
        conversation_id: spec.start.conversation_id.clone(),
        turn_id: spec.turn_id.clone(),
        user_message: spec.start.message.clone(),
        parsed,
        tools,
        structured,
        usage,
        diagnostics,
    };
    let complete = outcome::complete(parts.clone(), &ending);
    let error_event = ending.failure().map(Failure::to_event);

    let mut events = Vec::new();
    if !reasoning.is_empty() {
        events.push(EventBody::Reasoning { text: reasoning });
    }
    events.extend(convert::tool_events(&complete.tool_history));
    events.push(EventBody::AssistantMessage(convert::complete_to_stored(
        &complete,
        stored_text,
        ending.state(),
        error_event.as_ref(),
    )));
    let tail = journal.close().await;
    let outcome = convert::encode_outcome(&complete);
    let mut last: Vec<Event> = error_event.map(Event::Error).into_iter().collect();
    last.push(Event::Complete(Box::new(complete)));
    let stored = shared
        .store
        .finish_turn(FinishTurn {
            owner: spec.start.principal.owner(),
            conversation_id: &spec.start.conversation_id,
            turn_id: &spec.turn_id,
            replica: &shared.replica,
            state: ending.state(),
            retryable: ending.failure().is_some_and(|failure| failure.retryable),
            outcome: Some(outcome),
            events,
            wire: journal.final_batch(tail.stored, &last),
            pause: None,
        })
        .instrument(tracing::info_span!("store.finish_turn"))
        .await;
    let stop = slot.stop_cause();
    drop(slot);
    let state = match stored {
        Ok(true) => {
            journal.finish(last);
            if ending.state() == TurnState::Completed {
                after::spawn(shared, spec, history, &parts.parsed.message);
            }
            ending.state().as_str()
        }
        Ok(false) => {
            // The conversation was deleted, or another replica ended the
            // turn after its lease expired: the store has its end.
            tracing::info!(conversation = %spec.start.conversation_id, turn = %spec.turn_id, "the turn was ended elsewhere; followers read the store");
            journal.hand_to_store();
            "lost"
        }
        Err(error) => {
            // Nothing of the end is committed: never tell the client it is.
            // Its lease runs out and a replica ends it as stored so far.
            tracing::error!(%error, turn = %spec.turn_id, "cannot store the turn's answer");
            let failure = recover::store_unavailable();
            let failed = Ending::Failed(failure.clone());
            journal.finish(vec![
                Event::Error(failure.to_event()),
                Event::Complete(Box::new(outcome::complete(parts, &failed))),
            ]);
            "unstored"
        }
    };
    tracing::info!(
        conversation = %spec.start.conversation_id,
        turn = %spec.turn_id,
        state,
        reason = ending.failure().map_or("", |failure| failure.reason.as_str()),
        followed = journal.followed(),
        stop = ?stop,
        "turn ended"
    );
}
