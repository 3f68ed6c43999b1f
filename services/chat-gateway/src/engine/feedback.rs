//! What users do with finished turns: their decision on a turn's proposal
//! card (`RecordPayloadDecision`) and their rating of a turn
//! (`SubmitFeedback`). Both are data: stored with the turn (the last one
//! recorded wins, so a retry changes nothing), shown to the model in the
//! next turn's payload manifest (decisions), returned by `GetConversation`,
//! counted per payload type or page in the metrics and recorded as a span
//! event on the turn's trace — counts and names only, never the note, the
//! comment or the applied data.

use parley_grpc::telemetry::{metrics, propagation, semconv as sc};
use serde_json::Value;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::Engine;
use crate::{
    convert,
    error::GatewayError,
    store::{
        StoredDecision, StoredFeedback, TurnState, UserDecision, decisions::DecidedTurn, now_ms,
    },
};

/// A checked `RecordPayloadDecisionRequest`.
#[derive(Debug, Clone, PartialEq)]
pub struct PayloadDecisionInput {
    /// The conversation.
    pub conversation_id: String,
    /// The decided turn.
    pub turn_id: String,
    /// The decision.
    pub decision: UserDecision,
    /// What the application applied (edited proposals only).
    pub applied_data: Option<Value>,
    /// The user's note.
    pub note: String,
}

/// A checked `SubmitFeedbackRequest`.
#[derive(Debug, Clone, PartialEq)]
pub struct FeedbackInput {
    /// The conversation.
    pub conversation_id: String,
    /// The rated turn.
    pub turn_id: String,
    /// -1, or 1 to 5.
    pub rating: i32,
    /// The comment.
    pub comment: String,
    /// The tags.
    pub tags: Vec<String>,
}

impl Engine {
    /// Stores the owner's decision on the turn's proposal card: the turn
    /// must have finished with one (`NO_PAYLOAD` otherwise), and edited data
    /// must fit the payload type's schema.
    pub async fn record_payload_decision(
        &self,
        owner: &str,
        input: PayloadDecisionInput,
    ) -> Result<(), GatewayError> {
        let turn = self
            .finished_turn(owner, &input.conversation_id, &input.turn_id)
            .await?;
        let payload_type = turn
            .outcome
            .as_deref()
            .and_then(convert::decode_outcome)
            .and_then(|complete| complete.custom_payload)
            .map(|payload| payload.r#type)
            .ok_or_else(|| GatewayError::NoPayload {
                turn_id: input.turn_id.clone(),
            })?;
        if let Some(applied) = &input.applied_data {
            self.check_applied_data(&payload_type, applied)?;
        }
        let decision = StoredDecision {
            decision: input.decision,
            applied_data: input.applied_data,
            note: input.note,
            decided_at: now_ms(),
        };
        let stored = self
            .store()
            .record_payload_decision(owner, &input.conversation_id, &input.turn_id, &decision)
            .await?;
        if !stored {
            return Err(GatewayError::TurnNotFound);
        }
        let label = if self.registry().payload_type(&payload_type).is_some() {
            payload_type.as_str()
        } else {
            sc::OTHER
        };
        let kind = decision.decision.as_str();
        metrics()
            .payload_decisions
            .with_label_values(&[label, kind])
            .inc();
        on_turn_trace(
            &turn,
            &input.turn_id,
            "parley.payload_decision",
            vec![
                opentelemetry::KeyValue::new(sc::LABEL_PAYLOAD_TYPE, label.to_owned()),
                opentelemetry::KeyValue::new(sc::LABEL_DECISION, kind),
            ],
        );
        Ok(())
    }

    /// Stores the owner's rating of a finished turn.
    pub async fn submit_feedback(
        &self,
        owner: &str,
        input: FeedbackInput,
    ) -> Result<(), GatewayError> {
        let turn = self
            .finished_turn(owner, &input.conversation_id, &input.turn_id)
            .await?;
        let feedback = StoredFeedback {
            rating: input.rating,
            comment: input.comment,
            tags: input.tags,
            submitted_at: now_ms(),
        };
        let stored = self
            .store()
            .record_feedback(owner, &input.conversation_id, &input.turn_id, &feedback)
            .await?;
        if !stored {
            return Err(GatewayError::TurnNotFound);
        }
        let page = if self.registry().has_page(&turn.page) {
            turn.page.as_str()
        } else {
            sc::OTHER
        };
        let rating = feedback.rating.to_string();
        metrics()
            .feedback
            .with_label_values(&[page, rating.as_str()])
            .inc();
        on_turn_trace(
            &turn,
            &input.turn_id,
            "parley.feedback",
            vec![
                opentelemetry::KeyValue::new(sc::LABEL_PAGE, page.to_owned()),
                opentelemetry::KeyValue::new(sc::LABEL_RATING, i64::from(feedback.rating)),
            ],
        );
        Ok(())
    }

    /// The owner's turn, once it has ended: `TURN_NOT_FOUND` when there is
    /// no such turn of theirs in the conversation, `TURN_NOT_FINISHED`
    /// while it runs or waits for decisions.
    async fn finished_turn(
        &self,
        owner: &str,
        conversation_id: &str,
        turn_id: &str,
    ) -> Result<DecidedTurn, GatewayError> {
        let turn = self
            .store()
            .decided_turn(owner, conversation_id, turn_id)
            .await?
            .ok_or(GatewayError::TurnNotFound)?;
        match turn.state {
            TurnState::Running | TurnState::AwaitingInput => Err(GatewayError::TurnNotFinished {
                turn_id: turn_id.to_owned(),
            }),
            TurnState::Completed | TurnState::Cancelled | TurnState::Failed => Ok(turn),
        }
    }

    /// Edited data must be what the payload type allows (its registered
    /// schema); a type no longer registered accepts any object.
    fn check_applied_data(&self, payload_type: &str, applied: &Value) -> Result<(), GatewayError> {
        let Some(schema) = self.registry().payload_schema_text(payload_type) else {
            return Ok(());
        };
        let refuse = |problem: String| {
            GatewayError::invalid("INVALID_PAYLOAD_DECISION", "applied_data", problem)
        };
        let schema: Value = serde_json::from_str(schema)
            .map_err(|_| refuse(format!("the schema of `{payload_type}` cannot be read")))?;
        let validator = jsonschema::validator_for(&schema)
            .map_err(|_| refuse(format!("the schema of `{payload_type}` does not compile")))?;
        if let Some(error) = validator.iter_errors(applied).next() {
            return Err(refuse(format!(
                "does not match the schema of `{payload_type}`: {} (at `{}`)",
                crate::text::truncate(&error.to_string(), 200),
                error.instance_path()
            )));
        }
        Ok(())
    }
}

/// Records `event` on the turn's trace: a short span, child of the call
/// that began the turn (when it was traced) and linked to this call's.
fn on_turn_trace(
    turn: &DecidedTurn,
    turn_id: &str,
    event: &'static str,
    attributes: Vec<opentelemetry::KeyValue>,
) {
    let span = tracing::info_span!(
        "turn.user_input",
        otel.name = event,
        { sc::PARLEY_TURN_ID } = turn_id,
    );
    let here = tracing::Span::current().context();
    if let Some(parent) = turn.trace_parent.as_deref() {
        let _ = span.set_parent(propagation::from_traceparent(parent));
    }
    {
        use opentelemetry::trace::TraceContextExt;
        let link = here.span().span_context().clone();
        if link.is_valid() {
            span.add_link(link);
        }
    }
    span.add_event(event, attributes);
}

#[cfg(test)]
mod tests {
    use parley_testkit::spans::SpanCapture;

