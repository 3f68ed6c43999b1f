//! The body `useChat`'s default transport posts, and what it asks Parley
//! to do: send a message, regenerate the last answer, or continue a turn
//! that paused with the user's approvals and the app's tool results.
//!
//! The transport sends `{id, messages, trigger, messageId, ...body}`: the
//! whole conversation as the browser holds it, of which only the last
//! message counts (Parley has the rest). Fields the transport's `body`
//! option adds are read when Parley knows them (`page`, `model`) and
//! ignored otherwise.

use parley_proto::{gateway::v1 as gw, json::to_struct, json::to_struct_wrapped};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The posted body.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatBody {
    /// The chat id (`useChat`'s `id`): a Parley conversation id, or the
    /// browser's own id bound to a conversation on its first message.
    pub id: String,
    /// The messages as the browser holds them; the last one is new.
    #[serde(default)]
    pub messages: Vec<UiMessage>,
    /// `submit-message` (the default) or `regenerate-message`.
    #[serde(default)]
    pub trigger: Option<String>,
    /// With `regenerate-message`: the assistant message (Parley turn) to
    /// run again; the latest when absent.
    #[serde(default)]
    pub message_id: Option<String>,
    /// Where the user is (`ChatRequest.page`).
    #[serde(default)]
    pub page: Option<PageBody>,
    /// A model override (`ChatRequest.model`).
    #[serde(default)]
    pub model: Option<String>,
}

/// One `UIMessage`.
#[derive(Debug, Deserialize)]
pub struct UiMessage {
    /// Its id (the browser's for a user message, the turn id for ours).
    #[serde(default)]
    pub id: String,
    /// `user`, `assistant` or `system`.
    pub role: String,
    /// Its parts, read by type.
    #[serde(default)]
    pub parts: Vec<Value>,
}

/// `ChatRequest.page` in JSON.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PageBody {
    #[serde(default)]
    page: String,
    #[serde(default)]
    tab: String,
    #[serde(default)]
    subtab: String,
    #[serde(default)]
    state: Option<Map<String, Value>>,
    #[serde(default)]
    stream_id: String,
}

impl PageBody {
    /// The wire page context.
    pub fn to_wire(&self) -> gw::PageContext {
        gw::PageContext {
            page: self.page.clone(),
            tab: self.tab.clone(),
            subtab: self.subtab.clone(),
            state: self.state.as_ref().map(to_struct),
            stream_id: self.stream_id.clone(),
        }
    }
}

/// What a posted body asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    /// A new user message (`Chat`).
    Send {
        /// Its text: the last user message's text parts.
        text: String,
        /// Its idempotency key: the browser's id of the message, so a
        /// retried post joins its turn.
        request_id: String,
    },
    /// Run an answer again (`RegenerateTurn`).
    Regenerate {
        /// The turn; the conversation's latest when `None`.
        turn_id: Option<String>,
    },
    /// Continue a paused turn (`SubmitToolDecisions`): the last message is
    /// the assistant's, with the user's approval responses and the app's
    /// tool outputs in its last step.
    Decide {
        /// The paused turn (the assistant message's id).
        turn_id: String,
        /// One decision per call the turn waits for.
        decisions: Vec<gw::ToolDecision>,
    },
}

/// Why a body cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// Not JSON, or not the shape `useChat` sends.
    #[error("the body is not the JSON useChat sends: {0}")]
    Json(#[from] serde_json::Error),
    /// `id` is empty.
    #[error("`id` (the chat id) is required")]
    MissingId,
    /// A trigger this endpoint does not know.
    #[error("`trigger` must be `submit-message` or `regenerate-message`, not `{0}`")]
    Trigger(String),
    /// No message to send.
    #[error("`messages` holds no message to send")]
    NoMessage,
    /// The last message is the assistant's but answers nothing.
    #[error(
        "the last message is the assistant's and holds no tool output or approval response for a call Parley waits for"
    )]
    NoDecisions,
}

