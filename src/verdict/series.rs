//! A series as a whole: what it cost the target's process (memory kept per step from the slope
//! over the later half of the steps after the warm-up, CPU per step, descriptors), whether the server bounded it the protocol's
//! way (a cap answer, a session let go), and how a `ping` on another connection fared while it
//! ran. Each kind of answer a step got is judged as a case's answer in [`super::judge`]; this
//! file judges what only the whole series shows.

use super::{Check, Judge, Status};
use crate::case::SeriesExpect;
use crate::transport::procfs::ProcSample;
use crate::transport::SeriesSeen;

const KIB: f64 = 1024.0;
/// The least CPU a baseline step is counted as (µs): the kernel counts CPU in 10 ms ticks, so
/// a baseline of a few hundred cheap steps may read as nothing.
const BASELINE_FLOOR_US: f64 = 100.0;
/// The kernel's CPU clock tick (ms): what a reading may be off by.
const TICK_MS: u64 = 10;
const MIB: f64 = 1024.0 * 1024.0;

impl Judge<'_> {
    /// The series' own findings: its measurements (always said, observed or not) and each
    /// bound of `expect.series` it broke.
    pub(super) fn series(&mut self) {
        let Some(seen) = self.obs.answer.series.as_deref() else {
            return;
        };
        let bounds = self.expect.series.clone().unwrap_or_default();
        let warmup = self.case.spec.series.as_ref().map_or(0, |s| s.warmup);
        let close_each = self.case.spec.series.as_ref().is_some_and(|s| s.close_each);
        self.add(Check::Series, Status::Pass, summary(seen));
        if let Some(held) = &seen.held {
            self.add(Check::Series, Status::Pass, held_summary(held, seen.before));
        }
        if close_each {
            self.deletes(seen);
        }
        if let Some((step, status)) = seen.capped_at {
            self.add(
                Check::Series,
                Status::Pass,
                format!("bounded: step {} was refused with HTTP {status}, a cap the protocol allows; {} steps were taken before it", step + 1, step),
            );
        } else if seen.first_session_answer == Some(404) && !close_each {
            self.add(
                Check::Series,
                Status::Pass,
                "bounded: the first session a step opened was let go by the end (a ping in it answered 404)".into(),
            );
        }
        if seen.cut {
            self.add(
                Check::Series,
                Status::Pass,
                format!("the series was cut by its budget after {} of {} steps: what was sent is judged", seen.sent, seen.count),
            );
        }
        self.memory(seen, &bounds, warmup, close_each);
        self.cpu(seen, &bounds);
        self.descriptors(seen, &bounds);
        self.streams(seen, &bounds);
        self.latency(seen, &bounds);
    }

    /// `open_streams`: how many of the held connections the server gave an event stream that
    /// was still open when they were let go (MCP-DOS-10). Read from the wire, so always
    /// observed.
    fn streams(&mut self, seen: &SeriesSeen, bounds: &SeriesExpect) {
        let (Some(max), Some(held)) = (bounds.open_streams, &seen.held) else {
            return;
        };
        let opened = held.held_to_the_end + held.closed_by_server;
        let open = held.streams_open;
        if open > max {
            self.add(
                Check::Resources,
                self.level_status,
                format!("{open} of the {opened} held connections were each given an event stream of their own, all still open when let go; at most {max} expected: the streams a client may hold open are not bounded"),
            );
        } else {
            self.add(
                Check::Resources,
                Status::Pass,
                format!("{open} of the {opened} held connections had an event stream open when let go (at most {max} expected)"),
            );
        }
    }

    /// `close_each`: every step's session was ended with `DELETE`: each `DELETE` accepted
    /// (MCP-HTTP-SESS-07: 2xx; a server may refuse every one with 405, and then no client
    /// ends a session there), and the first session gone afterwards (MCP-HTTP-SESS-05).
    fn deletes(&mut self, seen: &SeriesSeen) {
        let ended: u32 = seen.deletes.values().sum();
        if ended > 0 && seen.deletes.keys().all(|s| *s == 405) {
            self.add(
                Check::Series,
                Status::Pass,
                format!("all {ended} DELETEs were refused with 405 (the server lets no client end a session, as it may): what ending a session frees is not judged"),
            );
            return;
        }
        let refused: Vec<String> = seen
            .deletes
            .iter()
            .filter(|(status, _)| !(200..300).contains(*status))
            .map(|(status, n)| match status {
                0 => format!("{n} got no answer"),
                s => format!("{n} answered HTTP {s}"),
            })
            .collect();
        if !refused.is_empty() {
            self.add(
                Check::Series,
                self.level_status,
                format!("of the {ended} DELETEs that ended the steps' sessions, {}: a session its client ends is ended with 2xx (or every DELETE refused with 405)", refused.join(", ")),
            );
        }
        match seen.first_session_answer {
            Some(404) => self.add(
                Check::Series,
                Status::Pass,
                format!("{ended} sessions ended with DELETE; the first answers 404 afterwards"),
            ),
            // Refused as unknown with another status, it is ended all the same: which status
            // an unknown session gets is headers/session-id-unknown's to judge, once.
            Some(status @ (400 | 410)) => self.add(
                Check::Series,
                Status::Pass,
                format!("{ended} sessions ended with DELETE; the first is refused afterwards (HTTP {status}; MCP-HTTP-SESS-05 wants 404, judged by headers/session-id-unknown)"),
            ),
            Some(status @ 200..=299) if ended > 0 => self.add(
                Check::Series,
                self.level_status,
                format!("the first session a step opened was ended with DELETE, yet a ping in it answered HTTP {status}: the session was not ended"),
            ),
            Some(0) => self.add(
                Check::Series,
                Status::Pass,
                "whether the ended sessions are gone could not be told: a ping in the first got no answer".into(),
            ),
            Some(status) => self.add(
                Check::Series,
                Status::Pass,
                format!("whether the ended sessions are gone could not be told: a ping in the first answered HTTP {status}"),
            ),
            None => {}
        }
    }

    fn memory(&mut self, seen: &SeriesSeen, bounds: &SeriesExpect, warmup: u32, close_each: bool) {
        let Some(max) = bounds.retained_bytes_per_step else {
            return;
        };
        if !seen.watched {
            self.add(
                Check::Memory,
                Status::Pass,
                "memory not observed: the target's process is not known (run it with --serve, or give --pid)".into(),
            );
            return;
        }
        // The steady state: the later half of the steps after the warm-up (up to a cap). A
        // collected heap (V8, the JVM, Go) grows with garbage until its collector settles,
        // which is not memory kept: only what still grows once it has settled is.
        let end = seen.capped_at.map_or(seen.sent, |(step, _)| step);
        let from = warmup + end.saturating_sub(warmup) / 2;
        let points: Vec<(f64, f64)> = seen
            .samples
            .iter()
            .filter(|(done, _)| *done >= from && *done <= end)
            .map(|(done, s)| (f64::from(*done), s.rss_kib as f64 * KIB))
            .collect();
        let Some(per_step) = slope(&points) else {
            self.add(
                Check::Memory,
                Status::Pass,
                format!("memory not measured: {} samples in the later half of the steps after the warm-up of {warmup} (three are needed)", points.len()),
            );
            return;
        };
        let (first, last) = (points[0], points[points.len() - 1]);
        let span = format!(
            "resident memory went from {:.1} MiB at step {} to {:.1} MiB at step {}",
            first.1 / MIB,
            first.0,
            last.1 / MIB,
            last.0
        );
        // A server that showed its bound (a cap answered, the oldest session let go) keeps
        // what it keeps below that bound by design: what each step costs up to it is said,
        // not judged.
        // Sessions ended by the client (`close_each`) answer 404 because they were ended: no
        // bound of the server's.
        let bounded =
            seen.capped_at.is_some() || (seen.first_session_answer == Some(404) && !close_each);
        if per_step > max as f64 && bounded {
            self.add(
                Check::Memory,
                Status::Pass,
                format!(
                    "{:.1} KiB kept per step up to the server's bound ({span})",
                    per_step / KIB
                ),
            );
        } else if per_step > max as f64 {
            let closed = closed_note(seen);
            self.add(
                Check::Memory,
                self.level_status,
                format!(
                    "the server keeps {:.1} KiB per step ({span}); at most {:.1} KiB expected: what each request leaves behind is never let go{closed}",
                    per_step / KIB,
                    max as f64 / KIB
                ),
            );
        } else {
            self.add(
                Check::Memory,
                Status::Pass,
                format!(
                    "{:.0} bytes kept per step ({span}); at most {max} expected",
                    per_step.max(0.0)
                ),
            );
        }
    }

    /// CPU against the baseline's (`cpu_ratio`): the same server's cost for a plain request
    /// of about the same size, so the bound holds on any machine. Each side is given a clock
    /// tick in its favour (the kernel counts CPU in 10 ms ticks).
    fn cpu_against_baseline(&mut self, seen: &SeriesSeen, bounds: &SeriesExpect, used: u64) {
        let (Some(ratio), Some(base)) = (bounds.cpu_ratio, seen.baseline.as_ref()) else {
            return;
        };
        let Some(base_ms) = base.cpu_ms else {
            self.add(
                Check::Cpu,
                Status::Pass,
                "the baseline's CPU could not be read: not compared".into(),
            );
            return;
        };
        let per_step = |ms: u64, steps: u32| ms as f64 * 1000.0 / f64::from(steps.max(1));
        let case_us = per_step(used, seen.sent);
        let base_us = per_step(base_ms, base.sent);
        let counted = per_step(base_ms + TICK_MS, base.sent).max(BASELINE_FLOOR_US);
        let sizes = match (
            seen.kinds.first().and_then(|k| k.observation.sent.extent),
            base.bytes,
        ) {
            (Some(e), Some(b)) => format!(" ({} bytes against {b})", e.bytes),
            _ => String::new(),
        };
        let said = format!(
            "{case_us:.0} µs of CPU a step over {} steps, against {base_us:.0} µs for a plain request of about the same size{sizes} over {} ({})",
            seen.sent, base.sent, base.answer
        );
        // A plain request refused (cheaply) says nothing of what reading one costs.
        let answered = |key: &str| {
            key.split(", ")
                .any(|part| part == "result" || part == "isError")
        };
        let case_answered = seen.kinds.first().is_some_and(|k| answered(&k.key));
        if case_answered && !answered(&base.answer) {
            self.add(Check::Cpu, Status::Pass, format!("{said}: not compared, the plain request was refused where the case's was answered"));
            return;
        }
        if per_step(used.saturating_sub(TICK_MS), seen.sent) > counted * f64::from(ratio) {
            self.add(
                Check::Cpu,
                self.level_status,
                format!("{said}: {:.0} times as much; at most {ratio} times expected: this input costs far more than its size", case_us / counted),
            );
        } else {
            self.add(Check::Cpu, Status::Pass, said);
        }
    }

    fn cpu(&mut self, seen: &SeriesSeen, bounds: &SeriesExpect) {
        if bounds.cpu_ratio.is_none() && bounds.cpu_us_per_step.is_none() {
            return;
        }
        let Some(used) = cpu_ms(seen) else {
            self.add(Check::Cpu, Status::Pass, "CPU not observed: the target's process is not known (run it with --serve, or give --pid)".into());
            return;
        };
        self.cpu_against_baseline(seen, bounds, used);
        let Some(max) = bounds.cpu_us_per_step else {
            return;
        };
        let per_step = used as f64 * 1000.0 / f64::from(seen.sent.max(1));
        if per_step > max as f64 {
            self.add(
                Check::Cpu,
                self.level_status,
                format!("the server spent {used} ms of CPU on {} steps, {per_step:.0} µs each; at most {max} µs expected: an input this small should not cost this much", seen.sent),
            );
        }
    }

    fn descriptors(&mut self, seen: &SeriesSeen, bounds: &SeriesExpect) {
        if bounds.fds_growth.is_some() && !seen.watched {
            self.add(
                Check::Resources,
                Status::Pass,
                "descriptors not observed: the target's process is not known (run it with --serve, or give --pid)".into(),
            );
            return;
        }
        let Some(max) = bounds.fds_growth else {
            return;
        };
        let (Some(before), Some(after)) = (seen.before, seen.after) else {
            self.add(
                Check::Resources,
                Status::Pass,
                "descriptors not observed: the process could not be read before and after".into(),
            );
            return;
        };
        let grew = after.fds.saturating_sub(before.fds);
        if let (Some(held), true) = (&seen.held, grew > max) {
            let closed = held.held_to_the_end + held.closed_by_server;
            self.add(
                Check::Resources,
                self.level_status,
                format!("{closed} held connections were closed, yet the server holds {grew} more open descriptors than before them ({} -> {}, read after it had a moment to let go); at most {max} more expected: what a closed connection held is not let go", before.fds, after.fds),
            );
        } else if grew > max {
            self.add(
                Check::Resources,
                self.level_status,
                format!("the server holds {grew} more open descriptors after the series ({} -> {}); at most {max} more expected", before.fds, after.fds),
            );
        }
    }

    fn latency(&mut self, seen: &SeriesSeen, bounds: &SeriesExpect) {
        if seen.one_client {
            if bounds.ping_ms.is_some() {
                self.add(
                    Check::Latency,
                    Status::Pass,
                    "latency not observed: over stdio the process has one client, and no other connection to ping".into(),
                );
            }
            return;
        }
        let slowest = seen.pings.iter().max().copied();
        let failed = seen.ping_failures.len();
        if let Some(first) = seen.ping_refusals.first() {
            self.add(
                Check::Latency,
                Status::Pass,
                format!(
                    "{} pings on another connection were refused (first: {first}): no latency to time for those",
                    seen.ping_refusals.len()
                ),
            );
        }
        if failed > 0 && failed >= seen.pings.len() {
            self.add(
                Check::Latency,
                self.level_status,
                format!(
                    "{failed} of {} pings on another connection got no answer while the series ran (first: {}): one client's series shut others out",
                    failed + seen.pings.len(),
                    seen.ping_failures[0]
                ),
            );
            return;
        }
        if let (Some(max), Some(slowest)) = (bounds.ping_ms, slowest) {
            if slowest > max {
                self.add(
                    Check::Latency,
                    self.level_status,
                    format!("a ping on another connection took {slowest} ms while the series ran; at most {max} ms expected: one client's input blocks the server for every other"),
                );
            }
        }
    }
}

