//! The AI SDK's UI message stream (ai-sdk.dev, "Stream Protocols"), so a
//! React app using `useChat` with its default transport talks to Parley
//! with no server of its own:
//!
//! - `POST /v1/ui/chat` takes the body the transport sends
//!   ([`request`]): a new user message runs a turn (`Chat`),
//!   `regenerate-message` runs the latest answer again (`RegenerateTurn`),
//!   and an assistant message carrying approval responses or tool outputs
//!   continues its paused turn (`SubmitToolDecisions`). The answer is
//!   `text/event-stream` with `x-vercel-ai-ui-message-stream: v1`, one
//!   `data: {part}` event per part ([`parts`], mapped from the turn's
//!   events by [`events`]), then `data: [DONE]`; a
//!   comment (`: keep-alive`) after every [`KEEP_ALIVE`] of silence.
//! - `GET /v1/ui/chat/{id}/stream` follows the running turn of the chat
//!   from its start (`ResumeTurn`; the SDK's `resume: true`), or answers
//!   `204 No Content` when none runs, which the SDK reads as "nothing to
//!   resume".
//!
//! The chat id is the browser's (`useChat` makes one up) or a Parley
//! conversation id. A browser's id is bound to the conversation its first
//! message creates, in the conversation's metadata
//! (`ai_sdk.chat_id`), so every replica finds it again.
//!
//! Each request is authenticated as a gRPC call is (the same bearer token,
//! [`Authenticator`]) and runs through the `ChatGateway` methods in
//! process, so it is validated, limited and stored exactly like one. A
//! refusal is an HTTP error whose JSON body is `{code, reason, message}`
//! (the gRPC code name, the `ErrorInfo` reason), with `Retry-After` when
//! the refusal says when to retry. A client that goes away
//! drops its stream as a gRPC client does: the turn runs on, and the
//! chat's next `GET …/stream` (or `ResumeTurn`) follows it.

