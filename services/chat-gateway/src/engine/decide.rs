//! Turns paused for the user's decisions (see [`crate::turn::pause`]):
//! continuing one with `SubmitToolDecisions`, and closing one that expired,
//! that the user left for a new message, or that was cancelled — on any
//! replica, since a paused turn lives in the store alone.

use std::sync::Arc;

use parley_proto::{
    gateway::v1::{self as gw, ChatEvent, tool_decision::Decision},
    json,
    runner::v1 as runner,
};
use tracing::Instrument;

use super::{Engine, Followed};
use crate::{
    auth::Principal,
    durable::{follow, journal::Journal, manager::ReserveError},
    error::GatewayError,
    registry::PageRef,
    store::{
        Store, StoredPage, TurnState, millis,
        pauses::{TakePaused, Taken},
    },
    turn::{
        StartTurn, TurnSpec, flow, observe,
        outcome::Ending,
        pause::{Continuation, Resume},
    },
};

/// A `SubmitToolDecisions` request, checked for form.
#[derive(Debug, Clone)]
pub struct Decisions {
    /// The conversation.
    pub conversation_id: String,
    /// The paused turn.
    pub turn_id: String,
    /// One per pending call.
    pub decisions: Vec<gw::ToolDecision>,
    /// The idempotency key, when sent.
    pub request_id: Option<String>,
}

/// Why a paused turn is closed without running on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closing {
    /// Its pause expired (`turns.input_ttl`).
    Expired,
    /// The user sent a new message on its conversation.
    MovedOn,
    /// `CancelTurn`.
    Cancelled,
}

impl Closing {
    fn ending(self) -> (Ending, &'static str) {
        match self {
            Self::Expired => (
                Ending::Completed {
                    stop_reason: "no_answer".into(),
                },
                "not run: no decision came before the request expired",
            ),
            Self::MovedOn => (
                Ending::Completed {
                    stop_reason: "no_answer".into(),
                },
                "not run: the user sent a new message instead of deciding",
            ),
            Self::Cancelled => (Ending::Cancelled, "not run: the turn was cancelled"),
        }
    }
}

/// Longest rejection reason or client error, in bytes.
const MAX_DECISION_TEXT: usize = 4096;

impl Engine {
    /// Continues a paused turn of `principal` with `submitted` decisions,
    /// here, and returns the client's stream of the continuation (the
    /// events after the pause). A retried submission (same request id)
    /// follows the turn instead.
    pub async fn submit_tool_decisions(
        self: &Arc<Self>,
        principal: &Principal,
        submitted: Decisions,
    ) -> Result<Followed, GatewayError> {
        let owner = principal.owner();
        let turn = self
            .conversation_turn(
                owner,
                &submitted.conversation_id,
                Some(&submitted.turn_id),
                Store::latest_turn,
            )
            .await?
            .ok_or(GatewayError::TurnNotFound)?;
        if turn.state != TurnState::AwaitingInput {
            if let Some(request_id) = &submitted.request_id
                && self
                    .shared
                    .store
                    .decisions_request_id(owner, &turn.id)
                    .await?
                    .as_deref()
                    == Some(request_id.as_str())
            {
                tracing::info!(turn = %turn.id, "a retried submission follows its turn");
                return self.follow_leased(principal, turn, 0).await;
            }
            return Err(GatewayError::TurnNotAwaitingInput { turn_id: turn.id });
        }
        let Some((last_seq, stored)) = self.shared.store.paused(owner, &turn.id).await? else {
            return Err(GatewayError::TurnNotAwaitingInput { turn_id: turn.id });
        };
        let continuation = decode(&turn.id, &stored)?;
        let decisions = runner_decisions(
            &continuation,
            &submitted.decisions,
            self.shared.config.max_state_bytes,
        )?;
        let lease = self.open_stream(principal).await?;
        let journal = self.continued_journal(owner, &turn.id, last_seq).await?;
        let slot = self
            .turns
            .reserve(&turn.conversation_id, &journal)
            .map_err(refused)?;
        let taken = self
            .shared
            .store
            .take_paused(&TakePaused {
                owner,
                turn_id: &turn.id,
                replica: &self.shared.replica,
                lease_ttl_ms: millis(self.shared.config.lease_ttl),
                request_id: submitted.request_id.as_deref(),
                expired_too: false,
                at_seq: Some(last_seq),
            })
            .await?;
        match taken {
            Taken::Taken(_) => {}
            Taken::NotPaused => {
                return Err(GatewayError::TurnNotAwaitingInput { turn_id: turn.id });
            }
            Taken::Busy => {
                return Err(GatewayError::TurnInProgress {
                    turn_id: String::new(),
                });
            }
        }
        let resume = Resume {
            request: continuation.continued_request(decisions),
            before: continuation.before(),
        };
        let spec = self.continued_spec(
            principal.clone(),
            &turn.conversation_id,
            &turn.id,
            &continuation,
            Some(resume),
        );
        tracing::info!(conversation = %spec.start.conversation_id, turn = %spec.turn_id, "turn continues after decisions");
        let source = self.source(owner, &spec.turn_id);
        let stream = follow::local(journal.clone(), source, last_seq);
        let span = observe::turn_span(&spec);
        tokio::spawn(flow::run(self.shared.clone(), spec, slot, journal).instrument(span));
        tokio::task::yield_now().await;
        Ok(Followed { stream, lease })
    }

