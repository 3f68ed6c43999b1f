//! The public contracts of `proto/` never break within a version: `buf
//! breaking` (PyPI `buf-bin`, installed by scripts/setup.sh) compares them
//! with `proto/baseline/v1.binpb`, the `buf build` image of the v1 contracts
//! as released. `.ci/run` runs the same check on the tree; these tests show
//! that it passes here, fails on an incompatible change and passes an
//! additive one, each on a copy of `proto/` (nothing is committed broken).
//!
//! The baseline is updated deliberately, when a release is cut:
//! `cd proto && buf build -o baseline/v1.binpb`.
//!
//! `docs/api.md`, the API reference, is generated from the protos' comments
//! by `scripts/api_docs.py`; a test checks it is current.
//!
//! Without `buf` (or Python with grpcio-tools, for the reference) the tests
//! print `NOT RUN`; under `CI=true` they fail.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

fn proto_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto")
}

fn baseline() -> PathBuf {
    proto_dir().join("baseline/v1.binpb")
}

/// Whether `buf` runs here; prints NOT RUN (or panics under `CI=true`).
fn buf_available(test: &str) -> bool {
    let found = Command::new("buf")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if !found {
        parley_testkit::not_run(test, "`buf` is needed: run scripts/setup.sh");
    }
    found
}

/// `buf breaking --against <baseline>` in the module at `dir`.
fn buf_breaking(dir: &Path) -> Output {
    Command::new("buf")
        .arg("breaking")
        .arg("--against")
        .arg(baseline())
        .current_dir(dir)
        .output()
        .expect("run buf")
}

fn shown(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A copy of `proto/` with `old` replaced by `new` in the gateway's file.
fn edited_copy(old: &str, new: &str) -> tempfile::TempDir {
    let copy = tempfile::tempdir().expect("a temporary directory");
    let status = Command::new("cp")
        .arg("-r")
        .arg(proto_dir().join("."))
        .arg(copy.path())
        .status()
        .expect("run cp");
    assert!(status.success(), "cannot copy proto/");
    let file = copy.path().join("parley/gateway/v1/gateway.proto");
    let text = std::fs::read_to_string(&file).expect("gateway.proto");
    assert_eq!(
        text.matches(old).count(),
        1,
        "gateway.proto no longer has exactly one `{old}`: update this test"
    );
    std::fs::write(&file, text.replace(old, new)).expect("write gateway.proto");
    copy
}

#[test]
fn the_contracts_are_compatible_with_the_v1_baseline() {
    if !buf_available("the_contracts_are_compatible_with_the_v1_baseline") {
        return;
    }
    let output = buf_breaking(&proto_dir());
    assert!(
        output.status.success(),
        "proto/ breaks the v1 contracts:\n{}",
        shown(&output)
    );
}

#[test]
fn an_incompatible_change_fails_buf_breaking_with_its_reason() {
    if !buf_available("an_incompatible_change_fails_buf_breaking_with_its_reason") {
        return;
    }
    // A client sending `model` as a string would be misread.
    let copy = edited_copy("  string model = 5;", "  int64 model = 5;");
    let output = buf_breaking(copy.path());
    let text = shown(&output);
    assert!(!output.status.success(), "buf breaking passed:\n{text}");
    assert!(
        text.contains(r#"Field "5" with name "model" on message "ChatRequest" changed type from "string" to "int64""#),
        "{text}"
    );
}

#[test]
fn an_additive_change_passes_buf_breaking() {
    if !buf_available("an_additive_change_passes_buf_breaking") {
        return;
    }
    let copy = edited_copy(
        "  string model = 5;",
        "  string model = 5;\n  // A field added in a later v1 release.\n  string added_later = 99;",
    );
    let output = buf_breaking(copy.path());
    assert!(
        output.status.success(),
        "a new field breaks buf breaking:\n{}",
        shown(&output)
    );
}

#[test]
fn docs_api_md_is_generated_from_the_current_protos() {
    let test = "docs_api_md_is_generated_from_the_current_protos";
    let python = Command::new("python3")
        .args(["-c", "import grpc_tools"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !python {
        parley_testkit::not_run(
            test,
            "python3 with grpcio-tools is needed: run scripts/setup.sh",
        );
        return;
    }
    let generator = proto_dir().join("../scripts/api_docs.py");
    let output = Command::new("python3")
        .arg(generator)
        .arg("--check")
        .output()
        .expect("run scripts/api_docs.py");
    assert!(output.status.success(), "{}", shown(&output));
}
