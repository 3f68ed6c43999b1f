//! Turns: starting one (idempotency, one turn per conversation, the user
//! message stored first), running it in its own task ([`flow`]), and
//! stopping it ([`manager`]).
//!
//! A turn runs independently of the client's stream: the stream only
//! receives its events. So a client that disconnects loses nothing (the turn
//! completes and is stored), `CancelTurn` reaches the turn through its
//! cancellation token, and the caller's deadline bounds it.

pub mod cleaner;
pub mod flow;
pub mod history;
pub mod manager;
pub mod observe;
pub mod outcome;
pub mod parse;
pub mod relay;
pub mod sink;

use std::sync::Arc;

use parley_proto::{
    gateway::v1::{self as gw, ChatEvent, chat_event::Event},
    runner::v1 as runner,
};
use serde_json::Value;
use tokio::{sync::mpsc, time::Instant};
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;
use tracing::Instrument;

use crate::{
    clients::Upstreams,
    config::TurnConfig,
    convert,
    error::GatewayError,
    registry::Registry,
    store::{BeginTurn, EventBody, NewTurn, Store, StoredPage, TurnRecord, TurnState, title_from},
};
use manager::{ReserveError, StopCause, TurnManager};
use relay::TurnIds;
use sink::EventSink;

/// Longest conversation title, in characters.
const TITLE_CHARS: usize = 80;

/// The stream a `Chat` or `ExecuteAction` call returns.
pub type EventStream = ReceiverStream<Result<ChatEvent, Status>>;

/// What every turn shares.
#[derive(Debug)]
pub struct Engine {
    /// The conversation store.
    pub store: Store,
    /// The page registry.
    pub registry: Arc<Registry>,
    /// The runner and the parser sidecar.
    pub upstreams: Upstreams,
    /// The running turns.
    pub turns: TurnManager,
    /// Turn limits.
    pub config: TurnConfig,
}

/// One turn to run, validated.
#[derive(Debug, Clone)]
pub struct TurnSpec {
    /// The authenticated user.
    pub owner: String,
    /// The conversation.
    pub conversation_id: String,
    /// Whether this turn created the conversation (so its history is the
    /// user message alone, with nothing to read back).
    pub new_conversation: bool,
    /// The turn.
    pub turn_id: String,
    /// The user message.
    pub message: String,
    /// Where the user is.
    pub page: StoredPage,
    /// The output schema of this request, when any.
    pub response_schema: Option<Value>,
    /// A model override.
    pub model: Option<runner::ModelRef>,
    /// When the turn must end.
    pub deadline: Instant,
}

/// A request to start a turn, before it has ids.
#[derive(Debug, Clone)]
pub struct StartTurn {
    /// The authenticated user.
    pub owner: String,
    /// The conversation; empty starts a new one.
    pub conversation_id: String,
    /// The user message.
    pub message: String,
    /// Where the user is.
    pub page: StoredPage,
    /// The output schema, when any.
    pub response_schema: Option<Value>,
    /// A model override.
    pub model: Option<runner::ModelRef>,
    /// The idempotency key, when sent.
    pub request_id: Option<String>,
    /// Cancel a running turn instead of refusing.
    pub cancel_running: bool,
    /// The server action the message was rendered from, when any.
    pub action: Option<String>,
    /// When the turn must end.
    pub deadline: Instant,
}

/// The events of a finished turn, replayed for a retried request id.
fn replay(turn: &TurnRecord) -> EventStream {
    let ids = TurnIds {
        conversation_id: turn.conversation_id.clone(),
        turn_id: turn.id.clone(),
    };
    let complete = turn
        .outcome
        .as_deref()
        .and_then(convert::decode_outcome)
        .unwrap_or_else(|| gw::TurnComplete {
            success: false,
            message: "The answer to this request is not available.".into(),
            conversation_id: turn.conversation_id.clone(),
            turn_id: turn.id.clone(),
            state: convert::state_to_wire(turn.state) as i32,
            ..Default::default()
        });
    let events = [
        ids.status(gw::TurnPhase::Started, "Replaying the stored answer"),
        Event::Complete(complete),
    ];
    let (tx, rx) = mpsc::channel(events.len());
    for (seq, event) in (1_u64..).zip(events) {
        let _ = tx.try_send(Ok(ChatEvent {
            seq,
            event: Some(event),
        }));
    }
    ReceiverStream::new(rx)
}

fn existing_turn(turn: TurnRecord) -> Result<EventStream, GatewayError> {
    if turn.state == TurnState::Running {
        return Err(GatewayError::TurnInProgress { turn_id: turn.id });
    }
    tracing::info!(turn = %turn.id, "replaying a retried request");
    Ok(replay(&turn))
}

