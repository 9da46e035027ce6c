//! `mcp-gauntlet bench`: the figures of DESIGN.md section 9, each measured beside its reference
//! in the same run and reported as a ratio (never asserted: speed is reported, not tested).
//!
//! - canonicalization of a `tools/call` (about 1 KB, 100 KB, 1 MiB) against serde_json typed
//!   parsing of the same bytes (bar: at least 0.5). serde_json is built here as the suite builds
//!   it, with `preserve_order` (objects in an IndexMap), which makes it a little slower than a
//!   default build: 0.79 here against 0.72 in a build of the gate alone, for 1 KB;
//! - the gate against the witness it fronts, HTTP and stdio, 1 and 64 clients (`load`; bar:
//!   at least 0.4 of direct throughput, zero wrong answers);
//! - the whole catalogue against the embedded default (bar: under 10 s).

use crate::error::RunError;
use crate::load::{load, LaneLoad, LoadOptions};
use reference_gate::canonical::{self, Limits};
use std::path::PathBuf;
use std::time::Instant;

#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct Call {
    jsonrpc: String,
    id: i64,
    method: String,
    params: Params,
}

#[derive(serde::Deserialize)]
#[allow(dead_code)]
struct Params {
    name: String,
    arguments: serde_json::Value,
}

/// A `tools/call` of about `size` bytes with varied arguments.
pub(crate) fn sample_call(size: usize) -> Vec<u8> {
    let mut args = String::new();
    let mut i = 0;
    while args.len() + 120 < size {
        args.push_str(&format!(
            r#""field_{i}":{{"text":"value number {i} with some words","n":{i},"ok":true}},"#
        ));
        i += 1;
    }
    args.push_str(r#""last":[1,2.5,-3e2,null]"#);
    format!(r#"{{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{{"name":"echo","arguments":{{{args}}}}}}}"#).into_bytes()
}

/// One canonicalization measurement.
#[derive(Debug, Clone)]
pub(crate) struct CanonicalFigure {
    pub bytes: usize,
    pub canonical_us: f64,
    pub serde_us: f64,
    /// Canonicalization throughput over serde_json's.
    pub ratio: f64,
}

/// Canonical parse + serialize against serde_json typed parsing, best of five rounds.
pub(crate) fn canonical_vs_serde(size: usize) -> CanonicalFigure {
    let msg = sample_call(size);
    let limits = Limits {
        max_bytes: 64 << 20,
        max_members: 1 << 20,
        max_string: 64 << 20,
        ..Limits::default()
    };
    let iters = (100_000_000 / msg.len().max(1)).clamp(20, 100_000);
    let mut best = (f64::MAX, f64::MAX);
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..iters {
            if let Ok(c) = canonical::parse(std::hint::black_box(&msg), &limits) {
                std::hint::black_box(c.forwarding_bytes().len());
            }
        }
        let canon = t.elapsed().as_secs_f64() / iters as f64;
        let t = Instant::now();
        for _ in 0..iters {
            if let Ok(c) = serde_json::from_slice::<Call>(std::hint::black_box(&msg)) {
                std::hint::black_box(c.params.name.len());
            }
        }
        let serde = t.elapsed().as_secs_f64() / iters as f64;
        best = (best.0.min(canon), best.1.min(serde));
    }
    CanonicalFigure {
        bytes: msg.len(),
        canonical_us: best.0 * 1e6,
        serde_us: best.1 * 1e6,
        ratio: best.1 / best.0,
    }
}

/// Run every benchmark and return the report as text. `exe` runs the catalogue (normally this
/// binary).
pub fn bench(exe: Option<PathBuf>, requests: u64) -> Result<String, RunError> {
    let mut out =
        String::from("canonicalization vs serde_json typed parsing (bar: ratio >= 0.5)\n");
    for size in [1024, 100 * 1024, 1024 * 1024] {
        let f = canonical_vs_serde(size);
        out.push_str(&format!(
            "  {:>8} bytes: canonical {:.2} us, serde_json {:.2} us, ratio {:.2}\n",
            f.bytes, f.canonical_us, f.serde_us, f.ratio
        ));
    }
    out.push_str("gate vs direct (bar: throughput ratio >= 0.4, p50 added < 100 us, zero wrong)\n");
    for clients in [1, 64] {
        let results: Vec<LaneLoad> = load(LoadOptions {
            concurrency: clients,
            requests: Some(requests),
            self_exe: exe.clone(),
            ..LoadOptions::default()
        })?;
        let find = |n: &str| results.iter().find(|r| r.lane == n);
        for transport in ["http", "stdio"] {
            if let (Some(d), Some(g)) = (find(transport), find(&format!("gate/{transport}"))) {
                out.push_str(&format!(
                    "  {transport:>5}, {clients:>2} client(s): direct {:.0}/s p50 {:.0} us, gate {:.0}/s p50 {:.0} us; ratio {:.2}, p50 added {:.0} us, wrong {}, lost {}\n",
                    d.per_second, d.p50_us, g.per_second, g.p50_us,
                    g.per_second / d.per_second.max(1e-9), g.p50_us - d.p50_us,
                    d.wrong + g.wrong, d.lost + g.lost
                ));
            }
        }
    }
    let exe = crate::target::self_exe(exe.as_ref())?;
    let t = Instant::now();
    let status = std::process::Command::new(&exe)
        .args(["run", "--", "-q"])
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(RunError::Setup)?;
    let wall = t.elapsed();
    out.push_str(&format!(
        "the catalogue against the embedded default (bar: < 10 s): {:.2} s ({})\n",
        wall.as_secs_f64(),
        if status.success() {
            "all passed"
        } else {
            "FAILURES"
        }
    ));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bench must measure successful parses on both sides, not error paths.
    #[test]
    fn the_sample_call_is_accepted_by_both_readers_at_every_size() {
        let limits = Limits {
            max_bytes: 64 << 20,
            max_members: 1 << 20,
            max_string: 64 << 20,
            ..Limits::default()
        };
        for size in [1024, 100 * 1024, 1024 * 1024] {
            let msg = sample_call(size);
            assert!(msg.len() >= size && msg.len() < size + 200);
            assert!(canonical::parse(&msg, &limits).is_ok());
            assert!(serde_json::from_slice::<Call>(&msg).is_ok());
        }
    }
}
