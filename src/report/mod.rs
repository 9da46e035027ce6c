//! Reports: the per-trial record the runner keeps, the JSON report (`--report`), JUnit XML
//! (`--junit`), the cross-target matrix (`mcp-gauntlet matrix`), baselines (`baseline.rs`), and
//! the warning summary printed after libtest's own output. Nothing here knows about transports.

pub mod baseline;
mod junit;
mod markdown;
mod sarif;

/// A record's findings and what was observed: part of the report format.
pub use crate::verdict::{Check, Finding, Observed, Status};
pub use junit::junit;
pub(crate) use markdown::step_summary;
pub use sarif::sarif;

use crate::case::{Case, Level, Profile, TransportKind};
use crate::verdict::Verdict;
use crate::versions::Version;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};

/// The version of the JSON report format; bumped on any incompatible change.
pub(crate) const REPORT_FORMAT: &str = "mcp-gauntlet-report/1";

/// What became of one trial, as the reports spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrialVerdict {
    Pass,
    Warn,
    Fail,
    /// Not applicable to the target, or not run.
    Skip,
    /// A failure the baseline lists.
    Known,
    /// Listed in the baseline, but it passes now.
    Stale,
}

impl TrialVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            TrialVerdict::Pass => "pass",
            TrialVerdict::Warn => "warn",
            TrialVerdict::Fail => "fail",
            TrialVerdict::Skip => "skip",
            TrialVerdict::Known => "known",
            TrialVerdict::Stale => "stale",
        }
    }
}

impl std::fmt::Display for TrialVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One trial's result: what `--report` writes, and what the matrix reads back (the fields added
/// since the format began default when an older report lacks them).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    pub id: String,
    pub transport: TransportKind,
    #[serde(default)]
    pub profile: Profile,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub requirements: Vec<String>,
    /// The published advisories the case reproduces (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub advisories: Vec<String>,
    #[serde(default = "must")]
    pub level: Level,
    pub verdict: TrialVerdict,
    #[serde(default)]
    pub observed: Option<Observed>,
    #[serde(default)]
    pub http_status: Option<u16>,
    #[serde(default)]
    pub error_code: Option<i64>,
    #[serde(default)]
    pub elapsed_ms: u64,
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// The downstream witness's personality, on a lane whose witness is not strict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downstream: Option<String>,
    /// The protocol version the case spoke (and its verdict used).
    #[serde(default)]
    pub version: String,
    /// Set when the run had lanes for several versions: the version is then part of the lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane_version: Option<String>,
    /// For failures: the full explanation (acceptable set next to what was observed), with
    /// `--header` values redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
}

impl Record {
    /// The record of `case` on the lane `lane` (its verdict, when it ran).
    pub fn new(case: &Case, lane: &LaneId, verdict: Option<&Verdict>, elapsed_ms: u64) -> Record {
        Record {
            id: case.id.clone(),
            transport: lane.transport,
            profile: lane.profile,
            title: case.spec.title.clone(),
            requirements: case.spec.requirements.clone(),
            advisories: case.spec.advisories.clone(),
            level: case.spec.level,
            verdict: match verdict.map(|v| v.status) {
                None => TrialVerdict::Skip,
                Some(Status::Pass) => TrialVerdict::Pass,
                Some(Status::Warn) => TrialVerdict::Warn,
                Some(Status::Fail) => TrialVerdict::Fail,
            },
            observed: verdict.map(|v| v.observed.clone()),
            http_status: verdict.and_then(|v| v.http_status),
            error_code: verdict.and_then(|v| v.error_code),
            elapsed_ms,
            findings: verdict.map(|v| v.findings.clone()).unwrap_or_default(),
            downstream: lane.downstream.map(str::to_string),
            version: lane.version.to_string(),
            lane_version: lane.version_in_name.then(|| lane.version.to_string()),
            explanation: None,
        }
    }

    /// The name of the lane the record is of, as the run showed it.
    pub(crate) fn lane_name(&self) -> LaneName<'_> {
        LaneName {
            profile: self.profile,
            transport: self.transport,
            downstream: self.downstream.as_deref(),
            version: self.lane_version.as_deref(),
        }
    }
}

/// Records collected by trials running on several threads (`--jobs`), each pushed with its
/// trial's ordinal so that the order of the records does not depend on which trial ended first.
#[derive(Debug, Clone, Default)]
pub(crate) struct Collector {
    inner: Arc<Mutex<Vec<(usize, Record)>>>,
}

