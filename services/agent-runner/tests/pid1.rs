//! The runner as PID 1, as in its `FROM scratch` image: the real binary in
//! a new PID namespace (`unshare --pid --fork --mount-proc`, root only),
//! with a stdio MCP server whose grandchild outlives its parent and exits
//! later. Orphans are re-parented to PID 1; the runner must reap them, so
//! no zombie is left once the grandchild has exited. SIGTERM to PID 1
//! still stops the runner gracefully, with exit code 0.

use std::{
    io::Write,
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use parley_proto::runner::v1::{ListToolsRequest, agent_runner_client::AgentRunnerClient};

const PATIENCE: Duration = Duration::from_secs(30);
const TEST: &str = "pid1::orphans_of_an_mcp_server_are_reaped_when_the_runner_is_pid_1";

/// Kills the namespace (its PID 1, then `unshare`) if the test fails early.
struct Namespace {
    unshare: Child,
    log: PathBuf,
}

impl Namespace {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if let Some(init) = children_of(self.unshare.id()).first() {
            let _ = Command::new("kill")
                .args(["-KILL", &init.to_string()])
                .status();
        }
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
    }
}

/// The field after the parenthesised command name of /proc/PID/stat, and
/// the parent pid after it.
fn stat(pid: u32) -> Option<(char, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn children_of(parent: u32) -> Vec<u32> {
    pids()
        .into_iter()
        .filter(|&pid| stat(pid).is_some_and(|(_, ppid)| ppid == parent))
        .collect()
}

/// Every process below `root` (host pids) with its state.
fn descendants(root: u32) -> Vec<(u32, char)> {
    let mut found = Vec::new();
    let mut queue = vec![root];
    while let Some(parent) = queue.pop() {
        for pid in children_of(parent) {
            if let Some((state, _)) = stat(pid) {
                found.push((pid, state));
            }
            queue.push(pid);
        }
    }
    found
}

/// The host pid of the process whose innermost pid (NSpid) is `inner`,
/// among `root`'s descendants.
fn host_pid(root: u32, inner: u32) -> Option<u32> {
    descendants(root)
        .into_iter()
        .map(|(pid, _)| pid)
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|status| {
                    let line = status.lines().find(|l| l.starts_with("NSpid:"))?;
                    line.split_whitespace().last()?.parse::<u32>().ok()
                })
                == Some(inner)
        })
}

