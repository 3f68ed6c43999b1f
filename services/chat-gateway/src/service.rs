//! The gRPC edge: `parley.gateway.v1.ChatGateway`.
//!
//! Each method takes the caller from the request's extensions (put there by
//! the auth interceptor, see [`crate::auth`]), checks the request
//! ([`validate`]), calls the turn engine or the store, and maps errors to
//! `tonic::Status` through [`GatewayError`] — the only place they become
//! statuses.

pub mod attachments;
pub mod branches;
pub mod conversations;
pub mod finding;
pub mod validate;

use std::sync::Arc;

use parley_proto::gateway::v1::{
    self as gw, chat_gateway_server::ChatGateway, chat_gateway_server::ChatGatewayServer,
};
use tonic::{Request, Response, Status, service::interceptor::InterceptedService};

use crate::{
    auth::{AuthInterceptor, Authenticator, Principal},
    convert,
    durable::{
        EventStream,
        streams::{self, Admitted},
    },
    engine::{Engine, Followed},
    error::GatewayError,
    prompt::{PromptInput, build_system_prompt},
    store::{Deletion, search::Updated},
};

/// The ChatGateway service.
#[derive(Debug, Clone)]
pub struct GatewayService {
    engine: Arc<Engine>,
}

impl GatewayService {
    /// A service over `engine`.
    pub fn new(engine: Arc<Engine>) -> Self {
        Self { engine }
    }

    /// The service behind the auth interceptor (health and reflection are
    /// served beside it, without one).
    pub fn authenticated(
        engine: Arc<Engine>,
        auth: Arc<Authenticator>,
    ) -> InterceptedService<ChatGatewayServer<GatewayService>, AuthInterceptor> {
        InterceptedService::new(
            ChatGatewayServer::new(Self::new(engine)).max_decoding_message_size(4 * 1024 * 1024),
            AuthInterceptor(auth),
        )
    }
}

impl GatewayService {
    /// Runs the turn a `RegenerateTurn` or an `EditMessage` starts: a
    /// sibling of the turn it names ([`branches::start`]), streamed like a
    /// `Chat`.
    async fn start_branch<T: Into<branches::BranchRequest>>(
        &self,
        request: Request<T>,
    ) -> Result<Response<EventStream>, Status> {
        let principal = principal(&request)?;
        let admitted = self.engine.admit_turn_stream(&principal)?;
        let deadline = validate::deadline(request.metadata(), self.engine.config().max_duration);
        let branch = request.into_inner().into();
        let start = branches::start(&self.engine, principal, branch, deadline).await?;
        let stream = self.engine.start_turn(start).await?;
        Ok(Response::new(self.held(stream, admitted)))
    }

    /// A client's stream, holding its place among `turns.max_streams` and
    /// its stream lease until it ends, is dropped or stalls.
    fn held(&self, followed: Followed, permit: tokio::sync::OwnedSemaphorePermit) -> EventStream {
        streams::held(
            followed.stream,
            Admitted {
                permit,
                lease: followed.lease,
            },
            self.engine.config().follower_stall,
        )
    }
}

/// The authenticated caller of `request` (the auth interceptor put it
/// there). Its tenant becomes the tenant of the call's audit line
/// (`parley_grpc::edge`): every RPC asks for its caller before refusing
/// anything else.
fn principal<T>(request: &Request<T>) -> Result<Principal, Status> {
    let principal = request.extensions().get::<Principal>().cloned();
    if let Some(tenant) = principal.as_ref().and_then(|p| p.tenant.as_deref()) {
        parley_grpc::edge::record_tenant(request, tenant);
    }
    principal.ok_or_else(|| crate::auth::AuthError::NoCaller.into())
}

/// The owner key of the caller of `request`.
fn caller<T>(request: &Request<T>) -> Result<String, Status> {
    principal(request).map(|principal| principal.owner().to_owned())
}

#[tonic::async_trait]
impl ChatGateway for GatewayService {
    type ChatStream = EventStream;
    type ExecuteActionStream = EventStream;
    type ResumeTurnStream = EventStream;
    type SubmitToolDecisionsStream = EventStream;
    type DownloadAttachmentStream = attachments::DownloadStream;
    type RegenerateTurnStream = EventStream;
    type EditMessageStream = EventStream;