impl Collector {
    /// Keep `r`, the record of the trial numbered `ordinal` in the order the run listed them.
    pub fn push(&self, ordinal: usize, r: Record) {
        crate::sync::lock(&self.inner).push((ordinal, r));
    }

    /// All records, sorted by case id, profile and transport, then in the order the run listed
    /// their trials (lanes in order, each version's lanes after the previous version's): the
    /// same order whatever the number of jobs.
    pub fn records(&self) -> Vec<Record> {
        let mut v = crate::sync::lock(&self.inner).clone();
        v.sort_by(|(i, a), (j, b)| {
            (&a.id, a.profile, a.transport, i).cmp(&(&b.id, b.profile, b.transport, j))
        });
        v.into_iter().map(|(_, r)| r).collect()
    }
}

#[derive(Debug, Serialize)]
struct Summary {
    pass: usize,
    warn: usize,
    fail: usize,
    skip: usize,
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    format: &'static str,
    tool_version: &'static str,
    target: &'a str,
    profile: String,
    spec: &'a str,
    strict: bool,
    /// How the run spoke to the target, where not as to a plain server (call mapping,
    /// identity, refusal style); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    spelling: Option<&'a str>,
    summary: Summary,
    results: &'a [Record],
}

/// What the report says about the run itself.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub target: String,
    pub profile: RunProfile,
    pub spec: String,
    pub strict: bool,
    /// [`crate::settings::Settings::spelling`] of the run.
    pub spelling: Option<String>,
}

/// The JSON report text.
pub(crate) fn json_report(info: &RunInfo, records: &[Record]) -> String {
    let count = |v: TrialVerdict| records.iter().filter(|r| r.verdict == v).count();
    let report = Report {
        format: REPORT_FORMAT,
        tool_version: env!("CARGO_PKG_VERSION"),
        target: &info.target,
        profile: info.profile.to_string(),
        spec: &info.spec,
        strict: info.strict,
        spelling: info.spelling.as_deref(),
        summary: Summary {
            pass: count(TrialVerdict::Pass),
            warn: count(TrialVerdict::Warn),
            fail: count(TrialVerdict::Fail),
            skip: count(TrialVerdict::Skip),
        },
        results: records,
    };
    serde_json::to_string_pretty(&report)
        .expect("a report serializes: strings, numbers and lists only")
}

/// Lines summarising the warnings (libtest shows them as passed).
pub(crate) fn warning_summary(records: &[Record]) -> String {
    let warned: Vec<&Record> = records
        .iter()
        .filter(|r| r.verdict == TrialVerdict::Warn)
        .collect();
    if warned.is_empty() {
        return String::new();
    }
    let mut out = format!("\nwarnings ({}; they fail under --strict):\n", warned.len());
    for r in warned {
        // Every finding that warned (a note is not one), in the judge's order.
        let warned: Vec<String> = r
            .findings
            .iter()
            .filter(|f| f.status == crate::verdict::Status::Warn)
            .map(|f| format!("[{}] {}", f.check.as_str(), f.message))
            .collect();
        out.push_str(&format!(
            "    [{}] {}: {}\n",
            kind_of(r),
            r.id,
            warned.join("; ")
        ));
    }
    out
}

/// `summary: N trials: P passed, F failed, …`: the run's counts by verdict.
pub(crate) fn count_line(records: &[Record]) -> String {
    let count = |v: TrialVerdict| records.iter().filter(|r| r.verdict == v).count();
    format!(
        "summary: {} trials: {} passed, {} failed, {} warned, {} known, {} not applicable or not run",
        records.len(),
        count(TrialVerdict::Pass),
        count(TrialVerdict::Fail) + count(TrialVerdict::Stale),
        count(TrialVerdict::Warn),
        count(TrialVerdict::Known),
        count(TrialVerdict::Skip),
    )
}

/// Whether a trial counts as failed: a failure, or a stale baseline entry.
pub(crate) fn failing(r: &Record) -> bool {
    matches!(r.verdict, TrialVerdict::Fail | TrialVerdict::Stale)
}

/// The finding a trial is summed up by: its first failed one, else its first warned one, else
/// its first.
pub(crate) fn headline(r: &Record) -> Option<&Finding> {
    let first = |s: Status| r.findings.iter().find(|f| f.status == s);
    first(Status::Fail)
        .or_else(|| first(Status::Warn))
        .or(r.findings.first())
}

