//! Branches from the terminal. `/edit TEXT` replaces the user message of
//! the last turn shown and runs it (`EditMessage`), `/regenerate` runs it
//! again (`RegenerateTurn`): either makes a sibling of that turn, streamed
//! like any message, whose branch becomes current. `/branches [TURN_ID]`
//! prints the current branch (or the one through a turn, without switching
//! to it) with `‹ i/n ›` where a turn has siblings and the siblings' turn
//! ids; `/switch TURN_ID` makes the branch through that turn current
//! (`SwitchBranch`) and prints it.

use anyhow::{Result, bail};
use parley_proto::gateway::v1::{
    ConversationMessage, EditMessageRequest, GetConversationRequest, MessageRole,
    RegenerateTurnRequest, SwitchBranchRequest, TurnState,
};

use crate::{Session, authorized, describe_status, render::Style, turn::Start, verdict};

/// A branch as `GetConversation` shows it, all its pages read.
#[derive(Debug, Default)]
pub(crate) struct Branch {
    /// Its messages, oldest first.
    pub(crate) messages: Vec<ConversationMessage>,
    /// Its last turn.
    pub(crate) leaf_turn_id: String,
}

impl Session<'_> {
    /// The last turn shown; with none yet (a run that began with
    /// `--conversation`), the last turn of the conversation's current
    /// branch.
    pub(crate) async fn last_turn(&mut self) -> Result<verdict::LastTurn> {
        if !self.last.turn_id.is_empty() || self.conversation_id.is_empty() {
            return Ok(self.last.clone());
        }
        let page = self
            .client
            .get_conversation(authorized(
                GetConversationRequest {
                    conversation_id: self.conversation_id.clone(),
                    page_size: 1,
                    ..Default::default()
                },
                self.args.token.as_deref(),
            )?)
            .await
            .map_err(describe_status)?
            .into_inner();
        self.last = last_of(&self.conversation_id, &page.leaf_turn_id, &page.messages);
        Ok(self.last.clone())
    }

    /// The last turn shown, which `/edit` and `/regenerate` run again.
    async fn turn_to_branch(&mut self, what: &str) -> Result<verdict::LastTurn> {
        let last = self.last_turn().await?;
        if last.turn_id.is_empty() {
            bail!("no turn yet to {what}: send a message first");
        }
        Ok(last)
    }

    /// `/edit TEXT`: the last turn's message replaced by `text`, run as a
    /// sibling of that turn and rendered like any turn.
    pub(crate) async fn edit(&mut self, text: String) -> Result<()> {
        let last = self.turn_to_branch("edit").await?;
        println!(
            "{} {} {}",
            self.style.bold("you ›"),
            text,
            self.style.dim("(edited)")
        );
        self.stream(Start::Edit(EditMessageRequest {
            conversation_id: last.conversation_id,
            turn_id: last.turn_id,
            message: text,
            request_id: uuid::Uuid::new_v4().to_string(),
            ..Default::default()
        }))
        .await
    }

    /// `/regenerate`: the last turn's message run again, as a sibling of
    /// that turn, and rendered like any turn.
    pub(crate) async fn regenerate(&mut self) -> Result<()> {
        let last = self.turn_to_branch("regenerate").await?;
        println!(
            "{} {}",
            self.style.bold("you ›"),
            self.style.dim("(the same message again)")
        );
        self.stream(Start::Regenerate(RegenerateTurnRequest {
            conversation_id: last.conversation_id,
            turn_id: last.turn_id,
            request_id: uuid::Uuid::new_v4().to_string(),
            ..Default::default()
        }))
        .await
    }

    /// `/branches [TURN_ID]`: prints the current branch, or the one through
    /// `turn_id` without making it current.
    pub(crate) async fn branches(&mut self, turn_id: Option<&str>) -> Result<()> {
        let branch = self.read_branch(turn_id.unwrap_or_default()).await?;
        for line in branch_lines(self.style, &branch) {
            println!("{line}");
        }
        println!();
        Ok(())
    }

    /// `/switch TURN_ID`: makes the branch through `turn_id` current and
    /// prints it; its last turn becomes the last one shown.
    pub(crate) async fn switch(&mut self, turn_id: &str) -> Result<()> {
        if self.conversation_id.is_empty() {
            bail!("no conversation yet: send a message first");
        }
        let switched = self
            .client
            .switch_branch(authorized(
                SwitchBranchRequest {
                    conversation_id: self.conversation_id.clone(),
                    turn_id: turn_id.to_owned(),
                },
                self.args.token.as_deref(),
            )?)
            .await
            .map_err(describe_status)?
            .into_inner();
        println!(
            "{} {}",
            self.style.bold("you ›"),
            self.style
                .dim(&format!("(switched to the branch through {turn_id})"))
        );
        let branch = self.read_branch("").await?;
        if branch.leaf_turn_id != switched.leaf_turn_id {
            // Someone changed the conversation in between: say what is shown.
            println!(
                "{}",
                self.style.dim(&format!(
                    "(the current branch has changed since: it ends at {})",
                    branch.leaf_turn_id
                ))
            );
        }
        self.last = last_of(
            &self.conversation_id,
            &branch.leaf_turn_id,
            &branch.messages,
        );
        for line in branch_lines(self.style, &branch) {
            println!("{line}");
        }
        println!();
        Ok(())
    }

    /// Reads the branch through `turn_id` (the current one when empty),
    /// every page of it.
    async fn read_branch(&mut self, turn_id: &str) -> Result<Branch> {
        if self.conversation_id.is_empty() {
            bail!("no conversation yet: send a message first");
        }
        let mut branch = Branch::default();
        let mut page_token = String::new();
        loop {
            let page = self
                .client
                .get_conversation(authorized(
                    GetConversationRequest {
                        conversation_id: self.conversation_id.clone(),
                        turn_id: turn_id.to_owned(),
                        page_token,
                        ..Default::default()
                    },
                    self.args.token.as_deref(),
                )?)
                .await
                .map_err(describe_status)?
                .into_inner();
            if branch.leaf_turn_id.is_empty() {
                branch.leaf_turn_id = page.leaf_turn_id;
            }
            // Pages come newest first; each holds its turns oldest first.
            let mut messages = page.messages;
            messages.append(&mut branch.messages);
            branch.messages = messages;
            if page.next_page_token.is_empty() {
                return Ok(branch);
            }
            page_token = page.next_page_token;
        }
    }
}