    /// Closes a paused turn of `owner` without running it on (see
    /// [`Closing`]): true when this call closed it, false when it was not
    /// paused (any more).
    pub async fn close_paused(
        self: &Arc<Self>,
        owner: &str,
        turn_id: &str,
        closing: Closing,
    ) -> Result<bool, GatewayError> {
        let Some((last_seq, stored)) = self.shared.store.paused(owner, turn_id).await? else {
            return Ok(false);
        };
        let continuation = decode(turn_id, &stored)?;
        let request = continuation.request.clone().unwrap_or_default();
        let journal = self.continued_journal(owner, turn_id, last_seq).await?;
        let slot = match self.turns.reserve(&request.conversation_id, &journal) {
            Ok(slot) => slot,
            Err(error) => return Err(refused(error)),
        };
        let taken = self
            .shared
            .store
            .take_paused(&TakePaused {
                owner,
                turn_id,
                replica: &self.shared.replica,
                lease_ttl_ms: millis(self.shared.config.lease_ttl),
                request_id: None,
                expired_too: true,
                at_seq: Some(last_seq),
            })
            .await?;
        let Taken::Taken(_) = taken else {
            return Ok(false);
        };
        let principal = Principal::new(
            request.user_issuer.clone(),
            Some(request.tenant.clone()).filter(|tenant| !tenant.is_empty()),
            request.user_id.clone(),
        );
        let spec = self.continued_spec(
            principal,
            &request.conversation_id,
            turn_id,
            &continuation,
            None,
        );
        tracing::info!(turn = %turn_id, ?closing, "closing a paused turn");
        let span = observe::turn_span(&spec);
        flow::close(
            self.shared.clone(),
            spec,
            (slot, journal),
            continuation,
            closing.ending(),
        )
        .instrument(span)
        .await;
        Ok(true)
    }

    /// The journal of a paused turn about to run on: its stored events up
    /// to the pause (`last_seq`), then what it adds.
    async fn continued_journal(
        &self,
        owner: &str,
        turn_id: &str,
        last_seq: u64,
    ) -> Result<Arc<Journal>, GatewayError> {
        // Events the store no longer has (pruned, or never logged) keep
        // their seqs, empty: a follower from seq 0 skips them.
        let mut events: Vec<ChatEvent> = (1..=last_seq)
            .map(|seq| ChatEvent { seq, event: None })
            .collect();
        for batch in self.shared.store.wire_events(owner, turn_id, 0).await? {
            for event in crate::durable::journal::decode(&batch).unwrap_or_default() {
                if let Some(slot) = usize::try_from(event.seq)
                    .ok()
                    .and_then(|seq| seq.checked_sub(1))
                    .and_then(|index| events.get_mut(index))
                {
                    *slot = event;
                }
            }
        }
        let (log, ahead) = match &self.log {
            Some(log) => (
                Some(log.clone() as Arc<dyn crate::durable::journal::Writer>),
                self.shared.config.stream_ahead,
            ),
            None => (None, 0),
        };
        Ok(Journal::continued(turn_id, log, ahead, events))
    }

