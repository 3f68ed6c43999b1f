//! Whether the end-to-end suite can run here, decided once per test.
//!
//! The suite needs a Docker engine, the three images built by
//! `scripts/images.sh` and the test PostgreSQL of `scripts/postgres.sh`
//! (`PARLEY_TEST_POSTGRES_URL`). When one is missing, a test prints a loud
//! `NOT RUN: <test>: <why>` line and returns, except under `CI=true`, where
//! it fails: CI must never pass without having run the suite.

use std::time::Duration;

use testcontainers::bollard::Docker;

/// The tag of the images under test: the workspace version, as
/// `scripts/images.sh` tags them.
pub const TAG: &str = env!("CARGO_PKG_VERSION");

/// The three images, by repository name.
pub const IMAGES: [&str; 3] = [
    "parley/payload-parser",
    "parley/agent-runner",
    "parley/chat-gateway",
];

/// What a test needs from its environment.
#[derive(Debug, Clone)]
pub struct Prerequisites {
    /// The test PostgreSQL as the host reaches it.
    pub postgres_url: String,
}

/// Prints `NOT RUN` and returns `None`, or panics under `CI=true`.
fn not_run(test: &str, why: &str) -> Option<Prerequisites> {
    parley_testkit::not_run(test, why);
    None
}

async fn docker() -> Result<Docker, String> {
    let docker = testcontainers::core::client::docker_client_instance()
        .await
        .map_err(|error| format!("no Docker client ({error})"))?;
    match tokio::time::timeout(Duration::from_secs(5), docker.ping()).await {
        Ok(Ok(_)) => Ok(docker),
        Ok(Err(error)) => Err(format!("the Docker engine does not answer ({error})")),
        Err(_) => Err("the Docker engine does not answer within 5 s".into()),
    }
}

/// Checks Docker, the images and PostgreSQL for `test`; `None` means the
/// test must return at once (it has printed why).
pub async fn prerequisites(test: &str) -> Option<Prerequisites> {
    let docker = match docker().await {
        Ok(docker) => docker,
        Err(why) => return not_run(test, &why),
    };
    let mut missing = Vec::new();
    for image in IMAGES {
        let reference = format!("{image}:{TAG}");
        if docker.inspect_image(&reference).await.is_err() {
            missing.push(reference);
        }
    }
    if !missing.is_empty() {
        return not_run(
            test,
            &format!(
                "image(s) {} not found: build them with scripts/images.sh (scripts/test.sh does)",
                missing.join(", ")
            ),
        );
    }
    let Some(postgres_url) = std::env::var("PARLEY_TEST_POSTGRES_URL")
        .ok()
        .filter(|url| !url.is_empty())
    else {
        return not_run(
            test,
            "PARLEY_TEST_POSTGRES_URL is not set: export PARLEY_TEST_POSTGRES_URL=\"$(scripts/postgres.sh)\" (scripts/test.sh does)",
        );
    };
    Some(Prerequisites { postgres_url })
}

/// Whether an external command needed by a test is there; `false` means the
/// test must return (under `CI=true` it panics instead).
pub fn command_available(test: &str, program: &str, args: &[&str], install: &str) -> bool {
    let found = std::process::Command::new(program)
        .args(args)
        .output()
        .map(|output| output.status.success())
        .unwrap_or(false);
    if !found {
        not_run(test, &format!("`{program}` is not usable: {install}"));
    }
    found
}
