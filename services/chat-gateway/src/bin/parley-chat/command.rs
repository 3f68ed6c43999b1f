//! The lines that are commands, not messages: they start with `/`.
//!
//! `/accept`, `/dismiss` and `/rate N` are about the last answer (see
//! [`crate::verdict`]); `/edit TEXT`, `/regenerate`, `/branches [TURN_ID]`
//! and `/switch TURN_ID` about the conversation's branches (see
//! [`crate::branches`]).

use anyhow::{Result, anyhow};
use parley_proto::gateway::v1::PayloadDecision;

use crate::verdict;

/// What the unknown-command error suggests.
const HELP: &str =
    "/accept, /dismiss, /rate N, /edit TEXT, /regenerate, /branches [TURN_ID], /switch TURN_ID";

/// A command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    /// Accept or dismiss the last proposal, or rate the last answer.
    Verdict(verdict::Command),
    /// Replace the user message of the last turn shown with this text and
    /// run it (`EditMessage`).
    Edit(String),
    /// Run the last turn shown again (`RegenerateTurn`).
    Regenerate,
    /// Print the current branch, or the one through this turn.
    Branches(Option<String>),
    /// Make the branch through this turn current (`SwitchBranch`) and
    /// print it.
    Switch(String),
}

/// The command a line holds: `None` for a message, an error for a line
/// that starts with `/` but is no command.
pub(crate) fn parse(line: &str) -> Option<Result<Command>> {
    let command = line.trim().strip_prefix('/')?;
    let (name, rest) = command
        .split_once(char::is_whitespace)
        .map_or((command, ""), |(name, rest)| (name, rest.trim()));
    let mut words = rest.split_whitespace();
    let one_word = (words.next(), words.next());
    Some(match (name, one_word) {
        ("accept", (None, _)) => Ok(Command::Verdict(verdict::Command::Decide(
            PayloadDecision::Accepted,
        ))),
        ("dismiss", (None, _)) => Ok(Command::Verdict(verdict::Command::Decide(
            PayloadDecision::Dismissed,
        ))),
        ("rate", (Some(rating), None)) => match rating.parse::<i32>() {
            Ok(rating @ (-1 | 1..=5)) => Ok(Command::Verdict(verdict::Command::Rate(rating))),
            _ => Err(anyhow!("/rate takes -1, or 1 to 5")),
        },
        ("rate", _) => Err(anyhow!("/rate takes -1, or 1 to 5")),
        // The text is the rest of the line, as typed (inner spaces kept).
        ("edit", (Some(_), _)) => Ok(Command::Edit(rest.to_owned())),
        ("edit", (None, _)) => Err(anyhow!("/edit takes the new text: /edit TEXT")),
        ("regenerate", (None, _)) => Ok(Command::Regenerate),
        ("branches", (turn, None)) => Ok(Command::Branches(turn.map(str::to_owned))),
        ("switch", (Some(turn), None)) => Ok(Command::Switch(turn.to_owned())),
        ("switch", _) => Err(anyhow!(
            "/switch takes one turn id (/branches lists them): /switch TURN_ID"
        )),
        _ => Err(anyhow!("unknown command `/{command}` (try {HELP})")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(line: &str) -> Option<Command> {
        parse(line).map(|command| command.expect(line))
    }

    fn refused(line: &str) -> String {
        match parse(line) {
            Some(Err(error)) => error.to_string(),
            other => panic!("{line} is not refused: {other:?}"),
        }
    }

    #[test]
    fn commands_are_lines_that_start_with_a_slash() {
        assert!(parse("What now?").is_none());
        assert!(parse("a / b").is_none());
        assert_eq!(
            parsed(" /accept "),
            Some(Command::Verdict(verdict::Command::Decide(
                PayloadDecision::Accepted
            )))
        );
        assert_eq!(
            parsed("/dismiss"),
            Some(Command::Verdict(verdict::Command::Decide(
                PayloadDecision::Dismissed
            )))
        );
        assert_eq!(
            parsed("/rate -1"),
            Some(Command::Verdict(verdict::Command::Rate(-1)))
        );
        for bad in ["/rate 0", "/rate 6", "/rate", "/rate 1 2", "/accept now"] {
            assert!(matches!(parse(bad), Some(Err(_))), "{bad}");
        }
    }

    #[test]
    fn edit_takes_the_rest_of_the_line_as_the_new_text() {
        assert_eq!(
            parsed("/edit  Make it  a job tracker "),
            Some(Command::Edit("Make it  a job tracker".into()))
        );
        assert_eq!(parsed("/edit\tb?"), Some(Command::Edit("b?".into())));
        assert!(refused("/edit").contains("/edit TEXT"));
        assert!(refused("/edit   ").contains("/edit TEXT"));
        // Not a command word followed by text.
        assert!(refused("/editing b?").starts_with("unknown command `/editing b?`"));
    }

    #[test]
    fn regenerate_branches_and_switch() {
        assert_eq!(parsed("/regenerate"), Some(Command::Regenerate));
        assert!(matches!(parse("/regenerate now"), Some(Err(_))));
        assert_eq!(parsed("/branches"), Some(Command::Branches(None)));
        assert_eq!(
            parsed("/branches 0193a"),
            Some(Command::Branches(Some("0193a".into())))
        );
        assert!(matches!(parse("/branches a b"), Some(Err(_))));
        assert_eq!(
            parsed(" /switch 0193a "),
            Some(Command::Switch("0193a".into()))
        );
        assert!(refused("/switch").contains("/switch TURN_ID"));
        assert!(refused("/switch a b").contains("/switch TURN_ID"));
    }

    #[test]
    fn an_unknown_command_lists_every_command() {
        let help = refused("/undo");
        for command in [
            "/accept",
            "/dismiss",
            "/rate N",
            "/edit TEXT",
            "/regenerate",
            "/branches",
            "/switch TURN_ID",
        ] {
            assert!(help.contains(command), "{help} misses {command}");
        }
    }
}
