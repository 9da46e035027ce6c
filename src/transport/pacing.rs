//! stdio pacing: how long a case waits for its own answer after the barrier ping's answer came
//! first (the settle window).
//!
//! Over stdio the runner sends the case's bytes, then a barrier request, and reads until the
//! barrier is answered. A server that handles one request at a time has answered the case by
//! then, or never will; one that handles requests concurrently (the Python SDK runs each in a
//! task, rmcp spawns one) may answer the barrier first, and a late answer to the case is exactly
//! what some cases must catch (a repaired line that ran). So the window is learned per target:
//!
//! 1. **The order probe**, once per target: a fresh process gets four pairs of (`tools/call` of
//!    the allowed tool, barrier) in one write each. It finds whether the barrier was ever
//!    answered first (concurrent, with the longest *lag* of the earlier answer) and the target's
//!    warm *pace*: the longest round trip of a pair after the first (the first pays for lazy
//!    start-up work, as the Python SDK's first request does: about 0.8 s here).
//! 2. **The window** for a case: at least 250 ms, ten times the longest lag seen (in the probe
//!    or in any case of the run so far), twenty times the pace, and 50 ms more per MiB the case
//!    sent (a server may parse a large line in a task of its own: a 1 MiB line's answer came
//!    5 ms after the barrier's from the TypeScript SDK and rmcp here); the whole `--settle-ms`
//!    when the probe got no answers; never more than `--settle-ms`. A target that answers in order in
//!    the probe may still answer some inputs late (the Python SDK answers a line it had to
//!    repair after the next one, 0.3 to 8 ms late here), so its order alone never shortens the
//!    window below the floor.
//! 3. **Stop early**: the window ends the moment the case's answer is in.
//!
//! A case under 1 MiB that sees a late answer reports its lag here, and later windows grow
//! with it. So a window can depend on which cases ran before it (and, with `--jobs`, on their
//! order); the floor and the factor of ten are there so that no answer that comes as late as
//! any seen is missed either way. The probe runs once per target, at the version of the first
//! case that needs a window (a server's order of answers does not change with the version);
//! a target without the allowed tool answers the probe's calls with quick errors and is taken
//! to answer in order: it still gets the floor.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How a stdio target orders its answers, as the order probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Every probe pair was answered in the order it was sent.
    Sequential,
    /// A barrier was answered before the request sent ahead of it; `lag` is the longest time
    /// the earlier request's answer came after the barrier's.
    Concurrent { lag: Duration },
    /// The probe got no usable answers (the process did not start, or answered no pair).
    Unknown,
}

/// What the order probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probed {
    pub order: Order,
    /// The longest round trip of a probe pair after the first (zero when there was none).
    pub pace: Duration,
}

impl Probed {
    /// The probe learned nothing.
    pub(crate) const UNKNOWN: Probed = Probed {
        order: Order::Unknown,
        pace: Duration::ZERO,
    };
}

/// The shortest window, whatever the target.
pub(crate) const FLOOR: Duration = Duration::from_millis(250);
/// How many lags a window spans.
const LAG_FACTOR: u32 = 10;
/// How many warm round trips a window spans.
const PACE_FACTOR: u32 = 20;
/// How much longer a window is for each MiB the case sent.
const PER_MIB: Duration = Duration::from_millis(50);

/// What one stdio target taught the run about its answers; shared by its lanes and trials.
#[derive(Debug, Default)]
pub struct Pacing {
    probed: tokio::sync::OnceCell<Probed>,
    /// The longest lag seen so far in this run between the barrier's answer and a case's late
    /// answer, in microseconds.
    late_us: AtomicU64,
}

impl Pacing {
    /// What the probe found, running `probe` the first time it is asked (concurrent askers wait
    /// for the one probe).
    pub(crate) async fn probed<F>(&self, probe: F) -> Probed
    where
        F: std::future::Future<Output = Probed>,
    {
        *self.probed.get_or_init(|| probe).await
    }

    /// A case saw its answer `lag` after the barrier's.
    pub(crate) fn saw_late(&self, lag: Duration) {
        let us = u64::try_from(lag.as_micros()).unwrap_or(u64::MAX);
        self.late_us.fetch_max(us, Ordering::Relaxed);
    }

    /// The longest late lag seen so far.
    pub(crate) fn longest_late(&self) -> Duration {
        Duration::from_micros(self.late_us.load(Ordering::Relaxed))
    }

    /// How long to keep reading after the barrier's answer, for a case that sent `sent` bytes
    /// to a target the probe found to be `probed`; `max` is `--settle-ms`.
    pub fn window(&self, probed: Probed, sent: u64, max: Duration) -> Duration {
        let lag = match probed.order {
            Order::Unknown => return max,
            Order::Sequential => Duration::ZERO,
            Order::Concurrent { lag } => lag,
        };
        let mib = u32::try_from(sent >> 20).unwrap_or(u32::MAX);
        FLOOR
            .max(lag.max(self.longest_late()).saturating_mul(LAG_FACTOR))
            .max(probed.pace.saturating_mul(PACE_FACTOR))
            .saturating_add(PER_MIB.saturating_mul(mib))
            .min(max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: Duration = Duration::from_secs(5);
    const MS: Duration = Duration::from_millis(1);

    fn found(order: Order, pace_ms: u32) -> Probed {
        Probed {
            order,
            pace: pace_ms * MS,
        }
    }

    #[test]
    fn unknown_targets_get_the_whole_window() {
        assert_eq!(Pacing::default().window(Probed::UNKNOWN, 0, MAX), MAX);
    }

    #[test]
    fn quick_targets_get_the_floor_and_never_more_than_the_maximum() {
        let p = Pacing::default();
        assert_eq!(p.window(found(Order::Sequential, 2), 0, MAX), FLOOR);
        let quick = Order::Concurrent { lag: 3 * MS };
        assert_eq!(p.window(found(quick, 2), 0, MAX), FLOOR);
        assert_eq!(p.window(found(Order::Sequential, 2), 0, 100 * MS), 100 * MS);
    }

    #[test]
    fn windows_scale_with_the_lag_and_the_pace() {
        let p = Pacing::default();
        let slow = Order::Concurrent { lag: 80 * MS };
        assert_eq!(p.window(found(slow, 1), 0, MAX), 800 * MS);
        assert_eq!(p.window(found(Order::Sequential, 60), 0, MAX), 1200 * MS);
        assert_eq!(p.window(found(slow, 900), 0, MAX), MAX);
    }

    #[test]
    fn large_cases_get_more_time() {
        let p = Pacing::default();
        let quick = found(Order::Sequential, 1);
        assert_eq!(p.window(quick, 1 << 20, MAX), FLOOR + 50 * MS);
        assert_eq!(p.window(quick, 100 << 20, MAX), MAX);
        assert_eq!(p.window(quick, u64::MAX, MAX), MAX);
    }

    #[test]
    fn a_late_answer_widens_later_windows() {
        let p = Pacing::default();
        p.saw_late(70 * MS);
        p.saw_late(20 * MS);
        assert_eq!(p.longest_late(), 70 * MS);
        assert_eq!(p.window(found(Order::Sequential, 1), 0, MAX), 700 * MS);
        let quick = Order::Concurrent { lag: 3 * MS };
        assert_eq!(p.window(found(quick, 1), 0, MAX), 700 * MS);
    }
}
