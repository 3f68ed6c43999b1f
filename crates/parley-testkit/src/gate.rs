//! What a test does when something it needs is missing here (Docker, the
//! images, PostgreSQL, Python with grpcio-tools, the Python MCP servers).
//!
//! Under `CI=true`, where every test must run, it fails. Elsewhere it
//! prints `NOT RUN: <test>: <why>` straight to the process's stderr (the
//! test harness captures `eprintln!` of passing tests, and this line must be
//! seen) and the test returns. Every suite of the workspace uses this one
//! rule.

use std::io::Write;

/// Whether this is a CI run (`CI=true`): every test must run.
pub fn ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Panics under `CI=true`; elsewhere prints the `NOT RUN` line and returns,
/// and the caller returns too.
#[track_caller]
pub fn not_run(test: &str, why: &str) {
    if ci() {
        panic!("{test}: CI=true, so this test must run, but {why}");
    }
    let _ = writeln!(std::io::stderr(), "NOT RUN: {test}: {why}");
}

/// The python of the MCP tests' virtual environment (PyPI `mcp` and
/// `mcp-server-time`): `PARLEY_MCP_PYTHON`, else what `scripts/mcp.sh`
/// installs (it is idempotent); `None` after [`not_run`] when neither works.
pub fn mcp_python(test: &str) -> Option<std::path::PathBuf> {
    if let Some(python) = std::env::var_os("PARLEY_MCP_PYTHON") {
        return Some(python.into());
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let output = std::process::Command::new("bash")
        .arg(root.join("scripts/mcp.sh"))
        .stderr(std::process::Stdio::inherit())
        .output();
    match output {
        Ok(output) if output.status.success() => {
            let path = String::from_utf8_lossy(&output.stdout).trim().to_owned();
            Some(path.into())
        }
        Ok(output) => {
            not_run(
                test,
                &format!(
                    "scripts/mcp.sh could not install the MCP servers ({})",
                    output.status
                ),
            );
            None
        }
        Err(error) => {
            not_run(test, &format!("cannot run scripts/mcp.sh: {error}"));
            None
        }
    }
}
