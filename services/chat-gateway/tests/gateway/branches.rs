//! Branches through the wire: regenerating an answer and editing a message
//! make siblings, the model sees the current branch only, `SwitchBranch`
//! brings an old branch back exactly, and a branch made on one replica
//! goes on on another.

use std::time::Duration;

use parley_proto::{gateway::v1 as gw, runner::v1 as runner};
use tonic::Code;

use crate::{
    harness::{
        Harness, Options, chat, chat_request, collect,
        fake_runner::text_reply,
        process::{GatewayProcess, ProcessConfig},
        reason, start_upstreams,
    },
    postgres,
};

/// The messages a runner request carries, as `role: text` lines.
fn transcript(request: &runner::RunRequest) -> Vec<String> {
    request
        .messages
        .iter()
        .map(|message| {
            let role = if message.role == runner::Role::Assistant as i32 {
                "assistant"
            } else {
                "user"
            };
            format!("{role}: {}", message.text)
        })
        .collect()
}

/// The user and assistant texts of a `GetConversation` page.
fn texts(messages: &[gw::ConversationMessage]) -> Vec<String> {
    messages.iter().map(|m| m.text.clone()).collect()
}

async fn get(
    client: &mut gw::chat_gateway_client::ChatGatewayClient<tonic::transport::Channel>,
    conversation_id: &str,
    turn_id: &str,
) -> gw::GetConversationResponse {
    client
        .get_conversation(gw::GetConversationRequest {
            conversation_id: conversation_id.to_owned(),
            turn_id: turn_id.to_owned(),
            ..Default::default()
        })
        .await
        .expect("get")
        .into_inner()
}

async fn regenerate(
    client: &mut gw::chat_gateway_client::ChatGatewayClient<tonic::transport::Channel>,
    conversation_id: &str,
    turn_id: &str,
) -> crate::harness::Turn {
    collect(
        client
            .regenerate_turn(gw::RegenerateTurnRequest {
                conversation_id: conversation_id.to_owned(),
                turn_id: turn_id.to_owned(),
                ..Default::default()
            })
            .await
            .expect("regenerate accepted")
            .into_inner(),
    )
    .await
}

async fn edit(
    client: &mut gw::chat_gateway_client::ChatGatewayClient<tonic::transport::Channel>,
    conversation_id: &str,
    turn_id: &str,
    message: &str,
) -> crate::harness::Turn {
    collect(
        client
            .edit_message(gw::EditMessageRequest {
                conversation_id: conversation_id.to_owned(),
                turn_id: turn_id.to_owned(),
                message: message.to_owned(),
                ..Default::default()
            })
            .await
            .expect("edit accepted")
            .into_inner(),
    )
    .await
}

#[tokio::test]
async fn a_regenerated_answer_is_a_sibling_and_its_prompt_leaves_the_old_answer_out() {
    let mut stack = Harness::start(Options::default()).await;
    let client = &mut stack.client;
    stack.runner.push(text_reply(&["Answer one."]));
    let first = chat(client, chat_request("", "First question", "tables_list")).await;
    let conversation = first.conversation_id();
    stack.runner.push(text_reply(&["OLD ANSWER"]));
    let second = chat(
        client,
        chat_request(&conversation, "Second question", "tables_list"),
    )
    .await;
    let old = second.complete.turn_id.clone();

    stack.runner.push(text_reply(&["NEW ANSWER"]));
    let regenerated = regenerate(client, &conversation, &old).await;
    assert!(regenerated.complete.success, "{:?}", regenerated.error);
    assert_eq!(regenerated.text, "NEW ANSWER");
    let new = regenerated.complete.turn_id.clone();
    assert_ne!(new, old);
    let seen = stack.runner.seen();
    assert_eq!(
        transcript(&seen[2].request),
        [
            "user: First question",
            "assistant: Answer one.",
            "user: Second question"
        ],
        "the regenerated turn's prompt has the same message and not the old answer"
    );

    // The current branch ends with the new answer, "2 of 2".
    let shown = get(client, &conversation, "").await;
    assert_eq!(
        texts(&shown.messages),
        [
            "First question",
            "Answer one.",
            "Second question",
            "NEW ANSWER"
        ]
    );
    assert_eq!(shown.leaf_turn_id, new);
    let last = shown.messages.last().expect("a message");
    assert_eq!(last.sibling_turn_ids, [old.clone(), new.clone()]);
    assert_eq!((last.sibling_index, last.sibling_count), (1, 2));
    assert_eq!(last.parent_turn_id, first.complete.turn_id);
    let top = &shown.messages[0];
    assert_eq!((top.sibling_index, top.sibling_count), (0, 1));
    assert_eq!(top.parent_turn_id, "");

    // The old branch is still there, "1 of 2", without switching to it.
    let old_branch = get(client, &conversation, &old).await;
    assert_eq!(
        texts(&old_branch.messages),
        [
            "First question",
            "Answer one.",
            "Second question",
            "OLD ANSWER"
        ]
    );
    assert_eq!(old_branch.leaf_turn_id, old);
    assert_eq!(old_branch.messages.last().map(|m| m.sibling_index), Some(0));
    assert_eq!(get(client, &conversation, "").await.leaf_turn_id, new);

    // The next message follows the new answer.
    stack.runner.push(text_reply(&["Third answer."]));
    let third = chat(
        client,
        chat_request(&conversation, "Third question", "tables_list"),
    )
    .await;
    assert!(third.complete.success);
    assert_eq!(
        transcript(&stack.runner.seen()[3].request),
        [
            "user: First question",
            "assistant: Answer one.",
            "user: Second question",
            "assistant: NEW ANSWER",
            "user: Third question"
        ]
    );
    stack.stop().await;
}

