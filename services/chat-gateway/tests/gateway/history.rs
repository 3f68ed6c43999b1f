//! Answers and history: a turn's answer is capped, and the history sent to
//! the runner stays within a budget below the runner's decode limit, so a
//! conversation never grows into one that fails on every turn.

use agent_runner::{app::RunnerApp, config::ProviderConfig};
use chat_gateway::config::Quota;

use crate::harness::{Harness, Options, chat, chat_request, incoming};

/// The real runner (its own decode limit, as configured) playing a script
/// whose every turn answers with `answer_bytes` of text.
async fn runner_answering(answer_bytes: usize, dir: &std::path::Path) -> String {
    let answer = "All work and no play. ".repeat(answer_bytes / 22 + 1);
    scripted_runner(
        &format!(
            "model = \"big\"\nchunk_chars = 16384\n[default]\nsteps = [{{ text = \"{answer}\" }}]\n"
        ),
        dir,
        |_| {},
    )
    .await
}

/// The real runner playing `script` (its model `big`), configured further
/// by `tweak`; returns its URL.
async fn scripted_runner(
    script: &str,
    dir: &std::path::Path,
    tweak: impl FnOnce(&mut agent_runner::config::RunnerConfig),
) -> String {
    let path = dir.join("script.toml");
    std::fs::write(&path, script).expect("script");
    let mut config = crate::real_stack::runner_config();
    config
        .providers
        .insert("scripted".into(), ProviderConfig::scripted(Some(path)));
    config.max_request_bytes = RUNNER_MAX;
    tweak(&mut config);
    let app = RunnerApp::build(&config, |_| None).expect("runner");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let routes = app.routes();
    tokio::spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_routes(routes)
            .serve_with_incoming(incoming(listener))
            .await;
    });
    format!("http://{addr}")
}

/// The runner's route `small`: `scripted/big` with a window of 30 000
/// tokens and answers of 500.
fn small_window(config: &mut agent_runner::config::RunnerConfig) {
    config.models.routes.insert(
        "small".into(),
        agent_runner::routes::RouteConfig {
            primary: "scripted/big".into(),
            fallbacks: Vec::new(),
            context_window: Some(30_000),
            max_output_tokens: Some(500),
            input: Vec::new(),
            prices: None,
            max_image_bytes: None,
            max_image_edge: None,
        },
    );
}

/// A gateway that lets one user hold a long conversation.
fn long_conversations(config: &mut chat_gateway::config::GatewayConfig) {
    config.turns.per_user = Quota::UNLIMITED;
    config.turns.per_tenant = Quota::UNLIMITED;
    config.upstream.runner_max_request_bytes = RUNNER_MAX;
    config.attachments.max_message_bytes = 2 * 1024 * 1024;
}

#[tokio::test]
async fn a_conversation_far_past_its_models_window_keeps_answering_with_its_newest_turns() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A model of 30 000 tokens (answers of 500): about 80 KB at the
    // estimate's 3 bytes a token, the page's system prompt and tools
    // included, where each turn below brings 3 KB (120 KB in all).
    let runner_url = scripted_runner(
        "model = \"big\"\n[default]\nsteps = [{ echo = \"messages\" }]\n",
        dir.path(),
        small_window,
    )
    .await;
    let mut stack = Harness::start(Options {
        runner_url: Some(runner_url),
        tweak: long_conversations,
        ..Options::default()
    })
    .await;
    let mut conversation = String::new();
    let filler = "lorem ipsum dolor ".repeat(170);
    let mut sent = Vec::new();
    for number in 1..=40 {
        let turn = chat(
            &mut stack.client,
            chat_request(
                &conversation,
                &format!("question {number} {filler}"),
                "tables_list",
            ),
        )
        .await;
        assert!(turn.complete.success, "turn {number}: {:?}", turn.error);
        conversation = turn.conversation_id();
        sent.push(turn.text);
    }
    // Early on the model sees everything; far past its window, a bounded
    // number of messages that starts with a recent question.
    assert!(
        sent[0].starts_with("1 messages; first: question 1 "),
        "{}",
        sent[0]
    );
    assert!(
        sent[2].starts_with("5 messages; first: question 1 "),
        "{}",
        sent[2]
    );
    let last = &sent[39];
    let count: usize = last
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a count");
    assert!((11..=61).contains(&count), "{last}");
    assert!(!last.contains("first: question 1 "), "{last}");
    let first_kept: usize = last
        .split("first: question ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the first message kept");
    assert_eq!(first_kept, 40 - count / 2, "{last}");
    stack.stop().await;
}

