//! Gateways side by side: a proxy or gateway whose target file says it fronts the witness
//! (`fronts_witness`) is loaded, lane by lane, right after its cases, and so is the reference
//! gate in front of the same witness (over stdio, as the proxy runs it), in the same campaign:
//! throughput, p50 and p99 added, wrong and lost answers. Kept in `OUT/COLUMN.side.json`; the
//! ecosystem pages make a column of it.

use super::file::{LaneKind, LaneSpec, SideBySideSpec, TargetFile};
use super::CampaignOptions;
use crate::load::{LaneLoad, LoadOptions};
use crate::target::{SseAt, Target};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The format of a side-by-side record.
pub const SIDE_FORMAT: &str = "mcp-gauntlet-side-by-side/1";

/// One endpoint's load, as the pages show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub sent: u64,
    pub ok: u64,
    pub errors: u64,
    pub wrong: u64,
    pub lost: u64,
    pub per_second: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

impl From<&LaneLoad> for Measured {
    fn from(l: &LaneLoad) -> Measured {
        Measured {
            sent: l.sent,
            ok: l.ok,
            errors: l.errors,
            wrong: l.wrong,
            lost: l.lost,
            per_second: l.per_second,
            p50_us: l.p50_us,
            p99_us: l.p99_us,
        }
    }
}

/// A gateway lane and the reference gate, loaded alike one after the other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideBySide {
    pub format: String,
    pub column: String,
    pub concurrency: usize,
    pub requests: u64,
    /// The gateway's lane, or why it could not be loaded.
    pub gateway: Result<Measured, String>,
    /// The reference gate in front of `witness --stdio`, or why it could not be loaded.
    pub reference: Result<Measured, String>,
}

impl SideBySide {
    /// `0.42× the reference gate's throughput, p50 +1.2 ms, p99 +5.0 ms; 0 wrong, 0 lost`,
    /// or what could not be measured.
    pub fn cell(&self) -> String {
        match (&self.gateway, &self.reference) {
            (Ok(g), Ok(r)) => format!(
                "{:.2}× the reference gate's throughput ({:.0}/s vs {:.0}/s), p50 {:+.1} ms, p99 {:+.1} ms; {} wrong, {} lost of {}",
                g.per_second / r.per_second.max(1e-9),
                g.per_second,
                r.per_second,
                (g.p50_us - r.p50_us) / 1000.0,
                (g.p99_us - r.p99_us) / 1000.0,
                g.wrong,
                g.lost,
                g.sent
            ),
            (Err(why), _) => format!("not measured: the gateway could not be loaded ({why})"),
            (_, Err(why)) => {
                format!("not measured: the reference gate could not be loaded ({why})")
            }
        }
    }

    /// The matrix's cell: `0.42× throughput, p50 +1.2 ms, 0 wrong, 0 lost`.
    pub fn short(&self) -> String {
        match (&self.gateway, &self.reference) {
            (Ok(g), Ok(r)) => format!(
                "{:.2}× throughput, p50 {:+.1} ms, p99 {:+.1} ms, {} wrong, {} lost",
                g.per_second / r.per_second.max(1e-9),
                (g.p50_us - r.p50_us) / 1000.0,
                (g.p99_us - r.p99_us) / 1000.0,
                g.wrong,
                g.lost
            ),
            _ => "not measured".into(),
        }
    }

    /// The record of `column` in `dir`, when one was written.
    pub fn read(dir: &Path, column: &str) -> Option<SideBySide> {
        let text = std::fs::read_to_string(path(dir, column)).ok()?;
        serde_json::from_str::<SideBySide>(&text)
            .ok()
            .filter(|s| s.format == SIDE_FORMAT)
    }
}

fn path(dir: &Path, column: &str) -> PathBuf {
    dir.join(format!("{column}.side.json"))
}

/// Load lane `l` of `t` (started by `command`, its placeholders filled) and the reference gate
/// in front of the witness, one after the other, and keep the record beside the lane's report.
/// Nothing for a target that does not front the witness or a lane that is not HTTP.
pub(crate) fn run(
    t: &TargetFile,
    l: &LaneSpec,
    command: Option<String>,
    opts: &CampaignOptions,
) -> Option<SideBySide> {
    let spec = t.spec.fronts_witness.as_ref()?;
    let command = command.filter(|_| l.kind == LaneKind::Http)?;
    let gauntlet = super::lane::gauntlet(opts);
    let column = t.column(l);
    let load = |target: Target| load_one(target, spec, opts);
    let gateway = load(Target::Serve {
        command,
        path: l.path.clone().unwrap_or_else(|| "/mcp".into()),
        sse: SseAt::Beside(None),
    });
    let reference = reference_command(&gauntlet, &opts.out, &column).and_then(|command| {
        load(Target::Serve {
            command,
            path: "/mcp".into(),
            sse: SseAt::Beside(None),
        })
    });
    let record = SideBySide {
        format: SIDE_FORMAT.into(),
        column: column.clone(),
        concurrency: spec.concurrency,
        requests: spec.requests,
        gateway,
        reference,
    };
    let text = serde_json::to_string_pretty(&record).expect("a side-by-side record serializes");
    super::lane::write_whole(&path(&opts.out, &column), &(text + "\n"));
    Some(record)
}

/// The reference gate serving HTTP on `{port}` in front of `witness --stdio`, with the policy
/// the embedded default runs (written beside the lane's report).
fn reference_command(gauntlet: &Path, out: &Path, column: &str) -> Result<String, String> {
    let config = out.join(format!("{column}.reference-gate.json"));
    std::fs::write(&config, crate::target::WITNESS_POLICY)
        .map_err(|e| format!("cannot write {}: {e}", config.display()))?;
    let quote = |p: &Path| shell_words::quote(&p.display().to_string()).into_owned();
    let downstream = format!("{} witness --stdio", quote(gauntlet));
    Ok(format!(
        "{} reference-gate --config {} --listen 127.0.0.1:{{port}} --downstream-cmd {}",
        quote(gauntlet),
        quote(&config),
        shell_words::quote(&downstream)
    ))
}

/// `load` of one endpoint, its first lane's result, or why there is none.
fn load_one(
    target: Target,
    spec: &SideBySideSpec,
    opts: &CampaignOptions,
) -> Result<Measured, String> {
    let results = crate::load::load(LoadOptions {
        target,
        concurrency: spec.concurrency,
        requests: Some(spec.requests),
        request_timeout: Duration::from_secs(10),
        self_exe: opts.self_exe.clone(),
        ..LoadOptions::default()
    })
    .map_err(|e| crate::error::error_chain(&e))?;
    results
        .first()
        .map(Measured::from)
        .ok_or_else(|| "no lane it could load".to_string())
}