/// CPU the target's process tree spent over the series, in ms.
fn cpu_ms(seen: &SeriesSeen) -> Option<u64> {
    let (before, after) = (seen.before?, seen.after?);
    Some(after.cpu_ms.saturating_sub(before.cpu_ms))
}

/// What closing the series' sessions gave back, when they were closed.
fn closed_note(seen: &SeriesSeen) -> String {
    match (seen.after, seen.after_close) {
        (Some(after), Some(closed)) if seen.sessions_closed > 0 => format!(
            "; after closing its {} sessions with DELETE it held {:.1} MiB (was {:.1} MiB)",
            seen.sessions_closed,
            closed.rss_kib as f64 / KIB,
            after.rss_kib as f64 / KIB
        ),
        _ => String::new(),
    }
}

/// What became of the held connections, in one line: how they were held, how many the
/// server closed or answered, and what holding them cost the process.
fn held_summary(held: &crate::transport::HeldSeen, before: Option<ProcSample>) -> String {
    use crate::case::Trickle;
    let how = match held.trickle {
        Some(Trickle::Headers) => format!("its head trickled, a byte every {} ms", held.every_ms),
        Some(Trickle::Body) => format!("its body trickled, a byte every {} ms", held.every_ms),
        Some(Trickle::Idle) | None => "the whole request, then idle".to_string(),
    };
    let opened = held.held_to_the_end + held.closed_by_server;
    let mut said = format!(
        "held {opened} connections for {:.1} s ({how}): {} still open when let go, {} closed by the server",
        held.for_ms as f64 / 1000.0,
        held.held_to_the_end,
        held.closed_by_server
    );
    if let Some(after) = held.first_closed_after {
        said.push_str(&format!(
            " (the first {:.1} s into the hold)",
            after.as_secs_f64()
        ));
    }
    if held.not_opened > 0 {
        said.push_str(&format!(", {} could not be opened", held.not_opened));
    }
    if held.streams_open > 0 {
        said.push_str(&format!(
            ", {} of them event streams still open",
            held.streams_open
        ));
    }
    if !held.answers.is_empty() {
        let answers: Vec<String> = held
            .answers
            .iter()
            .map(|(status, n)| format!("HTTP {status} x{n}"))
            .collect();
        said.push_str(&format!("; answered: {}", answers.join(", ")));
    }
    if let (Some(b), Some(h)) = (before, held.held_sample) {
        let per = (h.rss_kib as f64 - b.rss_kib as f64) * KIB / f64::from(opened.max(1));
        said.push_str(&format!(
            "; while held: descriptors {} -> {}, resident memory {:+.1} KiB a connection",
            b.fds,
            h.fds,
            per / KIB
        ));
    }
    said
}

