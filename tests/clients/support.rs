//! The generated clients of other languages, run on the one scenario of
//! `tests/clients/scenario.json`: the Python client of
//! `tests/python/chat_client.py` and the Go client of `tests/clients/go`.
//!
//! Each prints its transcript (`tests/clients/README.md`) and then a
//! summary line naming its language. Tests compare the transcripts line by
//! line, so the two clients cannot drift apart. Shared by the test target
//! `clients` (the local binaries) and the end-to-end suite (the
//! containers).

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The repository root.
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Whether `program args` runs and succeeds here.
fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .map(|output| output.status.success())
        .unwrap_or(false)
}

/// Whether Python with grpcio-tools is here; prints NOT RUN (or panics
/// under `CI=true`) when it is not.
pub fn python_available(test: &str) -> bool {
    let found = succeeds("python3", &["-c", "import grpc, grpc_tools"]);
    if !found {
        parley_testkit::not_run(
            test,
            "python3 with grpcio-tools is needed: run scripts/setup.sh",
        );
    }
    found
}

/// Whether Go, protoc with its Go plugins and Debian's Go gRPC sources are
/// here; prints NOT RUN (or panics under `CI=true`) when they are not.
pub fn go_available(test: &str) -> bool {
    let check = repo_root().join("scripts/go.sh");
    let found = succeeds("bash", &[&check.to_string_lossy(), "--check"]);
    if !found {
        parley_testkit::not_run(
            test,
            "Go and Debian's Go gRPC packages are needed: run scripts/go.sh",
        );
    }
    found
}

/// What a client printed.
#[derive(Debug)]
pub struct Run {
    /// Every line but the last: the transcript the clients share.
    pub transcript: String,
    /// The last line, `<language> client: conversation ...`.
    pub summary: String,
}

