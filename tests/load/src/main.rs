//! `parley-load`: how Parley compares with what you run, on your machine.
//!
//! - `parley-load mock` serves a mock OpenAI-compatible provider (a first
//!   token after `--first-token`, then `--chunks` chunks `--gap` apart).
//! - `parley-load run --target gateway|runner|openai --url URL` holds
//!   `--streams` concurrent streams against the chat-gateway, the
//!   agent-runner or any OpenAI-compatible endpoint (the mock itself, or
//!   LiteLLM, TensorZero… in front of it), and prints first-token and total
//!   time p50/p99, turns/s, errors and, for each `--pid NAME=PID`, CPU per
//!   turn and resident memory.
//!
//! `scripts/load.sh` starts the mock and the three services and runs the
//! same-run table of docs/performance.md.

mod mock;
mod proc;
mod run;
mod target;

use std::{net::SocketAddr, time::Duration};

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use parley_proto::{
    gateway::v1::chat_gateway_client::ChatGatewayClient,
    runner::v1::{ModelRef, agent_runner_client::AgentRunnerClient},
};

use crate::{
    proc::Process,
    run::{LoadConfig, Report},
    target::Target,
};

#[derive(Debug, Parser)]
#[command(
    name = "parley-load",
    version,
    about = "Parley's load generator and mock provider"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the mock OpenAI-compatible provider until stopped.
    Mock(MockArgs),
    /// Hold concurrent streams against a target and report.
    Run(Box<RunArgs>),
}

#[derive(Debug, clap::Args)]
struct MockArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:18080")]
    listen: SocketAddr,
    /// Time from a request to its first content chunk.
    #[arg(long, default_value = "100ms", value_parser = humantime::parse_duration)]
    first_token: Duration,
    /// Content chunks per answer.
    #[arg(long, default_value_t = 20)]
    chunks: usize,
    /// Pause between two content chunks.
    #[arg(long, default_value = "50ms", value_parser = humantime::parse_duration)]
    gap: Duration,
    /// The text of each content chunk.
    #[arg(long, default_value = "word ")]
    chunk_text: String,
}

/// What `run` talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Kind {
    /// `parley.gateway.v1.ChatGateway/Chat`.
    Gateway,
    /// The same `Chat` over the Connect protocol in proto3 JSON, on
    /// HTTP/1.1, as a browser's `fetch` sends it.
    Connect,
    /// `parley.runner.v1.AgentRunner/Run`.
    Runner,
    /// An OpenAI-compatible `POST …/chat/completions`, streamed.
    Openai,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// What the URL is.
    #[arg(long, value_enum)]
    target: Kind,
    /// The target: `http://HOST:PORT` for gateway and runner, the
    /// chat-completions URL (or its `/v1` base) for openai.
    #[arg(long)]
    url: String,
    /// Streams held open at once.
    #[arg(long, default_value_t = 100)]
    streams: usize,
    /// The measured window.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Load before the window starts.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    warmup: Duration,
    /// Stream starts are spread over this (about one turn).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    stagger: Duration,
    /// Pause after a successful turn (0s: back to back).
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// Pause after a failed turn.
    #[arg(long, default_value = "1ms", value_parser = humantime::parse_duration)]
    backoff: Duration,
    /// Connections the streams share, round robin (default: one per 100
    /// streams).
    #[arg(long)]
    connections: Option<usize>,
    /// The user's message.
    #[arg(long, default_value = "Tell me something.")]
    message: String,
    /// gateway: the bearer token (none in dev mode).
    #[arg(long, env = "PARLEY_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// gateway: the page of every turn (none: the default page).
    #[arg(long, default_value = "")]
    page: String,
    /// runner: the provider (empty: the runner's default).
    #[arg(long, default_value = "")]
    provider: String,
    /// runner and openai: the model name.
    #[arg(long, default_value = "")]
    model: String,
    /// openai: the environment variable holding the API key, if any.
    #[arg(long)]
    api_key_env: Option<String>,
    /// A process to measure, `NAME=PID` (repeat for each); `self` is the
    /// load tool itself.
    #[arg(long = "pid", value_parser = Process::parse)]
    processes: Vec<Process>,
    /// A name for the run in the output.
    #[arg(long, default_value = "")]
    label: String,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Mock(args) => {
            let listener = tokio::net::TcpListener::bind(args.listen)
                .await
                .with_context(|| format!("binding {}", args.listen))?;
            let config = mock::MockConfig {
                first_token: args.first_token,
                chunks: args.chunks,
                gap: args.gap,
                chunk_text: args.chunk_text,
            };
            eprintln!(
                "parley-load mock: http://{}/v1/chat/completions, first token after {}, {} chunks {} apart ({} an answer)",
                listener.local_addr()?,
                humantime::format_duration(config.first_token),
                config.chunks,
                humantime::format_duration(config.gap),
                humantime::format_duration(config.answer_time()),
            );
            tokio::select! {
                served = mock::serve(listener, config) => served?,
                _ = tokio::signal::ctrl_c() => {}
            }
            Ok(())
        }
        Command::Run(args) => {
            let targets = targets(&args).await?;
            let config = LoadConfig {
                streams: args.streams,
                warmup: args.warmup,
                duration: args.duration,
                stagger: args.stagger,
                interval: args.interval,
                backoff: args.backoff,
            };
            let report = run::run(targets, &config, &args.processes).await;
            if args.json {
                println!("{}", json(&args, &report));
            } else {
                print!("{}", table(&args, &report));
            }
            Ok(())
        }
    }
}