/// The series in one line: steps, kinds of answer, and each measurement or why it is missing.
fn summary(seen: &SeriesSeen) -> String {
    let kinds: Vec<String> = seen
        .kinds
        .iter()
        .map(|k| format!("{} x{}", k.key, k.count))
        .collect();
    let process = match (seen.before, seen.after) {
        (Some(b), Some(a)) => process_line(b, a, seen.sent),
        _ if seen.watched => "the process could not be read".to_string(),
        _ => "memory, CPU and descriptors not observed (no --serve or --pid)".to_string(),
    };
    let ping = match seen.pings.iter().max() {
        _ if seen.one_client => "no other connection over stdio (one client)".to_string(),
        Some(max) => {
            let mut sorted = seen.pings.clone();
            sorted.sort_unstable();
            format!(
                "ping on another connection: median {} ms, slowest {max} ms over {}",
                sorted[sorted.len() / 2],
                sorted.len()
            )
        }
        None => "no ping on another connection was answered with a result".to_string(),
    };
    if let Some(held) = &seen.held {
        return format!(
            "held connections: {} of {} opened, {:.1} s in all; the request sent whole at the end: {}; {process}; {ping}",
            held.held_to_the_end + held.closed_by_server,
            seen.count,
            seen.elapsed.as_secs_f64(),
            kinds.join(", ")
        );
    }
    format!(
        "series: {} of {} steps in {:.1} s ({}); {process}; {ping}",
        seen.sent,
        seen.count,
        seen.elapsed.as_secs_f64(),
        kinds.join(", ")
    )
}

