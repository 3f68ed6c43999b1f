//! One turn's pipeline, from the runner call to the stored answer: the
//! turn's task ([`flow`]) calls the runner and relays its events
//! ([`relay`]) through the text cleaner ([`cleaner`], [`partials`]), parses
//! the answer ([`parse`]), reads the history it sends ([`history`]) and
//! decides how the turn ends ([`outcome`]) and what it used ([`usage`]);
//! [`recover`] ends, from its
//! stored events, a turn whose replica died. How a turn starts, is
//! followed and stopped across replicas is [`crate::engine`].

pub mod after;
pub mod cleaner;
pub mod flow;
pub mod history;
pub mod observe;
pub mod outcome;
pub mod parse;
pub mod partials;
pub mod pause;
pub mod recover;
pub mod relay;
pub mod usage;

use std::sync::Arc;

use parley_proto::runner::v1 as runner;
use serde_json::Value;
use tokio::time::Instant;

use crate::{
    auth::Principal,
    clients::Upstreams,
    config::TurnConfig,
    registry::{Registry, ResolvedPage},
    store::{Store, StoredPage},
};

/// What every turn's pipeline uses, shared by the turns of this replica.
#[derive(Debug)]
pub struct Shared {
    /// The conversation store.
    pub store: Store,
    /// The page registry.
    pub registry: Arc<Registry>,
    /// The runner and the parser sidecar.
    pub upstreams: Upstreams,
    /// Turn limits.
    pub config: TurnConfig,
    /// This replica's id, recorded on the turns it runs.
    pub replica: String,
    /// `[tenants.NAME]`: the tenants' restrictions.
    pub tenants: crate::config::Tenants,
    /// `[attachments]`: the limits of uploaded files.
    pub attachments: crate::config::AttachmentsConfig,
    /// Where attachment bytes are kept.
    pub blobs: crate::blobs::Blobs,
}

/// A request to start a turn, validated, with the page it resolved to.
#[derive(Debug, Clone)]
pub struct StartTurn {
    /// The authenticated caller; its owner key scopes every store access.
    pub principal: Principal,
    /// The conversation; empty starts a new one (then [`crate::engine::Engine::start_turn`]
    /// fills in the new id).
    pub conversation_id: String,
    /// The user message.
    pub message: String,
    /// Where the user is, as stored with the message.
    pub page: StoredPage,
    /// What that page allows, resolved once for the whole turn.
    pub resolved: Arc<ResolvedPage>,
    /// The output schema, when any.
    pub response_schema: Option<Value>,
    /// A model override.
    pub model: Option<runner::ModelRef>,
    /// The idempotency key, when sent.
    pub request_id: Option<String>,
    /// Cancel a running turn instead of refusing.
    pub cancel_running: bool,
    /// Run a model call that fails midway again (`step_reset`) instead of
    /// failing the turn.
    pub mid_answer_failover: bool,
    /// The server action the message was rendered from, when any.
    pub action: Option<String>,
    /// Tools the application runs for this turn (`ChatRequest.client_tools`),
    /// as runner definitions (endpoint `client`).
    pub client_tools: Vec<runner::ToolDefinition>,
    /// The files attached to the message, the caller's and of types the
    /// page takes (checked by `service::attachments::resolve`).
    pub attachments: Vec<crate::store::StoredAttachmentRef>,
    /// Set when the turn starts a branch (`EditMessage`, `RegenerateTurn`):
    /// the parent of the turn it is a sibling of (`""` for a first
    /// message). `None` continues the conversation's current branch.
    pub parent: Option<String>,
    /// When the turn must end.
    pub deadline: Instant,
}

/// One turn to run: the request, with the conversation and turn it got.
#[derive(Debug, Clone)]
pub struct TurnSpec {
    /// The request; its `conversation_id` is set.
    pub start: StartTurn,
    /// The turn.
    pub turn_id: String,
    /// Whether this turn created the conversation (so its history is the
    /// user message alone, with nothing to read back).
    pub new_conversation: bool,
    /// Whether the turn names its parent (its conversation has branches):
    /// its history is then read along its branch, not by position.
    pub branched: bool,
    /// Set when the turn continues after a pause: the runner request and
    /// the answer so far come from the pause, not from the history.
    pub resume: Option<Arc<pause::Resume>>,
}
