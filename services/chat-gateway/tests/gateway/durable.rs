//! Durable turns: resuming a broken stream, a gateway killed mid-turn
//! (SIGKILL of a real process), replicas sharing one PostgreSQL, and a
//! store that fails (injected faults and a full disk).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use parley_proto::{
    gateway::v1::{
        self as gw, ChatEvent, chat_event::Event, chat_gateway_client::ChatGatewayClient,
    },
    runner::v1::run_event,
};
use tokio::sync::Notify;
use tonic::{Code, Streaming, transport::Channel};

use crate::{
    harness::{
        Harness, Options, chat, chat_request, collect, drain,
        fake_runner::{Reply, Step, finished, text_reply},
        process::{GatewayProcess, ProcessConfig},
        reason, start_upstreams,
    },
    postgres,
};

pub(crate) fn text(delta: &str) -> Step {
    Step::Send(run_event::Event::TextDelta(delta.into()))
}

/// Reads events until `texts` text deltas arrived; returns them all.
pub(crate) async fn read_texts(stream: &mut Streaming<ChatEvent>, texts: usize) -> Vec<ChatEvent> {
    let mut events = Vec::new();
    let mut seen = 0;
    while seen < texts {
        let event = tokio::time::timeout(Duration::from_secs(10), stream.message())
            .await
            .expect("an event within 10 s")
            .expect("stream ok")
            .expect("not ended");
        if matches!(event.event, Some(Event::TextDelta(_))) {
            seen += 1;
        }
        events.push(event);
    }
    events
}

pub(crate) fn ids(events: &[ChatEvent]) -> (String, String) {
    events
        .iter()
        .find_map(|event| match &event.event {
            Some(Event::Status(status)) => {
                Some((status.conversation_id.clone(), status.turn_id.clone()))
            }
            _ => None,
        })
        .expect("a status with the ids")
}

pub(crate) async fn resume(
    client: &mut ChatGatewayClient<Channel>,
    conversation_id: &str,
    turn_id: &str,
    after_seq: u64,
) -> Streaming<ChatEvent> {
    client
        .resume_turn(gw::ResumeTurnRequest {
            conversation_id: conversation_id.into(),
            turn_id: turn_id.into(),
            after_seq,
        })
        .await
        .expect("resume accepted")
        .into_inner()
}

pub(crate) fn ending(events: &[ChatEvent]) -> (Option<gw::TurnError>, gw::TurnComplete) {
    let error = events.iter().find_map(|event| match &event.event {
        Some(Event::Error(error)) => Some(error.clone()),
        _ => None,
    });
    let Some(Event::Complete(complete)) = events.last().and_then(|event| event.event.clone())
    else {
        panic!("the last event is complete: {events:?}")
    };
    (error, *complete)
}

pub(crate) async fn last_answer(
    client: &mut ChatGatewayClient<Channel>,
    conversation_id: &str,
) -> gw::ConversationMessage {
    let stored = client
        .get_conversation(gw::GetConversationRequest {
            conversation_id: conversation_id.into(),
            ..Default::default()
        })
        .await
        .expect("get")
        .into_inner();
    stored
        .messages
        .last()
        .filter(|message| message.role == gw::MessageRole::Assistant as i32)
        .cloned()
        .unwrap_or_else(|| panic!("an answer last: {:?}", stored.messages))
}