#[tokio::test]
async fn an_edit_then_a_switch_back_restores_the_old_branch_exactly() {
    let mut stack = Harness::start(Options::default()).await;
    let client = &mut stack.client;
    let mut conversation = String::new();
    let mut turns = Vec::new();
    for (question, answer) in [("a?", "A."), ("b?", "B."), ("c?", "C.")] {
        stack.runner.push(text_reply(&[answer]));
        let turn = chat(client, chat_request(&conversation, question, "tables_list")).await;
        conversation = turn.conversation_id();
        turns.push(turn.complete.turn_id.clone());
    }
    // What the model would see after c, on the old branch.
    let mut before = transcript(&stack.runner.seen()[2].request);
    before.push("assistant: C.".into());

    stack.runner.push(text_reply(&["B edited."]));
    let edited = edit(client, &conversation, &turns[1], "b, better?").await;
    assert!(edited.complete.success, "{:?}", edited.error);
    assert_eq!(
        transcript(&stack.runner.seen()[3].request),
        ["user: a?", "assistant: A.", "user: b, better?"]
    );
    stack.runner.push(text_reply(&["D."]));
    chat(client, chat_request(&conversation, "d?", "tables_list")).await;
    let shown = get(client, &conversation, "").await;
    assert_eq!(
        texts(&shown.messages),
        ["a?", "A.", "b, better?", "B edited.", "d?", "D."]
    );
    assert_eq!(
        shown.messages[2].sibling_turn_ids,
        [turns[1].clone(), edited.complete.turn_id.clone()]
    );

    // Back to the first version of b: its branch ends at c again.
    let switched = client
        .switch_branch(gw::SwitchBranchRequest {
            conversation_id: conversation.clone(),
            turn_id: turns[1].clone(),
        })
        .await
        .expect("switch")
        .into_inner();
    assert_eq!(switched.leaf_turn_id, turns[2]);
    let shown = get(client, &conversation, "").await;
    assert_eq!(texts(&shown.messages), ["a?", "A.", "b?", "B.", "c?", "C."]);
    assert_eq!(shown.messages[2].sibling_index, 0);
    stack.runner.push(text_reply(&["E."]));
    chat(client, chat_request(&conversation, "e?", "tables_list")).await;
    before.push("user: e?".into());
    assert_eq!(
        transcript(&stack.runner.seen()[5].request),
        before,
        "the old branch's history, exactly"
    );

    // Switching needs a turn of the conversation.
    let unknown = client
        .switch_branch(gw::SwitchBranchRequest {
            conversation_id: conversation.clone(),
            turn_id: uuid::Uuid::now_v7().to_string(),
        })
        .await
        .expect_err("unknown turn");
    assert_eq!(
        (unknown.code(), reason(&unknown).as_str()),
        (Code::NotFound, "TURN_NOT_FOUND")
    );
    stack.stop().await;
}