/// One target per connection.
async fn targets(args: &RunArgs) -> anyhow::Result<Vec<Target>> {
    // HTTP/1.1 streams each need a connection: one pooled client serves all.
    let connections = match args.target {
        Kind::Openai | Kind::Connect => 1,
        _ => args
            .connections
            .unwrap_or(args.streams.div_ceil(100))
            .max(1),
    };
    let mut targets = Vec::with_capacity(connections);
    for _ in 0..connections {
        targets.push(match args.target {
            Kind::Gateway => Target::Gateway {
                client: ChatGatewayClient::new(target::channel(&args.url).await?),
                token: args
                    .token
                    .as_deref()
                    .map(|token| format!("Bearer {token}").parse())
                    .transpose()
                    .context("the token is not valid in a header")?,
                page: args.page.clone(),
                message: args.message.clone(),
            },
            Kind::Connect => Target::Connect {
                http: target::http_client(args.streams)?,
                url: format!(
                    "{}/parley.gateway.v1.ChatGateway/Chat",
                    args.url.trim_end_matches('/')
                ),
                body: target::connect_body(&args.page, &args.message),
                token: args.token.clone(),
            },
            Kind::Runner => Target::Runner {
                client: AgentRunnerClient::new(target::channel(&args.url).await?),
                model: ModelRef {
                    provider: args.provider.clone(),
                    model: args.model.clone(),
                    ..Default::default()
                },
                message: args.message.clone(),
            },
            Kind::Openai => {
                let url = args.url.trim_end_matches('/');
                let url = if url.ends_with("/chat/completions") {
                    url.to_owned()
                } else {
                    format!("{url}/chat/completions")
                };
                let api_key = match &args.api_key_env {
                    Some(name) => {
                        Some(std::env::var(name).with_context(|| format!("${name} is not set"))?)
                    }
                    None => None,
                };
                Target::OpenAi {
                    http: target::http_client(args.streams)?,
                    url,
                    body: target::openai_body(&args.model, &args.message),
                    api_key,
                }
            }
        });
    }
    Ok(targets)
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// The human-readable report.
fn table(args: &RunArgs, report: &Report) -> String {
    let errors: usize = report.errors.values().sum();
    let mut out = format!(
        "parley-load {}{:?} {} — {} streams, {} window\n",
        if args.label.is_empty() {
            String::new()
        } else {
            format!("[{}] ", args.label)
        },
        args.target,
        args.url,
        report.streams,
        humantime::format_duration(report.window),
    );
    out += &format!(
        "  turns        {} ok, {:.1}/s, {:.1} text deltas each; {errors} failed\n",
        report.ok, report.turns_per_second, report.deltas_per_turn
    );
    for (label, count) in &report.errors {
        out += &format!("    {count:>8}  {label}\n");
    }
    out += &format!(
        "  first token  p50 {:.2} ms   p99 {:.2} ms\n",
        ms(report.first_token.p50),
        ms(report.first_token.p99)
    );
    out += &format!(
        "  whole turn   p50 {:.2} ms   p99 {:.2} ms\n",
        ms(report.total.p50),
        ms(report.total.p99)
    );
    for process in &report.processes {
        out += &format!(
            "  {:<12} {:.3} ms CPU per turn, {:.1} MB resident\n",
            process.name,
            ms(process.cpu_per_turn),
            process.rss_bytes as f64 / 1e6
        );
    }
    out
}

/// The machine-readable report (one line).
fn json(args: &RunArgs, report: &Report) -> serde_json::Value {
    let processes: serde_json::Map<String, serde_json::Value> = report
        .processes
        .iter()
        .map(|process| {
            (
                process.name.clone(),
                serde_json::json!({
                    "cpu_ms_per_turn": ms(process.cpu_per_turn),
                    "rss_bytes": process.rss_bytes,
                }),
            )
        })
        .collect();
    serde_json::json!({
        "label": args.label,
        "target": format!("{:?}", args.target).to_lowercase(),
        "url": args.url,
        "streams": report.streams,
        "window_s": report.window.as_secs_f64(),
        "ok": report.ok,
        "turns_per_s": report.turns_per_second,
        "deltas_per_turn": report.deltas_per_turn,
        "errors": report.errors,
        "first_token_ms": {"p50": ms(report.first_token.p50), "p99": ms(report.first_token.p99)},
        "total_ms": {"p50": ms(report.total.p50), "p99": ms(report.total.p99)},
        "processes": processes,
    })
}