pub mod events;
pub mod parts;
pub mod request;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::{Path, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use futures::StreamExt;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use parley_proto::gateway::v1::{self as gw, chat_gateway_server::ChatGateway};
use tonic::{Code, Status, metadata::MetadataMap};

use self::{
    events::UiStream,
    parts::{DONE, Part},
    request::{Ask, BodyError},
};
use crate::{
    auth::{Authenticator, Principal},
    durable::EventStream,
    engine::Engine,
    error::GatewayError,
    service::GatewayService,
    store::{
        TurnState,
        search::{Archived, ConversationUpdate, ListFilter},
    },
};

/// The conversation metadata key that binds a browser's chat id.
pub const CHAT_ID_KEY: &str = "ai_sdk.chat_id";

/// The response header the AI SDK checks for.
pub const STREAM_HEADER: &str = "x-vercel-ai-ui-message-stream";

/// How many times `turns.max_message_bytes` a posted body may hold: the
/// transport posts the whole conversation the browser holds (trim it with
/// `prepareSendMessagesRequest` to send the last message only).
pub const BODY_MESSAGES: usize = 64;

/// The smallest body limit, whatever `turns.max_message_bytes` says.
pub const MIN_BODY_BYTES: usize = 1024 * 1024;

/// The routes of the UI message stream.
pub fn routes(engine: Arc<Engine>, auth: Arc<Authenticator>) -> Router {
    let body_limit = body_limit(engine.config().max_message_bytes);
    let ui = Ui {
        service: GatewayService::new(engine.clone()),
        engine,
        auth,
        body_limit,
    };
    Router::new()
        .route("/v1/ui/chat", post(chat))
        .route("/v1/ui/chat/{id}/stream", get(resume))
        .with_state(Arc::new(ui))
}

/// The largest body `POST /v1/ui/chat` reads: [`BODY_MESSAGES`] messages
/// of `turns.max_message_bytes`, at least [`MIN_BODY_BYTES`].
pub fn body_limit(max_message_bytes: usize) -> usize {
    max_message_bytes
        .saturating_mul(BODY_MESSAGES)
        .max(MIN_BODY_BYTES)
}

/// What the handlers share.
struct Ui {
    service: GatewayService,
    engine: Arc<Engine>,
    auth: Arc<Authenticator>,
    body_limit: usize,
}

async fn chat(State(ui): State<Arc<Ui>>, headers: HeaderMap, body: Body) -> Response {
    ui.chat(&headers, body)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn resume(State(ui): State<Arc<Ui>>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    ui.resume(&headers, &id)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

impl Ui {
    async fn chat(&self, headers: &HeaderMap, body: Body) -> Result<Response, HttpError> {
        let principal = self.principal(headers)?;
        let bytes = read_body(headers, body, self.body_limit).await?;
        let body = request::parse(&bytes).map_err(HttpError::body)?;
        let ask = body.ask().map_err(HttpError::body)?;
        let conversation = self.conversation_of(&principal, &body.id).await?;
        match ask {
            Ask::Send { text, request_id } => {
                let message = gw::ChatRequest {
                    conversation_id: conversation.clone().unwrap_or_default(),
                    message: text,
                    page: body.page.as_ref().map(request::PageBody::to_wire),
                    model: body.model.clone().unwrap_or_default(),
                    request_id,
                    ..Default::default()
                };
                let events = self
                    .service
                    .chat(call(&principal, message))
                    .await?
                    .into_inner();
                let mut events = events.peekable();
                if conversation.is_none() {
                    // The first event names the new conversation.
                    if let Some(Ok(first)) = std::pin::Pin::new(&mut events).peek().await
                        && let Some(gw::chat_event::Event::Status(status)) = &first.event
                    {
                        self.bind(&principal, &status.conversation_id, &body.id)
                            .await;
                    }
                }
                Ok(event_stream(events.boxed(), UiStream::new()))
            }
            Ask::Regenerate { turn_id } => {
                let conversation = conversation.ok_or(GatewayError::ConversationNotFound)?;
                let turn_id = match turn_id {
                    Some(turn_id) => turn_id,
                    None => self.latest_turn(&principal, &conversation).await?.id,
                };
                let message = gw::RegenerateTurnRequest {
                    conversation_id: conversation,
                    turn_id,
                    model: body.model.clone().unwrap_or_default(),
                    ..Default::default()
                };
                let events = self
                    .service
                    .regenerate_turn(call(&principal, message))
                    .await?;
                Ok(event_stream(events.into_inner(), UiStream::new()))
            }
            Ask::Decide { turn_id, decisions } => {
                let conversation = conversation.ok_or(GatewayError::ConversationNotFound)?;
                let message = gw::SubmitToolDecisionsRequest {
                    conversation_id: conversation,
                    turn_id: turn_id.clone(),
                    decisions,
                    request_id: String::new(),
                };
                let events = self
                    .service
                    .submit_tool_decisions(call(&principal, message))
                    .await?;
                Ok(event_stream(
                    events.into_inner(),
                    UiStream::continuing(turn_id),
                ))
            }
        }
    }

    async fn resume(&self, headers: &HeaderMap, id: &str) -> Result<Response, HttpError> {
        let principal = self.principal(headers)?;
        crate::service::validate::conversation_id(id)?;
        let Some(conversation) = self.conversation_of(&principal, id).await? else {
            return Ok(StatusCode::NO_CONTENT.into_response());
        };
        let turn = self
            .engine
            .store()
            .latest_turn(principal.owner(), &conversation)
            .await
            .map_err(GatewayError::from)?;
        let Some(turn) = turn.filter(|turn| turn.state == TurnState::Running) else {
            return Ok(StatusCode::NO_CONTENT.into_response());
        };
        let message = gw::ResumeTurnRequest {
            conversation_id: conversation,
            turn_id: turn.id,
            after_seq: 0,
        };
        let events = self.service.resume_turn(call(&principal, message)).await?;
        Ok(event_stream(events.into_inner(), UiStream::new()))
    }

    fn principal(&self, headers: &HeaderMap) -> Result<Principal, HttpError> {
        let metadata = MetadataMap::from_headers(headers.clone());
        Ok(self.auth.authenticate(&metadata).map_err(Status::from)?)
    }

    /// The caller's conversation of chat `id`: the one bound to it, or the
    /// conversation of that id; `None` for a chat that has none yet.
    async fn conversation_of(
        &self,
        principal: &Principal,
        id: &str,
    ) -> Result<Option<String>, HttpError> {
        crate::service::validate::id(id, "id")?;
        let store = self.engine.store();
        let filter = ListFilter {
            metadata: BTreeMap::from([(CHAT_ID_KEY.to_owned(), id.to_owned())]),
            archived: Archived::Include,
            pinned_only: false,
        };
        let (bound, _) = store
            .list_filtered(principal.owner(), &filter, 1, None)
            .await
            .map_err(GatewayError::from)?;
        if let Some(bound) = bound.into_iter().next() {
            return Ok(Some(bound.id));
        }
        let own = store
            .conversation(principal.owner(), id)
            .await
            .map_err(GatewayError::from)?;
        Ok(own.map(|conversation| conversation.id))
    }

    /// Binds chat `id` to the `conversation` its first message created. A
    /// failure is logged: the turn runs, and the chat's next message
    /// starts another conversation.
    async fn bind(&self, principal: &Principal, conversation: &str, id: &str) {
        let update = ConversationUpdate {
            set_metadata: BTreeMap::from([(CHAT_ID_KEY.to_owned(), id.to_owned())]),
            ..ConversationUpdate::default()
        };
        if let Err(error) = self
            .engine
            .store()
            .update_conversation(principal.owner(), conversation, update)
            .await
        {
            tracing::warn!(%error, %conversation, "cannot bind the AI SDK chat id to its conversation");
        }
    }

    async fn latest_turn(
        &self,
        principal: &Principal,
        conversation: &str,
    ) -> Result<crate::store::TurnRecord, HttpError> {
        Ok(self
            .engine
            .store()
            .latest_turn(principal.owner(), conversation)
            .await
            .map_err(GatewayError::from)?
            .ok_or(GatewayError::TurnNotFound)?)
    }
}

/// A gRPC request from `principal`, as the auth interceptor would pass it.
fn call<T>(principal: &Principal, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.extensions_mut().insert(principal.clone());
    request
}

/// Reads at most `limit` bytes of body.
async fn read_body(headers: &HeaderMap, body: Body, limit: usize) -> Result<Bytes, HttpError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|length| length.to_str().ok())
        .and_then(|length| length.parse::<u64>().ok());
    let too_large = |size: Option<u64>| {
        HttpError::from(parley_grpc::status::request_too_large(size, limit as u64))
            .with_status(StatusCode::PAYLOAD_TOO_LARGE)
    };
    if let Some(size) = declared
        && size > limit as u64
    {
        return Err(too_large(Some(size)));
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<LengthLimitError>() => Err(too_large(None)),
        Err(error) => Err(HttpError::from(parley_grpc::status::malformed_message(
            Some("body"),
            &format!("the body could not be read: {error}"),
        ))),
    }
}

/// How long a stream stays silent before it sends an SSE comment: proxies
/// keep an idle connection open, and a client that went away is noticed
/// (the write fails, the stream is dropped) while the model thinks.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The SSE response: each event's parts, the end, then `[DONE]`.
fn event_stream(events: EventStream, ui: UiStream) -> Response {
    let body = futures::stream::unfold(Some((events, ui)), |state| async move {
        let (mut events, mut ui) = state?;
        let Ok(next) = tokio::time::timeout(KEEP_ALIVE, events.next()).await else {
            return Some((
                Ok(Bytes::from_static(b": keep-alive\n\n")),
                Some((events, ui)),
            ));
        };
        let (parts, next, done) = match next {
            Some(Ok(event)) => (ui.event(&event), Some((events, ui)), false),
            Some(Err(status)) => {
                let reason = parley_grpc::status::reason(&status)
                    .unwrap_or_else(|| parley_grpc::codes::code_name(status.code() as i32).into());
                (ui.failed(&reason, status.message()), None, true)
            }
            None => (ui.end(), None, true),
        };
        let mut text: String = parts.iter().map(Part::to_sse).collect();
        if done {
            text.push_str(DONE);
        }
        Some((Ok::<_, std::convert::Infallible>(Bytes::from(text)), next))
    });
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(STREAM_HEADER, HeaderValue::from_static("v1"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// A refusal as HTTP: the status for its gRPC code, a JSON body
/// `{code, reason, message}`, and `Retry-After` when its `RetryInfo` says
/// when to retry.
#[derive(Debug)]
pub struct HttpError {
    status: StatusCode,
    code: Code,
    reason: Option<String>,
    message: String,
    retry_after: Option<Duration>,
}

impl HttpError {
    fn body(error: BodyError) -> Self {
        Self::from(parley_grpc::status::malformed_message(
            Some(error.field()),
            &error.to_string(),
        ))
    }

    fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }
}

impl From<Status> for HttpError {
    fn from(status: Status) -> Self {
        use tonic_types::StatusExt;
        Self {
            status: http_status(status.code()),
            code: status.code(),
            reason: parley_grpc::status::reason(&status),
            message: status.message().to_owned(),
            retry_after: status
                .get_details_retry_info()
                .and_then(|info| info.retry_delay),
        }
    }
}

impl From<GatewayError> for HttpError {
    fn from(error: GatewayError) -> Self {
        Self::from(Status::from(error))
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "code": parley_grpc::codes::code_name(self.code as i32),
            "reason": self.reason,
            "message": self.message,
        });
        let mut response = (self.status, body.to_string()).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(delay) = self.retry_after {
            // Whole seconds, rounded up: never "retry at once".
            let seconds = delay.as_secs() + u64::from(delay.subsec_nanos() > 0);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
        }
        response
    }
}

/// The HTTP status of a gRPC code (as `google.rpc.Code` documents it).
pub fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Ok => StatusCode::OK,
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => {
            StatusCode::BAD_REQUEST
        }
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        // 499 Client Closed Request.
        Code::Cancelled => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

#[cfg(test)]
mod tests;