#[tokio::test]
async fn an_edited_first_message_is_a_second_root_and_the_title_stays() {
    let mut stack = Harness::start(Options::default()).await;
    let client = &mut stack.client;
    stack.runner.push(text_reply(&["Hi."]));
    let first = chat(client, chat_request("", "Hello there", "tables_list")).await;
    let conversation = first.conversation_id();
    stack.runner.push(text_reply(&["Bonjour."]));
    let edited = edit(client, &conversation, &first.complete.turn_id, "Bonjour").await;
    assert!(edited.complete.success);
    assert_eq!(
        transcript(&stack.runner.seen()[1].request),
        ["user: Bonjour"],
        "nothing before a first message"
    );
    let shown = get(client, &conversation, "").await;
    assert_eq!(texts(&shown.messages), ["Bonjour", "Bonjour."]);
    assert_eq!(shown.messages[0].parent_turn_id, "");
    assert_eq!(
        shown.messages[0].sibling_turn_ids,
        [
            first.complete.turn_id.clone(),
            edited.complete.turn_id.clone()
        ]
    );
    let conversation = shown.conversation.expect("conversation");
    assert_eq!(conversation.title, "Hello there");
    assert_eq!(conversation.turn_count, 2);
    stack.stop().await;
}

#[tokio::test]
async fn a_branch_is_refused_while_a_turn_runs_and_for_a_turn_not_in_the_conversation() {
    let mut stack = Harness::start(Options::default()).await;
    let client = &mut stack.client;
    stack.runner.push(text_reply(&["One."]));
    let first = chat(client, chat_request("", "One", "tables_list")).await;
    let conversation = first.conversation_id();
    stack.runner.push(text_reply(&["Elsewhere."]));
    let other = chat(client, chat_request("", "Other", "tables_list")).await;

    // A turn of another conversation is not found here.
    let refused = client
        .regenerate_turn(gw::RegenerateTurnRequest {
            conversation_id: conversation.clone(),
            turn_id: other.complete.turn_id.clone(),
            ..Default::default()
        })
        .await
        .expect_err("another conversation's turn");
    assert_eq!(
        (refused.code(), reason(&refused).as_str()),
        (Code::NotFound, "TURN_NOT_FOUND")
    );
    let refused = client
        .edit_message(gw::EditMessageRequest {
            conversation_id: conversation.clone(),
            turn_id: first.complete.turn_id.clone(),
            message: String::new(),
            ..Default::default()
        })
        .await
        .expect_err("an empty edit");
    assert_eq!(
        (refused.code(), reason(&refused).as_str()),
        (Code::InvalidArgument, "EMPTY_MESSAGE")
    );

    // While a turn runs, neither a switch nor a regeneration goes through.
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    stack
        .runner
        .push(crate::harness::fake_runner::Reply::Steps(vec![
            crate::harness::fake_runner::Step::Gate(gate.clone()),
            crate::harness::fake_runner::Step::Send(crate::harness::fake_runner::finished("Two.")),
        ]));
    let mut running = client
        .chat(chat_request(&conversation, "Two", "tables_list"))
        .await
        .expect("running")
        .into_inner();
    let _first_event = running.message().await.expect("event");
    let busy = client
        .switch_branch(gw::SwitchBranchRequest {
            conversation_id: conversation.clone(),
            turn_id: first.complete.turn_id.clone(),
        })
        .await
        .expect_err("a turn runs");
    assert_eq!(
        (busy.code(), reason(&busy).as_str()),
        (Code::FailedPrecondition, "TURN_IN_PROGRESS")
    );
    let busy = client
        .regenerate_turn(gw::RegenerateTurnRequest {
            conversation_id: conversation.clone(),
            turn_id: first.complete.turn_id.clone(),
            ..Default::default()
        })
        .await
        .expect_err("a turn runs");
    assert_eq!(reason(&busy), "TURN_IN_PROGRESS");
    gate.notify_one();
    while running.message().await.expect("stream").is_some() {}
    stack.stop().await;
}

