//! `parley-tools`: the test `parley.tools.v1.ToolService` of
//! [`parley_testkit::tools`] on a fixed address, as the app's tool server of
//! `scripts/demo.sh` (the example registry's `lookup_rows` dials
//! `127.0.0.1:50061`). It serves until SIGTERM or SIGINT.
//!
//! ```text
//! parley-tools [--listen 127.0.0.1:50061]
//! ```

use std::{net::SocketAddr, process::ExitCode};

use parley_testkit::tools::{ToolOptions, ToolServer};
use tokio::signal::unix::{SignalKind, signal};

/// Where it listens unless `--listen` says otherwise.
const DEFAULT_LISTEN: &str = "127.0.0.1:50061";

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let listen = match (args.next().as_deref(), args.next()) {
        (None, _) => DEFAULT_LISTEN.to_owned(),
        (Some("--listen"), Some(address)) => address,
        _ => {
            eprintln!("usage: parley-tools [--listen ADDRESS]");
            return ExitCode::from(2);
        }
    };
    let Ok(listen) = listen.parse::<SocketAddr>() else {
        eprintln!("parley-tools: `{listen}` is not an address like {DEFAULT_LISTEN}");
        return ExitCode::from(2);
    };
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("parley-tools: cannot listen for signals");
        return ExitCode::FAILURE;
    };
    let server = ToolServer::start(ToolOptions {
        listen: Some(listen),
        ..ToolOptions::default()
    })
    .await;
    println!(
        "parley-tools: serving the test ToolService on {}",
        server.addr
    );
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    ExitCode::SUCCESS
}
