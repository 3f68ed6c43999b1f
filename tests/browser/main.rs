//! The chat page of `web/` in a real browser: the three local binaries as
//! child processes, as `scripts/demo.sh` runs them (the scripted demo
//! model, the demo registry, SQLite, dev auth) with the page on
//! (`PARLEY_WEB__ENABLED=true`), and `tests/browser/chat_page.py` driving
//! headless Chromium with Selenium through it: streamed text, a card that
//! forms and is accepted, chips, an approval and a client tool, a reload in
//! the middle of a turn, Stop, the conversation list, a refused request.
//! The scripted model plays `deploy/config/demo-script.toml` with
//! `tests/browser/slow-turn.toml` appended (a turn slow enough to reload
//! the page in).
//!
//! Screenshots go to `target/browser-artifacts/` (or
//! `$PARLEY_BROWSER_ARTIFACTS`). Chromium, chromium-driver and selenium
//! come from `scripts/browser.sh`; without them the test prints `NOT RUN`,
//! and under `CI=true` it installs them (or fails saying why).

use std::{path::PathBuf, process::Command};

use parley_testkit::{
    process::repo_root,
    stack::{Service, ServiceOptions, Stack, StackOptions},
};

const TEST: &str = "the_chat_page_streams_forms_cards_resumes_and_shows_refusals_in_chromium";

/// Whether `scripts/browser.sh --check` (or, under `CI=true`, the install
/// itself) succeeds; prints NOT RUN or panics otherwise.
fn browser_available() -> bool {
    let script = repo_root().join("scripts/browser.sh");
    let check = || {
        Command::new("bash")
            .arg(&script)
            .arg("--check")
            .status()
            .is_ok_and(|status| status.success())
    };
    if check() {
        return true;
    }
    if parley_testkit::ci() {
        let installed = Command::new("bash")
            .arg(&script)
            .status()
            .is_ok_and(|status| status.success());
        assert!(
            installed && check(),
            "{TEST}: CI=true, so this test must run, but scripts/browser.sh could not install Chromium and selenium"
        );
        return true;
    }
    parley_testkit::not_run(
        TEST,
        "chromium, chromium-driver and PyPI selenium are needed: run scripts/browser.sh",
    );
    false
}

/// Where screenshots go.
fn artifacts() -> PathBuf {
    std::env::var_os("PARLEY_BROWSER_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/browser-artifacts"))
}

#[tokio::test]
async fn the_chat_page_streams_forms_cards_resumes_and_shows_refusals_in_chromium() {
    if !browser_available() {
        return;
    }
    let state = tempfile::tempdir().expect("state directory");
    let dir = state.path();
    let config = repo_root().join("deploy/config");
    let script = dir.join("script.toml");
    let demo = std::fs::read_to_string(config.join("demo-script.toml")).expect("the demo script");
    let slow = std::fs::read_to_string(repo_root().join("tests/browser/slow-turn.toml"))
        .expect("tests/browser/slow-turn.toml");
    std::fs::write(&script, format!("{demo}\n{slow}")).expect("write the script");
    let registry = config.join("registry.yaml");

    let own_port = ["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"];
    let mut options = StackOptions::new(dir);
    options.parser = ServiceOptions::default()
        .args(own_port)
        .args(["--profiles".into(), config.join("parser-profiles.json")]);
    options.runner = ServiceOptions::default()
        .env("PARLEY_TOOLS__REGISTRY", &registry)
        .args(own_port)
        .args([PathBuf::from("--script"), script]);
    options.gateway = ServiceOptions::default()
        .env("PARLEY_WEB__ENABLED", "true")
        .args(own_port)
        .args([
            "--registry".into(),
            registry.into_os_string(),
            "--database-url".into(),
            format!("sqlite://{}?mode=rwc", dir.join("parley.db").display()).into(),
            "--dev-auth".into(),
        ]);
    let stack = Stack::start(&options).await;
    let gateway = stack.url(Service::Gateway);

    let page_test = repo_root().join("tests/browser/chat_page.py");
    let artifacts = artifacts();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .arg(page_test)
            .arg(&gateway)
            .arg(&artifacts)
            .env("SE_OFFLINE", "true")
            .output()
    })
    .await
    .expect("join")
    .expect("run python3 tests/browser/chat_page.py");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "the browser test failed ({}):\n{stdout}\n{stderr}\nthe stack's logs:\n{}",
        output.status,
        stack.logs()
    );
    assert!(stdout.contains("browser test: passed"), "{stdout}");
}