#[tokio::test]
async fn a_branch_made_on_one_replica_goes_on_on_the_other() {
    let Some((database_url, schema)) =
        postgres::fresh_schema("branches::a_branch_made_on_one_replica_goes_on_on_the_other").await
    else {
        return;
    };
    let options = Options::default();
    let (runner, runner_addr, parser_addr, _parser) = start_upstreams(&options).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = ProcessConfig {
        database_url,
        runner: runner_addr,
        parser: parser_addr,
        lease_renew: Duration::from_millis(200),
        lease_ttl: Duration::from_secs(1),
        stream_ahead: 32,
        per_user_concurrent_turns: 0,
    };
    let mut a = GatewayProcess::start(&config, dir.path(), "a").await;
    let mut b = GatewayProcess::start(&config, dir.path(), "b").await;
    runner.push(text_reply(&["Old."]));
    let first = chat(&mut a.client, chat_request("", "Question", "tables_list")).await;
    let conversation = first.conversation_id();
    runner.push(text_reply(&["New."]));
    let regenerated = regenerate(&mut a.client, &conversation, &first.complete.turn_id).await;
    assert!(regenerated.complete.success);

    // B continues the new branch, and shows it as A left it.
    runner.push(text_reply(&["Next."]));
    let next = chat(
        &mut b.client,
        chat_request(&conversation, "And then?", "tables_list"),
    )
    .await;
    assert!(next.complete.success, "{:?}", next.error);
    assert_eq!(
        transcript(&runner.seen()[2].request),
        ["user: Question", "assistant: New.", "user: And then?"]
    );
    let on_b = get(&mut b.client, &conversation, "").await;
    assert_eq!(
        texts(&on_b.messages),
        ["Question", "New.", "And then?", "Next."]
    );
    // B switches back; A sees the old branch current.
    b.client
        .switch_branch(gw::SwitchBranchRequest {
            conversation_id: conversation.clone(),
            turn_id: first.complete.turn_id.clone(),
        })
        .await
        .expect("switch on B");
    let on_a = get(&mut a.client, &conversation, "").await;
    assert_eq!(texts(&on_a.messages), ["Question", "Old."]);
    assert_eq!(on_a.messages[0].sibling_count, 2);
    drop(a);
    drop(b);
    postgres::drop_schema(&schema).await;
}

/// A database the demo wrote with the binaries before branches (schema
/// 0016: `scripts/demo.sh --bin DIR --save-db FILE`, see
/// services/chat-gateway/testdata/README.md): three conversations with tool
/// calls, a proposal accepted, approvals and an app-run tool.
fn fixture() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/store-0016.db")
}

#[tokio::test]
async fn conversations_written_before_branches_read_whole_and_branch() {
    let mut stack = Harness::start(Options {
        database_file: Some(fixture()),
        ..Options::default()
    })
    .await;
    let client = &mut stack.client;
    let listed = client
        .list_conversations(gw::ListConversationsRequest::default())
        .await
        .expect("list")
        .into_inner()
        .conversations;
    let mut titles: Vec<String> = listed.iter().map(|c| c.title.clone()).collect();
    titles.sort();
    assert_eq!(
        titles,
        [
            "Add some sample data",
            "Find the applications at Walrus",
            "Help me create a job tracker for my applications"
        ]
    );
    // Every conversation reads as one branch: each turn follows the one
    // before it, alone among its siblings, and ends answered.
    for conversation in &listed {
        let shown = get(client, &conversation.id, "").await;
        let turns: Vec<&gw::ConversationMessage> = shown
            .messages
            .iter()
            .filter(|m| m.role == gw::MessageRole::User as i32)
            .collect();
        assert_eq!(
            turns.len() as u32,
            conversation.turn_count,
            "{}",
            conversation.title
        );
        let mut parent = String::new();
        for message in &shown.messages {
            assert_eq!(message.sibling_count, 1, "{message:?}");
            assert_eq!(
                message.sibling_turn_ids,
                std::slice::from_ref(&message.turn_id)
            );
            if message.role == gw::MessageRole::User as i32 {
                assert_eq!(message.parent_turn_id, parent);
                parent = message.turn_id.clone();
            } else {
                assert_eq!(
                    message.state,
                    gw::TurnState::Completed as i32,
                    "{message:?}"
                );
                assert!(!message.text.is_empty(), "{message:?}");
            }
        }
        assert_eq!(shown.leaf_turn_id, parent);
    }
    // The job tracker: its first answer carried a proposal, accepted.
    let tracker = listed
        .iter()
        .find(|c| c.title.starts_with("Help me"))
        .expect("the tracker");
    let shown = get(client, &tracker.id, "").await;
    let answer = &shown.messages[1];
    assert!(answer.custom_payload.is_some(), "{answer:?}");
    assert!(answer.payload_decision.is_some(), "{answer:?}");
    assert!(!answer.tool_history.is_empty(), "{answer:?}");

    // It goes on, and branches, like a new one.
    let first_turn = shown.messages[0].turn_id.clone();
    let second_turn = shown.messages[2].turn_id.clone();
    stack.runner.push(text_reply(&["Carry on."]));
    let next = chat(client, chat_request(&tracker.id, "And now?", "tables_list")).await;
    assert!(next.complete.success, "{:?}", next.error);
    let seen = transcript(&stack.runner.seen()[0].request);
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert_eq!(
        seen[0],
        "user: Help me create a job tracker for my applications"
    );
    stack.runner.push(text_reply(&["Again."]));
    let again = regenerate(client, &tracker.id, &second_turn).await;
    assert!(again.complete.success);
    let shown = get(client, &tracker.id, "").await;
    assert_eq!(shown.messages.len(), 4);
    assert_eq!(shown.messages[2].parent_turn_id, first_turn);
    assert_eq!(shown.messages[2].sibling_count, 2);
    assert_eq!(shown.messages[3].text, "Again.");
    stack.stop().await;
}