#[tokio::test]
async fn a_client_resumes_a_broken_stream_exactly() {
    let mut stack = Harness::start(Options::default()).await;
    let gate = Arc::new(Notify::new());
    stack.runner.push(Reply::Steps(vec![
        text("Alpha "),
        text("beta "),
        Step::Gate(gate.clone()),
        text("gamma."),
        Step::Send(finished("Alpha beta gamma.")),
    ]));
    let mut broken = stack
        .client
        .chat(chat_request("", "Three words", "tables_list"))
        .await
        .expect("chat")
        .into_inner();
    let seen = read_texts(&mut broken, 1).await;
    let (conversation, turn) = ids(&seen);
    // An undisturbed client of the same turn, from its first event.
    let undisturbed = resume(&mut stack.client, &conversation, &turn, 0).await;
    drop(broken);
    gate.notify_one();
    let last_seq = seen.last().expect("events").seq;
    // Empty turn id: the conversation's latest turn.
    let rest = drain(resume(&mut stack.client, &conversation, "", last_seq).await).await;
    let undisturbed = drain(undisturbed).await;
    let mut joined = seen.clone();
    joined.extend(rest);
    assert_eq!(joined, undisturbed, "seen + resumed = the whole stream");
    let (error, complete) = ending(&undisturbed);
    assert!(error.is_none() && complete.success, "{complete:?}");
    assert_eq!(complete.message, "Alpha beta gamma.");

    // A finished turn is replayed exactly, from anywhere in it.
    let replayed = drain(resume(&mut stack.client, &conversation, &turn, 0).await).await;
    assert_eq!(replayed, undisturbed);
    let tail = drain(resume(&mut stack.client, &conversation, &turn, last_seq).await).await;
    assert_eq!(tail, undisturbed[seen.len()..]);

    // Unknown turns and conversations are NOT_FOUND.
    let unknown = uuid::Uuid::now_v7().to_string();
    for (conversation_id, turn_id, expected) in [
        (conversation.as_str(), unknown.as_str(), "TURN_NOT_FOUND"),
        (unknown.as_str(), "", "CONVERSATION_NOT_FOUND"),
    ] {
        let refused = stack
            .client
            .resume_turn(gw::ResumeTurnRequest {
                conversation_id: conversation_id.into(),
                turn_id: turn_id.into(),
                after_seq: 0,
            })
            .await
            .expect_err("not found");
        assert_eq!(
            (refused.code(), reason(&refused).as_str()),
            (Code::NotFound, expected)
        );
    }
    stack.stop().await;
}

#[tokio::test]
async fn a_gateway_killed_mid_turn_is_ended_at_restart_with_what_its_client_saw() {
    let options = Options::default();
    let (runner, runner_addr, parser_addr, _parser) = start_upstreams(&options).await;
    runner.push(Reply::Steps(vec![
        text("The first half of the answer"),
        Step::Hang,
    ]));
    let dir = tempfile::tempdir().expect("temp dir");
    let config = ProcessConfig {
        database_url: format!("sqlite://{}?mode=rwc", dir.path().join("g.db").display()),
        runner: runner_addr,
        parser: parser_addr,
        lease_renew: Duration::from_secs(2),
        lease_ttl: Duration::from_secs(10),
        // Only stored events reach the client: what it saw is stored.
        stream_ahead: 0,
        per_user_concurrent_turns: 0,
    };
    let mut first = GatewayProcess::start(&config, dir.path(), "first").await;
    let mut request = chat_request("", "Tell me everything", "tables_list");
    request.request_id = "req-killed".into();
    let mut stream = first
        .client
        .chat(request.clone())
        .await
        .expect("chat")
        .into_inner();
    let seen = read_texts(&mut stream, 1).await;
    let (conversation, turn) = ids(&seen);
    first.kill().await;

    let mut second = GatewayProcess::start(&config, dir.path(), "second").await;
    let client = &mut second.client;
    let answer = last_answer(client, &conversation).await;
    assert_eq!(answer.state, gw::TurnState::Failed as i32, "{answer:?}");
    assert_eq!(answer.text, "The first half of the answer");
    let error = answer.error.expect("the stored error");
    assert_eq!(error.reason, "REPLICA_LOST");
    assert!(error.retryable);

    let last_seq = seen.last().expect("events").seq;
    let rest = drain(resume(client, &conversation, &turn, last_seq).await).await;
    assert_eq!(
        rest.iter().map(|event| event.seq).collect::<Vec<_>>(),
        [last_seq + 1, last_seq + 2],
        "{rest:?}"
    );
    let (error, complete) = ending(&rest);
    assert_eq!(
        error.map(|error| error.reason).as_deref(),
        Some("REPLICA_LOST")
    );
    assert!(!complete.success);

    // The conversation is free, and the retried request runs again.
    let next = chat(
        client,
        chat_request(&conversation, "Still there?", "tables_list"),
    )
    .await;
    assert!(next.complete.success, "{:?}", next.complete);
    let retried = chat(client, request).await;
    assert!(retried.complete.success, "{:?}", retried.complete);
    assert_ne!(retried.complete.turn_id, turn, "a new turn");
    assert_eq!(runner.seen().len(), 3);
}

