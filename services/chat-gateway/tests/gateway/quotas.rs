//! Per-user limits through the wire: `RESOURCE_EXHAUSTED` with
//! `QuotaFailure` and `RetryInfo`, one user held and another not.

use std::{sync::Arc, time::Duration};

use chat_gateway::config::Quota;
use parley_proto::{gateway::v1 as gw, runner::v1::run_event};
use tokio::sync::Notify;
use tonic::{Code, Status};
use tonic_types::StatusExt;

use crate::{
    auth::{authenticator, hs256},
    harness::{
        Harness, Options, chat, chat_request, collect,
        fake_runner::{Reply, Step, finished},
        reason, until_text, with_token,
    },
};

/// The limit a refusal names, and when it says to retry.
fn quota_refusal(status: &Status) -> (String, String, Duration) {
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(reason(status), "QUOTA_EXCEEDED");
    let failure = status
        .get_details_quota_failure()
        .expect("a QuotaFailure detail");
    let violation = failure.violations.first().expect("one violation");
    let retry = status
        .get_details_retry_info()
        .and_then(|info| info.retry_delay)
        .expect("a RetryInfo delay");
    (
        violation.subject.clone(),
        violation.description.clone(),
        retry,
    )
}

#[tokio::test]
async fn a_user_at_their_concurrent_turn_limit_is_refused_and_another_is_not() {
    let mut stack = Harness::start(Options {
        auth: authenticator(),
        tweak: |config| {
            config.turns.per_user = Quota {
                concurrent_turns: 1,
                ..Quota::UNLIMITED
            }
        },
        ..Options::default()
    })
    .await;
    let alice = hs256("alice", "parley", 600);
    let bob = hs256("bob", "parley", 600);

    // Alice's first turn runs until the gate opens.
    let gate = Arc::new(Notify::new());
    stack.runner.push(Reply::Steps(vec![
        Step::Send(run_event::Event::TextDelta("Working".into())),
        Step::Gate(gate.clone()),
        Step::Send(finished("Working")),
    ]));
    // The response arrives once the turn is stored as running.
    let first = stack
        .client
        .chat(with_token(
            chat_request("", "A long one", "tables_list"),
            &alice,
        ))
        .await
        .expect("admitted")
        .into_inner();

    // Her second, in another conversation, is refused...
    let refused = stack
        .client
        .chat(with_token(
            chat_request("", "And another", "tables_list"),
            &alice,
        ))
        .await
        .expect_err("over her limit");
    let (subject, description, retry) = quota_refusal(&refused);
    assert_eq!(subject, "user");
    assert_eq!(description, "turns.per_user.concurrent_turns = 1");
    assert!(retry >= Duration::from_secs(1), "{retry:?}");

    // ...while Bob's is not.
    let bobs = chat(
        &mut stack.client,
        with_token(chat_request("", "Hello", "tables_list"), &bob),
    )
    .await;
    assert!(bobs.complete.success);

    // Once her turn ends, she may start another.
    gate.notify_one();
    let ended = collect(first).await;
    assert!(ended.complete.success);
    let again = chat(
        &mut stack.client,
        with_token(chat_request("", "Now?", "tables_list"), &alice),
    )
    .await;
    assert!(again.complete.success);
    stack.stop().await;
}