/// How many failing trials (see [`failing`]) each check failed, a trial counted once per check.
pub(crate) fn failed_checks<'a>(
    records: impl Iterator<Item = &'a Record>,
) -> std::collections::BTreeMap<&'static str, usize> {
    let mut checks = std::collections::BTreeMap::new();
    for r in records.filter(|r| failing(r)) {
        let seen: std::collections::BTreeSet<&'static str> = r
            .findings
            .iter()
            .filter(|f| f.status == Status::Fail)
            .map(|f| f.check.as_str())
            .collect();
        for c in seen {
            *checks.entry(c).or_default() += 1;
        }
    }
    checks
}

/// One line per failed trial (and stale baseline entry), `FAIL [lane] id: [check] message`,
/// after a heading; empty when none failed. A quiet run prints it in place of libtest's lines.
pub(crate) fn failure_lines(records: &[Record]) -> String {
    let failed: Vec<&Record> = records
        .iter()
        .filter(|r| matches!(r.verdict, TrialVerdict::Fail | TrialVerdict::Stale))
        .collect();
    if failed.is_empty() {
        return String::new();
    }
    let mut out = format!("\nfailed ({}):\n", failed.len());
    for r in failed {
        let first = headline(r).map_or(String::new(), |f| {
            format!(": [{}] {}", f.check.as_str(), f.message)
        });
        out.push_str(&format!(
            "    {} [{}] {}{first}\n",
            r.verdict.as_str().to_uppercase(),
            kind_of(r),
            r.id
        ));
    }
    out
}

/// The end of a run, for a person: counts by verdict, the failed trials by case family and by
/// check (the denied tool run, messages forwarded, targets left dead, leaks), and, when
/// `rerun` gives the command line that ran (without libtest arguments), the command that
/// reruns exactly the failed trials (`rerun` may end with `--` and libtest options that are
/// not filters). Empty when nothing failed or warned.
pub(crate) fn run_summary(records: &[Record], rerun: Option<&[String]>) -> String {
    use std::collections::BTreeMap;
    let count = |v: TrialVerdict| records.iter().filter(|r| r.verdict == v).count();
    let failed: Vec<&Record> = records
        .iter()
        .filter(|r| matches!(r.verdict, TrialVerdict::Fail | TrialVerdict::Stale))
        .collect();
    if failed.is_empty() && count(TrialVerdict::Warn) == 0 {
        return String::new();
    }
    let mut out = format!("\n{}\n", count_line(records));
    let mut families: BTreeMap<&str, [usize; 2]> = BTreeMap::new();
    for r in records {
        let family = r.id.split('/').next().unwrap_or(&r.id);
        match r.verdict {
            TrialVerdict::Fail | TrialVerdict::Stale => families.entry(family).or_default()[0] += 1,
            TrialVerdict::Warn => families.entry(family).or_default()[1] += 1,
            _ => {}
        }
    }
    let checks = failed_checks(records.iter());
    let shown: Vec<String> = families
        .iter()
        .map(|(f, [fail, warn])| match (fail, warn) {
            (0, w) => format!("{f} {w} warned"),
            (n, 0) => format!("{f} {n} failed"),
            (n, w) => format!("{f} {n} failed, {w} warned"),
        })
        .collect();
    out.push_str(&format!("  by family: {}\n", shown.join("; ")));
    if !checks.is_empty() {
        let what = |c: &str| match c {
            "canary" => " (the denied tool ran)",
            "forwarded" => " (wrong or forbidden messages reached the downstream)",
            "alive" => " (the target was left dead or deaf)",
            "leak" => " (internal detail in an answer)",
            _ => "",
        };
        let shown: Vec<String> = checks
            .iter()
            .map(|(c, n)| format!("{c} {n}{}", what(c)))
            .collect();
        out.push_str(&format!("  failed checks: {}\n", shown.join("; ")));
    }
    if let (Some(base), false) = (rerun, failed.is_empty()) {
        out.push_str(&format!(
            "  rerun the failed trials: {}\n",
            rerun_line(base, &failed)
        ));
    }
    out
}