/// The runner's request limit in these tests: 8 MiB (its default before
/// attachments made it 32).
const RUNNER_MAX: usize = 8 * 1024 * 1024;

#[tokio::test]
async fn a_conversation_with_more_history_than_the_runner_takes_still_gets_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 50 answers of 200 KiB: 10 MiB of history, more than the runner
    // decodes (8 MiB here; tonic's 4 MiB before it was set).
    let runner_url = runner_answering(200 * 1024, dir.path()).await;
    let mut stack = Harness::start(Options {
        runner_url: Some(runner_url),
        tweak: long_conversations,
        ..Options::default()
    })
    .await;
    let mut conversation = String::new();
    let mut stored = 0;
    for number in 1..=51 {
        let turn = chat(
            &mut stack.client,
            chat_request(&conversation, &format!("turn {number}"), "tables_list"),
        )
        .await;
        assert!(
            turn.complete.success,
            "turn {number} failed after {stored} bytes of answers: {:?}",
            turn.error
        );
        stored += turn.complete.message.len();
        conversation = turn.conversation_id();
    }
    assert!(stored > RUNNER_MAX, "{stored}");
    stack.stop().await;
}

#[tokio::test]
async fn an_answer_past_its_cap_fails_the_turn_keeps_the_partial_and_cancels_the_runner() {
    use crate::harness::fake_runner::{Reply, Step};
    use parley_proto::{
        gateway::v1::{self as gw, chat_event::Event as GwEvent},
        runner::v1::run_event::Event,
    };

    let mut stack = Harness::start(Options::default()).await;
    // 8 KiB deltas without end: far past the 256 KiB default.
    let delta = "lorem ipsum ".repeat(8 * 1024 / 12);
    let mut steps: Vec<Step> = (0..64)
        .map(|_| Step::Send(Event::TextDelta(delta.clone())))
        .collect();
    steps.push(Step::Hang);
    stack.runner.push(Reply::Steps(steps));

    let turn = chat(
        &mut stack.client,
        chat_request("", "write forever", "tables_list"),
    )
    .await;
    let error = turn.error.clone().expect("an error event");
    assert_eq!(error.reason, "ANSWER_TOO_LARGE", "{error:?}");
    assert!(!error.retryable, "{error:?}");
    assert!(!turn.complete.success);
    assert_eq!(turn.complete.state, gw::TurnState::Failed as i32);
    let cap = 256 * 1024;
    assert!(
        turn.text.len() > cap / 2 && turn.text.len() <= cap,
        "the client saw {} bytes",
        turn.text.len()
    );
    assert!(
        !turn
            .events
            .iter()
            .any(|event| matches!(&event.event, Some(GwEvent::Complete(c)) if c.success)),
    );
    // The runner's call was cancelled (its stream dropped).
    stack.runner.dropped(1).await;

    // The partial answer is stored with the failed turn.
    let stored = stack
        .client
        .get_conversation(gw::GetConversationRequest {
            conversation_id: turn.conversation_id(),
            ..Default::default()
        })
        .await
        .expect("get")
        .into_inner();
    let answer = stored.messages.last().expect("the answer");
    assert_eq!(answer.state, gw::TurnState::Failed as i32);
    assert!(
        answer.text.starts_with(delta.trim_end()) && answer.text.len() <= cap + 1024,
        "{} bytes stored",
        answer.text.len()
    );
    assert_eq!(
        answer.error.as_ref().map(|e| e.reason.as_str()),
        Some("ANSWER_TOO_LARGE")
    );
    stack.stop().await;
}

