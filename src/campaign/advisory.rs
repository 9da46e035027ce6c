//! A target's advisory rows: an advisory of `cases/advisories.json` proven on the package it is
//! about, a release it affects reproducing it and one it does not staying clean.
//!
//! A target file of `advisories` has no `release`: each row names two, and its recipe's paths
//! take `{release}` (`python-{release}.txt`). The campaign installs each release once, starts
//! the row's lane on it and runs the row's check: the advisory's cases (`run --advisory ID`),
//! or clients whose request ids collide (`load --same-ids`). Each run is written to
//! `OUT/TARGET-RELEASE-ID[-load].advisory.json` (with its report and log beside it, resumed as
//! lanes are), and the rows make one table, printed and written to `OUT/advisories.md`.

use super::file::{AdvisoryCheck, AdvisoryRow, CheckKind, Role, Shown, TargetFile};
use super::CampaignOptions;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The format of an advisory run's record (`OUT/….advisory.json`).
pub const ADVISORY_FORMAT: &str = "mcp-gauntlet-advisory/1";

/// One release of one row, run: what it should show and what it did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdvisoryRecord {
    pub format: String,
    pub target: String,
    pub advisory: String,
    pub package: String,
    pub release: String,
    pub role: Role,
    pub check: CheckKind,
    /// How it was shown (`run --advisory ID`, `load --same-ids, …`).
    pub how: String,
    pub want: Shown,
    pub got: Shown,
    /// What the check printed or why it could not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// As a lane's key: a campaign started again reruns it when this differs.
    pub key: String,
    pub seconds: u64,
}

impl AdvisoryRecord {
    pub fn ok(&self) -> bool {
        self.want == self.got
    }
}

/// One release of one row to run.
pub(crate) struct Planned<'a> {
    pub row: &'a AdvisoryRow,
    pub role: Role,
    pub release: &'a str,
}

impl Planned<'_> {
    fn want(&self) -> Shown {
        let given = self.row.expect.as_ref().and_then(|e| match self.role {
            Role::Affected => e.affected,
            Role::Fixed => e.fixed,
        });
        given.unwrap_or(match self.role {
            Role::Affected => Shown::Reproduced,
            Role::Fixed => Shown::Clean,
        })
    }

    /// Its files' stem under `OUT`: `TARGET-RELEASE-ID`, `-load` for a load check.
    fn stem(&self, t: &TargetFile) -> String {
        let load = match self.row.check {
            AdvisoryCheck::Cases => "",
            AdvisoryCheck::LoadSameIds { .. } => "-load",
        };
        format!("{}-{}-{}{load}", t.name, self.release, self.row.id)
    }
}

