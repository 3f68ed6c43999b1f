//! What runs after a turn has ended and is stored, beside the user's next
//! message and never in its way: the conversation's title, written by a
//! model from its first exchange (`turns.title_model`), and the rolling
//! summary of the turns a model's context window no longer holds
//! (`turns.history_strategy = "summarize"`). Each is one model call through
//! the runner, bounded in time; a failure is logged and changes nothing.

use std::time::Duration;

use parley_proto::runner::v1::{self as runner, run_event::Event};
use tokio_stream::StreamExt as _;

use super::{Shared, TurnSpec};
use crate::{
    config::HistoryStrategy,
    store::{EventBody, Store, summaries::Summary},
};

/// How long a title or a summary call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// The longest summary kept, in characters (a model that writes more is
/// cut here).
const MAX_SUMMARY_CHARS: usize = 4_000;

/// The longest title kept, in characters.
const MAX_TITLE_CHARS: usize = 80;

/// How much of each message a summary or title request quotes, in
/// characters.
const QUOTE_CHARS: usize = 4_000;

/// The instructions of a summary call.
const SUMMARY_PROMPT: &str = "You keep the memory of a conversation between a user and an \
assistant. Write a summary of the conversation below, building on the earlier summary when \
there is one: the user's goals and preferences, the decisions made, facts, names and numbers \
that matter, and what is still open. Plain text, at most 300 words, no preamble.";

/// The instructions of a title call.
const TITLE_PROMPT: &str = "Write a title of at most six words for the conversation below, \
in the user's language. Answer with the title alone: no quotes, no final period.";

/// The heading the summary goes under at the end of the system prompt.
const SUMMARY_HEADING: &str = "## Earlier in this conversation";

/// What the work after a turn needs of the history the turn was sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Earlier {
    /// The earlier turns sent (id and position, oldest first), with
    /// `summarize` only.
    pub turns: Vec<(String, u32)>,
    /// The summary sent in place of older turns, when there was one.
    pub summary: Option<String>,
    /// How many of the earlier turns the model's window left out (the
    /// runner's `Finished.history_turns_left_out`).
    pub left_out: u32,
}

/// Puts `summary` at the end of a turn's system prompt (after its stable
/// part, so a provider's prompt cache still holds).
pub fn add_summary(system_prompt: &mut String, summary: &str) {
    system_prompt.push_str("\n\n");
    system_prompt.push_str(SUMMARY_HEADING);
    system_prompt.push_str(
        "\nA summary of the turns before the messages you are given (they are no longer shown):\n",
    );
    system_prompt.push_str(summary);
}

/// Starts what the completed turn `spec` calls for: a title after a new
/// conversation's first turn, a summary after a turn whose model left
/// earlier turns out. `answer` is the stored answer.
pub fn spawn(shared: &Shared, spec: &TurnSpec, history: Earlier, answer: &str) {
    let config = &shared.config;
    let owner = spec.start.principal.owner().to_owned();
    let conversation_id = spec.start.conversation_id.clone();
    let call = Call {
        runner: shared.upstreams.runner.clone(),
        conversation_id: conversation_id.clone(),
        turn_id: spec.turn_id.clone(),
        user_id: spec.start.principal.subject.clone(),
        user_issuer: spec.start.principal.issuer.clone(),
        tenant: spec.start.principal.tenant.clone().unwrap_or_default(),
    };
    if spec.new_conversation && !config.title_model.trim().is_empty() {
        let model = model_ref(&config.title_model, None);
        let exchange = format!(
            "User: {}\n\nAssistant: {}",
            quote(&spec.start.message),
            quote(answer)
        );
        let clipped = crate::store::title_from(&spec.start.message, MAX_TITLE_CHARS);
        let (store, owner, conversation_id, call) = (
            shared.store.clone(),
            owner.clone(),
            conversation_id.clone(),
            call.clone(),
        );
        tokio::spawn(async move {
            let title = match call.ask(TITLE_PROMPT, exchange, model).await {
                Ok(text) => title_of(&text),
                Err(error) => {
                    tracing::warn!(%error, conversation = %conversation_id, "the title call failed; the first message stays the title");
                    return;
                }
            };
            if title.is_empty() {
                return;
            }
            match store
                .retitle(&owner, &conversation_id, &clipped, &title)
                .await
            {
                Ok(_) => tracing::info!(conversation = %conversation_id, "conversation titled"),
                Err(error) => tracing::warn!(%error, "cannot store the title"),
            }
        });
    }
    if config.history_strategy == HistoryStrategy::Summarize && history.left_out > 0 {
        let model = model_ref(&config.summary_model, spec.start.model.clone());
        let store = shared.store.clone();
        tokio::spawn(async move {
            if let Err(error) = summarize(&store, &call, &owner, history, model).await {
                tracing::warn!(%error, conversation = %call.conversation_id, "the summary call failed; the turns it would cover stay left out");
            }
        });
    }
}

