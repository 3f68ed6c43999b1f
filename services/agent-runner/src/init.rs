//! A minimal init for when the runner is PID 1 (its `FROM scratch` image,
//! a container without `--init`).
//!
//! Orphans are re-parented to PID 1, and a stdio MCP server's grandchild
//! that outlives its parent (a launcher such as `npx` or `uvx` that exits
//! first) would stay a zombie for ever if PID 1 never waited for it. The
//! runner cannot reap arbitrary children itself without racing
//! `tokio::process`, which must collect its own children's statuses. So,
//! as PID 1, the binary starts itself again (`/proc/self/exe`, same
//! arguments and environment) as its only child and stays a small init:
//! it forwards SIGTERM, SIGINT and SIGHUP to that child, reaps every child
//! it is handed (`wait4(-1)` on SIGCHLD) and exits with the child's
//! status (128 + the signal number when a signal ended it). The child is
//! not PID 1, so it runs the runner as usual.

use std::{os::unix::process::CommandExt, process::Command};

use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};
use tokio::signal::unix::{SignalKind, signal};

/// Whether this process is PID 1 of its PID namespace.
pub fn is_pid1() -> bool {
    std::process::id() == 1
}

/// Runs the binary again as a child and supervises it (see the module
/// docs); returns the exit code to exit with. An error means the child
/// could not be started, and nothing has happened yet.
pub fn supervise() -> std::io::Result<i32> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    runtime.block_on(async {
        // The handlers first: a SIGCHLD or SIGTERM that arrives between
        // the spawn and the loop is then not lost.
        let mut child_signal = signal(SignalKind::child())?;
        let mut terminate = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        let mut hangup = signal(SignalKind::hangup())?;
        let mut args = std::env::args_os();
        let mut command = Command::new("/proc/self/exe");
        if let Some(arg0) = args.next() {
            command.arg0(arg0);
        }
        let child = command.args(args).spawn()?;
        let child = Pid::from_raw(child.id().cast_signed())
            .ok_or_else(|| std::io::Error::other("the child has no pid"))?;
        loop {
            if let Some(code) = reap(child) {
                return Ok(code);
            }
            let forward = tokio::select! {
                _ = child_signal.recv() => None,
                _ = terminate.recv() => Some(Signal::TERM),
                _ = interrupt.recv() => Some(Signal::INT),
                _ = hangup.recv() => Some(Signal::HUP),
            };
            if let Some(forward) = forward {
                // The child may have just exited; the next reap says so.
                let _ = rustix::process::kill_process(child, forward);
            }
        }
    })
}

/// Waits for every child that has exited, without blocking; the exit code
/// of `child` once it is among them.
fn reap(child: Pid) -> Option<i32> {
    let mut code = None;
    loop {
        // wait(), i.e. wait4(-1): rustix's waitpid(None) is wait4(0), the
        // caller's process group only, which misses an MCP server's.
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some((pid, status))) => {
                if pid == child {
                    code = Some(exit_code(status));
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            // None: children left, none exited; ECHILD: no child at all
            // (then ours is gone too, and was reaped above).
            Ok(None) | Err(_) => return code,
        }
    }
}

fn exit_code(status: WaitStatus) -> i32 {
    match (status.exit_status(), status.terminating_signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => 128 + signal,
        (None, None) => 1,
    }
}