async fn until<T>(what: &str, ns: &Namespace, mut probe: impl FnMut() -> Option<T>) -> T {
    let wait = async {
        loop {
            if let Some(value) = probe() {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    match tokio::time::timeout(PATIENCE, wait).await {
        Ok(value) => value,
        Err(_) => panic!("{what}\n---- runner log\n{}", ns.log()),
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write a test file");
}

#[tokio::test]
async fn orphans_of_an_mcp_server_are_reaped_when_the_runner_is_pid_1() {
    let root = rustix::process::geteuid().is_root();
    let unshare = Command::new("unshare")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !root || !unshare {
        parley_testkit::not_run(
            TEST,
            "needs root and util-linux `unshare` (a new PID namespace)",
        );
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("release");
    let pid_file = dir.path().join("grandchild");
    let mkfifo = Command::new("mkfifo").arg(&fifo).status();
    assert!(mkfifo.is_ok_and(|s| s.success()), "mkfifo");
    // The grandchild: writes its pid, then waits until the test releases it.
    let grandchild = dir.path().join("grandchild.sh");
    write(
        &grandchild,
        &format!(
            "echo $$ > '{}.tmp' && mv '{0}.tmp' '{0}'\nread _ < '{}'\n",
            pid_file.display(),
            fifo.display()
        ),
    );
    // The server: a subshell starts the grandchild and exits at once (a
    // double fork), so the grandchild is an orphan; the server itself
    // never answers the handshake and stays up.
    let server = dir.path().join("server.sh");
    write(
        &server,
        &format!(
            "( sh '{}' </dev/null >/dev/null 2>&1 & )\nexec sleep 600\n",
            grandchild.display()
        ),
    );
    let config = dir.path().join("runner.toml");
    write(
        &config,
        &format!(
            "[mcp_servers.proc]\ncommand = [\"sh\", \"{}\"]\nstartup_timeout = \"10m\"\nrestart_backoff = \"10m\"\n",
            server.display()
        ),
    );
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let log = dir.path().join("runner.log");
    let mut command = Command::new("unshare");
    command
        .args(["--pid", "--fork", "--mount-proc", "--kill-child"])
        .arg(env!("CARGO_BIN_EXE_agent-runner"))
        .arg("--config")
        .arg(&config)
        .arg(format!("--listen=127.0.0.1:{port}"))
        .arg("--metrics-listen=off")
        .arg("--drain-timeout=5s")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"));
    for (key, _) in std::env::vars() {
        if key.starts_with("OTEL_") || key.starts_with("PARLEY_") {
            command.env_remove(key);
        }
    }
    let ns = Namespace {
        unshare: command.spawn().expect("unshare"),
        log,
    };
    let unshare_pid = ns.unshare.id();

    // Serving: one answered call also means the signal handlers are set.
    let serving = tokio::time::timeout(PATIENCE, async {
        loop {
            if let Ok(mut client) =
                AgentRunnerClient::connect(format!("http://127.0.0.1:{port}")).await
                && client.list_tools(ListToolsRequest {}).await.is_ok()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        serving.is_ok(),
        "the runner never served ListTools\n---- runner log\n{}",
        ns.log()
    );
    let inner: u32 = until("the grandchild never started", &ns, || {
        std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
    })
    .await;
    let grandchild = until("the grandchild is not in the namespace", &ns, || {
        host_pid(unshare_pid, inner)
    })
    .await;

    // Release it: it exits, after its parent (the subshell) did.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .and_then(|mut f| f.write_all(b"\n"))
        .expect("release the grandchild");
    until("the grandchild did not exit", &ns, || {
        stat(grandchild)
            .is_none_or(|(state, _)| state == 'Z')
            .then_some(())
    })
    .await;
    // Exited: reaped (gone from /proc) or a zombie for ever.
    let reaped = tokio::time::timeout(PATIENCE, async {
        while stat(grandchild).is_some() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .is_ok();
    let zombies: Vec<_> = descendants(unshare_pid)
        .into_iter()
        .filter(|&(_, state)| state == 'Z')
        .map(|(pid, _)| {
            (
                pid,
                stat(pid).map(|(_, ppid)| ppid),
                std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        reaped && zombies.is_empty(),
        "the orphaned grandchild {grandchild} was never reaped: zombies in the namespace {zombies:?}\n---- runner log\n{}",
        ns.log()
    );

    // SIGTERM to the namespace's PID 1: a graceful stop, exit code 0.
    let init = children_of(unshare_pid);
    assert_eq!(init.len(), 1, "one PID 1 under unshare");
    let kill = Command::new("kill")
        .args(["-TERM", &init[0].to_string()])
        .status();
    assert!(kill.is_ok_and(|s| s.success()), "kill -TERM");
    let mut ns = ns;
    let exit = wait_exit(&mut ns).await;
    assert_eq!(
        exit,
        Some(0),
        "SIGTERM did not stop the runner cleanly\n---- runner log\n{}",
        ns.log()
    );
    assert!(
        ns.log().contains("drain"),
        "no graceful drain in the log:\n{}",
        ns.log()
    );
}

async fn wait_exit(ns: &mut Namespace) -> Option<i32> {
    let wait = async {
        loop {
            if let Ok(Some(status)) = ns.unshare.try_wait() {
                return status.code();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(PATIENCE, wait)
        .await
        .expect("the runner did not stop within 30 s of SIGTERM")
}