/// `turns.stream_ahead` of the replicas that share one PostgreSQL.
const STREAM_AHEAD: u64 = 32;

#[tokio::test]
async fn two_replicas_on_one_postgres_share_their_turns() {
    let Some((database_url, schema)) =
        postgres::fresh_schema("durable::two_replicas_on_one_postgres_share_their_turns").await
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
        stream_ahead: STREAM_AHEAD,
        per_user_concurrent_turns: 0,
    };
    let mut a = GatewayProcess::start(&config, dir.path(), "a").await;
    let mut b = GatewayProcess::start(&config, dir.path(), "b").await;

    // A slow turn on A.
    let gate = Arc::new(Notify::new());
    runner.push(Reply::Steps(vec![
        text("Working on it"),
        Step::Gate(gate.clone()),
        text(" and done."),
        Step::Send(finished("Working on it and done.")),
    ]));
    let mut on_a = a
        .client
        .chat(chat_request("", "A long job", "tables_list"))
        .await
        .expect("chat on A")
        .into_inner();
    let seen = read_texts(&mut on_a, 1).await;
    let (conversation, turn) = ids(&seen);

    // B refuses a second turn on the conversation.
    let busy = b
        .client
        .chat(chat_request(&conversation, "Me too", "tables_list"))
        .await
        .expect_err("busy");
    assert_eq!(
        (busy.code(), reason(&busy).as_str()),
        (Code::FailedPrecondition, "TURN_IN_PROGRESS")
    );

    // B follows A's turn from where A's client is.
    let last_seq = seen.last().expect("events").seq;
    let followed_on_b = resume(&mut b.client, &conversation, &turn, last_seq).await;

    // CancelTurn on B stops it on A.
    let asked = Instant::now();
    let cancelled = b
        .client
        .cancel_turn(gw::CancelTurnRequest {
            conversation_id: conversation.clone(),
            turn_id: String::new(),
        })
        .await
        .expect("cancel on B")
        .into_inner();
    assert!(cancelled.cancelled);
    assert_eq!(cancelled.turn_id, turn);
    let rest_on_a = drain(on_a).await;
    eprintln!(
        "durable: CancelTurn on B to A's complete: {} ms",
        asked.elapsed().as_millis()
    );
    let (_, complete) = ending(&rest_on_a);
    assert_eq!(complete.state, gw::TurnState::Cancelled as i32);
    assert_eq!(
        drain(followed_on_b).await,
        rest_on_a,
        "B delivers A's events exactly"
    );
    let answer = last_answer(&mut b.client, &conversation).await;
    assert_eq!(answer.state, gw::TurnState::Cancelled as i32);
    assert_eq!(answer.text, "Working on it");
    gate.notify_one();

    // A dies mid-turn: B ends the turn once A's lease expires.
    runner.push(Reply::Steps(vec![text("Half an answer"), Step::Hang]));
    let mut request = chat_request(&conversation, "Again", "tables_list");
    request.request_id = "req-pg-killed".into();
    let mut on_a = a
        .client
        .chat(request.clone())
        .await
        .expect("chat")
        .into_inner();
    let seen = read_texts(&mut on_a, 1).await;
    let (_, killed_turn) = ids(&seen);
    a.kill().await;
    let killed = Instant::now();
    let last_seq = seen.last().expect("events").seq;
    let rest = drain(resume(&mut b.client, &conversation, "", last_seq).await).await;
    eprintln!(
        "durable: SIGKILL of A to REPLICA_LOST on B: {} ms (lease {} ms)",
        killed.elapsed().as_millis(),
        config.lease_ttl.as_millis()
    );
    let (error, complete) = ending(&rest);
    assert_eq!(
        error.map(|error| error.reason).as_deref(),
        Some("REPLICA_LOST")
    );
    assert!(!complete.success);
    // A streamed up to STREAM_AHEAD events ahead of its log, so its client
    // may have seen events that were never stored: the stored partial
    // answer is a prefix of what the client saw, and the ending is numbered
    // after anything A could have sent (never a seq the client has).
    let answer = last_answer(&mut b.client, &conversation).await;
    assert_eq!(answer.state, gw::TurnState::Failed as i32);
    assert!(
        "Half an answer".starts_with(&answer.text),
        "stored {:?}",
        answer.text
    );
    let seqs: Vec<u64> = rest.iter().map(|event| event.seq).collect();
    assert_eq!(seqs.len(), 2, "{rest:?}");
    assert!(seqs[0] > last_seq, "{seqs:?} after {last_seq}");
    assert!(seqs[0] <= last_seq + STREAM_AHEAD + 1, "{seqs:?}");
    assert_eq!(seqs[1], seqs[0] + 1);

    runner.push(text_reply(&["Back."]));
    let next = chat(
        &mut b.client,
        chat_request(&conversation, "Hello?", "tables_list"),
    )
    .await;
    assert!(next.complete.success, "{:?}", next.complete);
    let retried = chat(&mut b.client, request).await;
    assert!(retried.complete.success, "{:?}", retried.complete);
    assert_ne!(retried.complete.turn_id, killed_turn);
    b.kill().await;
    postgres::drop_schema(&schema).await;
}