/// The oracles whose failure shows a target did what an advisory describes: it served what it
/// had to refuse, ran the denied tool, forwarded what it had to hold, spent unbounded memory
/// (on one input, or kept over a series), CPU or other clients' time, or served a request
/// smuggled behind another. A refusal with the wrong status, error code, id or
/// shape is a finding of its own, not the advisory's bug. An answer that reached another client
/// (or none) is the bug of CVE-2026-25536.
const OPENING_CHECKS: &[&str] = &[
    "outcome",
    "canary",
    "forwarded",
    "resources",
    "framing",
    "crossed",
    "memory",
    "cpu",
    "latency",
];

/// Whether a trial shows the target open to the advisories its case cites: a failure (known to
/// the baseline or not), or a warning on a `should` case (the rule the advisory broke is a
/// SHOULD of the protocol), with a finding of an [`OPENING_CHECKS`] oracle among what did not
/// pass (`checks`).
pub fn reproduces<'a>(
    verdict: TrialVerdict,
    level: Level,
    mut checks: impl Iterator<Item = &'a str>,
) -> bool {
    let counted = match verdict {
        TrialVerdict::Fail | TrialVerdict::Known => true,
        TrialVerdict::Warn => level == Level::Should,
        TrialVerdict::Pass | TrialVerdict::Skip | TrialVerdict::Stale => false,
    };
    counted && checks.any(|c| OPENING_CHECKS.contains(&c))
}

/// The oracles of a record's findings that did not pass.
fn unpassed(r: &Record) -> impl Iterator<Item = &'static str> + '_ {
    r.findings
        .iter()
        .filter(|f| f.status != Status::Pass)
        .map(|f| f.check.as_str())
}

/// Whether a trial's case went out at all: one whose handshake failed tested nothing.
fn was_sent(r: &Record) -> bool {
    !r.findings
        .iter()
        .any(|f| f.check == crate::verdict::Check::Setup)
}

/// The end of a run's list of advisories: which ones the target reproduced (with the case and
/// the lanes and versions where it did), which its trials tested without reproducing, and which
/// none of its trials could test. Empty when no trial's case cites an advisory.
/// What a run's trials showed of one advisory.
#[derive(Default)]
struct AdvisorySeen {
    /// Case id -> the lanes where it reproduced the advisory.
    by: std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
    tested: bool,
    /// A case citing it failed on other oracles only (a refusal's status or shape).
    otherwise: bool,
}

/// Each advisory the records' cases cite, by its catalogue id, with what the trials showed.
fn advisories_seen(records: &[Record]) -> std::collections::BTreeMap<&'static str, AdvisorySeen> {
    let mut seen: std::collections::BTreeMap<&'static str, AdvisorySeen> = Default::default();
    for r in records {
        for cited in &r.advisories {
            let Some(a) = crate::advisory::find(cited) else {
                continue;
            };
            let entry = seen.entry(a.id.as_str()).or_default();
            let sent = was_sent(r);
            entry.tested |= r.verdict != TrialVerdict::Skip && sent;
            entry.otherwise |=
                sent && matches!(r.verdict, TrialVerdict::Fail | TrialVerdict::Known);
            if reproduces(r.verdict, r.level, unpassed(r)) {
                // The lane with its version, even when the run had one version only.
                let lane = match (&r.lane_version, r.version.is_empty()) {
                    (None, false) => format!("{} {}", kind_of(r), r.version),
                    _ => kind_of(r),
                };
                entry.by.entry(r.id.clone()).or_default().insert(lane);
            }
        }
    }
    seen
}

pub(crate) fn advisory_summary(records: &[Record]) -> String {
    let seen = advisories_seen(records);
    if seen.is_empty() {
        return String::new();
    }
    let reproduced = seen.values().filter(|s| !s.by.is_empty()).count();
    let untested: Vec<&str> = seen
        .iter()
        .filter(|(_, s)| !s.tested)
        .map(|(id, _)| *id)
        .collect();
    let clean: Vec<&str> = seen
        .iter()
        .filter(|(_, s)| s.tested && s.by.is_empty())
        .map(|(id, _)| *id)
        .collect();
    let mut out = format!(
        "\nadvisories: {reproduced} reproduced, {} tested and not reproduced, {} not tested on this target\n",
        clean.len(),
        untested.len()
    );
    for (id, s) in seen.iter().filter(|(_, s)| !s.by.is_empty()) {
        let Some(a) = crate::advisory::find(id) else {
            continue;
        };
        out.push_str(&format!(
            "  REPRODUCED {}: {}\n    affects {}\n",
            a.ids(),
            a.summary,
            a.affects()
        ));
        for (case, lanes) in &s.by {
            let lanes: Vec<&str> = lanes.iter().map(String::as_str).collect();
            out.push_str(&format!("    by {case} [{}]\n", lanes.join(", ")));
        }
    }
    if !clean.is_empty() {
        out.push_str(&format!("  not reproduced: {}\n", clean.join(", ")));
    }
    let otherwise: Vec<&str> = seen
        .iter()
        .filter(|(_, s)| s.by.is_empty() && s.otherwise)
        .map(|(id, _)| *id)
        .collect();
    if !otherwise.is_empty() {
        out.push_str(&format!(
            "    (cases citing {} failed, but on how they refused, not on what they served: see their findings)\n",
            otherwise.join(", ")
        ));
    }
    if !untested.is_empty() {
        out.push_str(&format!(
            "  not tested (no case citing them applies here, or none could be sent): {}\n",
            untested.join(", ")
        ));
    }
    out
}

