//! What the user did with the last answer, as commands typed instead of a
//! message ([`crate::command`] parses them): `/accept` and `/dismiss` its
//! proposal card (`RecordPayloadDecision`, which the model sees in the next
//! turn's prompt), and `/rate N` it (`SubmitFeedback`: -1 or 1 to 5).

use anyhow::{Result, bail};
use parley_proto::gateway::v1::{
    PayloadDecision, RecordPayloadDecisionRequest, SubmitFeedbackRequest,
    chat_gateway_client::ChatGatewayClient,
};
use tonic::transport::Channel;

use crate::{authorized, render::Style};

/// A command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    /// Accept or dismiss the last proposal.
    Decide(PayloadDecision),
    /// Rate the last answer.
    Rate(i32),
}

/// The last turn shown, which the commands are about: the last turn that
/// finished here, or the last turn of a branch switched to.
#[derive(Debug, Clone, Default)]
pub(crate) struct LastTurn {
    /// Its conversation.
    pub(crate) conversation_id: String,
    /// The turn.
    pub(crate) turn_id: String,
    /// Whether it ended with a proposal card.
    pub(crate) proposal: bool,
}

/// Sends `command` about `last`, and says what was recorded.
pub(crate) async fn run(
    client: &mut ChatGatewayClient<Channel>,
    command: Command,
    last: &LastTurn,
    token: Option<&str>,
    style: &Style,
) -> Result<()> {
    if last.turn_id.is_empty() {
        bail!("no answer yet to decide on or rate");
    }
    match command {
        Command::Decide(decision) => {
            if !last.proposal {
                bail!("the last answer has no proposal card");
            }
            client
                .record_payload_decision(authorized(
                    RecordPayloadDecisionRequest {
                        conversation_id: last.conversation_id.clone(),
                        turn_id: last.turn_id.clone(),
                        decision: decision as i32,
                        ..Default::default()
                    },
                    token,
                )?)
                .await
                .map_err(crate::describe_status)?;
            let word = if decision == PayloadDecision::Accepted {
                "accepted"
            } else {
                "dismissed"
            };
            println!(
                "{} {}\n",
                style.bold("you ›"),
                style.dim(&format!("({word} the proposal)"))
            );
        }
        Command::Rate(rating) => {
            client
                .submit_feedback(authorized(
                    SubmitFeedbackRequest {
                        conversation_id: last.conversation_id.clone(),
                        turn_id: last.turn_id.clone(),
                        rating,
                        ..Default::default()
                    },
                    token,
                )?)
                .await
                .map_err(crate::describe_status)?;
            println!(
                "{} {}\n",
                style.bold("you ›"),
                style.dim(&format!("(rated the answer {rating})"))
            );
        }
    }
    Ok(())
}