#[tokio::test]
async fn a_spent_daily_token_budget_refuses_until_midnight_utc() {
    // The fake runner reports 150 tokens a turn: the second turn passes
    // (150 of 200 spent), the third does not (300).
    let mut stack = Harness::start(Options {
        tweak: |config| {
            config.turns.per_user = Quota {
                tokens_per_day: 200,
                ..Quota::UNLIMITED
            }
        },
        ..Options::default()
    })
    .await;
    for message in ["One", "Two"] {
        let turn = chat(&mut stack.client, chat_request("", message, "tables_list")).await;
        assert!(turn.complete.success, "{message}");
    }
    let refused = stack
        .client
        .chat(chat_request("", "Three", "tables_list"))
        .await
        .expect_err("the day's tokens are spent");
    let (subject, description, retry) = quota_refusal(&refused);
    assert_eq!(
        (subject.as_str(), description.as_str()),
        ("user", "turns.per_user.tokens_per_day = 200")
    );
    assert!(retry <= Duration::from_secs(86_400), "{retry:?}");
    // Nothing was stored for the refused turn.
    let listed = stack
        .client
        .list_conversations(gw::ListConversationsRequest::default())
        .await
        .expect("list")
        .into_inner();
    assert_eq!(listed.conversations.len(), 2);
    stack.stop().await;
}

