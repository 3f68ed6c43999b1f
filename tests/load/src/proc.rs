//! A server process's CPU time and resident memory, read from `/proc` (Linux).

use std::time::Duration;

/// Clock ticks per second of `/proc/PID/stat` times: Linux's `USER_HZ`,
/// 100 on every architecture it exports to user space.
const USER_HZ: u64 = 100;

/// A process the report measures, by name.
#[derive(Debug, Clone)]
pub struct Process {
    /// The name printed in the report.
    pub name: String,
    /// Its process id.
    pub pid: u32,
}

/// One reading.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// User + system CPU time so far (all threads, ended ones included).
    pub cpu: Duration,
    /// Resident memory.
    pub rss_bytes: u64,
}

impl Process {
    /// `NAME=PID`, or `self` for this process.
    pub fn parse(spec: &str) -> Result<Self, String> {
        if spec == "self" {
            return Ok(Self {
                name: "parley-load".into(),
                pid: std::process::id(),
            });
        }
        let (name, pid) = spec
            .split_once('=')
            .ok_or_else(|| format!("{spec:?}: expected NAME=PID"))?;
        let pid = pid
            .parse()
            .map_err(|_| format!("{spec:?}: {pid:?} is not a process id"))?;
        Ok(Self {
            name: name.to_owned(),
            pid,
        })
    }

    /// Reads the process's counters now (zero when it is gone).
    pub fn sample(&self) -> Sample {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).unwrap_or_default();
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid)).unwrap_or_default();
        Sample {
            cpu: cpu_time(&stat).unwrap_or_default(),
            rss_bytes: rss(&status).unwrap_or_default(),
        }
    }
}

/// utime + stime from `/proc/PID/stat` (fields 14 and 15; the command name,
/// field 2, may hold spaces and parentheses, so fields are counted after
/// its last `)`).
fn cpu_time(stat: &str) -> Option<Duration> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((user + system) * 1000 / USER_HZ))
}

/// `VmRSS` from `/proc/PID/status`, in bytes.
fn rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stat_with_a_name_holding_parentheses() {
        let stat =
            "4242 (chat (gw) x) S 1 4242 4242 0 -1 4194560 1 0 0 0 250 130 0 0 20 0 9 0 1 1 1";
        assert_eq!(cpu_time(stat), Some(Duration::from_millis(3800)));
        assert_eq!(cpu_time("garbage"), None);
    }

    #[test]
    fn reads_this_process() {
        let me = Process::parse("self").expect("self");
        assert!(me.sample().rss_bytes > 0);
        assert!(Process::parse("gateway").is_err());
        assert_eq!(Process::parse("gateway=12").expect("spec").pid, 12);
    }
}
