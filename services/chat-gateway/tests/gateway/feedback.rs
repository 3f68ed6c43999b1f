//! What the user did with a turn, through the wire: the decision on its
//! proposal card reaches the next turn's prompt and `GetConversation`, a
//! rating is stored and counted, and both are the owner's alone.

use parley_proto::{
    gateway::v1::{self as gw},
    json,
};
use serde_json::json;
use tonic::Code;

use crate::{
    auth::{hs256, secured},
    harness::{
        Harness, Options, chat, chat_request,
        fake_runner::{Reply, Step, deltas, text_reply},
        reason, until_text, with_token,
    },
};

/// An answer with a schema proposal (the example registry's type).
fn proposal_answer() -> String {
    let proposal = json!({
        "mode": "create",
        "reasoning": "Track applications",
        "table_name": "Job Applications",
        "table_description": "Tracks job applications",
        "operations": [{"action": "add", "column": {"name": "Company", "type": "text"}}],
        "sample_rows": [{"Company": "Acme"}],
    });
    format!("Here is a table.\n\n**SCHEMA_PROPOSAL:** {proposal}")
}

fn decision(
    conversation_id: &str,
    turn_id: &str,
    decision: gw::PayloadDecision,
    applied: Option<serde_json::Value>,
    note: &str,
) -> gw::RecordPayloadDecisionRequest {
    gw::RecordPayloadDecisionRequest {
        conversation_id: conversation_id.into(),
        turn_id: turn_id.into(),
        decision: decision as i32,
        applied_data: applied.as_ref().map(json::to_struct_wrapped),
        note: note.into(),
    }
}

fn rating(conversation_id: &str, turn_id: &str, rating: i32) -> gw::SubmitFeedbackRequest {
    gw::SubmitFeedbackRequest {
        conversation_id: conversation_id.into(),
        turn_id: turn_id.into(),
        rating,
        comment: "the wrong table".into(),
        tags: vec!["inaccurate".into()],
    }
}

fn feedback_count(page: &str, rating: &str) -> u64 {
    parley_grpc::telemetry::metrics()
        .feedback
        .with_label_values(&[page, rating])
        .get()
}

fn decision_count(payload_type: &str, decision: &str) -> u64 {
    parley_grpc::telemetry::metrics()
        .payload_decisions
        .with_label_values(&[payload_type, decision])
        .get()
}

#[tokio::test]
async fn a_decision_on_a_proposal_reaches_the_next_prompt_and_the_conversation() {
    let mut stack = Harness::start(Options::default()).await;
    stack.runner.push(deltas(&proposal_answer(), 16));
    let first = chat(
        &mut stack.client,
        chat_request("", "Track my job applications", "tables_list"),
    )
    .await;
    assert!(
        first.complete.custom_payload.is_some(),
        "{:?}",
        first.complete
    );
    let (conversation, turn) = (first.conversation_id(), first.complete.turn_id.clone());
    let edited_before = decision_count("schema_proposal", "edited");

    // Dismissed first; then the user changes their mind and applies an
    // edited table. Data that breaks the type's schema is refused.
    stack
        .client
        .record_payload_decision(decision(
            &conversation,
            &turn,
            gw::PayloadDecision::Dismissed,
            None,
            "",
        ))
        .await
        .expect("dismissed");
    let bad = stack
        .client
        .record_payload_decision(decision(
            &conversation,
            &turn,
            gw::PayloadDecision::Edited,
            Some(json!({"mode": "sideways"})),
            "",
        ))
        .await
        .expect_err("not a schema proposal");
    assert_eq!(
        (bad.code(), reason(&bad).as_str()),
        (Code::InvalidArgument, "INVALID_PAYLOAD_DECISION"),
        "{bad:?}"
    );
    let applied = json!({
        "mode": "create",
        "reasoning": "Renamed by the user",
        "table_name": "Job Tracker",
        "table_description": "Tracks job applications",
        "operations": [{"action": "add", "column": {"name": "Company", "type": "text"}}],
        "sample_rows": [],
    });
    for _ in 0..2 {
        // A retry changes nothing: the last write wins.
        stack
            .client
            .record_payload_decision(decision(
                &conversation,
                &turn,
                gw::PayloadDecision::Edited,
                Some(applied.clone()),
                "renamed it",
            ))
            .await
            .expect("edited");
    }
    assert_eq!(
        decision_count("schema_proposal", "edited"),
        edited_before + 2,
        "each recorded decision is counted"
    );

    // The next turn's prompt says what the user did.
    stack.runner.push(text_reply(&["Renamed."]));
    chat(
        &mut stack.client,
        chat_request(&conversation, "Add a Status column", "tables_list"),
    )
    .await;
    let prompt = stack.runner.seen()[1].request.system_prompt.clone();
    let line = prompt
        .lines()
        .find(|line| line.starts_with("- turn 0, schema_proposal:"))
        .unwrap_or_else(|| panic!("no manifest line in {prompt}"));
    assert!(
        line.ends_with("[edited: renamed it; applied create table \"Job Tracker\", 1 column operation(s): Renamed by the user]"),
        "{line}"
    );

    // And GetConversation returns it.
    let stored = stack
        .client
        .get_conversation(gw::GetConversationRequest {
            conversation_id: conversation.clone(),
            ..Default::default()
        })
        .await
        .expect("get")
        .into_inner();
    let record = stored.messages[1]
        .payload_decision
        .as_ref()
        .expect("the decision");
    assert_eq!(record.decision, gw::PayloadDecision::Edited as i32);
    assert_eq!(record.note, "renamed it");
    assert_eq!(
        record.applied_data.as_ref().map(json::from_struct_value),
        Some(applied)
    );
    assert!(record.decided_at.is_some());
    assert!(stored.messages[3].payload_decision.is_none());
    stack.stop().await;
}