/// Every release of every row of `t`, grouped by release (one install each), in row order.
pub(crate) fn plan(t: &TargetFile) -> Vec<(String, Vec<Planned<'_>>)> {
    let mut out: Vec<(String, Vec<Planned<'_>>)> = Vec::new();
    for row in &t.spec.advisories {
        for (role, release) in [(Role::Affected, &row.affected), (Role::Fixed, &row.fixed)] {
            let p = Planned { row, role, release };
            match out.iter_mut().find(|(r, _)| r == release) {
                Some((_, list)) => list.push(p),
                None => out.push((release.clone(), vec![p])),
            }
        }
    }
    out
}

/// A run already done in `opts.out` with this key (one whose target answered).
pub(crate) fn done(
    t: &TargetFile,
    p: &Planned<'_>,
    key: &str,
    opts: &CampaignOptions,
) -> Option<AdvisoryRecord> {
    let path = opts.out.join(format!("{}.advisory.json", p.stem(t)));
    let text = std::fs::read_to_string(path).ok()?;
    let r: AdvisoryRecord = serde_json::from_str(&text).ok()?;
    (r.format == ADVISORY_FORMAT && r.key == key && r.got != Shown::NoServer).then_some(r)
}

/// The run's key: its lane's, with the row.
pub(crate) fn key(t: &TargetFile, p: &Planned<'_>, opts: &CampaignOptions) -> Option<String> {
    let lane = t
        .spec
        .lanes
        .iter()
        .find(|l| l.name() == Some(&p.row.lane))?;
    let row = serde_json::to_string(p.row).expect("an advisory row serializes: strings");
    let lane_key = super::lane::key(t, lane, opts);
    Some(super::install::fnv(
        format!("{lane_key}\n{row}\n{}", p.role.as_str()).as_bytes(),
    ))
}

/// Run one release of one row on `t` (at that release, installed at `env`).
pub(crate) fn run(
    t: &TargetFile,
    p: &Planned<'_>,
    env: &Path,
    key: String,
    opts: &CampaignOptions,
) -> AdvisoryRecord {
    let stem = p.stem(t);
    let at = |ext: &str| opts.out.join(format!("{stem}{ext}"));
    for stale in [".advisory.json", ".json", ".json.partial", ".xml", ".log"] {
        let _ = std::fs::remove_file(at(stale));
    }
    let started = Instant::now();
    let (got, detail) = match t.spec.lanes.iter().find(|l| l.name() == Some(&p.row.lane)) {
        None => (Shown::NoServer, Some(format!("no lane `{}`", p.row.lane))),
        Some(lane) => {
            let files = super::lane::LaneFiles {
                report: at(".json.partial"),
                junit: at(".xml"),
                log: at(".log"),
            };
            match super::lane::options(t, lane, env, opts, &files) {
                Err(why) => (Shown::NoServer, Some(why)),
                Ok(o) => match &p.row.check {
                    AdvisoryCheck::Cases => cases(o, &p.row.id, &files.report, &at(".json")),
                    AdvisoryCheck::LoadSameIds {
                        concurrency,
                        requests,
                        request_timeout,
                    } => load(o, *concurrency, *requests, *request_timeout, &files.log),
                },
            }
        }
    };
    let record = AdvisoryRecord {
        format: ADVISORY_FORMAT.to_string(),
        target: t.name.clone(),
        advisory: p.row.id.clone(),
        package: t.spec.package.clone(),
        release: p.release.to_string(),
        role: p.role,
        check: p.row.check.kind(),
        how: p.row.check.describe(&p.row.id),
        want: p.want(),
        got,
        detail,
        key,
        seconds: started.elapsed().as_secs(),
    };
    let text = serde_json::to_string_pretty(&record).expect("an advisory record serializes") + "\n";
    super::lane::write_whole(&at(".advisory.json"), &text);
    record
}

/// The advisory's cases on the lane: what the run's records show of it.
fn cases(
    mut o: crate::run::RunOptions,
    id: &str,
    partial: &PathBuf,
    report: &PathBuf,
) -> (Shown, Option<String>) {
    let Some(advisory) = crate::advisory::find(id) else {
        return (
            Shown::NoServer,
            Some(format!("`{id}` is not in the catalogue")),
        );
    };
    o.advisories = crate::advisory::Selection::Named(vec![advisory]);
    match crate::run::run(o) {
        // It answered, and no case could be sent (no version it speaks): not tested.
        Err(e) if e.target_answered() => (Shown::NotTested, Some(crate::error::error_chain(&e))),
        Err(e) => (Shown::NoServer, Some(crate::error::error_chain(&e))),
        Ok(out) => {
            let _ = std::fs::rename(partial, report);
            let shown = match crate::report::advisory_shown(&out.records, id) {
                crate::report::AdvisoryShown::Reproduced => Shown::Reproduced,
                crate::report::AdvisoryShown::Clean => Shown::Clean,
                crate::report::AdvisoryShown::NotTested => Shown::NotTested,
            };
            let detail = (!out.not_run.is_empty())
                .then(|| format!("{} trials not run: the target died", out.not_run.len()));
            (shown, detail)
        }
    }
}

/// Clients whose ids collide on the lane's target: an answer crossed between them reproduces.
fn load(
    o: crate::run::RunOptions,
    concurrency: usize,
    requests: u64,
    request_timeout: u64,
    log: &Path,
) -> (Shown, Option<String>) {
    let results = crate::load::load(crate::load::LoadOptions {
        target: o.target,
        concurrency: concurrency.max(1),
        requests: Some(requests),
        time: None,
        request_timeout: Duration::from_secs(request_timeout.max(1)),
        same_ids: true,
        self_exe: o.self_exe,
        ..crate::load::LoadOptions::default()
    });
    match results {
        Err(e) => (Shown::NoServer, Some(crate::error::error_chain(&e))),
        Ok(results) => {
            let text = crate::load::summary(&results);
            if let Err(e) = std::fs::write(log, &text) {
                eprintln!("cannot write {}: {e}", log.display());
            }
            let shown = match results.first() {
                None => Shown::NoServer,
                Some(r) if r.wrong > 0 => Shown::Reproduced,
                Some(_) => Shown::Clean,
            };
            (
                shown,
                Some(text.lines().next().unwrap_or_default().to_string()),
            )
        }
    }
}

/// The rows as a table: advisory, release, what it should be, what it was.
pub fn table(records: &[AdvisoryRecord], targets: &[TargetFile]) -> String {
    let because = |r: &AdvisoryRecord| {
        targets
            .iter()
            .find(|t| t.name == r.target)
            .and_then(|t| {
                t.spec
                    .advisories
                    .iter()
                    .find(|a| a.id == r.advisory && a.check.kind() == r.check)
            })
            .and_then(|a| a.expect.as_ref())
            .filter(|e| match r.role {
                Role::Affected => e.affected.is_some(),
                Role::Fixed => e.fixed.is_some(),
            })
            .map(|e| format!(" ({})", e.because))
            .unwrap_or_default()
    };
    let mut out =
        "| advisory | package | release | should be | got | | how |\n|---|---|---|---|---|---|---|\n"
            .to_string();
    for r in records {
        let detail = r
            .detail
            .as_deref()
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        out.push_str(&format!(
            "| {} | {} | {} ({}) | {}{} | {} | {} | {}{detail} |\n",
            r.advisory,
            r.package,
            r.release,
            r.role.as_str(),
            r.want.as_str(),
            because(r),
            r.got.as_str(),
            if r.ok() { "ok" } else { "WRONG" },
            r.how,
        ));
    }
    out
}
