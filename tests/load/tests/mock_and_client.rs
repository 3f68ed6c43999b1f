//! The `parley-load` binary against its own mock: every turn streams the
//! configured chunks, and the JSON report says so.

use std::{
    net::TcpListener,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

const BIN: &str = env!("CARGO_BIN_EXE_parley-load");

/// Kills the mock when the test ends, passed or not.
struct Mock(Child);

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free loopback port")
}

/// `parley-load run --target openai --json` against `addr` with `args`:
/// it must succeed and print one JSON report.
fn run_openai(addr: &str, args: &[&str]) -> serde_json::Value {
    let output = Command::new(BIN)
        .args(["run", "--target", "openai", "--json", "--url"])
        .arg(format!("http://{addr}/v1"))
        .args(args)
        .output()
        .expect("parley-load run");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON report")
}

#[test]
fn run_against_the_mock_reports_every_chunk() {
    let addr = format!("127.0.0.1:{}", free_port());
    let _mock = Mock(
        Command::new(BIN)
            .args([
                "mock",
                "--listen",
                &addr,
                "--first-token",
                "20ms",
                "--chunks",
                "5",
            ])
            .args(["--gap", "5ms"])
            .stderr(Stdio::null())
            .spawn()
            .expect("parley-load mock starts"),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(&addr).is_err() {
        assert!(
            Instant::now() < deadline,
            "the mock never listened on {addr}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let report = run_openai(
        &addr,
        &[
            "--streams",
            "4",
            "--duration",
            "1s",
            "--warmup",
            "200ms",
            "--pid",
            "self",
        ],
    );
    assert!(report["ok"].as_u64().unwrap_or(0) >= 4, "{report}");
    assert_eq!(report["deltas_per_turn"], 5.0, "{report}");
    assert_eq!(report["errors"], serde_json::json!({}), "{report}");
    let first = report["first_token_ms"]["p50"].as_f64().unwrap_or(0.0);
    assert!(
        first >= 20.0,
        "the first token cannot beat the mock's delay: {report}"
    );
    assert!(
        report["processes"]["parley-load"]["rss_bytes"]
            .as_u64()
            .unwrap_or(0)
            > 0
    );
}

#[test]
fn a_target_that_is_not_listening_fails_every_turn_without_hanging() {
    let addr = format!("127.0.0.1:{}", free_port());
    let report = run_openai(
        &addr,
        &[
            "--streams",
            "2",
            "--duration",
            "300ms",
            "--warmup",
            "0s",
            "--backoff",
            "50ms",
        ],
    );
    assert_eq!(report["ok"], 0, "{report}");
    assert!(
        report["errors"]["transport"].as_u64().unwrap_or(0) > 0,
        "{report}"
    );
}