/// The last turn of a branch that ends at `leaf` with `messages`.
fn last_of(
    conversation_id: &str,
    leaf: &str,
    messages: &[ConversationMessage],
) -> verdict::LastTurn {
    let proposal = messages
        .iter()
        .rev()
        .find(|message| message.turn_id == leaf && message.role == MessageRole::Assistant as i32)
        .is_some_and(|answer| answer.custom_payload.is_some());
    verdict::LastTurn {
        conversation_id: conversation_id.to_owned(),
        turn_id: leaf.to_owned(),
        proposal,
    }
}

/// The lines `/branches` prints: each message with its author, `‹ i/n ›`
/// after the first message of a turn that has siblings and, under it, each
/// sibling's position and turn id (the one shown marked), then where the
/// branch ends.
pub(crate) fn branch_lines(style: &Style, branch: &Branch) -> Vec<String> {
    let mut lines = Vec::new();
    let mut turn = "";
    for message in &branch.messages {
        let user = message.role == MessageRole::User as i32;
        let label = if user {
            style.bold("you ›")
        } else {
            style.cyan("parley ›")
        };
        let first_of_turn = message.turn_id != turn;
        turn = &message.turn_id;
        let count = message.sibling_count;
        if first_of_turn && count > 1 {
            let index = message.sibling_index.saturating_add(1);
            lines.push(format!(
                "{label} {}  {}",
                message.text,
                style.bold(&format!("‹ {index}/{count} ›"))
            ));
            for (at, sibling) in message.sibling_turn_ids.iter().enumerate() {
                let shown = if *sibling == message.turn_id {
                    " (this branch)"
                } else {
                    ""
                };
                lines.push(style.dim(&format!("  {}/{count} {sibling}{shown}", at + 1)));
            }
        } else {
            lines.push(format!("{label} {}", message.text));
        }
        if let Some(payload) = &message.custom_payload {
            let decision = message
                .payload_decision
                .as_ref()
                .map(|record| {
                    let decision = record.decision().as_str_name();
                    let word = decision
                        .strip_prefix("PAYLOAD_DECISION_")
                        .unwrap_or(decision);
                    format!(" ({})", word.to_ascii_lowercase())
                })
                .unwrap_or_default();
            lines.push(style.dim(&format!("  ▣ {} card{decision}", payload.r#type)));
        }
        if message.state == TurnState::Failed as i32 {
            let why = message
                .error
                .as_ref()
                .map(|error| format!("{}: {}", error.reason, error.message))
                .unwrap_or_else(|| message.stop_reason.clone());
            lines.push(style.red(&format!("  turn ended: {why}")));
        }
    }
    if branch.leaf_turn_id.is_empty() {
        lines.push(style.dim("(no turns yet)"));
    } else {
        lines.push(style.dim(&format!(
            "(the branch ends at turn {})",
            branch.leaf_turn_id
        )));
    }
    lines
}

#[cfg(test)]
mod tests {
    use parley_proto::gateway::v1::{PayloadDecision, PayloadDecisionRecord, TurnError};
    use parley_proto::parser::v1::Payload;

    use super::*;

    fn message(turn: &str, role: MessageRole, text: &str) -> ConversationMessage {
        ConversationMessage {
            turn_id: turn.into(),
            role: role as i32,
            text: text.into(),
            sibling_turn_ids: vec![turn.into()],
            sibling_index: 0,
            sibling_count: 1,
            ..Default::default()
        }
    }

    /// Both messages of `turn`, which is sibling `index` of `siblings`.
    fn turn(
        turn: &str,
        siblings: &[&str],
        question: &str,
        answer: &str,
    ) -> Vec<ConversationMessage> {
        let index = siblings.iter().position(|s| *s == turn).expect("a sibling");
        [
            message(turn, MessageRole::User, question),
            message(turn, MessageRole::Assistant, answer),
        ]
        .into_iter()
        .map(|message| ConversationMessage {
            sibling_turn_ids: siblings.iter().map(|s| (*s).to_owned()).collect(),
            sibling_index: u32::try_from(index).expect("small"),
            sibling_count: u32::try_from(siblings.len()).expect("small"),
            ..message
        })
        .collect()
    }

    #[test]
    fn a_turn_with_siblings_shows_its_place_and_each_siblings_id() {
        let style = Style { plain: true };
        let mut messages = turn("t1", &["t1"], "a?", "A.");
        messages.extend(turn("t3", &["t2", "t3", "t4"], "b, better?", "B edited."));
        let branch = Branch {
            messages,
            leaf_turn_id: "t3".into(),
        };
        assert_eq!(
            branch_lines(&style, &branch),
            [
                "you › a?",
                "parley › A.",
                "you › b, better?  ‹ 2/3 ›",
                "  1/3 t2",
                "  2/3 t3 (this branch)",
                "  3/3 t4",
                "parley › B edited.",
                "(the branch ends at turn t3)",
            ]
        );
    }

    #[test]
    fn cards_decisions_and_failures_are_noted_under_the_answer() {
        let style = Style { plain: true };
        let mut answer = message("t1", MessageRole::Assistant, "Here is a table.");
        answer.custom_payload = Some(Payload {
            r#type: "schema_proposal".into(),
            ..Default::default()
        });
        answer.payload_decision = Some(PayloadDecisionRecord {
            decision: PayloadDecision::Accepted as i32,
            ..Default::default()
        });
        let mut failed = message("t2", MessageRole::Assistant, "Half");
        failed.state = TurnState::Failed as i32;
        failed.error = Some(TurnError {
            reason: "RUNNER_UNAVAILABLE".into(),
            message: "no runner".into(),
            ..Default::default()
        });
        let branch = Branch {
            messages: vec![answer, failed],
            leaf_turn_id: "t2".into(),
        };
        assert_eq!(
            branch_lines(&style, &branch),
            [
                "parley › Here is a table.",
                "  ▣ schema_proposal card (accepted)",
                "parley › Half",
                "  turn ended: RUNNER_UNAVAILABLE: no runner",
                "(the branch ends at turn t2)",
            ]
        );
        assert_eq!(branch_lines(&style, &Branch::default()), ["(no turns yet)"]);
    }

    #[test]
    fn the_last_turn_of_a_branch_knows_whether_it_has_a_card() {
        let mut messages = turn("t1", &["t1"], "a?", "A.");
        assert!(!last_of("c", "t1", &messages).proposal);
        messages[1].custom_payload = Some(Payload::default());
        let last = last_of("c", "t1", &messages);
        assert_eq!(
            (last.conversation_id.as_str(), last.turn_id.as_str()),
            ("c", "t1")
        );
        assert!(last.proposal);
        assert!(!last_of("c", "", &[]).proposal);
    }
}