/// Runs `parley-chat --plain` against the gateway at `addr` with `args`;
/// returns what it printed, after checking that it succeeded.
async fn parley_chat(addr: std::net::SocketAddr, args: &[&str]) -> String {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_parley-chat"))
        .arg("--gateway")
        .arg(format!("http://{addr}"))
        .arg("--plain")
        .args(args)
        .output()
        .await
        .expect("run parley-chat");
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "parley-chat {args:?} failed: {printed}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    printed
}

#[tokio::test]
async fn parley_chat_edits_regenerates_lists_branches_and_switches_back() {
    let mut stack = Harness::start(Options::default()).await;
    for answer in ["Answer one.", "OLD ANSWER", "EDITED ANSWER", "AGAIN ANSWER"] {
        stack.runner.push(text_reply(&[answer]));
    }
    let printed = parley_chat(
        stack.addr,
        &[
            "Question one",
            "Question two",
            "/edit Question two, better",
            "/regenerate",
            "/branches",
        ],
    )
    .await;
    // The edit and the regeneration stream like any turn, once each,
    // before `/branches` lists the branch.
    let (streamed, _) = printed
        .rsplit_once("\nyou › Question one\n")
        .unwrap_or_else(|| panic!("no listing after the turns:\n{printed}"));
    for line in [
        "you › Question two, better (edited)",
        "parley › EDITED ANSWER",
        "you › (the same message again)",
        "parley › AGAIN ANSWER",
    ] {
        assert_eq!(
            streamed.lines().filter(|printed| *printed == line).count(),
            1,
            "`{line}` once in:\n{printed}"
        );
    }
    let seen = stack.runner.seen();
    assert_eq!(seen.len(), 4, "{printed}");
    let edited_prompt = [
        "user: Question one",
        "assistant: Answer one.",
        "user: Question two, better",
    ];
    assert_eq!(transcript(&seen[2].request), edited_prompt, "the edit");
    assert_eq!(
        transcript(&seen[3].request),
        edited_prompt,
        "the regeneration runs the last turn shown (the edited one) again"
    );

    // `/branches`: the current branch, the second turn "3 of 3" with its
    // siblings' ids, as the gateway has them.
    let conversation = printed
        .lines()
        .filter_map(|line| line.strip_prefix("conversation "))
        .next_back()
        .expect("the conversation's id")
        .to_owned();
    let shown = get(&mut stack.client, &conversation, "").await;
    let siblings = shown.messages[2].sibling_turn_ids.clone();
    assert_eq!(siblings.len(), 3);
    let expected = [
        "you › Question one".to_owned(),
        "parley › Answer one.".to_owned(),
        "you › Question two, better  ‹ 3/3 ›".to_owned(),
        format!("  1/3 {}", siblings[0]),
        format!("  2/3 {}", siblings[1]),
        format!("  3/3 {} (this branch)", siblings[2]),
        "parley › AGAIN ANSWER".to_owned(),
        format!("(the branch ends at turn {})", shown.leaf_turn_id),
    ];
    let lines: Vec<&str> = printed.lines().collect();
    assert!(
        lines
            .windows(expected.len())
            .any(|window| window == expected),
        "no branch listing {expected:#?} in:\n{printed}"
    );

    // A later run on the same conversation: `/rate` finds the current
    // branch's last turn by itself, `/switch` goes back to the first
    // version of the second question (its id as `/branches` printed it),
    // and the next message follows it.
    stack.runner.push(text_reply(&["Answer three."]));
    let original = &siblings[0];
    let printed = parley_chat(
        stack.addr,
        &[
            "--conversation",
            &conversation,
            "/rate 5",
            &format!("/switch {original}"),
            "Question three",
        ],
    )
    .await;
    assert!(printed.contains("(rated the answer 5)"), "{printed}");
    assert!(
        printed.contains("you › Question two  ‹ 1/3 ›\n")
            && printed.contains(&format!("  1/3 {original} (this branch)\n"))
            && printed.contains("parley › OLD ANSWER\n"),
        "the switched branch is printed:\n{printed}"
    );
    assert_eq!(
        transcript(&stack.runner.seen()[4].request),
        [
            "user: Question one",
            "assistant: Answer one.",
            "user: Question two",
            "assistant: OLD ANSWER",
            "user: Question three"
        ],
        "the message after the switch follows the old branch"
    );
    let regenerated = get(&mut stack.client, &conversation, &siblings[2]).await;
    let rating = regenerated
        .messages
        .last()
        .and_then(|answer| answer.feedback.as_ref())
        .map(|feedback| feedback.rating);
    assert_eq!(rating, Some(5), "the rating went to the regenerated turn");

    // No turn to edit in a conversation not started yet.
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_parley-chat"))
        .arg("--gateway")
        .arg(format!("http://{}", stack.addr))
        .args(["--plain", "/edit Hello"])
        .output()
        .await
        .expect("run parley-chat");
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("no turn yet to edit"), "{said}");
    stack.stop().await;
}