#[tokio::test]
async fn a_failing_store_never_acknowledges_an_unstored_turn() {
    // Only stored events reach the client, so what it saw before the fault
    // is exactly what the store keeps.
    let mut stack = Harness::start(Options {
        tweak: |config| config.turns.stream_ahead = 0,
        ..Options::default()
    })
    .await;
    let gate = Arc::new(Notify::new());
    stack.runner.push(Reply::Steps(vec![
        text("Stored part. "),
        Step::Gate(gate.clone()),
        text("Unstored part."),
        Step::Send(finished("Stored part. Unstored part.")),
    ]));
    let mut stream = stack
        .client
        .chat(chat_request("", "Remember this", "tables_list"))
        .await
        .expect("chat")
        .into_inner();
    let seen = read_texts(&mut stream, 1).await;
    let (conversation, _) = ids(&seen);
    // The disk fills up (injected): every write fails from now on.
    stack.faults.fail_writes(true);
    gate.notify_one();
    let rest = drain(stream).await;
    let (error, complete) = ending(&rest);
    let error = error.expect("an error event");
    assert_eq!(error.reason, "STORE_UNAVAILABLE");
    assert!(error.retryable);
    assert!(!complete.success, "never success for an unstored turn");

    // Space again: the store shows exactly what was committed, and the
    // turn is ended (its replica's renewal finds it orphaned).
    stack.faults.fail_writes(false);
    let deadline = Instant::now() + Duration::from_secs(10);
    let answer = loop {
        let answer = stack
            .client
            .get_conversation(gw::GetConversationRequest {
                conversation_id: conversation.clone(),
                ..Default::default()
            })
            .await
            .expect("get")
            .into_inner()
            .messages
            .last()
            .cloned()
            .expect("messages");
        let ended = answer.role == gw::MessageRole::Assistant as i32
            && answer.state != gw::TurnState::Running as i32;
        if ended || Instant::now() > deadline {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(answer.state, gw::TurnState::Failed as i32, "{answer:?}");
    let shown: String = seen
        .iter()
        .filter_map(|event| match &event.event {
            Some(Event::TextDelta(text)) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(answer.text, shown, "what the client saw before the fault");
    assert_eq!(
        answer.error.map(|error| error.reason).as_deref(),
        Some("STORE_UNAVAILABLE")
    );
    // And the conversation goes on.
    let next = chat(
        &mut stack.client,
        chat_request(&conversation, "Again", "tables_list"),
    )
    .await;
    assert!(next.complete.success);
    stack.stop().await;
}

/// A connection of its own to the gateway's SQLite file, holding the
/// write lock: the gateway's writer can still decide a new conversation's
/// turn, but its inserts wait in SQLite's busy handler (5 s at most) until
/// the lock is released. (A writer whose transaction has read already gets
/// SQLITE_BUSY at once instead: no limit may read, see [`early_start`].)
async fn hold_write_lock(database_url: &str) -> sqlx::SqliteConnection {
    use sqlx::Connection;
    let mut lock = sqlx::SqliteConnection::connect(database_url)
        .await
        .expect("connect to the gateway's database");
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut lock)
        .await
        .expect("take the write lock");
    lock
}

/// A gateway for the early-start tests: no limit counts its turns (its
/// writer reads nothing to start a new conversation's turn), and its
/// periodic writes (the lease renewals, every `lease_renew`) come only at
/// start-up. Each write queued ahead of the turn's start while the test
/// holds the lock waits out the busy timeout twice (in its batch, then
/// alone): a renewal that fell into that window once kept the runner call
/// back past the test's deadline.
fn early_start() -> Options {
    Options {
        tweak: |config| {
            config.turns.per_user = chat_gateway::config::Quota::UNLIMITED;
            config.turns.per_tenant = chat_gateway::config::Quota::UNLIMITED;
            config.turns.lease_renew = Duration::from_secs(3600);
            config.turns.lease_ttl = Duration::from_secs(7200);
        },
        ..Options::default()
    }
}

#[tokio::test]
async fn a_new_conversation_calls_the_runner_while_its_start_commits_and_shows_nothing_before() {
    let mut stack = Harness::start(early_start()).await;
    // A whole turn first: the start-up's writes (the first renewals and
    // prunes) are committed before the lock is taken.
    stack.runner.push(text_reply(&["Warm."]));
    let warm = chat(
        &mut stack.client,
        chat_request("", "Warm up", "tables_list"),
    )
    .await;
    assert!(warm.complete.success, "{:?}", warm.complete);
    let mut lock = hold_write_lock(&stack.database_url).await;
    stack.runner.push(text_reply(&["Early ", "answer."]));
    let mut client = stack.client.clone();
    let call =
        tokio::spawn(async move { client.chat(chat_request("", "Hello", "tables_list")).await });
    // The runner has the turn's request while its start waits for the
    // lock; the client has not even the response's headers. (Without the
    // early start the request never comes while the lock is held: the
    // deadline is generous so that only that fails it.)
    let deadline = Instant::now() + Duration::from_secs(30);
    while stack.runner.seen().len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the runner call waited for the commit"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        !call.is_finished(),
        "the client's stream waits for the commit"
    );
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut lock)
        .await
        .expect("release the write lock");
    let turn = collect(call.await.expect("join").expect("chat").into_inner()).await;
    assert!(turn.complete.success, "{:?}", turn.complete);
    assert_eq!(turn.text, "Early answer.");
    stack.stop().await;
}

#[tokio::test]
async fn a_start_that_does_not_commit_stops_its_runner_call_and_shows_nothing() {
    let mut stack = Harness::start(early_start()).await;
    // Held past SQLite's busy timeout (5 s): the turn's start cannot commit.
    let lock = hold_write_lock(&stack.database_url).await;
    stack.runner.push(Reply::Steps(vec![
        text("Never "),
        Step::Gate(Arc::new(Notify::new())),
    ]));
    let refused = stack
        .client
        .chat(chat_request("", "Hello", "tables_list"))
        .await
        .expect_err("the start did not commit");
    assert_eq!(reason(&refused), "STORE_UNAVAILABLE", "{refused:?}");
    assert_eq!(stack.runner.seen().len(), 1, "its runner call had started");
    stack.runner.dropped(1).await;
    drop(lock);
    let listed = stack
        .client
        .list_conversations(gw::ListConversationsRequest::default())
        .await
        .expect("list")
        .into_inner();
    assert!(listed.conversations.is_empty(), "{listed:?}");
    // The store takes the next turn.
    stack.runner.push(text_reply(&["Stored."]));
    let next = chat(&mut stack.client, chat_request("", "Again", "tables_list")).await;
    assert!(next.complete.success, "{:?}", next.complete);
    stack.stop().await;
}

/// A tmpfs of `size` mounted on a temp dir, unmounted on drop.
pub(crate) struct Tmpfs {
    pub(crate) dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts one, or says why it cannot.
    pub(crate) fn mount(size: &str) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|error| error.to_string())?;
        let output = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|error| format!("cannot run mount: {error}"))?;
        if !output.status.success() {
            return Err(format!(
                "mount -t tmpfs failed (root needed): {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        Ok(Self { dir })
    }

    pub(crate) fn resize(&self, size: &str) {
        let status = std::process::Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(self.dir.path())
            .status()
            .expect("run mount");
        assert!(status.success(), "remount the tmpfs");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

#[tokio::test]
async fn a_full_disk_loses_nothing_that_was_acknowledged() {
    const TEST: &str = "durable::a_full_disk_loses_nothing_that_was_acknowledged";
    // Room for the migrated database, its WAL and one or two turns of 30 KB
    // messages: the disk fills within the twelve turns below, and a turn
    // that began before it filled can fail to end (seen: 1 or 2
    // acknowledged, 10 refused, 0 or 1 failed). Grow it when the schema
    // grows: at 400k the seventh migration left no room for a turn at all,
    // at 576k the eleventh (paused turns) did not, at 704k the sixteenth
    // (attachment objects) did not, at 832k the eighteenth (the search
    // index, which holds each message's text again) did not.
    let disk = match Tmpfs::mount("1152k") {
        Ok(disk) => disk,
        Err(why) => return parley_testkit::not_run(TEST, &why),
    };
    let options = Options::default();
    let (runner, runner_addr, parser_addr, _parser) = start_upstreams(&options).await;
    let logs = tempfile::tempdir().expect("temp dir");
    let config = ProcessConfig {
        database_url: format!(
            "sqlite://{}?mode=rwc",
            disk.dir.path().join("g.db").display()
        ),
        runner: runner_addr,
        parser: parser_addr,
        lease_renew: Duration::from_secs(2),
        lease_ttl: Duration::from_secs(10),
        stream_ahead: 32,
        per_user_concurrent_turns: 0,
    };
    let mut gateway = GatewayProcess::start(&config, logs.path(), "full").await;
    let message = "x".repeat(30_000);
    let (mut acknowledged, mut refused, mut failed) = (Vec::new(), 0, 0);
    for _ in 0..12 {
        runner.push(text_reply(&["Stored ", "answer."]));
        match gateway
            .client
            .chat(chat_request("", &message, "tables_list"))
            .await
        {
            Err(status) => {
                assert_eq!(reason(&status), "STORE_UNAVAILABLE", "{status:?}");
                refused += 1;
            }
            Ok(stream) => {
                let events = drain(stream.into_inner()).await;
                let (error, complete) = ending(&events);
                if complete.success {
                    acknowledged.push(complete.conversation_id.clone());
                } else {
                    let error = error.expect("an error event");
                    assert_eq!(error.reason, "STORE_UNAVAILABLE", "{error:?}");
                    assert!(error.retryable);
                    failed += 1;
                }
            }
        }
    }
    eprintln!(
        "durable: full disk: {} acknowledged, {refused} refused, {failed} failed",
        acknowledged.len()
    );
    assert!(refused + failed > 0, "the disk never filled up");
    assert!(!acknowledged.is_empty(), "nothing fit at all");
    // Every acknowledged turn is stored: now, and after freeing space and a
    // restart.
    for round in ["full", "freed"] {
        for conversation in &acknowledged {
            let answer = last_answer(&mut gateway.client, conversation).await;
            assert_eq!(
                (answer.state, answer.text.as_str()),
                (gw::TurnState::Completed as i32, "Stored answer."),
                "{round}: {conversation}"
            );
        }
        if round == "full" {
            gateway.kill().await;
            disk.resize("16m");
            gateway = GatewayProcess::start(&config, logs.path(), "freed").await;
        }
    }
    runner.push(text_reply(&["Room again."]));
    let next = chat(
        &mut gateway.client,
        chat_request("", "Hello", "tables_list"),
    )
    .await;
    assert!(next.complete.success, "{:?}", next.complete);
    gateway.kill().await;
}

/// A TCP proxy to `target`; sending on the returned channel cuts every
/// connection open at that moment (new ones are accepted as before).
async fn cutting_proxy(
    target: std::net::SocketAddr,
) -> (std::net::SocketAddr, tokio::sync::watch::Sender<u32>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (cut, cuts) = tokio::sync::watch::channel(0_u32);
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let mut cuts = cuts.clone();
            cuts.mark_unchanged();
            tokio::spawn(async move {
                let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await else {
                    return;
                };
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    _ = cuts.changed() => {}
                }
            });
        }
    });
    (addr, cut)
}