    /// The spec of a paused turn that runs on (or closes) here.
    fn continued_spec(
        &self,
        principal: Principal,
        conversation_id: &str,
        turn_id: &str,
        continuation: &Continuation,
        resume: Option<Resume>,
    ) -> TurnSpec {
        let page: StoredPage = serde_json::from_str(&continuation.page).unwrap_or_default();
        let resolved = Arc::new(self.shared.registry.resolve(&PageRef {
            page: page.page.clone(),
            tab: page.tab.clone(),
            subtab: page.subtab.clone(),
        }));
        let request = continuation.request.as_ref();
        TurnSpec {
            start: StartTurn {
                principal,
                conversation_id: conversation_id.to_owned(),
                message: continuation.message.clone(),
                page,
                resolved,
                response_schema: serde_json::from_str(&continuation.response_schema).ok(),
                model: request.and_then(|request| request.model.clone()),
                request_id: None,
                cancel_running: false,
                mid_answer_failover: continuation.mid_answer_failover,
                action: Some(continuation.action.clone()).filter(|action| !action.is_empty()),
                client_tools: Vec::new(),
                attachments: Vec::new(),
                parent: None,
                deadline: tokio::time::Instant::now() + self.shared.config.max_duration,
            },
            turn_id: turn_id.to_owned(),
            new_conversation: false,
            // A continued turn sends its pause's request: no history read.
            branched: false,
            resume: resume.map(Arc::new),
        }
    }
}

/// Why this replica cannot take a paused turn back now.
fn refused(error: ReserveError) -> GatewayError {
    match error {
        ReserveError::Full => GatewayError::TooManyTurns,
        ReserveError::Busy { turn_id } => GatewayError::TurnInProgress { turn_id },
    }
}

fn decode(turn_id: &str, stored: &str) -> Result<Continuation, GatewayError> {
    Continuation::decode_base64(stored).ok_or_else(|| {
        tracing::error!(turn = %turn_id, "a paused turn's continuation does not decode");
        GatewayError::Store(crate::store::StoreError::CorruptTurn {
            turn: turn_id.to_owned(),
            state: "awaiting_input, with an unreadable continuation".into(),
        })
    })
}

