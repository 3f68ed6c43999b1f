//! Branches at the edge: `RegenerateTurn` and `EditMessage` become a turn
//! that starts a branch (a sibling of the chosen turn), `GetConversation`
//! reads one branch with each turn's siblings, and `SwitchBranch` moves
//! the current leaf. The tree itself is [`crate::store::tree`].

use std::sync::Arc;

use parley_proto::gateway::v1 as gw;

use super::validate;
use crate::{
    auth::Principal,
    engine::Engine,
    error::GatewayError,
    store::{EventBody, branches::Switched, tree::TurnTree},
    turn::StartTurn,
};

/// What a new branch starts from: a turn of a conversation, and what
/// changes in its message (`RegenerateTurn`, `EditMessage`).
pub struct BranchRequest {
    /// The conversation.
    pub conversation_id: String,
    /// The turn the new one is a sibling of.
    pub turn_id: String,
    /// The edited text; `None` regenerates (the same message).
    pub message: Option<String>,
    /// A model override (`ChatRequest.model`).
    pub model: String,
    /// The idempotency key.
    pub request_id: String,
    /// Tools the application runs for the turn.
    pub client_tools: Vec<gw::ClientToolDefinition>,
    /// Cancel a running turn instead of refusing.
    pub cancel_running: bool,
}

impl From<gw::RegenerateTurnRequest> for BranchRequest {
    fn from(request: gw::RegenerateTurnRequest) -> Self {
        Self {
            conversation_id: request.conversation_id,
            turn_id: request.turn_id,
            message: None,
            model: request.model,
            request_id: request.request_id,
            client_tools: request.client_tools,
            cancel_running: request.cancel_running,
        }
    }
}

impl From<gw::EditMessageRequest> for BranchRequest {
    fn from(request: gw::EditMessageRequest) -> Self {
        Self {
            conversation_id: request.conversation_id,
            turn_id: request.turn_id,
            message: Some(request.message),
            model: request.model,
            request_id: request.request_id,
            client_tools: request.client_tools,
            cancel_running: request.cancel_running,
        }
    }
}

/// The turn a regeneration or an edit runs: the chosen turn's user message
/// (its page, schema and files; the new text for an edit) as a sibling of
/// it, to end by `deadline`. An unknown turn, or one of another
/// conversation or caller, is `TURN_NOT_FOUND`.
pub async fn start(
    engine: &Engine,
    principal: Principal,
    request: BranchRequest,
    deadline: tokio::time::Instant,
) -> Result<StartTurn, GatewayError> {
    validate::conversation_id(&request.conversation_id)?;
    validate::id(&request.turn_id, "turn_id")?;
    validate::id(&request.request_id, "request_id")?;
    if request.turn_id.is_empty() {
        return Err(GatewayError::invalid(
            "INVALID_ID",
            "turn_id",
            "is required",
        ));
    }
    let config = engine.config();
    if let Some(text) = &request.message {
        validate::message(text, "message", config)?;
    }
    let owner = principal.owner().to_owned();
    let store = engine.store();
    let tree = store.turn_tree(&owner, &request.conversation_id).await?;
    let position = tree
        .position(&request.turn_id)
        .ok_or(GatewayError::TurnNotFound)?;
    let parent = tree
        .parent(position)
        .map(|parent| tree.turn(parent).id.clone())
        .unwrap_or_default();
    let Some(EventBody::UserMessage {
        text,
        page,
        response_schema,
        action,
        attachments,
        ..
    }) = store
        .user_message(&owner, &request.conversation_id, &request.turn_id)
        .await?
    else {
        return Err(GatewayError::TurnNotFound);
    };
    let resolved = Arc::new(engine.registry().resolve(&validate::page_ref(&page)));
    let model = validate::page_model(
        &request.model,
        &resolved,
        validate::tenant_models(&principal, engine.tenants()),
    )?;
    let client_tools = validate::client_tools(&request.client_tools, &resolved, config)?;
    let edited = request.message.is_some();
    Ok(StartTurn {
        principal,
        conversation_id: request.conversation_id,
        message: request.message.unwrap_or(text),
        page,
        resolved,
        response_schema,
        model,
        request_id: Some(request.request_id).filter(|id| !id.is_empty()),
        cancel_running: request.cancel_running,
        mid_answer_failover: false,
        // An edited message is the user's own text, no longer the action's.
        action: action.filter(|_| !edited),
        client_tools,
        attachments,
        parent: Some(parent),
        deadline,
    })
}

/// The branch `GetConversation` shows: the one through `turn_id` (to its
/// newest leaf) when given, else the current one; its turns' ids, oldest
/// first, and its leaf. Empty for a conversation without turns.
pub fn shown_branch(
    tree: &TurnTree,
    current_leaf: Option<&str>,
    turn_id: &str,
) -> Result<(Vec<usize>, Option<usize>), GatewayError> {
    let leaf = if turn_id.is_empty() {
        tree.current_leaf(current_leaf)
    } else {
        let position = tree.position(turn_id).ok_or(GatewayError::TurnNotFound)?;
        Some(tree.newest_leaf(position))
    };
    Ok((leaf.map(|leaf| tree.branch(leaf)).unwrap_or_default(), leaf))
}

/// Fills each message's place in the tree: its parent and its siblings.
pub fn place(tree: &TurnTree, messages: &mut [gw::ConversationMessage]) {
    for message in messages {
        let Some(position) = tree.position(&message.turn_id) else {
            continue;
        };
        message.parent_turn_id = tree
            .parent(position)
            .map(|parent| tree.turn(parent).id.clone())
            .unwrap_or_default();
        let siblings = tree.siblings(position);
        message.sibling_turn_ids = siblings
            .iter()
            .map(|sibling| tree.turn(*sibling).id.clone())
            .collect();
        message.sibling_index = siblings
            .iter()
            .position(|sibling| *sibling == position)
            .and_then(|index| u32::try_from(index).ok())
            .unwrap_or(0);
        message.sibling_count = u32::try_from(siblings.len()).unwrap_or(u32::MAX);
    }
}

/// Makes the branch through `turn_id` (to its newest leaf) the current one
/// of a conversation of `owner`; returns that leaf.
pub async fn switch(
    engine: &Engine,
    owner: &str,
    request: &gw::SwitchBranchRequest,
) -> Result<String, GatewayError> {
    validate::conversation_id(&request.conversation_id)?;
    validate::id(&request.turn_id, "turn_id")?;
    if request.turn_id.is_empty() {
        return Err(GatewayError::invalid(
            "INVALID_ID",
            "turn_id",
            "is required",
        ));
    }
    let store = engine.store();
    let tree = store.turn_tree(owner, &request.conversation_id).await?;
    let position = tree
        .position(&request.turn_id)
        .ok_or(GatewayError::TurnNotFound)?;
    let leaf = tree.turn(tree.newest_leaf(position)).id.clone();
    match store
        .switch_branch(owner, &request.conversation_id, &leaf)
        .await?
    {
        Switched::Done => Ok(leaf),
        Switched::NotFound => Err(GatewayError::ConversationNotFound),
        Switched::Busy(turn_id) => Err(GatewayError::TurnInProgress { turn_id }),
    }
}