/// Summarises the earlier turns the model left out (with the summary sent
/// before them), and stores it as covering the last of them.
async fn summarize(
    store: &Store,
    call: &Call,
    owner: &str,
    history: Earlier,
    model: Option<runner::ModelRef>,
) -> Result<(), String> {
    let count = (history.left_out as usize).min(history.turns.len());
    let covered = &history.turns[..count];
    let Some((last, last_index)) = covered.last().cloned() else {
        return Ok(());
    };
    let ids: Vec<&str> = covered.iter().map(|(id, _)| id.as_str()).collect();
    let (turns, events) = store
        .turns_with_events(owner, &call.conversation_id, &ids)
        .await
        .map_err(|error| error.to_string())?;
    let mut text = String::new();
    if let Some(summary) = &history.summary {
        text.push_str("The earlier summary:\n");
        text.push_str(summary);
        text.push_str("\n\nThe conversation after it:\n");
    }
    let answered: std::collections::HashSet<&str> =
        turns.iter().map(|turn| turn.id.as_str()).collect();
    for event in events
        .iter()
        .filter(|event| answered.contains(event.turn_id.as_str()))
    {
        let (role, said) = match &event.body {
            EventBody::UserMessage { text, .. } => ("User", text),
            EventBody::AssistantMessage(answer) => ("Assistant", &answer.text),
            _ => continue,
        };
        text.push_str(&format!("{role}: {}\n\n", quote(said)));
    }
    let summary = call.ask(SUMMARY_PROMPT, text, model).await?;
    let summary: String = summary.trim().chars().take(MAX_SUMMARY_CHARS).collect();
    if summary.is_empty() {
        return Err("the model wrote an empty summary".into());
    }
    store
        .write_summary(
            owner,
            &call.conversation_id,
            Summary {
                turn_id: last,
                turn_index: last_index,
                text: summary,
            },
        )
        .await
        .map_err(|error| error.to_string())?;
    tracing::info!(conversation = %call.conversation_id, covered = count, "summary stored");
    Ok(())
}

/// A model call on behalf of a turn's user.
#[derive(Debug, Clone)]
struct Call {
    runner:
        parley_proto::runner::v1::agent_runner_client::AgentRunnerClient<crate::clients::Traced>,
    conversation_id: String,
    turn_id: String,
    user_id: String,
    user_issuer: String,
    tenant: String,
}

impl Call {
    /// Asks the model `model` (the runner's default when `None`) `text`
    /// under `system`, without tools; its answer.
    async fn ask(
        &self,
        system: &str,
        text: String,
        model: Option<runner::ModelRef>,
    ) -> Result<String, String> {
        let request = runner::RunRequest {
            system_prompt: system.to_owned(),
            messages: vec![runner::Message {
                role: runner::Role::User as i32,
                text,
                ..Default::default()
            }],
            model,
            conversation_id: self.conversation_id.clone(),
            turn_id: self.turn_id.clone(),
            user_id: self.user_id.clone(),
            user_issuer: self.user_issuer.clone(),
            tenant: self.tenant.clone(),
            ..Default::default()
        };
        let mut call = tonic::Request::new(request);
        call.set_timeout(CALL_TIMEOUT);
        let mut runner = self.runner.clone();
        let answer = async {
            let mut stream = runner
                .run(call)
                .await
                .map_err(|status| status.message().to_owned())?
                .into_inner();
            while let Some(event) = stream.next().await {
                match event.map_err(|status| status.message().to_owned())?.event {
                    Some(Event::Finished(finished)) => return Ok(finished.text),
                    Some(Event::Error(error)) => return Err(error.message),
                    _ => {}
                }
            }
            Err("the runner's stream ended without an answer".to_owned())
        };
        tokio::time::timeout(CALL_TIMEOUT, answer)
            .await
            .map_err(|_| format!("no answer within {CALL_TIMEOUT:?}"))?
    }
}

/// The model a setting names (a route, or `provider/model`), else `or`.
fn model_ref(setting: &str, or: Option<runner::ModelRef>) -> Option<runner::ModelRef> {
    let setting = setting.trim();
    if setting.is_empty() {
        return or;
    }
    let (provider, model) = setting.split_once('/').unwrap_or(("", setting));
    Some(runner::ModelRef {
        provider: provider.to_owned(),
        model: model.to_owned(),
        parameters: None,
    })
}

/// `text` cut to [`QUOTE_CHARS`].
fn quote(text: &str) -> String {
    let mut quoted: String = text.chars().take(QUOTE_CHARS).collect();
    if quoted.len() < text.len() {
        quoted.push_str(" …");
    }
    quoted
}

/// A title from a model's answer: its first line, without quotes or a
/// final period, within [`MAX_TITLE_CHARS`].
fn title_of(answer: &str) -> String {
    let line = answer.trim().lines().next().unwrap_or("").trim();
    let line = line
        .trim_matches(|c: char| matches!(c, '"' | '\'' | '“' | '”' | '*' | '#'))
        .trim()
        .trim_end_matches('.')
        .trim();
    line.chars().take(MAX_TITLE_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_is_the_first_line_without_quotes_or_period() {
        assert_eq!(
            title_of("\"Job tracker setup.\"\nMore"),
            "Job tracker setup"
        );
        assert_eq!(title_of("  ## Plans  "), "Plans");
        assert_eq!(title_of(&"x".repeat(200)).len(), MAX_TITLE_CHARS);
        assert_eq!(title_of(""), "");
    }

    #[test]
    fn the_summary_goes_under_its_heading_at_the_end() {
        let mut prompt = "You are helpful.".to_owned();
        add_summary(&mut prompt, "The user tracks jobs.");
        assert!(prompt.starts_with("You are helpful.\n\n## Earlier in this conversation\n"));
        assert!(prompt.ends_with("The user tracks jobs."));
    }
}
