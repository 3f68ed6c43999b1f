//! The tokio runtime each binary runs on.
//!
//! Tokio's multi-thread scheduler starts one worker per CPU the process may
//! use (the cgroup's quota counts: a pod limited to one CPU gets one
//! worker), or `TOKIO_WORKER_THREADS` of them. With one worker, that
//! scheduler keeps a "LIFO slot": a task woken by the running task runs
//! right after it, ahead of the tasks already queued. On a proxy hop that
//! order costs a socket write per message: the connection task that every
//! stream's send wakes runs after each stream in turn and writes one frame,
//! where running it after the queued streams would write all their frames at
//! once. The current-thread scheduler runs woken tasks in the order they
//! were woken, so [`build`] picks it whenever there would be one worker.

use std::io;
use std::num::NonZeroUsize;

/// The environment variable tokio reads for its worker count.
const WORKER_THREADS: &str = "TOKIO_WORKER_THREADS";

/// The runtime for a binary's `main`: the current-thread scheduler when
/// the process has one worker's worth of CPU (see the module's comment),
/// the multi-thread scheduler otherwise. I/O and timers are on in both.
pub fn build() -> io::Result<tokio::runtime::Runtime> {
    build_for(std::env::var(WORKER_THREADS).ok().as_deref())
}

/// [`build`] for the given value of `TOKIO_WORKER_THREADS`.
fn build_for(variable: Option<&str>) -> io::Result<tokio::runtime::Runtime> {
    let workers = worker_threads(variable)?;
    let mut builder = if workers.get() == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(workers.get());
        builder
    };
    builder.enable_all().build()
}

/// The worker count tokio's multi-thread scheduler would start: the
/// variable's value when set, else the CPUs this process may use.
fn worker_threads(variable: Option<&str>) -> io::Result<NonZeroUsize> {
    match variable {
        Some(value) => value.trim().parse::<NonZeroUsize>().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{WORKER_THREADS} must be a positive integer, got {value:?}"),
            )
        }),
        None => Ok(std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN)),
    }
}

#[cfg(test)]
mod tests {
    use tokio::runtime::RuntimeFlavor;

    use super::*;

    #[test]
    fn one_worker_is_the_current_thread_scheduler() {
        let runtime = build_for(Some("1")).expect("runtime");
        assert_eq!(
            runtime.handle().runtime_flavor(),
            RuntimeFlavor::CurrentThread
        );
        // Timers and I/O are on.
        runtime.block_on(async {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
        });
    }

    #[test]
    fn more_workers_are_the_multi_thread_scheduler() {
        let runtime = build_for(Some("2")).expect("runtime");
        assert_eq!(
            runtime.handle().runtime_flavor(),
            RuntimeFlavor::MultiThread
        );
        assert_eq!(runtime.metrics().num_workers(), 2);
    }

    #[test]
    fn a_bad_worker_count_builds_no_runtime() {
        assert!(build_for(Some("none")).is_err());
    }

    #[test]
    fn the_variable_sets_the_worker_count() {
        assert_eq!(worker_threads(Some("1")).expect("count").get(), 1);
        assert_eq!(worker_threads(Some(" 4 ")).expect("count").get(), 4);
    }

    #[test]
    fn a_worker_count_that_is_not_a_positive_integer_is_an_error() {
        for value in ["0", "-1", "two", ""] {
            let error = worker_threads(Some(value)).expect_err("not a count");
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{value:?}");
            assert!(error.to_string().contains(WORKER_THREADS), "{error}");
        }
    }

    #[test]
    fn without_the_variable_the_count_is_the_cpus_available() {
        let cpus = std::thread::available_parallelism().expect("cpus");
        assert_eq!(worker_threads(None).expect("count"), cpus);
    }
}