#[tokio::test]
async fn parley_chat_resumes_by_itself_when_its_stream_breaks() {
    use tokio::io::AsyncReadExt;
    let stack = Harness::start(Options::default()).await;
    let gate = Arc::new(Notify::new());
    stack.runner.push(Reply::Steps(vec![
        text("Before the break. "),
        Step::Gate(gate.clone()),
        text("After the break."),
        Step::Send(finished("Before the break. After the break.")),
    ]));
    let (proxy, cut) = cutting_proxy(stack.addr).await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_parley-chat"))
        .args([
            "--gateway",
            &format!("http://{proxy}"),
            "--plain",
            "Tell me",
        ])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start parley-chat");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut printed = Vec::new();
    let mut chunk = [0_u8; 4096];
    while !String::from_utf8_lossy(&printed).contains("Before the break.") {
        let read = tokio::time::timeout(Duration::from_secs(10), stdout.read(&mut chunk))
            .await
            .expect("output within 10 s")
            .expect("read");
        assert!(
            read > 0,
            "parley-chat ended early: {}",
            String::from_utf8_lossy(&printed)
        );
        printed.extend_from_slice(&chunk[..read]);
    }
    // The network breaks mid-turn; the answer goes on meanwhile.
    cut.send_modify(|n| *n += 1);
    gate.notify_one();
    tokio::time::timeout(Duration::from_secs(20), stdout.read_to_end(&mut printed))
        .await
        .expect("parley-chat finished within 20 s")
        .expect("read");
    let status = child.wait().await.expect("exit");
    let printed = String::from_utf8_lossy(&printed);
    assert!(status.success(), "{printed}");
    assert!(printed.contains("connection lost"), "{printed}");
    assert_eq!(printed.matches("Before the break.").count(), 1, "{printed}");
    assert_eq!(printed.matches("After the break.").count(), 1, "{printed}");
    assert_eq!(stack.runner.seen().len(), 1, "one model call");
    stack.stop().await;
}
