//! The generated clients of other languages against the local binaries:
//! payload-parser, agent-runner (the scripted demo) and chat-gateway
//! (SQLite, dev auth) as child processes on free ports, as `scripts/demo.sh`
//! runs them. The Go client of `tests/clients/go` and the Python client of
//! `tests/python` hold the conversation of `tests/clients/scenario.json`
//! and must print the same transcript; two of its turns pause (an approval
//! of `lookup_rows`, rejected, and the app-run `ask_user_to_pick_rows`) and
//! continue with `SubmitToolDecisions`, and one sends a PNG and a PDF
//! uploaded in chunks, which the scripted model echoes (name, media type,
//! size, SHA-256) so the clients check that it received both; a second
//! conversation edits its second message (`EditMessage`) and switches back
//! (`SwitchBranch`) to a branch that reads as before. README.md's
//! Python block of "Attachments" runs against the same stack.
//!
//! The binaries come from this build's target directory (`cargo test
//! --workspace` builds them; otherwise `cargo build --bins`). Without Go or
//! Python with grpcio-tools the test prints `NOT RUN`; under `CI=true` it
//! fails instead.
//!
//! The gateway's web protocols get a client that is not ours too: the
//! official Connect client for Python (`tests/python/connect_client.py`:
//! Connect with JSON and binary, and gRPC-Web over HTTP/1.1) holds a
//! two-turn conversation, reads a refusal's `google.rpc` details, cuts a
//! server stream and resumes its turn.

mod support;

// The trace tests' process stack, without tracing.
#[path = "../trace/support/stack.rs"]
#[allow(dead_code)]
mod stack;

use std::process::Command;

use parley_testkit::process::repo_root;
use stack::{Stack, Tracing};

#[tokio::test]
async fn generated_go_and_python_clients_hold_the_same_conversation_with_the_local_binaries() {
    let test = "generated_go_and_python_clients_hold_the_same_conversation_with_the_local_binaries";
    if !support::python_available(test) || !support::go_available(test) {
        return;
    }
    let go = support::GoClient::build().await;
    let (_stack, address) = demo_stack().await;

    let go_run = go.run(&address).await;
    let python_run = support::run_python(&address).await;
    support::assert_same_transcript(&python_run, &go_run);
    readme_python_attachment(&address).await;
}

/// The three binaries on the demo script and the example registry, and
/// the gateway's address.
async fn demo_stack() -> (Stack, String) {
    let tracing = Tracing {
        endpoint: None,
        schedule_delay_ms: 0,
    };
    let config = repo_root().join("deploy/config");
    let stack = Stack::start(
        &tracing,
        &config.join("demo-script.toml"),
        &config.join("registry.yaml"),
    )
    .await;
    let address = stack.gateway.trim_start_matches("http://").to_owned();
    (stack, address)
}

#[tokio::test]
async fn connect_and_grpc_web_clients_hold_a_conversation_with_the_local_binaries() {
    let test = "connect_and_grpc_web_clients_hold_a_conversation_with_the_local_binaries";
    if !connect_client_available(test) {
        return;
    }
    let (stack, address) = demo_stack().await;
    let script = repo_root().join("tests/python/connect_client.py");
    let output = tokio::task::spawn_blocking(move || {
        Command::new("python3").arg(script).arg(address).output()
    })
    .await
    .expect("join")
    .expect("run python3");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the Connect client failed:\n{stdout}\n{stderr}\n{}",
        stack.logs()
    );
    for line in [
        "connect json: 2 turns in ",
        "connect json: refused NOT_FOUND, ErrorInfo CONVERSATION_NOT_FOUND (parley.dev)",
        "connect json: a stream cut after 3 events, the turn resumed to complete",
        "connect proto: a turn to complete",
        "grpc-web: a turn to complete",
    ] {
        assert!(stdout.contains(line), "no `{line}` in:\n{stdout}");
    }
}

/// Whether python3 with the official Connect client and its stub
/// generators is here; prints NOT RUN (or panics under `CI=true`) when
/// they are not.
fn connect_client_available(test: &str) -> bool {
    let succeeds = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .output()
            .is_ok_and(|output| output.status.success())
    };
    let found = succeeds("python3", &["-c", "import connectrpc, grpc_tools"])
        && ["protoc-gen-connectrpc", "protoc-gen-py"]
            .iter()
            .all(|plugin| succeeds("sh", &["-c", &format!("command -v {plugin}")]));
    if !found {
        parley_testkit::not_run(
            test,
            "python3 with connectrpc, grpcio-tools, protoc-gen-connectrpc and protoc-gen-py is needed: run scripts/setup.sh",
        );
    }
    found
}

/// README.md's Python block of "Attachments", run as written but for the
/// gateway's address, in a directory holding `gen/` (the stubs, generated
/// as docs/clients.md says) and `chart.png` (the scenario's fixture): it
/// prints the stored file's media type, size and SHA-256, then the scripted
/// model's answer, which names the file it received.
async fn readme_python_attachment(address: &str) {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let section = readme
        .split_once("\n## Attachments\n")
        .and_then(|(_, rest)| rest.split("\n## ").next())
        .expect("README.md has an Attachments section");
    let block = section
        .split_once("\n```python\n")
        .and_then(|(_, rest)| rest.split_once("\n```\n"))
        .map(|(block, _)| block)
        .expect("README.md's Attachments section has a Python block");
    assert!(
        block.contains("\"127.0.0.1:50051\"") && block.contains("\"chart.png\""),
        "README.md's Python block of Attachments no longer names the demo gateway and chart.png:\n{block}"
    );
    let dir = tempfile::tempdir().expect("a scratch directory");
    let fixture = repo_root().join("tests/clients/fixtures/chart.png");
    let size = std::fs::metadata(&fixture).expect("the fixture").len();
    std::fs::copy(&fixture, dir.path().join("chart.png")).expect("copy chart.png");
    std::fs::write(
        dir.path().join("snippet.py"),
        block.replace("127.0.0.1:50051", address),
    )
    .expect("write the snippet");
    let proto = repo_root().join("proto");
    let generate = format!(
        "mkdir -p gen && python3 -m grpc_tools.protoc -I'{proto}' \
         -I\"$(python3 -c 'import grpc_tools,os;print(os.path.dirname(grpc_tools.__file__))')/_proto\" \
         --python_out=gen --grpc_python_out=gen $(find '{proto}' -name '*.proto') && python3 snippet.py",
        proto = proto.display()
    );
    let cwd = dir.path().to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("sh")
            .arg("-c")
            .arg(generate)
            .current_dir(cwd)
            .output()
    })
    .await
    .expect("join")
    .expect("run sh");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "README.md's Python block of Attachments fails ({}):\n{printed}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let mut lines = printed.lines();
    let stored: Vec<&str> = lines.next().unwrap_or_default().split(' ').collect();
    let [media_type, stored_size, sha256] = stored[..] else {
        panic!("the snippet's first line is not `TYPE SIZE SHA256`:\n{printed}");
    };
    assert_eq!(
        (media_type, stored_size),
        ("image/png", size.to_string().as_str()),
        "{printed}"
    );
    let echoed = format!(
        "chart.png (image/png, {size} bytes, sha256 {})",
        sha256.get(..12).unwrap_or(sha256)
    );
    assert!(
        lines.any(|line| line == echoed),
        "the scripted model does not say it received `{echoed}`:\n{printed}"
    );
}