/// Runs `program args`, which must succeed and print a transcript and a
/// summary starting with `summary_prefix`.
async fn run(program: PathBuf, args: Vec<String>, summary_prefix: &str) -> Run {
    let shown = format!("{} {}", program.display(), args.join(" "));
    let output = tokio::task::spawn_blocking(move || Command::new(program).args(args).output())
        .await
        .expect("join")
        .unwrap_or_else(|error| panic!("cannot run {shown}: {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{shown} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    let (transcript, summary) = stdout
        .trim_end()
        .rsplit_once('\n')
        .unwrap_or_else(|| panic!("{shown} printed no transcript:\n{stdout}\n{stderr}"));
    assert!(
        summary.starts_with(summary_prefix),
        "{shown} ends without its summary line:\n{stdout}"
    );
    Run {
        transcript: transcript.to_owned(),
        summary: summary.to_owned(),
    }
}

/// The Go client, built into a temporary directory.
pub struct GoClient {
    dir: tempfile::TempDir,
}

impl GoClient {
    /// Generates the stubs and builds the client (`tests/clients/go/build.sh`);
    /// panics with the build's output when that fails.
    pub async fn build() -> Self {
        let dir = tempfile::tempdir().expect("a build directory");
        let script = repo_root().join("tests/clients/go/build.sh");
        let out = dir.path().to_path_buf();
        let output =
            tokio::task::spawn_blocking(move || Command::new("bash").arg(script).arg(out).output())
                .await
                .expect("join")
                .expect("run tests/clients/go/build.sh");
        assert!(
            output.status.success(),
            "the Go client does not build:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        Self { dir }
    }

    /// Runs the scenario against the gateway at `address` (`host:port`).
    pub async fn run(&self, address: &str) -> Run {
        run(
            self.dir.path().join("parley-go-client"),
            vec![address.to_owned(), scenario()],
            "go client: conversation ",
        )
        .await
    }
}

/// Runs the Python client's scenario against the gateway at `address`.
pub async fn run_python(address: &str) -> Run {
    run(
        PathBuf::from("python3"),
        vec![
            repo_root()
                .join("tests/python/chat_client.py")
                .to_string_lossy()
                .into_owned(),
            address.to_owned(),
            scenario(),
        ],
        "python client: conversation ",
    )
    .await
}

fn scenario() -> String {
    repo_root()
        .join("tests/clients/scenario.json")
        .to_string_lossy()
        .into_owned()
}

/// Both clients held the scenario and printed the same transcript.
pub fn assert_same_transcript(python: &Run, go: &Run) {
    assert!(
        python
            .transcript
            .contains("\nrefused Chat: INVALID_ARGUMENT, ErrorInfo EMPTY_MESSAGE"),
        "the transcript misses the refused call:\n{}",
        python.transcript
    );
    assert_paused_and_continued(python);
    assert_attachments(python);
    assert_branched_and_switched_back(python);
    assert_eq!(
        python.transcript, go.transcript,
        "the Python and Go clients disagree on the scenario (left Python, right Go)"
    );
    // `<language> client: conversation ID: 5 turns, ...`: all but the id.
    let counts = |run: &Run| {
        run.summary
            .rsplit_once(": ")
            .map(|(_, counts)| counts.to_owned())
    };
    assert_eq!(
        counts(python),
        counts(go),
        "{}\n{}",
        python.summary,
        go.summary
    );
}

/// The scenario's turns that pause: an approval the client rejected and a
/// tool the app ran, each answered with `SubmitToolDecisions` and continued
/// to its `complete` (the clients check the rest against the scenario).
fn assert_paused_and_continued(run: &Run) {
    let lines: Vec<&str> = run.transcript.lines().collect();
    for (request, answer) in [
        ("approval_request lookup_rows ", ", answered reject"),
        (
            "client_tool_call ask_user_to_pick_rows",
            ", answered result",
        ),
    ] {
        let at = lines
            .iter()
            .position(|line| line.contains(request) && line.ends_with(answer))
            .unwrap_or_else(|| {
                panic!(
                    "the transcript misses the pause's `{request}`{answer}:\n{}",
                    run.transcript
                )
            });
        let turn = lines[at].split(':').next().unwrap_or_default();
        assert!(
            at > 0 && lines[at - 1].starts_with(&format!("{turn}: paused: events ")),
            "`{}` follows no pause of {turn}:\n{}",
            lines[at],
            run.transcript
        );
        assert!(
            lines[at + 1..].iter().any(|line| line
                .starts_with(&format!("{turn}: continued: events "))
                && line.ends_with(" complete")),
            "{turn} does not continue to its complete:\n{}",
            run.transcript
        );
    }
}

/// The scenario's second conversation: two turns, an edit of the second
/// that makes it "2 of 2", and a switch back after which the branch reads as
/// before the edit (the clients check the messages field for field).
fn assert_branched_and_switched_back(run: &Run) {
    let lines: Vec<&str> = run.transcript.lines().collect();
    let expected = [
        ("branches: turn 1: events ", " complete"),
        ("branches: turn 2: events ", " complete"),
        ("branches: edit turn 2: events ", " complete"),
        (
            "branches: edited turn 2: the branch shown has user messages [",
            "], turn 2 is 2 of 2",
        ),
        (
            "branches: switched back to turn 2: the branch shown is the one before the edit",
            "; turn 2 is 1 of 2",
        ),
    ];
    let mut at = 0;
    for (start, end) in expected {
        let found = lines[at..]
            .iter()
            .position(|line| line.starts_with(start) && line.ends_with(end));
        let Some(found) = found else {
            panic!(
                "the transcript misses `{start}…{end}` after line {at}:\n{}",
                run.transcript
            );
        };
        at += found + 1;
    }
}

/// The scenario's files: uploaded, one of them in several chunks, sent with
/// a turn whose scripted model received each of them, one downloaded back,
/// and a ZIP named `.png` refused (the clients check the rest against the
/// scenario: media types, sizes, SHA-256s, what the model echoed).
fn assert_attachments(run: &Run) {
    let lines: Vec<&str> = run.transcript.lines().collect();
    let chunks: Vec<u64> = lines
        .iter()
        .filter_map(|line| line.strip_prefix("upload "))
        .filter_map(|rest| rest.split_once(": ")?.1.split_once(" chunks, "))
        .filter_map(|(count, _)| count.parse().ok())
        .collect();
    assert!(
        chunks.len() >= 2 && chunks.iter().any(|&count| count >= 2),
        "the transcript misses two uploads, one of them in several chunks:\n{}",
        run.transcript
    );
    let has = |start: &str, end: &str| {
        lines
            .iter()
            .any(|line| line.starts_with(start) && line.ends_with(end))
    };
    let refused =
        "refused UploadAttachment: INVALID_ARGUMENT, ErrorInfo ATTACHMENT_TYPE_NOT_ALLOWED ";
    for (what, found) in [
        (
            "a turn whose model received the files",
            lines
                .iter()
                .any(|line| line.contains(": the model received [")),
        ),
        ("a download", has("download ", ", sha256 as uploaded")),
        ("the refused upload", has(refused, "")),
    ] {
        assert!(found, "the transcript misses {what}:\n{}", run.transcript);
    }
}
