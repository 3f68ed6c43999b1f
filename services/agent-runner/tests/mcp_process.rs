//! A stdio MCP server's process against the runner: its stderr is drained
//! in bounded pieces whatever it writes, and its whole process group (the
//! grandchildren a launcher such as `npx` or `uvx` starts included) ends
//! with the session, whether the runner stops, the handshake times out or
//! the server crashes. The servers are `sh` scripts that never answer the
//! handshake, so each test controls how the session ends.

use std::{path::Path, time::Duration};

use agent_runner::{app::RunnerApp, config::RunnerConfig, tools::mcp::McpServerConfig};

const PATIENCE: Duration = Duration::from_secs(30);

fn app(script: &str, startup_timeout: Duration) -> RunnerApp {
    let mut server = McpServerConfig::stdio(vec!["sh".into(), "-c".into(), script.into()]);
    server.startup_timeout = startup_timeout;
    server.restart_backoff = Duration::from_secs(600);
    let mut config = RunnerConfig::scripted_demo();
    config.mcp_servers.insert("proc".into(), server);
    RunnerApp::build(&config, |name| match name {
        "PATH" => std::env::var("PATH").ok(),
        _ => None,
    })
    .expect("build")
}

/// Waits until `path` holds a pid and returns it.
async fn pid_in(path: &Path) -> u32 {
    let read = async {
        loop {
            if let Ok(text) = std::fs::read_to_string(path)
                && let Ok(pid) = text.trim().parse()
            {
                return pid;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .expect("the server never wrote its grandchild's pid")
}

/// Whether `pid` is still a running (not zombie) process.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits until `pid` is gone (a zombie counts: it no longer runs).
async fn gone(pid: u32) -> bool {
    let wait = async {
        while alive(pid) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(PATIENCE, wait).await.is_ok()
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn stderr_without_newlines_or_utf8_keeps_memory_bounded_and_the_server_alive() {
    let dir = tempfile::tempdir().expect("tempdir");
    let done = dir.path().join("done");
    // 64 MiB without a newline, a byte that is not UTF-8, more after it;
    // `done` only once every write went through.
    let script = format!(
        "head -c 67108864 /dev/zero >&2 && printf 'bad \\377 byte\\n' >&2 \
         && head -c 1048576 /dev/zero >&2 && printf 'after\\n' >&2 && touch '{}' && sleep 600",
        done.display()
    );
    let before = rss_kib();
    let app = app(&script, Duration::from_secs(600));
    let mut peak = before;
    let finished = async {
        while !done.exists() {
            peak = peak.max(rss_kib());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let wrote = tokio::time::timeout(PATIENCE, finished).await.is_ok();
    drop(app);
    assert!(wrote, "the server died writing its stderr");
    let grown = peak.saturating_sub(before);
    assert!(grown < 32 * 1024, "the runner grew by {grown} KiB");
}

#[tokio::test]
async fn the_runner_stopping_ends_the_servers_grandchildren() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("grandchild");
    let script = format!(
        "sleep 600 </dev/null >/dev/null 2>&1 & echo $! > '{}'; sleep 600",
        file.display()
    );
    let app = app(&script, Duration::from_secs(600));
    let grandchild = pid_in(&file).await;
    assert!(alive(grandchild));
    drop(app);
    assert!(
        gone(grandchild).await,
        "the grandchild {grandchild} outlived the runner"
    );
}

#[tokio::test]
async fn a_handshake_time_out_ends_the_servers_grandchildren() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("grandchild");
    let script = format!(
        "sleep 600 </dev/null >/dev/null 2>&1 & echo $! > '{}'; sleep 600",
        file.display()
    );
    let app = app(&script, Duration::from_secs(1));
    let grandchild = pid_in(&file).await;
    // The handshake times out after a second and the server is down.
    let server = app
        .runner()
        .tools
        .mcp
        .get("proc")
        .expect("configured")
        .clone();
    let mut watch = server.watch();
    let down = watch.wait_for(|s| s.state == agent_runner::tools::mcp::ServerState::Down);
    assert!(tokio::time::timeout(PATIENCE, down).await.is_ok());
    assert!(
        gone(grandchild).await,
        "the grandchild {grandchild} outlived the session"
    );
    drop(app);
}

#[tokio::test]
async fn a_crashing_server_takes_its_grandchildren_with_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("grandchild");
    let script = format!(
        "sleep 600 </dev/null >/dev/null 2>&1 & echo $! > '{}'; exit 3",
        file.display()
    );
    let app = app(&script, Duration::from_secs(600));
    let grandchild = pid_in(&file).await;
    let server = app
        .runner()
        .tools
        .mcp
        .get("proc")
        .expect("configured")
        .clone();
    let mut watch = server.watch();
    let down = watch.wait_for(|s| s.state == agent_runner::tools::mcp::ServerState::Down);
    assert!(tokio::time::timeout(PATIENCE, down).await.is_ok());
    assert!(
        gone(grandchild).await,
        "the grandchild {grandchild} outlived its server"
    );
    drop(app);
}
