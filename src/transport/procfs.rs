//! What `/proc` tells of a target process and every process below it: resident memory, CPU
//! time, open descriptors and threads. A server started through a shell or a wrapper (`sh -c`,
//! `npx`, `uv run`) does its work in a descendant, so a sample sums the whole tree.
//!
//! Only this machine's processes can be seen: a target known by URL alone has no sample, and
//! the oracles that need one say "not observed" instead of passing.

use std::collections::HashMap;

/// Where the runner finds a target's process: a PID given (`--pid`), or the one of a process
/// it started itself (`--serve`), which changes when it is started again.
#[derive(Clone)]
pub struct Watch(std::sync::Arc<dyn Fn() -> Option<u32> + Send + Sync>);

impl Watch {
    /// A process started elsewhere on this machine.
    pub fn pid(pid: u32) -> Watch {
        Watch(std::sync::Arc::new(move || Some(pid)))
    }

    /// Whatever `current` says the process is now (`None` while there is none).
    pub fn following(current: impl Fn() -> Option<u32> + Send + Sync + 'static) -> Watch {
        Watch(std::sync::Arc::new(current))
    }

    /// The process now, if there is one.
    pub fn now(&self) -> Option<u32> {
        (self.0)()
    }
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Watch({:?})", self.now())
    }
}

/// One reading of a process tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcSample {
    /// Resident memory now (VmRSS), summed over the tree, in KiB.
    pub rss_kib: u64,
    /// The most resident memory each process has held so far (VmHWM), summed, in KiB.
    pub peak_kib: u64,
    /// User and system CPU time so far, summed over the tree, in milliseconds.
    pub cpu_ms: u64,
    /// Open file descriptors, summed over the tree (sockets included).
    pub fds: u64,
    /// Threads, summed over the tree.
    pub threads: u64,
    /// How many processes the tree held.
    pub processes: u64,
}

/// The process tree rooted at `pid` as `/proc` shows it now; `None` when the root is gone or
/// `/proc` cannot be read (another system, another machine's process).
pub fn sample(pid: u32) -> Option<ProcSample> {
    let tree = tree_of(pid)?;
    let tick_ms = 1000 / clock_ticks();
    let mut s = ProcSample::default();
    for p in tree {
        let Some((rss, peak, threads)) = status_of(p) else {
            continue;
        };
        s.rss_kib += rss;
        s.peak_kib += peak;
        s.threads += threads;
        s.cpu_ms += cpu_ticks_of(p).unwrap_or(0) * tick_ms;
        s.fds += std::fs::read_dir(format!("/proc/{p}/fd")).map_or(0, |d| d.count() as u64);
        s.processes += 1;
    }
    (s.processes > 0).then_some(s)
}

/// Clock ticks per second, in which `/proc/PID/stat` counts CPU time: Linux's `USER_HZ`, fixed
/// at 100 in its user-space ABI whatever the kernel's own tick rate.
const fn clock_ticks() -> u64 {
    100
}

/// `pid` and every live descendant of it (parents read from each process's `stat`).
fn tree_of(pid: u32) -> Option<Vec<u32>> {
    std::fs::metadata(format!("/proc/{pid}")).ok()?;
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(parent) = stat_fields(p).and_then(|f| f.get(1)?.parse::<u32>().ok()) {
            children.entry(parent).or_default().push(p);
        }
    }
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        if let Some(c) = children.get(&tree[i]) {
            let new: Vec<u32> = c.iter().copied().filter(|c| !tree.contains(c)).collect();
            tree.extend(new);
        }
        i += 1;
    }
    Some(tree)
}

/// The fields of `/proc/PID/stat` after the command name (whose parentheses may hold spaces):
/// state first, then the parent's PID, ... utime is the 12th, stime the 13th.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    Some(after.split_whitespace().map(str::to_string).collect())
}

fn cpu_ticks_of(pid: u32) -> Option<u64> {
    let f = stat_fields(pid)?;
    let user: u64 = f.get(11)?.parse().ok()?;
    let system: u64 = f.get(12)?.parse().ok()?;
    Some(user + system)
}

/// Resident memory now and at its peak (KiB), and threads, from `/proc/PID/status`.
fn status_of(pid: u32) -> Option<(u64, u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    // A zombie has no VmRSS: it holds no memory.
    Some((
        field("VmRSS:").unwrap_or(0),
        field("VmHWM:").unwrap_or(0),
        field("Threads:")?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_seen_with_its_threads_and_descriptors() {
        let s = sample(std::process::id()).expect("a sample of this process");
        assert!(s.rss_kib > 0 && s.peak_kib >= s.rss_kib && s.threads >= 1);
        assert!(s.fds >= 1 && s.processes >= 1);
    }

    #[test]
    fn a_child_counts_in_its_parents_tree() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let with = sample(std::process::id()).expect("a sample");
        let _ = child.kill();
        let _ = child.wait();
        assert!(with.processes >= 2, "{with:?}");
    }

    #[test]
    fn no_process_no_sample() {
        assert_eq!(sample(u32::MAX - 1), None);
    }
}