    use super::*;

    #[test]
    fn a_decision_is_an_event_on_the_trace_that_began_its_turn() {
        let (capture, _guard) = SpanCapture::install();
        // The call that began the turn: its traceparent is what the store
        // keeps (`begin_turn`).
        let began = tracing::info_span!("chat");
        let stored = began.in_scope(propagation::current_traceparent);
        drop(began);
        let stored = stored.expect("a traced call has a traceparent");
        let turn = DecidedTurn {
            state: TurnState::Completed,
            outcome: None,
            trace_parent: Some(stored.clone()),
            page: "tables_list".into(),
        };
        // Later, another call records the decision.
        let call = tracing::info_span!("record_payload_decision");
        call.in_scope(|| {
            on_turn_trace(
                &turn,
                "turn-1",
                "parley.payload_decision",
                vec![opentelemetry::KeyValue::new("decision", "accepted")],
            );
        });
        drop(call);
        let spans = capture.spans();
        let chat = spans.iter().find(|s| s.name == "chat").expect("chat span");
        let call = spans
            .iter()
            .find(|s| s.name == "record_payload_decision")
            .expect("call span");
        let event = spans
            .iter()
            .find(|s| s.name == "parley.payload_decision")
            .expect("the decision's span");
        assert_eq!(stored, chat.traceparent());
        assert_eq!(
            (event.trace_id.as_str(), event.parent_span_id.as_str()),
            (chat.trace_id.as_str(), chat.span_id.as_str()),
            "a child of the call that began the turn"
        );
        assert_eq!(event.events, vec!["parley.payload_decision".to_owned()]);
        assert_eq!(
            event.links,
            vec![call.trace_id.clone()],
            "linked to this call"
        );

        // A turn begun without tracing: the span stands alone, no panic.
        let untraced = DecidedTurn {
            trace_parent: None,
            ..turn
        };
        on_turn_trace(&untraced, "turn-2", "parley.feedback", Vec::new());
        let alone = capture
            .spans()
            .into_iter()
            .find(|s| s.name == "parley.feedback")
            .expect("the rating's span");
        assert_eq!(alone.events, vec!["parley.feedback".to_owned()]);
    }
}