#[tokio::test]
async fn ratings_are_stored_counted_and_only_the_owners() {
    let mut stack = secured().await;
    let alice = hs256("alice", "parley", 600);
    let mallory = hs256("mallory", "parley", 600);
    stack.runner.push(text_reply(&["Two tables."]));
    let answered = chat(
        &mut stack.client,
        with_token(chat_request("", "How many tables?", "tables_list"), &alice),
    )
    .await;
    let (conversation, turn) = (
        answered.conversation_id(),
        answered.complete.turn_id.clone(),
    );

    // Mallory cannot tell the turn exists.
    let theirs = stack
        .client
        .submit_feedback(with_token(rating(&conversation, &turn, 1), &mallory))
        .await
        .expect_err("not mallory's");
    assert_eq!(theirs.code(), Code::NotFound, "{theirs:?}");
    let theirs = stack
        .client
        .record_payload_decision(with_token(
            decision(
                &conversation,
                &turn,
                gw::PayloadDecision::Accepted,
                None,
                "",
            ),
            &mallory,
        ))
        .await
        .expect_err("not mallory's");
    assert_eq!(theirs.code(), Code::NotFound, "{theirs:?}");
    // A turn without a card has nothing to decide on.
    let none = stack
        .client
        .record_payload_decision(with_token(
            decision(
                &conversation,
                &turn,
                gw::PayloadDecision::Accepted,
                None,
                "",
            ),
            &alice,
        ))
        .await
        .expect_err("no card");
    assert_eq!(
        (none.code(), reason(&none).as_str()),
        (Code::FailedPrecondition, "NO_PAYLOAD")
    );

    let down_before = feedback_count("tables_list", "-1");
    let five_before = feedback_count("tables_list", "5");
    stack
        .client
        .submit_feedback(with_token(rating(&conversation, &turn, -1), &alice))
        .await
        .expect("thumbs down");
    let mut five = rating(&conversation, &turn, 5);
    five.comment = String::new();
    five.tags.clear();
    stack
        .client
        .submit_feedback(with_token(five, &alice))
        .await
        .expect("five stars");
    assert_eq!(feedback_count("tables_list", "-1"), down_before + 1);
    assert_eq!(feedback_count("tables_list", "5"), five_before + 1);
    let bad = stack
        .client
        .submit_feedback(with_token(rating(&conversation, &turn, 0), &alice))
        .await
        .expect_err("0 is no rating");
    assert_eq!(reason(&bad), "INVALID_FEEDBACK");

    let stored = stack
        .client
        .get_conversation(with_token(
            gw::GetConversationRequest {
                conversation_id: conversation.clone(),
                ..Default::default()
            },
            &alice,
        ))
        .await
        .expect("get")
        .into_inner();
    let feedback = stored.messages[1].feedback.as_ref().expect("the rating");
    assert_eq!(
        (
            feedback.rating,
            feedback.comment.as_str(),
            feedback.tags.len()
        ),
        (5, "", 0),
        "the last rating wins"
    );
    stack.stop().await;
}

#[tokio::test]
async fn a_turn_is_rated_once_it_has_ended() {
    let mut stack = Harness::start(Options::default()).await;
    stack.runner.push(Reply::Steps(vec![
        Step::Send(parley_proto::runner::v1::run_event::Event::TextDelta(
            "Thinking".into(),
        )),
        Step::Hang,
    ]));
    let mut stream = stack
        .client
        .chat(chat_request("", "A long one", "tables_list"))
        .await
        .expect("chat")
        .into_inner();
    let (conversation, turn, _) = until_text(&mut stream).await;
    let early = stack
        .client
        .submit_feedback(rating(&conversation, &turn, 1))
        .await
        .expect_err("still running");
    assert_eq!(
        (early.code(), reason(&early).as_str()),
        (Code::FailedPrecondition, "TURN_NOT_FINISHED")
    );
    let unknown = stack
        .client
        .submit_feedback(rating(&conversation, "no-such-turn", 1))
        .await
        .expect_err("unknown");
    assert_eq!(unknown.code(), Code::NotFound);
    stack
        .client
        .cancel_turn(gw::CancelTurnRequest {
            conversation_id: conversation.clone(),
            turn_id: turn.clone(),
        })
        .await
        .expect("cancel");
    drop(stream);
    stack.stop().await;
}