    async fn chat(
        &self,
        request: Request<gw::ChatRequest>,
    ) -> Result<Response<Self::ChatStream>, Status> {
        let principal = principal(&request)?;
        let admitted = self.engine.admit_turn_stream(&principal)?;
        let (mut start, files) = validate::chat(
            principal,
            request,
            self.engine.config(),
            self.engine.registry(),
            self.engine.tenants(),
            self.engine.attachments().max_inline_bytes,
        )?;
        // A retried request (its request_id known) joins its turn, which
        // has its files already: nothing is stored or resolved again.
        let retried = match (&start.request_id, files.is_empty()) {
            (Some(request_id), false) => self
                .engine
                .store()
                .turn_by_request(start.principal.owner(), request_id)
                .await
                .map_err(GatewayError::from)?
                .is_some(),
            _ => false,
        };
        if !files.is_empty() && !retried {
            let attachments = attachments::Attachments(&self.engine);
            let ids = attachments.store_inline(&start, files).await?;
            start.attachments = attachments.resolve(&start, &ids).await?;
        }
        let stream = self.engine.start_turn(start).await?;
        Ok(Response::new(self.held(stream, admitted)))
    }

    async fn cancel_turn(
        &self,
        request: Request<gw::CancelTurnRequest>,
    ) -> Result<Response<gw::CancelTurnResponse>, Status> {
        let owner = caller(&request)?;
        let request = request.into_inner();
        let turn = validate::turn_ref(&request.conversation_id, &request.turn_id)?;
        let cancelled = self
            .engine
            .cancel_turn(&owner, &request.conversation_id, turn)
            .await?;
        Ok(Response::new(gw::CancelTurnResponse {
            cancelled: cancelled.is_some(),
            turn_id: cancelled.unwrap_or_default(),
        }))
    }

    async fn resume_turn(
        &self,
        request: Request<gw::ResumeTurnRequest>,
    ) -> Result<Response<Self::ResumeTurnStream>, Status> {
        let principal = principal(&request)?;
        let admitted = self.engine.admit_stream()?;
        let request = request.into_inner();
        let turn = validate::turn_ref(&request.conversation_id, &request.turn_id)?;
        let stream = self
            .engine
            .resume_turn(
                &principal,
                &request.conversation_id,
                turn,
                request.after_seq,
            )
            .await?;
        Ok(Response::new(self.held(stream, admitted)))
    }

    async fn execute_action(
        &self,
        request: Request<gw::ExecuteActionRequest>,
    ) -> Result<Response<Self::ExecuteActionStream>, Status> {
        let principal = principal(&request)?;
        let admitted = self.engine.admit_turn_stream(&principal)?;
        let start = validate::execute_action(
            principal,
            request,
            self.engine.config(),
            self.engine.registry(),
            self.engine.tenants(),
        )?;
        let stream = self.engine.start_turn(start).await?;
        Ok(Response::new(self.held(stream, admitted)))
    }

    async fn get_conversation(
        &self,
        request: Request<gw::GetConversationRequest>,
    ) -> Result<Response<gw::GetConversationResponse>, Status> {
        let owner = caller(&request)?;
        let request = request.into_inner();
        let id = request.conversation_id;
        validate::conversation_id(&id)?;
        let before = match request.page_token.as_str() {
            "" => None,
            token => Some(conversations::decode_turn_page_token(token, &id)?),
        };
        let store = self.engine.store();
        let summary = store
            .conversation(&owner, &id)
            .await
            .map_err(GatewayError::from)?;
        let summary = summary.ok_or(GatewayError::ConversationNotFound)?;
        let tree = store
            .turn_tree(&owner, &id)
            .await
            .map_err(GatewayError::from)?;
        let (branch, leaf) =
            branches::shown_branch(&tree, summary.current_leaf.as_deref(), &request.turn_id)?;
        // The page: the branch's last turns before the token's position.
        let before = before.unwrap_or(u32::MAX);
        let earlier: Vec<usize> = branch
            .into_iter()
            .filter(|turn| tree.turn(*turn).turn_index < before)
            .collect();
        let size = conversations::turn_page_size(request.page_size) as usize;
        let first = earlier.len().saturating_sub(size);
        let ids: Vec<&str> = earlier[first..]
            .iter()
            .map(|turn| tree.turn(*turn).id.as_str())
            .collect();
        let (turns, events) = store
            .turns_with_events(&owner, &id, &ids)
            .await
            .map_err(GatewayError::from)?;
        let more = first > 0;
        let page_start = turns.first().map(|turn| turn.turn_index);
        let mut messages = conversations::messages(&events, &turns);
        branches::place(&tree, &mut messages);
        for message in &mut messages {
            if message.state == gw::TurnState::AwaitingInput as i32
                && let Some((_, stored)) = self
                    .engine
                    .store()
                    .paused(&owner, &message.turn_id)
                    .await
                    .map_err(GatewayError::from)?
                && let Some(continuation) = crate::turn::pause::Continuation::decode_base64(&stored)
            {
                conversations::paused(message, &continuation);
            }
        }
        Ok(Response::new(gw::GetConversationResponse {
            conversation: Some(conversations::summary_to_wire(&summary)),
            usage: Some(convert::usage_to_wire(&summary.usage)),
            messages,
            next_page_token: page_start
                .filter(|_| more)
                .map(|before| conversations::encode_turn_page_token(&id, before))
                .unwrap_or_default(),
            leaf_turn_id: leaf
                .map(|leaf| tree.turn(leaf).id.clone())
                .unwrap_or_default(),
        }))
    }

