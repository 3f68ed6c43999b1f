//! The load: `streams` tasks, each sending turns back to back (closed loop,
//! starts staggered over one `stagger`), for a warm-up and then a measured
//! window. Latencies are taken from the turns that start inside the window
//! (each awaited to its end), throughput from the turns that end inside it,
//! and the CPU of the named server processes from `/proc` at the window's
//! two ends.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use crate::{
    proc::{Process, Sample},
    target::{Target, Timing, TurnError},
};

/// How the load runs.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// Streams held open at once.
    pub streams: usize,
    /// Time before the measured window (connections, caches, allocator).
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
    /// Stream starts are spread over this (one turn's length keeps the
    /// load steady instead of synchronised).
    pub stagger: Duration,
    /// Pause after a turn that succeeded before the next (0: closed loop).
    pub interval: Duration,
    /// Pause after a turn that failed before the next.
    pub backoff: Duration,
}

/// One turn as a stream saw it.
#[derive(Debug)]
struct Record {
    start: Instant,
    end: Instant,
    outcome: Result<Timing, TurnError>,
}

/// What a load run measured.
#[derive(Debug)]
pub struct Report {
    /// Streams held open.
    pub streams: usize,
    /// The measured window.
    pub window: Duration,
    /// Successful turns that started in the window.
    pub ok: usize,
    /// Turns that ended (successfully) in the window, per second.
    pub turns_per_second: f64,
    /// Failed turns that started in the window, by label.
    pub errors: BTreeMap<String, usize>,
    /// Time to first text of the successful turns.
    pub first_token: Duration50x99,
    /// Time to the end of the successful turns.
    pub total: Duration50x99,
    /// Mean text deltas per successful turn.
    pub deltas_per_turn: f64,
    /// CPU time per turn ended in the window, by process (the load tool
    /// itself as `parley-load`), and each process's resident memory at the
    /// window's end.
    pub processes: Vec<ProcessReport>,
}

/// p50 and p99 of a sample.
#[derive(Debug, Clone, Copy, Default)]
pub struct Duration50x99 {
    /// The median.
    pub p50: Duration,
    /// The 99th percentile.
    pub p99: Duration,
}

/// One process's share.
#[derive(Debug)]
pub struct ProcessReport {
    /// The name given with `--pid NAME=PID`.
    pub name: String,
    /// CPU (user + system) per turn ended in the window.
    pub cpu_per_turn: Duration,
    /// Resident memory at the window's end, in bytes.
    pub rss_bytes: u64,
}

impl Duration50x99 {
    /// The percentiles of a sorted sample (zero when empty).
    pub fn of(sorted: &[Duration]) -> Self {
        Self {
            p50: percentile(sorted, 0.50),
            p99: percentile(sorted, 0.99),
        }
    }
}

/// The nearest-rank percentile of a sorted sample.
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Runs the load against `targets` (stream `i` uses `targets[i % len]`, one
/// per connection; at least one) and measures `processes`.
pub async fn run(targets: Vec<Target>, config: &LoadConfig, processes: &[Process]) -> Report {
    let begin = Instant::now();
    let window_start = begin + config.warmup;
    let window_end = window_start + config.duration;

    let mut tasks = Vec::with_capacity(config.streams);
    // No target, no streams (an empty report rather than a division by zero).
    let streams = if targets.is_empty() {
        0
    } else {
        config.streams
    };
    for index in 0..streams {
        let target = targets[index % targets.len()].clone();
        let offset = config
            .stagger
            .mul_f64(index as f64 / config.streams.max(1) as f64);
        let config = config.clone();
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(offset).await;
            let mut records = Vec::new();
            while Instant::now() < window_end {
                let start = Instant::now();
                let outcome = target.turn().await;
                let pause = if outcome.is_ok() {
                    config.interval
                } else {
                    config.backoff
                };
                records.push(Record {
                    start,
                    end: Instant::now(),
                    outcome,
                });
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
            }
            records
        }));
    }

    tokio::time::sleep_until(window_start.into()).await;
    let before: Vec<Sample> = processes.iter().map(Process::sample).collect();
    tokio::time::sleep_until(window_end.into()).await;
    let after: Vec<Sample> = processes.iter().map(Process::sample).collect();

    let mut records = Vec::new();
    for task in tasks {
        // A stream task only ends by returning its records.
        if let Ok(mut part) = task.await {
            records.append(&mut part);
        }
    }
    summarise(
        records,
        config,
        window_start,
        window_end,
        processes,
        &before,
        &after,
    )
}

fn summarise(
    records: Vec<Record>,
    config: &LoadConfig,
    window_start: Instant,
    window_end: Instant,
    processes: &[Process],
    before: &[Sample],
    after: &[Sample],
) -> Report {
    let in_window = |at: Instant| at >= window_start && at < window_end;
    let ended = records
        .iter()
        .filter(|record| record.outcome.is_ok() && in_window(record.end))
        .count();
    let mut first_token = Vec::new();
    let mut total = Vec::new();
    let mut deltas = 0u64;
    let mut errors = BTreeMap::new();
    for record in records.iter().filter(|record| in_window(record.start)) {
        match &record.outcome {
            Ok(timing) => {
                first_token.extend(timing.first_token);
                total.push(timing.total);
                deltas += u64::from(timing.deltas);
            }
            Err(error) => *errors.entry(error.0.clone()).or_insert(0) += 1,
        }
    }
    first_token.sort_unstable();
    total.sort_unstable();
    let window = window_end - window_start;
    let processes = processes
        .iter()
        .zip(before.iter().zip(after))
        .map(|(process, (before, after))| ProcessReport {
            name: process.name.clone(),
            cpu_per_turn: after
                .cpu
                .saturating_sub(before.cpu)
                .checked_div(ended.max(1) as u32)
                .unwrap_or_default(),
            rss_bytes: after.rss_bytes,
        })
        .collect();
    Report {
        streams: config.streams,
        window,
        ok: total.len(),
        turns_per_second: ended as f64 / window.as_secs_f64(),
        errors,
        deltas_per_turn: deltas as f64 / total.len().max(1) as f64,
        first_token: Duration50x99::of(&first_token),
        total: Duration50x99::of(&total),
        processes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let sample: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&sample, 0.50), Duration::from_millis(50));
        assert_eq!(percentile(&sample, 0.99), Duration::from_millis(99));
        assert_eq!(percentile(&sample[..1], 0.99), Duration::from_millis(1));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
    }
}