impl BodyError {
    /// The JSON field at fault, for the error's `BadRequest`.
    pub fn field(&self) -> &'static str {
        match self {
            Self::Json(_) => "body",
            Self::MissingId => "id",
            Self::Trigger(_) => "trigger",
            Self::NoMessage | Self::NoDecisions => "messages",
        }
    }
}

/// Reads a posted body.
pub fn parse(bytes: &[u8]) -> Result<ChatBody, BodyError> {
    let body: ChatBody = serde_json::from_slice(bytes)?;
    if body.id.is_empty() {
        return Err(BodyError::MissingId);
    }
    Ok(body)
}

impl ChatBody {
    /// What the body asks for.
    pub fn ask(&self) -> Result<Ask, BodyError> {
        match self.trigger.as_deref() {
            None | Some("submit-message") => {}
            Some("regenerate-message") => {
                return Ok(Ask::Regenerate {
                    turn_id: self.message_id.clone().filter(|id| !id.is_empty()),
                });
            }
            Some(other) => return Err(BodyError::Trigger(other.to_owned())),
        }
        let last = self.messages.last().ok_or(BodyError::NoMessage)?;
        match last.role.as_str() {
            "user" => Ok(Ask::Send {
                text: text_of(last),
                // An edit keeps the message's id: it is a new message.
                request_id: if self.message_id.is_some() {
                    String::new()
                } else {
                    last.id.clone()
                },
            }),
            "assistant" => {
                let decisions = decisions(last);
                if decisions.is_empty() {
                    return Err(BodyError::NoDecisions);
                }
                Ok(Ask::Decide {
                    turn_id: last.id.clone(),
                    decisions,
                })
            }
            _ => Err(BodyError::NoMessage),
        }
    }
}

/// A message's text parts, one after the other.
fn text_of(message: &UiMessage) -> String {
    let texts: Vec<&str> = message
        .parts
        .iter()
        .filter(|part| part["type"] == "text")
        .filter_map(|part| part["text"].as_str())
        .collect();
    texts.join("\n")
}

/// The decisions in the last step of an assistant message: for each call
/// Parley asked about in that step (a `data-parley-approval-request` or
/// `data-parley-client-tool-call` part), the tool part's approval response
/// or output. Calls still undecided are left out (Parley then refuses the
/// incomplete submission, naming them).
fn decisions(message: &UiMessage) -> Vec<gw::ToolDecision> {
    let step = message
        .parts
        .iter()
        .rposition(|part| part["type"] == "step-start")
        .map_or(&message.parts[..], |start| &message.parts[start + 1..]);
    let asked: Vec<&str> = step
        .iter()
        .filter(|part| {
            part["type"] == "data-parley-approval-request"
                || part["type"] == "data-parley-client-tool-call"
        })
        .filter_map(|part| part["data"]["toolCallId"].as_str())
        .collect();
    step.iter()
        .filter(|part| {
            part["type"]
                .as_str()
                .is_some_and(|kind| kind == "dynamic-tool" || kind.starts_with("tool-"))
        })
        .filter_map(|part| {
            let call_id = part["toolCallId"].as_str()?;
            if !asked.contains(&call_id) {
                return None;
            }
            use gw::tool_decision::Decision;
            let decision = match part["state"].as_str()? {
                "approval-responded" | "output-denied" => {
                    let approval = &part["approval"];
                    if approval["approved"].as_bool()? {
                        Decision::Approve(gw::ToolApproval { arguments: None })
                    } else {
                        Decision::Reject(gw::ToolRejection {
                            reason: approval["reason"].as_str().unwrap_or_default().to_owned(),
                        })
                    }
                }
                "output-available" => Decision::Result(gw::ClientToolResult {
                    output: Some(to_struct_wrapped(&part["output"])),
                    error: String::new(),
                }),
                "output-error" => Decision::Result(gw::ClientToolResult {
                    output: None,
                    error: part["errorText"]
                        .as_str()
                        .unwrap_or("the tool failed")
                        .to_owned(),
                }),
                _ => return None,
            };
            Some(gw::ToolDecision {
                call_id: call_id.to_owned(),
                decision: Some(decision),
            })
        })
        .collect()
}