    async fn regenerate_turn(
        &self,
        request: Request<gw::RegenerateTurnRequest>,
    ) -> Result<Response<Self::RegenerateTurnStream>, Status> {
        self.start_branch(request).await
    }

    async fn edit_message(
        &self,
        request: Request<gw::EditMessageRequest>,
    ) -> Result<Response<Self::EditMessageStream>, Status> {
        self.start_branch(request).await
    }

    async fn switch_branch(
        &self,
        request: Request<gw::SwitchBranchRequest>,
    ) -> Result<Response<gw::SwitchBranchResponse>, Status> {
        let owner = caller(&request)?;
        let leaf = branches::switch(&self.engine, &owner, request.get_ref()).await?;
        Ok(Response::new(gw::SwitchBranchResponse {
            leaf_turn_id: leaf,
        }))
    }

    async fn list_conversations(
        &self,
        request: Request<gw::ListConversationsRequest>,
    ) -> Result<Response<gw::ListConversationsResponse>, Status> {
        let owner = caller(&request)?;
        let request = request.into_inner();
        let size = match request.page_size {
            0 => conversations::DEFAULT_PAGE_SIZE,
            size => size.min(conversations::MAX_PAGE_SIZE),
        };
        let (filter, terms) = finding::list_filter(&request)?;
        let store = self.engine.store();
        let (page, next_page_token) = match terms {
            // A search: pages are positions in the ranking.
            Some(terms) => {
                let fingerprint = filter.fingerprint(&terms);
                let offset = match request.page_token.as_str() {
                    "" => 0,
                    token => finding::decode_search_token(token, &fingerprint)?,
                };
                let (page, next) = store
                    .search(&owner, &terms, &filter, size, offset)
                    .await
                    .map_err(GatewayError::from)?;
                let token = next
                    .map(|offset| finding::encode_search_token(offset, &fingerprint))
                    .unwrap_or_default();
                (page, token)
            }
            None => {
                let cursor = match request.page_token.as_str() {
                    "" => None,
                    token => Some(conversations::decode_page_token(token)?),
                };
                let (page, next) = store
                    .list_filtered(&owner, &filter, size, cursor.as_ref())
                    .await
                    .map_err(GatewayError::from)?;
                let token = next
                    .as_ref()
                    .map(conversations::encode_page_token)
                    .unwrap_or_default();
                (page, token)
            }
        };
        Ok(Response::new(gw::ListConversationsResponse {
            conversations: page.iter().map(conversations::summary_to_wire).collect(),
            next_page_token,
        }))
    }

    async fn update_conversation(
        &self,
        request: Request<gw::UpdateConversationRequest>,
    ) -> Result<Response<gw::Conversation>, Status> {
        let owner = caller(&request)?;
        let request = request.into_inner();
        validate::conversation_id(&request.conversation_id)?;
        let update = finding::update(&request)?;
        match self
            .engine
            .store()
            .update_conversation(&owner, &request.conversation_id, update)
            .await
            .map_err(GatewayError::from)?
        {
            Updated::Done(summary) => Ok(Response::new(conversations::summary_to_wire(&summary))),
            Updated::NotFound => Err(GatewayError::ConversationNotFound.into()),
            Updated::TooManyEntries(count) => Err(GatewayError::invalid(
                "INVALID_METADATA",
                "metadata",
                format!(
                    "the conversation would hold {count} entries, more than {}",
                    crate::store::search::MAX_METADATA_ENTRIES
                ),
            )
            .into()),
        }
    }