/// The runner's decisions for the pause's waiting calls: one for each, of
/// the kind its call needs (approve or reject an approval, a result for a
/// client call), edited arguments valid for the tool's input schema,
/// texts and values within bounds.
fn runner_decisions(
    continuation: &Continuation,
    submitted: &[gw::ToolDecision],
    max_value_bytes: usize,
) -> Result<Vec<runner::ToolDecision>, GatewayError> {
    let invalid = |field: String, problem: String| GatewayError::InvalidArgument {
        reason: "INVALID_DECISIONS",
        violations: vec![(field, problem)],
    };
    let pending = continuation.pending();
    let mut out = Vec::with_capacity(submitted.len());
    for (index, decision) in submitted.iter().enumerate() {
        let field = |name: &str| format!("decisions[{index}].{name}");
        let Some(waiting) = pending.iter().find(|p| {
            p.call
                .as_ref()
                .is_some_and(|call| call.id == decision.call_id)
        }) else {
            return Err(invalid(
                field("call_id"),
                format!("`{}` is not a call this turn waits for", decision.call_id),
            ));
        };
        if submitted[..index]
            .iter()
            .any(|earlier| earlier.call_id == decision.call_id)
        {
            return Err(invalid(field("call_id"), "decided twice".into()));
        }
        let client = waiting.reason == runner::PendingReason::Client as i32;
        let too_large = |value: &prost_types::Struct| {
            serde_json::to_vec(&json::from_struct_value(value))
                .map_or(true, |bytes| bytes.len() > max_value_bytes)
        };
        let decided = match &decision.decision {
            None => {
                return Err(invalid(
                    field("decision"),
                    "approve, reject or result is required".into(),
                ));
            }
            Some(Decision::Approve(_)) | Some(Decision::Result(_))
                if matches!(decision.decision, Some(Decision::Approve(_))) == client =>
            {
                let needs = if client {
                    "a `result`"
                } else {
                    "`approve` or `reject`"
                };
                return Err(invalid(
                    field("decision"),
                    format!("this call needs {needs}"),
                ));
            }
            Some(Decision::Approve(approval)) => {
                if let Some(arguments) = &approval.arguments {
                    if too_large(arguments) {
                        return Err(invalid(
                            field("approve.arguments"),
                            format!("larger than {max_value_bytes} bytes as JSON"),
                        ));
                    }
                    check_arguments(
                        continuation,
                        waiting,
                        arguments,
                        &field("approve.arguments"),
                    )?;
                }
                runner::tool_decision::Decision::Approve(runner::ToolApproval {
                    arguments: approval.arguments.clone(),
                })
            }
            Some(Decision::Reject(rejection)) => {
                if rejection.reason.len() > MAX_DECISION_TEXT {
                    return Err(invalid(
                        field("reject.reason"),
                        format!("longer than {MAX_DECISION_TEXT} bytes"),
                    ));
                }
                runner::tool_decision::Decision::Reject(runner::ToolRejection {
                    reason: rejection.reason.clone(),
                })
            }
            Some(Decision::Result(result)) => {
                if result.error.len() > MAX_DECISION_TEXT {
                    return Err(invalid(
                        field("result.error"),
                        format!("longer than {MAX_DECISION_TEXT} bytes"),
                    ));
                }
                if result.output.as_ref().is_some_and(too_large) {
                    return Err(invalid(
                        field("result.output"),
                        format!("larger than {max_value_bytes} bytes as JSON"),
                    ));
                }
                runner::tool_decision::Decision::Result(runner::ClientToolResult {
                    output: result.output.clone(),
                    error: result.error.clone(),
                })
            }
        };
        out.push(runner::ToolDecision {
            call_id: decision.call_id.clone(),
            decision: Some(decided),
        });
    }
    if let Some(missing) = pending
        .iter()
        .filter_map(|p| p.call.as_ref())
        .find(|call| !submitted.iter().any(|d| d.call_id == call.id))
    {
        return Err(invalid(
            "decisions".into(),
            format!("no decision for call `{}` ({})", missing.id, missing.name),
        ));
    }
    Ok(out)
}

/// Edited arguments must satisfy the tool's input schema.
fn check_arguments(
    continuation: &Continuation,
    waiting: &runner::PendingToolCall,
    arguments: &prost_types::Struct,
    field: &str,
) -> Result<(), GatewayError> {
    let Some(call) = &waiting.call else {
        return Ok(());
    };
    let schema = continuation
        .request
        .as_ref()
        .and_then(|request| request.tools.iter().find(|tool| tool.name == call.name))
        .and_then(|tool| tool.input_schema.as_ref())
        .map(json::from_struct_value);
    let Some(schema) = schema else {
        return Ok(());
    };
    let Ok(validator) = jsonschema::validator_for(&schema) else {
        return Ok(());
    };
    let value = json::from_struct_value(arguments);
    if let Some(error) = validator.iter_errors(&value).next() {
        return Err(GatewayError::InvalidArgument {
            reason: "INVALID_TOOL_ARGUMENTS",
            violations: vec![(
                field.to_owned(),
                format!("does not satisfy `{}`'s input schema: {error}", call.name),
            )],
        });
    }
    Ok(())
}
