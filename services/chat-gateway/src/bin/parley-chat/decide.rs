//! Answering a paused turn: approvals asked on the terminal (or answered
//! by `--approve`), and the demo's app-run tool, `ask_user_to_pick_rows`,
//! which picks rows of the `--state` the user is looking at.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::Result;
use parley_proto::{
    gateway::v1::{
        ClientToolCall, ClientToolResult, ToolApproval, ToolApprovalRequest, ToolDecision,
        ToolRejection, TurnPhase, chat_event::Event, tool_decision::Decision,
    },
    json,
};
use serde_json::{Value, json};

use crate::render::Style;

/// How approvals are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Approve {
    /// Ask y/n on the terminal; without one, decline.
    Ask,
    /// Approve every call.
    Yes,
    /// Decline every call.
    No,
}

/// What a turn's stream asked for before it paused.
#[derive(Debug, Default)]
pub struct Waiting {
    approvals: Vec<ToolApprovalRequest>,
    calls: Vec<ClientToolCall>,
    /// The stream's last status said the turn awaits input.
    pub paused: bool,
}

impl Waiting {
    /// Notes what `event` asks for.
    pub fn see(&mut self, event: &Option<Event>) {
        match event {
            Some(Event::ApprovalRequest(request)) => self.approvals.push(request.clone()),
            Some(Event::ClientToolCall(call)) => self.calls.push(call.clone()),
            Some(Event::Status(status)) => {
                self.paused = status.phase == TurnPhase::AwaitingInput as i32;
            }
            _ => {}
        }
    }
}

/// The decisions for everything `waiting` asked for.
pub fn answer(
    waiting: &Waiting,
    approve: Approve,
    state: Option<&prost_types::Struct>,
    style: &Style,
) -> Result<Vec<ToolDecision>> {
    let mut decisions = Vec::new();
    for request in &waiting.approvals {
        let yes = match approve {
            Approve::Yes => true,
            Approve::No => false,
            Approve::Ask => ask(&format!("  approve {}? [y/N] ", request.summary))?,
        };
        println!(
            "  {} {}",
            if yes { "✓ approved" } else { "✗ declined" },
            style.dim(&request.tool)
        );
        decisions.push(ToolDecision {
            call_id: request.call_id.clone(),
            decision: Some(if yes {
                Decision::Approve(ToolApproval { arguments: None })
            } else {
                Decision::Reject(ToolRejection {
                    reason: "declined in parley-chat".into(),
                })
            }),
        });
    }
    for call in &waiting.calls {
        let result = run_client_tool(call, state);
        match &result {
            Ok(output) => println!("  {} {}", style.dim("⇄ the app answered"), output),
            Err(error) => println!("  {} {error}", style.dim("⇄ the app could not run it:")),
        }
        decisions.push(ToolDecision {
            call_id: call.call_id.clone(),
            decision: Some(Decision::Result(match result {
                Ok(output) => ClientToolResult {
                    output: output.as_object().map(json::to_struct),
                    error: String::new(),
                },
                Err(error) => ClientToolResult {
                    output: None,
                    error,
                },
            })),
        });
    }
    Ok(decisions)
}

/// Reads y/n from the terminal; anything but `y`/`yes` (or no terminal)
/// is no.
fn ask(prompt: &str) -> Result<bool> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        println!("{prompt}(no terminal: no)");
        return Ok(false);
    }
    print!("{prompt}");
    std::io::stdout().flush()?;
    let mut line = String::new();
    stdin.lock().read_line(&mut line)?;
    Ok(matches!(
        line.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// Runs a tool the app runs, as the demo app would: `ask_user_to_pick_rows`
/// picks the first rows of the state's `sample_rows` (at most `max`).
fn run_client_tool(
    call: &ClientToolCall,
    state: Option<&prost_types::Struct>,
) -> Result<Value, String> {
    if call.tool != "ask_user_to_pick_rows" {
        return Err(format!("parley-chat does not run `{}`", call.tool));
    }
    let arguments = call
        .arguments
        .as_ref()
        .map(json::from_struct_value)
        .unwrap_or(Value::Null);
    let max = arguments["max"].as_u64().unwrap_or(2);
    let state = state.map(json::from_struct_value).unwrap_or(Value::Null);
    let ids: Vec<Value> = state["sample_rows"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .filter_map(|row| row.get("id").cloned())
                .take(usize::try_from(max).unwrap_or(usize::MAX))
                .collect()
        })
        .unwrap_or_default();
    if ids.is_empty() {
        return Err("no rows to pick from (the state has no sample_rows with ids)".into());
    }
    Ok(json!({ "row_ids": ids }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(max: Option<u64>) -> ClientToolCall {
        let mut arguments = json!({"table_id": "t1", "prompt": "Which?"});
        if let Some(max) = max {
            arguments["max"] = json!(max);
        }
        ClientToolCall {
            call_id: "c1".into(),
            tool: "ask_user_to_pick_rows".into(),
            arguments: arguments.as_object().map(json::to_struct),
            expires_at: None,
        }
    }

    #[test]
    fn the_demo_app_picks_the_first_rows_of_the_state() {
        let state = json!({"sample_rows": [{"id": 3}, {"id": 7}, {"id": 9}]});
        let state = state.as_object().map(json::to_struct);
        assert_eq!(
            run_client_tool(&pick(None), state.as_ref()),
            Ok(json!({"row_ids": [3, 7]}))
        );
        assert_eq!(
            run_client_tool(&pick(Some(1)), state.as_ref()),
            Ok(json!({"row_ids": [3]}))
        );
        assert!(run_client_tool(&pick(None), None).is_err());
        let other = ClientToolCall {
            tool: "open_camera".into(),
            ..pick(None)
        };
        assert!(run_client_tool(&other, state.as_ref()).is_err());
    }

    #[test]
    fn approvals_answered_by_the_flag_and_every_call_gets_one_decision() {
        let mut waiting = Waiting::default();
        waiting.see(&Some(Event::ApprovalRequest(ToolApprovalRequest {
            call_id: "a1".into(),
            tool: "lookup_rows".into(),
            ..Default::default()
        })));
        waiting.see(&Some(Event::ClientToolCall(pick(None))));
        let style = Style { plain: true };
        let yes = answer(&waiting, Approve::Yes, None, &style).expect("answers");
        assert_eq!(yes.len(), 2);
        assert!(matches!(yes[0].decision, Some(Decision::Approve(_))));
        // No rows in the state: the app's error is the tool's result.
        assert!(matches!(
            &yes[1].decision,
            Some(Decision::Result(result)) if !result.error.is_empty()
        ));
        let no = answer(&waiting, Approve::No, None, &style).expect("answers");
        assert!(matches!(no[0].decision, Some(Decision::Reject(_))));
    }
}