fn process_line(before: ProcSample, after: ProcSample, sent: u32) -> String {
    let grew = after.rss_kib as f64 - before.rss_kib as f64;
    let cpu = after.cpu_ms.saturating_sub(before.cpu_ms);
    format!(
        "resident memory {:.1} -> {:.1} MiB (peak {:.1} MiB; {:+.1} KiB per step), CPU {cpu} ms ({:.0} µs per step), descriptors {} -> {}, threads {} -> {}",
        before.rss_kib as f64 / KIB,
        after.rss_kib as f64 / KIB,
        after.peak_kib as f64 / KIB,
        grew / f64::from(sent.max(1)),
        cpu as f64 * 1000.0 / f64::from(sent.max(1)),
        before.fds,
        after.fds,
        before.threads,
        after.threads
    )
}

/// The least-squares slope of `y` over `x` (y units per x unit); `None` for fewer than three
/// points or no spread in `x`.
fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 3 {
        return None;
    }
    let n = points.len() as f64;
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let (mut num, mut den) = (0.0, 0.0);
    for (x, y) in points {
        num += (x - mx) * (y - my);
        den += (x - mx) * (x - mx);
    }
    (den > 0.0).then(|| num / den)
}

#[cfg(test)]
mod tests {
    use super::slope;

    #[test]
    fn slope_of_a_line_and_of_too_little() {
        let line: Vec<(f64, f64)> = (0..10).map(|x| (x as f64, 3.0 * x as f64 + 7.0)).collect();
        assert!((slope(&line).expect("slope") - 3.0).abs() < 1e-9);
        assert_eq!(slope(&line[..2]), None);
        assert_eq!(slope(&[(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)]), None);
    }
}
