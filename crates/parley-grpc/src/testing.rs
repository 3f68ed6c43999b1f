//! For tests only: what a test does when something it needs is missing
//! here (Docker, the images, PostgreSQL, Python with grpcio-tools).
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
