//! What the user did with the last answer, as commands typed instead of a
//! message: `/accept` and `/dismiss` its proposal card
//! (`RecordPayloadDecision`, which the model sees in the next turn's
//! prompt), and `/rate N` it (`SubmitFeedback`: -1 or 1 to 5).

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

/// The last finished turn, which the commands are about.
#[derive(Debug, Clone, Default)]
pub(crate) struct LastTurn {
    /// Its conversation.
    pub(crate) conversation_id: String,
    /// The turn.
    pub(crate) turn_id: String,
    /// Whether it ended with a proposal card.
    pub(crate) proposal: bool,
}

/// The command a line holds: `None` for a message, an error for a line
/// that starts with `/` but is no command.
pub(crate) fn parse(line: &str) -> Option<Result<Command>> {
    let command = line.trim().strip_prefix('/')?;
    let mut words = command.split_whitespace();
    Some(match (words.next(), words.next(), words.next()) {
        (Some("accept"), None, _) => Ok(Command::Decide(PayloadDecision::Accepted)),
        (Some("dismiss"), None, _) => Ok(Command::Decide(PayloadDecision::Dismissed)),
        (Some("rate"), Some(rating), None) => match rating.parse::<i32>() {
            Ok(rating @ (-1 | 1..=5)) => Ok(Command::Rate(rating)),
            _ => Err(anyhow::anyhow!("/rate takes -1, or 1 to 5")),
        },
        _ => Err(anyhow::anyhow!(
            "unknown command `/{command}` (try /accept, /dismiss, /rate N)"
        )),
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_lines_that_start_with_a_slash() {
        assert!(parse("What now?").is_none());
        assert_eq!(
            parse(" /accept ").map(Result::ok),
            Some(Some(Command::Decide(PayloadDecision::Accepted)))
        );
        assert_eq!(
            parse("/dismiss").map(Result::ok),
            Some(Some(Command::Decide(PayloadDecision::Dismissed)))
        );
        assert_eq!(
            parse("/rate -1").map(Result::ok),
            Some(Some(Command::Rate(-1)))
        );
        for bad in ["/rate 0", "/rate 6", "/rate", "/accept now", "/undo"] {
            assert!(matches!(parse(bad), Some(Err(_))), "{bad}");
        }
    }
}