impl Engine {
    /// Starts a turn: checks the request id and the conversation, takes
    /// the conversation's slot, stores the user message, then runs the turn
    /// in its own task and returns the client's event stream.
    ///
    /// A request id already used by this caller starts nothing: a finished
    /// turn is replayed (status, then its stored `complete`); a running one
    /// is refused with `TURN_IN_PROGRESS`.
    pub async fn start_turn(
        self: &Arc<Self>,
        start: StartTurn,
    ) -> Result<EventStream, GatewayError> {
        if let Some(request_id) = &start.request_id
            && let Some(turn) = self.store.turn_by_request(&start.owner, request_id).await?
        {
            return existing_turn(turn);
        }
        let create = start.conversation_id.is_empty();
        let conversation_id = if create {
            uuid::Uuid::now_v7().to_string()
        } else {
            start.conversation_id.clone()
        };
        if !create
            && self
                .store
                .conversation(&start.owner, &conversation_id)
                .await?
                .is_none()
        {
            return Err(GatewayError::ConversationNotFound);
        }
        let turn_id = uuid::Uuid::now_v7().to_string();
        let slot = match self.turns.reserve(&conversation_id, &turn_id) {
            Ok(slot) => slot,
            Err(ReserveError::Full) => return Err(GatewayError::TooManyTurns),
            Err(ReserveError::Busy { turn_id: running }) if !start.cancel_running => {
                return Err(GatewayError::TurnInProgress { turn_id: running });
            }
            Err(ReserveError::Busy { .. }) => {
                if let Some(stopping) =
                    self.turns
                        .stop(&conversation_id, None, StopCause::Superseded)
                {
                    stopping.stored(self.config.cancel_wait()).await;
                }
                self.turns
                    .reserve(&conversation_id, &turn_id)
                    .map_err(|error| match error {
                        ReserveError::Full => GatewayError::TooManyTurns,
                        ReserveError::Busy { turn_id } => GatewayError::TurnInProgress { turn_id },
                    })?
            }
        };
        let user_message = EventBody::UserMessage {
            text: start.message.clone(),
            page: start.page.clone(),
            response_schema: start.response_schema.clone(),
            request_id: start.request_id.clone(),
            action: start.action.clone(),
        };
        let title = title_from(&start.message, TITLE_CHARS);
        let begun = self
            .store
            .begin_turn(&NewTurn {
                owner: &start.owner,
                conversation_id: &conversation_id,
                create,
                turn_id: &turn_id,
                request_id: start.request_id.as_deref(),
                user_message: &user_message,
                title: &title,
            })
            .await?;
        match begun {
            BeginTurn::Started { .. } => {}
            BeginTurn::DuplicateRequest(turn) => return existing_turn(turn),
            BeginTurn::NotFound => return Err(GatewayError::ConversationNotFound),
        }
        let (tx, rx) = mpsc::channel(self.config.event_buffer.max(1));
        let sink = EventSink::new(tx, slot.cancel_token().clone(), start.deadline);
        let spec = TurnSpec {
            owner: start.owner,
            conversation_id,
            new_conversation: create,
            turn_id,
            message: start.message,
            page: start.page,
            response_schema: start.response_schema,
            model: start.model,
            deadline: start.deadline,
        };
        tracing::info!(conversation = %spec.conversation_id, turn = %spec.turn_id, new = spec.new_conversation, "turn started");
        let span = observe::turn_span(&spec);
        tokio::spawn(flow::run(self.clone(), spec, slot, sink).instrument(span));
        Ok(ReceiverStream::new(rx))
    }

    /// Cancels the running turn of a conversation of `owner` and waits (a
    /// bounded time) for its partial answer to be stored.
    pub async fn cancel_turn(
        &self,
        owner: &str,
        conversation_id: &str,
        turn_id: Option<&str>,
    ) -> Result<Option<String>, GatewayError> {
        if self
            .store
            .conversation(owner, conversation_id)
            .await?
            .is_none()
        {
            return Err(GatewayError::ConversationNotFound);
        }
        let Some(stopping) = self
            .turns
            .stop(conversation_id, turn_id, StopCause::Cancelled)
        else {
            return Ok(None);
        };
        let turn_id = stopping.turn_id.clone();
        if !stopping.stored(self.config.cancel_wait()).await {
            tracing::warn!(turn = %turn_id, "cancelled turn not stored within the wait");
        }
        Ok(Some(turn_id))
    }
}