#[tokio::test]
async fn search_finds_the_words_of_the_current_branch_only() {
    let mut stack = Harness::start(Options::default()).await;
    let client = &mut stack.client;
    stack.runner.push(text_reply(&["Noted."]));
    let first = chat(
        client,
        chat_request("", "Plan a trip to Lisbon", "tables_list"),
    )
    .await;
    let conversation = first.conversation_id();
    stack.runner.push(text_reply(&["Here is a plan."]));
    let second = chat(
        client,
        chat_request(&conversation, "Add a day in Sintra", "tables_list"),
    )
    .await;
    let found =
        |client: &mut gw::chat_gateway_client::ChatGatewayClient<tonic::transport::Channel>,
         query: &str| {
            let request = gw::ListConversationsRequest {
                query: query.into(),
                ..Default::default()
            };
            let mut client = client.clone();
            async move {
                client
                    .list_conversations(request)
                    .await
                    .expect("search")
                    .into_inner()
                    .conversations
                    .len()
            }
        };
    assert_eq!(found(client, "Sintra").await, 1);
    // Edited away, the old message no longer finds the conversation...
    stack.runner.push(text_reply(&["Here is another plan."]));
    let edited = edit(
        client,
        &conversation,
        &second.complete.turn_id,
        "Add a day in Porto",
    )
    .await;
    assert!(edited.complete.success);
    assert_eq!(found(client, "Sintra").await, 0);
    assert_eq!(found(client, "Porto").await, 1);
    assert_eq!(
        found(client, "Lisbon").await,
        1,
        "the turn both branches share"
    );
    // ...until its branch is current again.
    client
        .switch_branch(gw::SwitchBranchRequest {
            conversation_id: conversation.clone(),
            turn_id: second.complete.turn_id.clone(),
        })
        .await
        .expect("switch");
    assert_eq!(found(client, "Sintra").await, 1);
    assert_eq!(found(client, "Porto").await, 0);
    stack.stop().await;
}