#[tokio::test]
async fn limits_hold_across_two_gateway_processes_and_a_killed_one_frees_its_slots() {
    let Some((database_url, schema)) = crate::postgres::fresh_schema(
        "quotas::limits_hold_across_two_gateway_processes_and_a_killed_one_frees_its_slots",
    )
    .await
    else {
        return;
    };
    let options = Options::default();
    let (runner, runner_addr, parser_addr, _parser) =
        crate::harness::start_upstreams(&options).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = crate::harness::process::ProcessConfig {
        database_url,
        runner: runner_addr,
        parser: parser_addr,
        lease_renew: Duration::from_millis(200),
        lease_ttl: Duration::from_secs(1),
        stream_ahead: 0,
        per_user_concurrent_turns: 1,
    };
    let mut a = crate::harness::process::GatewayProcess::start(&config, dir.path(), "a").await;
    let mut b = crate::harness::process::GatewayProcess::start(&config, dir.path(), "b").await;

    // The dev user's one turn runs on A (and never ends by itself).
    runner.push(Reply::Steps(vec![
        Step::Send(run_event::Event::TextDelta("Working".into())),
        Step::Hang,
    ]));
    let mut on_a = a
        .client
        .chat(chat_request("", "A long job", "tables_list"))
        .await
        .expect("admitted on A")
        .into_inner();
    until_text(&mut on_a).await;

    // B counts it: the user's second turn is refused there.
    let refused = b
        .client
        .chat(chat_request("", "Another", "tables_list"))
        .await
        .expect_err("over the limit on B too");
    let (subject, _, _) = quota_refusal(&refused);
    assert_eq!(subject, "user");

    // A dies with the turn running: once its lease expires, B's sweep ends
    // the turn and the slot is free again (bounded wait, no timing claim).
    a.kill().await;
    drop(on_a);
    let admitted = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match b
                .client
                .chat(chat_request("", "After the crash", "tables_list"))
                .await
            {
                Ok(stream) => return collect(stream.into_inner()).await,
                Err(status) => {
                    assert_eq!(reason(&status), "QUOTA_EXCEEDED", "{status:?}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    })
    .await
    .expect("the dead replica's slot is freed by the sweep");
    assert!(admitted.complete.success);
    b.kill().await;
    crate::postgres::drop_schema(&schema).await;
}

/// A turn's end whose runner priced it at `cost_micros` USD.
fn priced(text: &str, cost_micros: i64) -> Reply {
    Reply::Steps(vec![
        Step::Send(run_event::Event::TextDelta(text.into())),
        Step::Send(run_event::Event::Finished(Box::new(
            parley_proto::runner::v1::Finished {
                stop_reason: parley_proto::runner::v1::StopReason::EndTurn as i32,
                raw_stop_reason: "end_turn".into(),
                text: text.into(),
                usage: Some(parley_proto::runner::v1::Usage {
                    input_tokens: 1_000,
                    output_tokens: 100,
                    cost_micros,
                    currency: "USD".into(),
                    ..Default::default()
                }),
                iterations: 1,
                response_model: "priced-model".into(),
                ..Default::default()
            },
        ))),
    ])
}

#[tokio::test]
async fn a_spent_daily_cost_budget_trips_across_two_gateway_processes() {
    let Some((database_url, schema)) = crate::postgres::fresh_schema(
        "quotas::a_spent_daily_cost_budget_trips_across_two_gateway_processes",
    )
    .await
    else {
        return;
    };
    let options = Options::default();
    let (runner, runner_addr, parser_addr, _parser) =
        crate::harness::start_upstreams(&options).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = crate::harness::process::ProcessConfig {
        database_url,
        runner: runner_addr,
        parser: parser_addr,
        lease_renew: Duration::from_millis(200),
        lease_ttl: Duration::from_secs(5),
        stream_ahead: 0,
        per_user_concurrent_turns: 0,
    };
    // 5 cents a day; each turn costs 3.
    let budget = [("PARLEY_TURNS__PER_USER__COST_PER_DAY", "0.05")];
    let mut a = crate::harness::process::GatewayProcess::start_with(
        &config,
        dir.path(),
        "a",
        None,
        &budget,
    )
    .await;
    let mut b = crate::harness::process::GatewayProcess::start_with(
        &config,
        dir.path(),
        "b",
        None,
        &budget,
    )
    .await;

    // 3 cents spent on A, then 6 on B: under the limit when each began.
    runner.push(priced("One", 30_000));
    let one = chat(&mut a.client, chat_request("", "One", "tables_list")).await;
    assert!(one.complete.success, "{:?}", one.complete);
    assert_eq!(
        one.complete
            .usage
            .as_ref()
            .map(|u| (u.cost_micros, u.currency.as_str())),
        Some((30_000, "USD"))
    );
    runner.push(priced("Two", 30_000));
    let two = chat(&mut b.client, chat_request("", "Two", "tables_list")).await;
    assert!(two.complete.success, "{:?}", two.complete);

    // The day's 6 cents are over the budget on either replica; nothing is
    // called or stored for the refused turn.
    let calls = runner.seen().len();
    for replica in [&mut a, &mut b] {
        let refused = replica
            .client
            .chat(chat_request("", "Three", "tables_list"))
            .await
            .expect_err("the day's budget is spent");
        let (subject, description, retry) = quota_refusal(&refused);
        assert_eq!(
            (subject.as_str(), description.as_str()),
            ("user", "turns.per_user.cost_per_day = 0.05")
        );
        assert!(
            refused.message().contains("limit of 0.05 cost_per_day"),
            "{refused:?}"
        );
        assert!(retry <= Duration::from_secs(86_400), "{retry:?}");
    }
    assert_eq!(
        runner.seen().len(),
        calls,
        "no model call for a refused turn"
    );
    let listed = b
        .client
        .list_conversations(gw::ListConversationsRequest::default())
        .await
        .expect("list")
        .into_inner();
    assert_eq!(listed.conversations.len(), 2);
    a.kill().await;
    b.kill().await;
    crate::postgres::drop_schema(&schema).await;
}

#[tokio::test]
async fn chatting_in_new_conversations_and_deleting_them_still_meets_the_per_minute_limit() {
    let mut stack = Harness::start(Options {
        tweak: |config| {
            config.turns.per_user = Quota {
                turns_per_minute: 3,
                ..Quota::UNLIMITED
            }
        },
        ..Options::default()
    })
    .await;
    for message in ["One", "Two", "Three"] {
        let turn = chat(&mut stack.client, chat_request("", message, "tables_list")).await;
        assert!(turn.complete.success, "{message}");
        stack
            .client
            .delete_conversation(gw::DeleteConversationRequest {
                conversation_id: turn.complete.conversation_id.clone(),
            })
            .await
            .expect("deleted");
    }
    let refused = stack
        .client
        .chat(chat_request("", "Four", "tables_list"))
        .await
        .expect_err("the minute's three turns were admitted, deleted or not");
    let (subject, description, retry) = quota_refusal(&refused);
    assert_eq!(
        (subject.as_str(), description.as_str()),
        ("user", "turns.per_user.turns_per_minute = 3")
    );
    assert!(retry <= Duration::from_secs(60), "{retry:?}");
    stack.stop().await;
}

#[tokio::test]
async fn deleting_a_conversation_whose_turn_runs_on_another_replica_frees_its_slot_only_once_it_ended()
 {
    let Some((database_url, schema)) = crate::postgres::fresh_schema(
        "quotas::deleting_a_conversation_whose_turn_runs_on_another_replica_frees_its_slot_only_once_it_ended",
    )
    .await
    else {
        return;
    };
    let options = Options::default();
    let (runner, runner_addr, parser_addr, _parser) =
        crate::harness::start_upstreams(&options).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = crate::harness::process::ProcessConfig {
        database_url,
        runner: runner_addr,
        parser: parser_addr,
        lease_renew: Duration::from_millis(200),
        // Far longer than the test: no sweep ends the frozen replica's turn.
        lease_ttl: Duration::from_secs(120),
        stream_ahead: 0,
        per_user_concurrent_turns: 1,
    };
    let mut a = crate::harness::process::GatewayProcess::start(&config, dir.path(), "a").await;
    let mut b = crate::harness::process::GatewayProcess::start(&config, dir.path(), "b").await;

    // The dev user's one turn runs on A and never ends by itself.
    runner.push(Reply::Steps(vec![
        Step::Send(run_event::Event::TextDelta("Working".into())),
        Step::Hang,
    ]));
    let mut on_a = a
        .client
        .chat(chat_request("", "A long job", "tables_list"))
        .await
        .expect("admitted on A")
        .into_inner();
    let first = on_a.message().await.expect("stream").expect("an event");
    let conversation_id = match first.event {
        Some(gw::chat_event::Event::Status(status)) => status.conversation_id,
        other => panic!("the first event is a status: {other:?}"),
    };
    until_text(&mut on_a).await;

    // A is frozen (SIGSTOP): it cannot end the turn that B asks it to stop.
    // The delete does not go through, and the user's slot stays taken.
    // B's calls are bounded: a frozen replica must not hold B up (it did,
    // when A stopped inside a transaction holding the turn's row).
    a.pause();
    let kept = tokio::time::timeout(
        Duration::from_secs(30),
        b.client.delete_conversation(gw::DeleteConversationRequest {
            conversation_id: conversation_id.clone(),
        }),
    )
    .await
    .expect("B answers while A is frozen")
    .expect_err("the turn has not ended");
    assert_eq!(reason(&kept), "TURN_IN_PROGRESS", "{kept:?}");
    let refused = tokio::time::timeout(
        Duration::from_secs(30),
        b.client.chat(chat_request("", "Another", "tables_list")),
    )
    .await
    .expect("B answers while A is frozen")
    .expect_err("the frozen turn still holds the slot");
    assert_eq!(quota_refusal(&refused).0, "user");

    // A runs again, sees the cancel and ends the turn as cancelled: the
    // delete goes through after it, and the slot is free.
    a.resume();
    let deleted = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match b
                .client
                .delete_conversation(gw::DeleteConversationRequest {
                    conversation_id: conversation_id.clone(),
                })
                .await
            {
                Ok(_) => return,
                Err(status) => {
                    assert_eq!(reason(&status), "TURN_IN_PROGRESS", "{status:?}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    })
    .await;
    deleted.expect("the delete goes through once A ended the turn");
    let ended = collect_rest(on_a).await;
    assert_eq!(
        ended.state,
        gw::TurnState::Cancelled as i32,
        "the turn on A ended cancelled: {ended:?}"
    );
    let admitted = collect(
        b.client
            .chat(chat_request("", "After the delete", "tables_list"))
            .await
            .expect("the slot is free")
            .into_inner(),
    )
    .await;
    assert!(admitted.complete.success);
    a.kill().await;
    b.kill().await;
    crate::postgres::drop_schema(&schema).await;
}

/// The `complete` that ends a stream already read from.
async fn collect_rest(mut stream: tonic::Streaming<gw::ChatEvent>) -> gw::TurnComplete {
    let read = async {
        while let Some(event) = stream.message().await.expect("stream ok") {
            if let Some(gw::chat_event::Event::Complete(complete)) = event.event {
                return *complete;
            }
        }
        panic!("the stream ended without a complete");
    };
    tokio::time::timeout(Duration::from_secs(20), read)
        .await
        .expect("the stream ended within 20 s")
}

#[tokio::test]
async fn a_users_seventeenth_stream_is_refused_across_two_gateway_processes() {
    let Some((database_url, schema)) = crate::postgres::fresh_schema(
        "quotas::a_users_seventeenth_stream_is_refused_across_two_gateway_processes",
    )
    .await
    else {
        return;
    };
    let options = Options::default();
    let (runner, runner_addr, parser_addr, _parser) =
        crate::harness::start_upstreams(&options).await;
    let dir = tempfile::tempdir().expect("temp dir");
    // The default `turns.per_user.streams` (16) on both.
    let config = crate::harness::process::ProcessConfig {
        database_url,
        runner: runner_addr,
        parser: parser_addr,
        lease_renew: Duration::from_millis(200),
        lease_ttl: Duration::from_secs(30),
        stream_ahead: 0,
        per_user_concurrent_turns: 0,
    };
    let mut a = crate::harness::process::GatewayProcess::start(&config, dir.path(), "a").await;
    let mut b = crate::harness::process::GatewayProcess::start(&config, dir.path(), "b").await;

    // One turn runs on A (its Chat stream is the user's first stream)...
    runner.push(Reply::Steps(vec![
        Step::Send(run_event::Event::TextDelta("Working".into())),
        Step::Hang,
    ]));
    let mut on_a = a
        .client
        .chat(chat_request("", "A long job", "tables_list"))
        .await
        .expect("admitted on A")
        .into_inner();
    let first = on_a.message().await.expect("stream").expect("an event");
    let (conversation_id, turn_id) = match first.event {
        Some(gw::chat_event::Event::Status(status)) => (status.conversation_id, status.turn_id),
        other => panic!("the first event is a status: {other:?}"),
    };
    // ...and 15 more follow it, on both replicas, without reading.
    let resume = || gw::ResumeTurnRequest {
        conversation_id: conversation_id.clone(),
        turn_id: turn_id.clone(),
        after_seq: 0,
    };
    let mut followers = Vec::new();
    for n in 0..15 {
        let client = if n % 2 == 0 {
            &mut a.client
        } else {
            &mut b.client
        };
        followers.push(
            client
                .resume_turn(resume())
                .await
                .unwrap_or_else(|status| panic!("stream {} admitted: {status:?}", n + 2))
                .into_inner(),
        );
    }

    // The seventeenth is refused on either replica, as a resume or a chat.
    let refused = b
        .client
        .resume_turn(resume())
        .await
        .expect_err("a seventeenth stream on B");
    let (subject, description, retry) = quota_refusal(&refused);
    assert_eq!(
        (subject.as_str(), description.as_str()),
        ("user", "turns.per_user.streams = 16")
    );
    assert!(retry >= Duration::from_secs(1), "{retry:?}");
    let refused = a
        .client
        .chat(chat_request("", "Another", "tables_list"))
        .await
        .expect_err("a seventeenth stream on A");
    assert_eq!(quota_refusal(&refused).1, "turns.per_user.streams = 16");

    // A stream that closes frees its place for the next (bounded wait: the
    // lease goes once A's stream has ended).
    drop(followers.pop());
    let admitted = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match b.client.resume_turn(resume()).await {
                Ok(stream) => return stream,
                Err(status) => {
                    assert_eq!(reason(&status), "QUOTA_EXCEEDED", "{status:?}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    })
    .await
    .expect("a closed stream frees its place");
    drop(admitted);
    drop(followers);
    drop(on_a);
    a.kill().await;
    b.kill().await;
    crate::postgres::drop_schema(&schema).await;
}

#[tokio::test]
async fn a_stream_whose_client_stops_reading_is_dropped_with_slow_consumer_and_frees_its_place() {
    let mut stack = Harness::start(Options {
        tweak: |config| {
            config.turns.follower_stall = Duration::from_millis(500);
            // The answer below is larger than the default cap.
            config.turns.max_answer_bytes = 4 << 20;
            config.turns.per_user = Quota {
                streams: 1,
                ..Quota::UNLIMITED
            };
        },
        ..Options::default()
    })
    .await;
    // A client whose HTTP/2 window holds 1 KiB: it takes nothing more
    // until it reads.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", stack.addr))
        .expect("url")
        .initial_stream_window_size(Some(1024))
        .initial_connection_window_size(Some(1024 * 1024))
        .connect()
        .await
        .expect("connect");
    let mut slow = gw::chat_gateway_client::ChatGatewayClient::new(channel);
    // A long answer written steadily (2 KiB every 5 ms, 800 KiB in all),
    // then the turn waits: far more than the client's window and the
    // server's HTTP/2 send buffer (hyper's, 400 KiB a stream). Written at
    // once, the deltas could travel as a few large events that all fit in
    // hyper's buffers, leaving nothing unread for the gateway to see; a
    // steady writer keeps events coming once the client stops taking them.
    let gate = Arc::new(Notify::new());
    let mut steps: Vec<Step> = (0..400)
        .flat_map(|n| {
            [
                Step::Send(run_event::Event::TextDelta(format!(
                    "{n:04} {}",
                    "x".repeat(2000)
                ))),
                Step::Sleep(Duration::from_millis(5)),
            ]
        })
        .collect();
    steps.push(Step::Gate(gate.clone()));
    steps.push(Step::Send(finished("done")));
    stack.runner.push(Reply::Steps(steps));
    let mut unread = slow
        .chat(chat_request("", "Tell me everything", "tables_list"))
        .await
        .expect("admitted")
        .into_inner();

    // The user's one stream is taken until the unread one is let go
    // (a bounded wait, a guard against a hang; the stall is half a second).
    let mut resumed = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let latest = stack
                .client
                .list_conversations(gw::ListConversationsRequest::default())
                .await
                .expect("list")
                .into_inner();
            let Some(conversation) = latest.conversations.first() else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            match stack
                .client
                .resume_turn(gw::ResumeTurnRequest {
                    conversation_id: conversation.id.clone(),
                    turn_id: String::new(),
                    after_seq: 0,
                })
                .await
            {
                Ok(stream) => return stream.into_inner(),
                Err(status) => {
                    assert_eq!(reason(&status), "QUOTA_EXCEEDED", "{status:?}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    })
    .await
    .expect("the stalled stream's place is freed");

    // The slow client, reading at last, gets what was on its way, then
    // SLOW_CONSUMER; the resumed stream gets the whole answer.
    let ended = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            match unread.message().await {
                Ok(Some(_)) => {}
                Ok(None) => panic!("the stream ended without SLOW_CONSUMER"),
                Err(status) => return status,
            }
        }
    })
    .await
    .expect("the slow stream ends");
    assert_eq!(reason(&ended), "SLOW_CONSUMER", "{ended:?}");
    assert_eq!(ended.code(), Code::ResourceExhausted);
    gate.notify_one();
    let rest = tokio::time::timeout(Duration::from_secs(60), async {
        let mut complete = None;
        while let Some(event) = resumed.message().await.expect("resumed stream ok") {
            if let Some(gw::chat_event::Event::Complete(done)) = event.event {
                complete = Some(*done);
            }
        }
        complete
    })
    .await
    .expect("the resumed stream ends")
    .expect("with a complete");
    assert!(rest.success, "{rest:?}");
    stack.stop().await;
}
