//! `parley-stack`: starts the processes of a local stack for
//! `scripts/demo.sh` and `scripts/load.sh`, waits until each is ready, and
//! stops them all cleanly on SIGTERM or SIGINT.
//!
//! ```text
//! parley-stack --logs DIR
//!     --service NAME [--wait health:ADDR | port:ADDR | socket:PATH]... -- PROGRAM ARGS... --end
//!     ...
//! ```
//!
//! Each service's command runs as given (a script passes `env K=V PROGRAM`
//! for its environment, and only the flags the binaries it runs know), its
//! stdout and stderr in `DIR/NAME.log`. Services start in order; each is
//! waited for (gRPC health SERVING, a TCP port accepting, a Unix socket
//! present: 10 s at most) before the next starts. Then it prints one line
//! `pid NAME PID` per service and a line `ready` on stdout. A service that
//! exits or is not ready in time stops the others: its log goes to stderr
//! and the exit status is 1. On SIGTERM or SIGINT every service gets
//! SIGTERM; the exit status is 0 when all of them then exit cleanly.

use std::{
    fs::File,
    io::Write as _,
    path::{Path, PathBuf},
    process::{Child, Command, ExitCode, Stdio},
    time::Duration,
};

use tokio::signal::unix::{SignalKind, signal};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

/// How long a service gets to become ready, and to stop.
const LIMIT: Duration = Duration::from_secs(10);

/// What says a service is ready.
#[derive(Debug, Clone)]
enum Wait {
    Health(String),
    Port(String),
    Socket(PathBuf),
}

#[derive(Debug)]
struct Spec {
    name: String,
    waits: Vec<Wait>,
    argv: Vec<String>,
}

#[derive(Debug)]
struct Running {
    name: String,
    child: Child,
    log: PathBuf,
}

fn usage(message: &str) -> ExitCode {
    eprintln!(
        "parley-stack: {message}\nusage: parley-stack --logs DIR (--service NAME [--wait health:ADDR|port:ADDR|socket:PATH]... -- PROGRAM ARGS... --end)..."
    );
    ExitCode::from(2)
}

fn parse(args: Vec<String>) -> Result<(PathBuf, Vec<Spec>), String> {
    let mut logs = None;
    let mut specs = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--logs" => {
                logs = Some(PathBuf::from(
                    args.next().ok_or("--logs needs a directory")?,
                ))
            }
            "--service" => {
                let name = args.next().ok_or("--service needs a name")?;
                let mut waits = Vec::new();
                loop {
                    match args.next().as_deref() {
                        Some("--wait") => {
                            let spec = args.next().ok_or("--wait needs a value")?;
                            waits.push(match spec.split_once(':') {
                                Some(("health", addr)) => Wait::Health(addr.to_owned()),
                                Some(("port", addr)) => Wait::Port(addr.to_owned()),
                                Some(("socket", path)) => Wait::Socket(path.into()),
                                _ => return Err(format!("unknown --wait {spec}")),
                            });
                        }
                        Some("--") => break,
                        other => {
                            return Err(format!("{name}: expected --wait or --, got {other:?}"));
                        }
                    }
                }
                let mut argv = Vec::new();
                loop {
                    match args.next() {
                        Some(arg) if arg == "--end" => break,
                        Some(arg) => argv.push(arg),
                        None => return Err(format!("{name}: its command needs --end")),
                    }
                }
                if argv.is_empty() {
                    return Err(format!("{name}: no command"));
                }
                specs.push(Spec { name, waits, argv });
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let logs = logs.ok_or("--logs is required")?;
    if specs.is_empty() {
        return Err("no --service".into());
    }
    Ok((logs, specs))
}

fn spawn(spec: &Spec, logs: &Path) -> Result<Running, String> {
    let log = logs.join(format!("{}.log", spec.name));
    let out = File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let child = Command::new(&spec.argv[0])
        .args(&spec.argv[1..])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("{}: cannot start {}: {e}", spec.name, spec.argv[0]))?;
    Ok(Running {
        name: spec.name.clone(),
        child,
        log,
    })
}

async fn healthy(addr: &str) -> bool {
    let Ok(endpoint) = tonic::transport::Endpoint::from_shared(format!("http://{addr}")) else {
        return false;
    };
    let Ok(Ok(channel)) = tokio::time::timeout(Duration::from_secs(1), endpoint.connect()).await
    else {
        return false;
    };
    let mut client = HealthClient::new(channel);
    let check = client.check(HealthCheckRequest {
        service: String::new(),
    });
    matches!(
        tokio::time::timeout(Duration::from_secs(1), check).await,
        Ok(Ok(response)) if response.get_ref().status == ServingStatus::Serving as i32
    )
}