    async fn delete_conversation(
        &self,
        request: Request<gw::DeleteConversationRequest>,
    ) -> Result<Response<gw::DeleteConversationResponse>, Status> {
        let owner = caller(&request)?;
        let id = request.into_inner().conversation_id;
        validate::conversation_id(&id)?;
        // A running turn of this caller's conversation is stopped first,
        // on whichever replica runs it; the conversation goes only once the
        // turn has ended (until then it holds its user's turn slot).
        if self
            .engine
            .store()
            .conversation(&owner, &id)
            .await
            .map_err(GatewayError::from)?
            .is_some()
        {
            self.engine.cancel_turn(&owner, &id, None).await?;
        }
        match self
            .engine
            .store()
            .delete(&owner, &id)
            .await
            .map_err(GatewayError::from)?
        {
            Deletion::Deleted => {}
            Deletion::NotFound => return Err(GatewayError::ConversationNotFound.into()),
            Deletion::TurnRunning { turn_id } => {
                tracing::info!(conversation = %id, turn = %turn_id, "conversation kept: its turn has not ended yet");
                return Err(GatewayError::TurnInProgress { turn_id }.into());
            }
        }
        // Its attachments' objects, once the rows are gone (a failure is
        // kept for the prune tick to retry).
        if let Err(error) = self.engine.blobs().purge_pending().await {
            tracing::warn!(%error, "cannot read the attachment objects to delete; the prune tick retries");
        }
        tracing::info!(conversation = %id, "conversation deleted");
        Ok(Response::new(gw::DeleteConversationResponse {}))
    }

    async fn describe_page(
        &self,
        request: Request<gw::DescribePageRequest>,
    ) -> Result<Response<gw::DescribePageResponse>, Status> {
        let principal = principal(&request)?;
        let admin = principal.admin;
        let request = request.into_inner();
        let page = validate::page(request.page.as_ref(), "page", self.engine.config())?;
        let registry = self.engine.registry();
        let resolved = registry.resolve(&validate::page_ref(&page));
        let mut response = resolved.describe();
        // What this caller may use: a restricted tenant sees its part of the
        // page's models, and the one its turns run on when it names none.
        if let Some((_, allowed)) = validate::tenant_models(&principal, self.engine.tenants()) {
            response
                .models_allowed
                .retain(|model| allowed.contains(model));
            response.model = validate::page_model(
                "",
                &resolved,
                validate::tenant_models(&principal, self.engine.tenants()),
            )
            .ok()
            .flatten()
            .map(|model| {
                if model.provider.is_empty() {
                    model.model
                } else {
                    format!("{}/{}", model.provider, model.model)
                }
            })
            .unwrap_or_default();
        }
        // The assembled prompt is the pages' internals: administrators only
        // (`auth.admin_claim`); everyone sees types, tools and actions.
        if request.include_system_prompt && admin {
            response.system_prompt = build_system_prompt(&PromptInput {
                registry,
                page: &resolved,
                stream_id: Some(page.stream_id.as_str()).filter(|id| !id.is_empty()),
                state: page.state.as_ref(),
                history_payloads: &[],
                response_schema: None,
                attachments: &[],
            });
        }
        Ok(Response::new(response))
    }

    async fn submit_tool_decisions(
        &self,
        request: Request<gw::SubmitToolDecisionsRequest>,
    ) -> Result<Response<Self::SubmitToolDecisionsStream>, Status> {
        let principal = principal(&request)?;
        let admitted = self.engine.admit_turn_stream(&principal)?;
        let request = request.into_inner();
        let submitted = validate::tool_decisions(request)?;
        let stream = self
            .engine
            .submit_tool_decisions(&principal, submitted)
            .await?;
        Ok(Response::new(self.held(stream, admitted)))
    }

    async fn record_payload_decision(
        &self,
        request: Request<gw::RecordPayloadDecisionRequest>,
    ) -> Result<Response<gw::RecordPayloadDecisionResponse>, Status> {
        let owner = caller(&request)?;
        let input = validate::payload_decision(request.into_inner(), self.engine.config())?;
        self.engine.record_payload_decision(&owner, input).await?;
        Ok(Response::new(gw::RecordPayloadDecisionResponse {}))
    }

    async fn submit_feedback(
        &self,
        request: Request<gw::SubmitFeedbackRequest>,
    ) -> Result<Response<gw::SubmitFeedbackResponse>, Status> {
        let owner = caller(&request)?;
        let input = validate::feedback(request.into_inner())?;
        self.engine.submit_feedback(&owner, input).await?;
        Ok(Response::new(gw::SubmitFeedbackResponse {}))
    }

    async fn upload_attachment(
        &self,
        request: Request<tonic::Streaming<gw::UploadAttachmentRequest>>,
    ) -> Result<Response<gw::Attachment>, Status> {
        let principal = principal(&request)?;
        let stored = attachments::Attachments(&self.engine)
            .upload(&principal, request.into_inner())
            .await?;
        Ok(Response::new(stored))
    }

    async fn download_attachment(
        &self,
        request: Request<gw::DownloadAttachmentRequest>,
    ) -> Result<Response<Self::DownloadAttachmentStream>, Status> {
        let principal = principal(&request)?;
        let id = request.into_inner().attachment_id;
        let stream = attachments::Attachments(&self.engine)
            .download(&principal, &id)
            .await?;
        Ok(Response::new(stream))
    }
}
