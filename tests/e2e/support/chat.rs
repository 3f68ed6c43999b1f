//! Talking to the gateway as an application backend does: a client on the
//! published port, one `Chat` stream per message, read event by event so a
//! test can act in the middle of a turn (stop a container after the first
//! text), `ResumeTurn` and `CancelTurn`, and health polling on
//! `grpc.health.v1`.

use std::time::{Duration, Instant};

use parley_proto::gateway::v1::{
    CancelTurnRequest, CancelTurnResponse, ChatEvent, ChatRequest, PageContext, ResumeTurnRequest,
    TurnComplete, TurnError, chat_event::Event, chat_gateway_client::ChatGatewayClient,
};
use tonic::{Request, Status, Streaming, metadata::MetadataValue, transport::Channel};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

/// A gateway client that adds a bearer token, when it has one.
#[derive(Clone)]
pub struct Client {
    inner: ChatGatewayClient<Channel>,
    token: Option<String>,
}

/// A channel to `addr` (`host:port`), connected now.
pub async fn channel(addr: &str) -> Result<Channel, tonic::transport::Error> {
    Channel::from_shared(format!("http://{addr}"))
        .expect("a valid address")
        .connect_timeout(Duration::from_secs(2))
        .connect()
        .await
}

/// Polls `grpc.health.v1.Health/Check` for `service` until it is SERVING;
/// panics after `limit`. Returns how long it took.
pub async fn wait_serving(addr: &str, service: &str, limit: Duration) -> Duration {
    let started = Instant::now();
    let mut last = String::from("never connected");
    while started.elapsed() < limit {
        if let Ok(channel) = channel(addr).await {
            let mut health = HealthClient::new(channel);
            let request = HealthCheckRequest {
                service: service.to_owned(),
            };
            match health.check(request).await {
                Ok(response) if response.get_ref().status == ServingStatus::Serving as i32 => {
                    return started.elapsed();
                }
                Ok(response) => last = format!("status {}", response.get_ref().status),
                Err(status) => last = format!("{:?}: {}", status.code(), status.message()),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{service} on {addr} not SERVING after {limit:?} (last: {last})")
}

/// A request for `message` on `page`, continuing `conversation_id` (empty
/// starts one).
pub fn request(conversation_id: &str, message: &str, page: &str) -> ChatRequest {
    ChatRequest {
        conversation_id: conversation_id.to_owned(),
        message: message.to_owned(),
        page: Some(PageContext {
            page: page.to_owned(),
            ..PageContext::default()
        }),
        ..ChatRequest::default()
    }
}

impl Client {
    /// A client of the gateway at `addr`, sending `token` when given.
    pub async fn connect(addr: &str, token: Option<String>) -> Self {
        let channel = channel(addr)
            .await
            .unwrap_or_else(|error| panic!("cannot connect to the gateway at {addr}: {error}"));
        Self {
            inner: ChatGatewayClient::new(channel),
            token,
        }
    }

    fn authorized<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        request.set_timeout(Duration::from_secs(120));
        if let Some(token) = &self.token {
            let value: MetadataValue<_> = format!("Bearer {token}")
                .parse()
                .expect("a valid header value");
            request.metadata_mut().insert("authorization", value);
        }
        request
    }

    /// Opens a `Chat` stream, or returns the status it was refused with.
    pub async fn try_open(&mut self, request: ChatRequest) -> Result<TurnReader, Status> {
        let stream = self
            .inner
            .chat(self.authorized(request))
            .await?
            .into_inner();
        Ok(TurnReader::new(stream))
    }

    /// Opens a `Chat` stream.
    pub async fn open(&mut self, request: ChatRequest) -> TurnReader {
        self.try_open(request)
            .await
            .unwrap_or_else(|status| panic!("Chat was refused: {status:?}"))
    }

    /// Sends one message and reads the whole turn, or returns the status
    /// the call was refused with.
    pub async fn try_chat(&mut self, request: ChatRequest) -> Result<Turn, Status> {
        Ok(self.try_open(request).await?.finish().await)
    }

    /// Sends one message and reads the whole turn.
    pub async fn chat(&mut self, request: ChatRequest) -> Turn {
        self.open(request).await.finish().await
    }

    /// Opens a `ResumeTurn` stream: the turn's events after `after_seq`.
    pub async fn resume(
        &mut self,
        conversation_id: &str,
        turn_id: &str,
        after_seq: u64,
    ) -> TurnReader {
        let request = ResumeTurnRequest {
            conversation_id: conversation_id.to_owned(),
            turn_id: turn_id.to_owned(),
            after_seq,
        };
        let stream = self
            .inner
            .resume_turn(self.authorized(request))
            .await
            .unwrap_or_else(|status| panic!("ResumeTurn was refused: {status:?}"))
            .into_inner();
        TurnReader::new(stream)
    }

    /// Cancels a conversation's running turn (`turn_id`, when not empty).
    pub async fn cancel_turn(
        &mut self,
        conversation_id: &str,
        turn_id: &str,
    ) -> CancelTurnResponse {
        let request = CancelTurnRequest {
            conversation_id: conversation_id.to_owned(),
            turn_id: turn_id.to_owned(),
        };
        self.inner
            .cancel_turn(self.authorized(request))
            .await
            .unwrap_or_else(|status| panic!("CancelTurn failed: {status:?}"))
            .into_inner()
    }

    /// Reads a whole conversation back, following its pages (the newest
    /// page comes first): the response holds every message, oldest first.
    pub async fn get_conversation(
        &mut self,
        conversation_id: &str,
    ) -> parley_proto::gateway::v1::GetConversationResponse {
        let mut whole = parley_proto::gateway::v1::GetConversationResponse::default();
        let mut page_token = String::new();
        loop {
            let request = parley_proto::gateway::v1::GetConversationRequest {
                conversation_id: conversation_id.to_owned(),
                page_token,
                ..Default::default()
            };
            let mut page = self
                .inner
                .get_conversation(self.authorized(request))
                .await
                .unwrap_or_else(|status| panic!("GetConversation failed: {status:?}"))
                .into_inner();
            page.messages.append(&mut whole.messages);
            whole.messages = page.messages;
            whole.conversation = page.conversation;
            page_token = page.next_page_token;
            if page_token.is_empty() {
                return whole;
            }
        }
    }

    /// Lists the caller's conversations.
    pub async fn list_conversations(
        &mut self,
    ) -> parley_proto::gateway::v1::ListConversationsResponse {
        let request = parley_proto::gateway::v1::ListConversationsRequest::default();
        self.inner
            .list_conversations(self.authorized(request))
            .await
            .unwrap_or_else(|status| panic!("ListConversations failed: {status:?}"))
            .into_inner()
    }
}

/// Everything one `Chat` stream delivered.
#[derive(Debug, Default)]
pub struct Turn {
    /// Every event, in order.
    pub events: Vec<ChatEvent>,
    /// The text deltas joined.
    pub text: String,
    /// The `error` event, when the turn failed.
    pub error: Option<TurnError>,
    /// The final `complete`, when it came.
    pub complete: Option<TurnComplete>,
    /// The status the stream ended with, when it broke instead of ending.
    pub status: Option<Status>,
    /// The conversation (from the first status event).
    pub conversation_id: String,
    /// The turn (from the first status event).
    pub turn_id: String,
}

impl Turn {
    /// The `complete` event; panics (with the events) when there was none.
    pub fn complete(&self) -> &TurnComplete {
        self.complete
            .as_ref()
            .unwrap_or_else(|| panic!("no complete event: {:?}", self.summary()))
    }

    /// Whether `complete.diagnostics` says the in-process parser answered.
    pub fn parser_fallback(&self) -> bool {
        self.complete().diagnostics.iter().any(|diagnostic| {
            diagnostic.kind == parley_proto::parser::v1::DiagnosticKind::ParserFallback as i32
        })
    }

    /// How many events of a kind arrived.
    pub fn count(&self, kind: fn(&Event) -> bool) -> usize {
        self.events
            .iter()
            .filter(|event| event.event.as_ref().is_some_and(kind))
            .count()
    }

    /// The `seq` of the last event received (0 before any).
    pub fn last_seq(&self) -> u64 {
        self.events.last().map_or(0, |event| event.seq)
    }

    /// A short description for assertion messages.
    pub fn summary(&self) -> String {
        format!(
            "{} events, text {:?}, error {:?}, status {:?}",
            self.events.len(),
            self.text,
            self.error,
            self.status
                .as_ref()
                .map(|s| (s.code(), s.message().to_owned()))
        )
    }

    fn record(&mut self, event: ChatEvent) {
        match &event.event {
            Some(Event::Status(status)) if self.conversation_id.is_empty() => {
                self.conversation_id = status.conversation_id.clone();
                self.turn_id = status.turn_id.clone();
            }
            Some(Event::TextDelta(text)) => self.text.push_str(text),
            Some(Event::Error(error)) => self.error = Some(error.clone()),
            Some(Event::Complete(complete)) => self.complete = Some((**complete).clone()),
            _ => {}
        }
        self.events.push(event);
    }
}

/// A `Chat` stream being read.
pub struct TurnReader {
    stream: Streaming<ChatEvent>,
    turn: Turn,
}

impl TurnReader {
    fn new(stream: Streaming<ChatEvent>) -> Self {
        Self {
            stream,
            turn: Turn::default(),
        }
    }

    /// Reads until an event satisfies `wanted` (returning true), or the
    /// stream ends (false).
    pub async fn until(&mut self, wanted: fn(&Event) -> bool) -> bool {
        loop {
            match self.stream.message().await {
                Ok(Some(event)) => {
                    let hit = event.event.as_ref().is_some_and(wanted);
                    self.turn.record(event);
                    if hit {
                        return true;
                    }
                }
                Ok(None) => return false,
                Err(status) => {
                    self.turn.status = Some(status);
                    return false;
                }
            }
        }
    }

    /// Reads until the streamed text contains `needle` (true), or the
    /// stream ends (false).
    pub async fn until_text(&mut self, needle: &str) -> bool {
        while !self.turn.text.contains(needle) {
            if !self
                .until(|event| matches!(event, Event::TextDelta(_)))
                .await
            {
                return false;
            }
        }
        true
    }

    /// What was read so far.
    pub fn so_far(&self) -> &Turn {
        &self.turn
    }

    /// Reads the rest of the stream.
    pub async fn finish(mut self) -> Turn {
        self.until(|_| false).await;
        self.turn
    }
}

/// Event kinds, for [`Turn::count`] and [`TurnReader::until`].
pub mod kind {
    use super::Event;

    /// A tool start.
    pub fn tool_start(event: &Event) -> bool {
        matches!(event, Event::ToolStart(_))
    }
    /// A tool progress report.
    pub fn tool_progress(event: &Event) -> bool {
        matches!(event, Event::ToolProgress(_))
    }
    /// A tool completion.
    pub fn tool_complete(event: &Event) -> bool {
        matches!(event, Event::ToolComplete(_))
    }
    /// The end of a turn.
    pub fn complete(event: &Event) -> bool {
        matches!(event, Event::Complete(_))
    }
}