/// Every advisory of `cases/advisories.json` with what it is and the cases of `catalogue` that
/// cite it.
pub fn advisory_listing(catalogue: &crate::case::Catalogue) -> String {
    let mut out = String::new();
    for a in crate::advisory::catalogue() {
        out.push_str(&format!(
            "{}\n  {}\n  {}\n  {}\n",
            a.ids(),
            a.affects(),
            a.summary,
            a.url
        ));
        let cases: Vec<&str> = catalogue
            .cases
            .iter()
            .filter(|c| c.spec.advisories.iter().any(|id| a.is_named(id)))
            .map(|c| c.id.as_str())
            .collect();
        if cases.is_empty() {
            out.push_str("  cases: none yet\n");
        } else {
            out.push_str(&format!("  cases: {}\n", cases.join(", ")));
        }
    }
    out
}

/// `base` (a command line ending, or not, with `--` and libtest options) with every failed
/// trial's lane-qualified name as an `--exact` filter, each word shell-quoted.
fn rerun_line(base: &[String], failed: &[&Record]) -> String {
    let mut words: Vec<String> = base
        .iter()
        .map(|w| shell_words::quote(w).into_owned())
        .collect();
    if !base.iter().any(|w| w == "--") {
        words.push("--".to_string());
    }
    if !base.iter().any(|w| w == "--exact") {
        words.push("--exact".to_string());
    }
    let mut names: Vec<String> = failed
        .iter()
        .map(|r| format!("[{}] {}", kind_of(r), r.id))
        .collect();
    names.dedup();
    words.extend(names.iter().map(|n| shell_words::quote(n).into_owned()));
    words.join(" ")
}

/// `text` with every secret (a `--header` value) replaced.
pub(crate) fn redact(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        out = out.replace(s.as_str(), "[redacted]");
    }
    out
}

/// The profiles a run judged by: one, or both (the embedded default runs server and gate lanes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunProfile {
    One(Profile),
    ServerAndGate,
}

impl std::fmt::Display for RunProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunProfile::One(p) => f.write_str(p.as_str()),
            RunProfile::ServerAndGate => f.write_str("server and gate"),
        }
    }
}

/// Who a lane is: the profile it is judged by, its transport, the personality of the witness
/// behind a gate (when not strict) and the version its cases speak, part of its name when the
/// run has lanes for several. Owned by the lane; a record is made from it, and every output
/// names the lane by it (`Display`: its [`LaneName`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneId {
    pub profile: Profile,
    pub transport: TransportKind,
    pub downstream: Option<&'static str>,
    pub version: Version,
    pub version_in_name: bool,
}

impl LaneId {
    /// A lane of the strict witness (or a target of its own) at the newest legacy version,
    /// named without it.
    pub fn new(transport: TransportKind, profile: Profile) -> LaneId {
        LaneId {
            profile,
            transport,
            downstream: None,
            version: crate::versions::NEWEST_LEGACY,
            version_in_name: false,
        }
    }
}

impl std::fmt::Display for LaneId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let version = self.version.to_string();
        LaneName {
            profile: self.profile,
            transport: self.transport,
            downstream: self.downstream,
            version: self.version_in_name.then_some(version.as_str()),
        }
        .fmt(f)
    }
}