async fn ready(wait: &Wait) -> bool {
    match wait {
        Wait::Health(addr) => healthy(addr).await,
        Wait::Port(addr) => tokio::net::TcpStream::connect(addr.as_str()).await.is_ok(),
        Wait::Socket(path) => {
            use std::os::unix::fs::FileTypeExt as _;
            std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket())
        }
    }
}

fn describe(wait: &Wait) -> String {
    match wait {
        Wait::Health(addr) => format!("become healthy on {addr}"),
        Wait::Port(addr) => format!("listen on {addr}"),
        Wait::Socket(path) => format!("listen on {}", path.display()),
    }
}

/// Waits for `service` to be ready; the reason when it is not.
async fn wait_ready(service: &mut Running, waits: &[Wait]) -> Result<(), String> {
    for wait in waits {
        let deadline = tokio::time::Instant::now() + LIMIT;
        loop {
            if let Ok(Some(status)) = service.child.try_wait() {
                return Err(format!("{} exited ({status})", service.name));
            }
            if ready(wait).await {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!("{} did not {}", service.name, describe(wait)));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

fn terminate(service: &Running) {
    if let Ok(pid) = i32::try_from(service.child.id()) {
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .stderr(Stdio::null())
            .status();
    }
}

/// SIGTERM to every service, then waits; true when all exited cleanly.
async fn stop(services: &mut [Running]) -> bool {
    for service in services.iter() {
        terminate(service);
    }
    let mut clean = true;
    for service in services.iter_mut() {
        let deadline = tokio::time::Instant::now() + LIMIT;
        loop {
            match service.child.try_wait() {
                Ok(Some(status)) => {
                    if !status.success() {
                        eprintln!("parley-stack: {} stopped with {status}", service.name);
                        clean = false;
                    }
                    break;
                }
                Ok(None) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                _ => {
                    eprintln!("parley-stack: {} did not stop; killed", service.name);
                    let _ = service.child.kill();
                    let _ = service.child.wait();
                    clean = false;
                    break;
                }
            }
        }
    }
    clean
}

fn show_log(service: &Running) {
    let text = std::fs::read_to_string(&service.log).unwrap_or_default();
    eprintln!("parley-stack: the log of {}:\n{text}", service.name);
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let (logs, specs) = match parse(std::env::args().skip(1).collect()) {
        Ok(parsed) => parsed,
        Err(message) => return usage(&message),
    };
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("parley-stack: cannot watch signals");
        return ExitCode::FAILURE;
    };
    let mut services: Vec<Running> = Vec::new();
    for spec in &specs {
        let started = match spawn(spec, &logs) {
            Ok(started) => started,
            Err(message) => {
                eprintln!("parley-stack: {message}");
                stop(&mut services).await;
                return ExitCode::FAILURE;
            }
        };
        services.push(started);
        let last = services.len() - 1;
        let outcome = tokio::select! {
            outcome = wait_ready(&mut services[last], &spec.waits) => outcome,
            _ = term.recv() => Err("stopped while starting".into()),
            _ = int.recv() => Err("stopped while starting".into()),
        };
        if let Err(message) = outcome {
            eprintln!("parley-stack: {message}");
            show_log(&services[last]);
            stop(&mut services).await;
            return ExitCode::FAILURE;
        }
    }
    let mut stdout = std::io::stdout().lock();
    for service in &services {
        let _ = writeln!(stdout, "pid {} {}", service.name, service.child.id());
    }
    let _ = writeln!(stdout, "ready");
    let _ = stdout.flush();
    drop(stdout);

    let mut watch = tokio::time::interval(Duration::from_millis(200));
    let died = loop {
        tokio::select! {
            _ = term.recv() => break None,
            _ = int.recv() => break None,
            _ = watch.tick() => {
                if let Some(index) = services
                    .iter_mut()
                    .position(|s| matches!(s.child.try_wait(), Ok(Some(_))))
                {
                    break Some(index);
                }
            }
        }
    };
    if let Some(index) = died {
        eprintln!("parley-stack: {} exited", services[index].name);
        show_log(&services[index]);
        stop(&mut services).await;
        return ExitCode::FAILURE;
    }
    if stop(&mut services).await {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