#[tokio::test]
async fn a_structured_answer_counts_against_the_cap_and_a_reset_step_no_longer_does() {
    use crate::harness::fake_runner::{Reply, Step, finished};
    use parley_proto::runner::v1::{self as runner, run_event::Event};

    let mut stack = Harness::start(Options::default()).await;
    let model_call = || {
        Step::Send(Event::Status(runner::Status {
            phase: runner::Phase::ModelCall as i32,
            iteration: 1,
            ..Default::default()
        }))
    };
    // 200 KiB twice within one turn: the first step is taken back by a
    // step reset, so the answer is 200 KiB, under the 256 KiB cap.
    let text = "a".repeat(200 * 1024);
    stack.runner.push(Reply::Steps(vec![
        model_call(),
        Step::Send(Event::TextDelta(text.clone())),
        Step::Send(Event::StepReset(runner::StepReset {
            iteration: 1,
            reason: "PROVIDER_STREAM_ERROR".into(),
            message: "trying again".into(),
        })),
        model_call(),
        Step::Send(Event::TextDelta(text.clone())),
        Step::Send(finished(&text)),
    ]));
    let mut request = chat_request("", "long but fine", "tables_list");
    request.mid_answer_failover = true;
    let turn = chat(&mut stack.client, request).await;
    assert!(turn.complete.success, "{:?}", turn.error);
    assert_eq!(turn.complete.message.len(), text.len());

    // Structured text past the cap ends the turn the same way.
    let mut steps: Vec<Step> = (0..40)
        .map(|_| Step::Send(Event::StructuredDelta(format!("\"{}\",", "b".repeat(8190)))))
        .collect();
    steps.insert(0, Step::Send(Event::StructuredDelta("[".into())));
    steps.push(Step::Hang);
    stack.runner.push(Reply::Steps(steps));
    let turn = chat(
        &mut stack.client,
        chat_request(&turn.conversation_id(), "a big list", "tables_list"),
    )
    .await;
    let error = turn.error.expect("an error event");
    assert_eq!(
        (error.reason.as_str(), error.retryable),
        ("ANSWER_TOO_LARGE", false)
    );
    stack.runner.dropped(1).await;
    stack.stop().await;
}

#[tokio::test]
async fn a_conversation_past_its_window_keeps_a_summary_of_what_it_left_out_in_the_prompt() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The summary call (its instructions in the system prompt) answers with
    // a marker; every other call says what it was sent, and the end of its
    // system prompt.
    let runner_url = scripted_runner(
        "model = \"big\"\nchunk_chars = 4096\n\
         [[turns]]\nname = \"summary\"\nmatch = { system = \"You keep the memory\" }\n\
         [[turns.steps]]\ntext = \"SUMMARY: the user asked numbered questions about lorem ipsum.\"\n\
         [default]\nsteps = [{ echo = \"messages\" }, { text = \" | \" }, { echo = \"system_tail\" }]\n",
        dir.path(),
        small_window,
    )
    .await;
    let mut stack = Harness::start(Options {
        runner_url: Some(runner_url),
        tweak: |config| {
            long_conversations(config);
            config.turns.history_strategy = chat_gateway::config::HistoryStrategy::Summarize;
        },
        ..Options::default()
    })
    .await;
    let mut conversation = String::new();
    let filler = "lorem ipsum dolor ".repeat(170);
    let mut answers = Vec::new();
    for number in 1..=40 {
        let turn = chat(
            &mut stack.client,
            chat_request(
                &conversation,
                &format!("question {number} {filler}"),
                "tables_list",
            ),
        )
        .await;
        assert!(turn.complete.success, "turn {number}: {:?}", turn.error);
        conversation = turn.conversation_id();
        answers.push(turn.text);
        // The summary is written after the turn, beside the next one: give
        // it the time a user takes to type.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(!answers[0].contains("SUMMARY"), "{}", answers[0]);
    let last = answers.last().expect("answers");
    assert!(
        last.contains("## Earlier in this conversation")
            && last.ends_with("SUMMARY: the user asked numbered questions about lorem ipsum."),
        "the model saw the summary at the end of its system prompt: {last}"
    );
    // The turns it covers are no longer sent: the first message is recent.
    assert!(!last.contains("first: question 1 "), "{last}");
    stack.stop().await;
}