/// A lane's name, as libtest, JUnit, the matrix and stderr show it: `http`, `gate/stdio`,
/// `gate/http@first-wins`, `http 2025-06-18` (in a run over several versions)…
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LaneName<'a> {
    pub profile: Profile,
    pub transport: TransportKind,
    /// The personality of the witness behind a gate, when not strict.
    pub downstream: Option<&'a str>,
    /// The version, when the run has lanes for several.
    pub version: Option<&'a str>,
}

impl std::fmt::Display for LaneName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.profile == Profile::Gate {
            f.write_str("gate/")?;
        }
        f.write_str(self.transport.as_str())?;
        if let Some(d) = self.downstream {
            write!(f, "@{d}")?;
        }
        if let Some(v) = self.version {
            write!(f, " {v}")?;
        }
        Ok(())
    }
}

fn kind_of(r: &Record) -> String {
    r.lane_name().to_string()
}

/// A report read back for the matrix.
#[derive(Debug, Clone, Deserialize)]
pub struct ReportFile {
    pub format: String,
    pub target: String,
    /// How the run spoke to the target (absent for a plain server).
    #[serde(default)]
    pub spelling: Option<String>,
    pub results: Vec<Record>,
}

fn must() -> Level {
    Level::Must
}

/// One cell of the matrix: what a target did with a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cell {
    Pass,
    Fail,
    Warn,
    Known,
    Skip,
    /// The target's report has no such row (the case does not apply to it).
    Absent,
}

impl Cell {
    fn from_verdict(v: TrialVerdict) -> Cell {
        match v {
            TrialVerdict::Pass => Cell::Pass,
            TrialVerdict::Fail | TrialVerdict::Stale => Cell::Fail,
            TrialVerdict::Warn => Cell::Warn,
            TrialVerdict::Known => Cell::Known,
            TrialVerdict::Skip => Cell::Skip,
        }
    }
    fn markdown(self) -> &'static str {
        match self {
            Cell::Pass => "pass",
            Cell::Fail => "**FAIL**",
            Cell::Warn => "warn",
            Cell::Known => "known",
            Cell::Skip => "-",
            Cell::Absent => "",
        }
    }
    fn word(self) -> &'static str {
        match self {
            Cell::Pass => "pass",
            Cell::Fail => "FAIL",
            Cell::Warn => "warn",
            Cell::Known => "known",
            Cell::Skip => "-",
            Cell::Absent => "",
        }
    }
}

/// Why a report could not be read back for the matrix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportReadError {
    #[error("cannot read {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a report")]
    NotAReport {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}: unknown report format {format}")]
    Format { path: String, format: String },
}

impl ReportFile {
    /// The reports `args` name (`PATH`, or `NAME=PATH` to head its column NAME instead of the
    /// report's target), each with its column's name.
    pub fn read_all(args: &[String]) -> Result<Vec<(String, ReportFile)>, ReportReadError> {
        let mut loaded = Vec::new();
        for arg in args {
            let (name, path) = match arg.split_once('=') {
                Some((n, p)) => (Some(n.to_string()), p),
                None => (None, arg.as_str()),
            };
            let text = std::fs::read_to_string(path).map_err(|source| ReportReadError::Read {
                path: path.to_string(),
                source,
            })?;
            let r: ReportFile =
                serde_json::from_str(&text).map_err(|source| ReportReadError::NotAReport {
                    path: path.to_string(),
                    source,
                })?;
            if r.format != REPORT_FORMAT {
                return Err(ReportReadError::Format {
                    path: path.to_string(),
                    format: r.format,
                });
            }
            loaded.push((name.unwrap_or_else(|| r.target.clone()), r));
        }
        Ok(loaded)
    }
}

