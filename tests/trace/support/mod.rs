//! Support for the end-to-end trace tests (`trace/main.rs`): the three
//! real binaries as child processes ([`stack`]), an in-test OTLP collector
//! ([`collector`]) and the app's ToolService with its own spans
//! ([`tool_server`]), all on free ports of 127.0.0.1.

pub mod collector;
pub mod stack;
pub mod tool_server;

use std::path::{Path, PathBuf};

/// The example registry with `lookup_rows` pointed at `tool_url` and run
/// without asking for approval (these tests follow a tool call's trace, not
/// a pause), written into `dir`.
pub fn registry_with_tools(dir: &Path, tool_url: &str) -> PathBuf {
    let example = parley_testkit::process::repo_root().join("deploy/config/registry.yaml");
    let text = std::fs::read_to_string(&example).expect("the example registry");
    let default_tools = "grpc: http://127.0.0.1:50061\n    approval: always";
    assert!(
        text.contains(default_tools),
        "the example registry no longer points lookup_rows at http://127.0.0.1:50061 \
         with `approval: always`; update this test"
    );
    let path = dir.join("registry.yaml");
    std::fs::write(
        &path,
        text.replace(default_tools, &format!("grpc: {tool_url}")),
    )
    .expect("write the registry");
    path
}

/// The scripted model's script for these tests.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("trace/fixtures/trace-script.toml")
}