/// Cases by target: one row per (lane, case), one column per report.
#[derive(Debug, Clone)]
pub struct Matrix {
    pub columns: Vec<String>,
    /// Per column: pass, fail (with stale), warn, known.
    pub summary: Vec<[usize; 4]>,
    pub rows: Vec<MatrixRow>,
    /// Per column that was spoken to its own way: the column and how.
    pub spellings: Vec<(String, String)>,
    /// Per advisory the rows cite: per column, whether the target reproduced it (`None`: no
    /// trial of that column tested it).
    pub advisories: Vec<(&'static crate::advisory::Advisory, Vec<Option<bool>>)>,
}

#[derive(Debug, Clone)]
pub struct MatrixRow {
    /// `http`, `stdio`, `gate/http` or `gate/stdio` (`@personality` for a non-strict downstream).
    pub lane: String,
    pub id: String,
    pub requirements: Vec<String>,
    pub advisories: Vec<String>,
    pub cells: Vec<Cell>,
}

impl MatrixRow {
    /// The requirements column: the cited requirements, then the advisories.
    fn cites(&self) -> String {
        let reqs = self.requirements.join(", ");
        if self.advisories.is_empty() {
            reqs
        } else {
            format!("{reqs}; advisories: {}", self.advisories.join(", "))
        }
    }
}

/// Per advisory the reports' rows cite: per report, reproduced, tested only, or not tested.
fn advisory_columns(
    reports: &[(String, ReportFile)],
) -> Vec<(&'static crate::advisory::Advisory, Vec<Option<bool>>)> {
    let mut out: std::collections::BTreeMap<
        &'static str,
        (&'static crate::advisory::Advisory, Vec<Option<bool>>),
    > = Default::default();
    for (col, (_, r)) in reports.iter().enumerate() {
        for row in &r.results {
            for cited in &row.advisories {
                let Some(a) = crate::advisory::find(cited) else {
                    continue;
                };
                let cells = &mut out
                    .entry(a.id.as_str())
                    .or_insert_with(|| (a, vec![None; reports.len()]))
                    .1;
                if row.verdict != TrialVerdict::Skip {
                    let was = cells[col].unwrap_or(false);
                    cells[col] = Some(was || reproduces(row.verdict, row.level, unpassed(row)));
                }
            }
        }
    }
    out.into_values().collect()
}

/// A row's lane; with `versioned`, named with the row's version even when its own run had only
/// one (so a report at one version lines up with others over several).
fn lane_of(row: &Record, versioned: bool) -> String {
    let version = match (&row.lane_version, versioned && !row.version.is_empty()) {
        (Some(v), _) => Some(v.as_str()),
        (None, true) => Some(row.version.as_str()),
        (None, false) => None,
    };
    LaneName {
        profile: row.profile,
        transport: row.transport,
        downstream: row.downstream.as_deref(),
        version,
    }
    .to_string()
}

impl Matrix {
    pub fn build(reports: &[(String, ReportFile)]) -> Matrix {
        let mut index: std::collections::BTreeMap<(String, String), MatrixRow> = Default::default();
        // When any report ran several versions, every lane is named with its version.
        let versioned = reports
            .iter()
            .any(|(_, r)| r.results.iter().any(|row| row.lane_version.is_some()));
        for (col, (_, r)) in reports.iter().enumerate() {
            for row in &r.results {
                let lane = lane_of(row, versioned);
                let entry = index
                    .entry((lane.clone(), row.id.clone()))
                    .or_insert_with(|| MatrixRow {
                        lane,
                        id: row.id.clone(),
                        requirements: row.requirements.clone(),
                        advisories: row.advisories.clone(),
                        cells: vec![Cell::Absent; reports.len()],
                    });
                entry.cells[col] = Cell::from_verdict(row.verdict);
            }
        }
        let summary = reports
            .iter()
            .map(|(_, r)| {
                let n = |v: TrialVerdict| r.results.iter().filter(|x| x.verdict == v).count();
                [
                    n(TrialVerdict::Pass),
                    n(TrialVerdict::Fail) + n(TrialVerdict::Stale),
                    n(TrialVerdict::Warn),
                    n(TrialVerdict::Known),
                ]
            })
            .collect();
        Matrix {
            columns: reports.iter().map(|(n, _)| n.clone()).collect(),
            summary,
            rows: index.into_values().collect(),
            spellings: reports
                .iter()
                .filter_map(|(n, r)| Some((n.clone(), r.spelling.clone()?)))
                .collect(),
            advisories: advisory_columns(reports),
        }
    }

    /// A markdown table with a summary row first.
    pub fn markdown(&self) -> String {
        let mut out = String::from("| case | requirements |");
        for name in &self.columns {
            out.push_str(&format!(" {} |", name.replace('|', "/")));
        }
        out.push_str("\n|---|---|");
        for _ in &self.columns {
            out.push_str("---|");
        }
        out.push_str("\n| **summary** (pass / fail / warn / known) | |");
        for [p, f, w, k] in &self.summary {
            out.push_str(&format!(" {p} / {f} / {w} / {k} |"));
        }
        out.push('\n');
        for row in &self.rows {
            out.push_str(&format!("| [{}] {} | {} |", row.lane, row.id, row.cites()));
            for c in &row.cells {
                out.push_str(&format!(" {} |", c.markdown()));
            }
            out.push('\n');
        }
        if !self.advisories.is_empty() {
            out.push_str("\nAdvisories (reproduced: a row citing it failed there):\n\n| advisory | affects |");
            for name in &self.columns {
                out.push_str(&format!(" {} |", name.replace('|', "/")));
            }
            out.push_str("\n|---|---|");
            for _ in &self.columns {
                out.push_str("---|");
            }
            out.push('\n');
            for (a, cells) in &self.advisories {
                out.push_str(&format!("| {} | {} |", a.ids(), a.affects()));
                for c in cells {
                    let w = advisory_word(*c);
                    if *c == Some(true) {
                        out.push_str(&format!(" **{w}** |"));
                    } else {
                        out.push_str(&format!(" {w} |"));
                    }
                }
                out.push('\n');
            }
        }
        if !self.spellings.is_empty() {
            out.push_str("\nSpoken to in their own way:\n\n");
            for (column, how) in &self.spellings {
                out.push_str(&format!("- {column}: {how}\n"));
            }
        }
        out
    }

    /// A self-contained HTML page: the same table, coloured, with a sticky header.
    pub fn html(&self) -> String {
        let mut out = String::from(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>mcp-gauntlet matrix</title>\n<style>\n\
             body{font:13px system-ui,sans-serif;margin:1em}table{border-collapse:collapse}\n\
             th,td{border:1px solid #ccc;padding:2px 6px;text-align:left}thead th{position:sticky;top:0;background:#f4f4f4}\n\
             td.pass{background:#dff0d8}td.FAIL{background:#f2a0a0;font-weight:bold}td.warn{background:#fcf3c8}\n\
             td.known{background:#f6d5b0}td.req{color:#555;font-size:11px}\n</style></head><body>\n\
             <table>\n<thead><tr><th>case</th><th>requirements</th>",
        );
        for name in &self.columns {
            out.push_str(&format!("<th>{}</th>", html_escape(name)));
        }
        out.push_str("</tr>\n<tr><th>summary</th><th>pass / fail / warn / known</th>");
        for [p, f, w, k] in &self.summary {
            out.push_str(&format!("<th>{p} / {f} / {w} / {k}</th>"));
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for row in &self.rows {
            out.push_str(&format!(
                "<tr><td>[{}] {}</td><td class=\"req\">{}</td>",
                html_escape(&row.lane),
                html_escape(&row.id),
                html_escape(&row.cites())
            ));
            for c in &row.cells {
                let w = c.word();
                out.push_str(&format!("<td class=\"{w}\">{w}</td>"));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody></table>\n");
        if !self.advisories.is_empty() {
            out.push_str("<p>Advisories (reproduced: a row citing it failed there):</p>\n<table>\n<thead><tr><th>advisory</th><th>affects</th>");
            for name in &self.columns {
                out.push_str(&format!("<th>{}</th>", html_escape(name)));
            }
            out.push_str("</tr></thead>\n<tbody>\n");
            for (a, cells) in &self.advisories {
                out.push_str(&format!(
                    "<tr><td>{}</td><td class=\"req\">{}</td>",
                    html_escape(&a.ids()),
                    html_escape(&a.affects())
                ));
                for c in cells {
                    let class = match c {
                        Some(true) => "FAIL",
                        Some(false) => "pass",
                        None => "",
                    };
                    out.push_str(&format!("<td class=\"{class}\">{}</td>", advisory_word(*c)));
                }
                out.push_str("</tr>\n");
            }
            out.push_str("</tbody></table>\n");
        }
        if !self.spellings.is_empty() {
            out.push_str("<p>Spoken to in their own way:</p>\n<ul>\n");
            for (column, how) in &self.spellings {
                out.push_str(&format!(
                    "<li>{}: {}</li>\n",
                    html_escape(column),
                    html_escape(how)
                ));
            }
            out.push_str("</ul>\n");
        }
        out.push_str("</body></html>\n");
        out
    }
}

/// A matrix cell of the advisories table.
fn advisory_word(c: Option<bool>) -> &'static str {
    match c {
        Some(true) => "REPRODUCED",
        Some(false) => "not reproduced",
        None => "",
    }
}

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The matrix as a markdown table (see [`Matrix`]).
pub fn matrix(reports: &[(String, ReportFile)]) -> String {
    Matrix::build(reports).markdown()
}
