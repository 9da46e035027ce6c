//! Reports: the per-trial record the runner keeps, the JSON report (`--report`), JUnit XML
//! (`--junit`), the cross-target matrix (`mcp-gauntlet matrix`), baselines (`baseline.rs`), and
//! the warning summary printed after libtest's own output. Nothing here knows about transports.

pub mod baseline;
mod junit;
mod markdown;
mod matrix;
mod sarif;

/// A record's findings and what was observed: part of the report format.
pub use crate::lane_id::LaneId;
pub(crate) use crate::lane_id::LaneName;
pub use crate::verdict::{Check, Finding, Observed, Status};
pub use junit::junit;
pub(crate) use markdown::step_summary;
pub use matrix::{matrix, Cell, Matrix, MatrixRow, MATRIX_FORMAT};
pub use sarif::sarif;

use crate::case::{Case, Level, Profile, TransportKind};
use crate::verdict::Verdict;
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

    /// Whether the trial failed only because its case could not be sent (the handshake before
    /// it was not answered, the target did not start): the harness could not test it, which
    /// says nothing of how the target treats the case.
    pub fn not_sent(&self) -> bool {
        self.verdict == TrialVerdict::Fail
            && !self.findings.is_empty()
            && self
                .findings
                .iter()
                .filter(|f| f.status != Status::Pass)
                .all(|f| f.check == Check::Setup)
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
    /// The package the target is (`npm @modelcontextprotocol/sdk`), when its target file or
    /// `--package` said: advisories of that package are REPRODUCED, others "as in".
    #[serde(skip_serializing_if = "Option::is_none")]
    package: Option<String>,
    /// The `serverInfo` names the target answered the version probe with.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    server_names: &'a [String],
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
    /// Who the target is, for its advisories.
    pub subject: crate::advisory::Subject,
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
        package: info.subject.package_line(),
        server_names: &info.subject.servers,
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

/// What makes a failure the same failure: its severity, the rule and the check that failed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cause {
    /// Ordered so the worst sorts first: the denied tool ran, then must, should and info.
    pub rank: u8,
    pub requirement: String,
    pub check: Check,
}

impl Cause {
    pub fn of(r: &Record) -> Option<Cause> {
        if r.not_sent() {
            return None;
        }
        let status = match r.verdict {
            TrialVerdict::Fail | TrialVerdict::Stale | TrialVerdict::Known => Status::Fail,
            TrialVerdict::Warn => Status::Warn,
            TrialVerdict::Pass | TrialVerdict::Skip => return None,
        };
        let finding = r.findings.iter().find(|f| f.status == status);
        let check = finding.map_or(Check::Outcome, |f| f.check);
        let ran = r
            .findings
            .iter()
            .any(|f| f.status == Status::Fail && f.check == crate::verdict::Check::Canary);
        let rank = match (ran, status, r.level) {
            (true, _, _) => 0,
            (false, Status::Fail, Level::Must) => 1,
            (false, Status::Fail, _) => 2,
            _ => 3,
        };
        // The oracles every case carries are their own rule, whatever the case is about: a
        // banner on stdout or a stack trace fails every case it shows in, and is one cause.
        let requirement = match check.as_str() {
            "output" if r.transport == TransportKind::Stdio => "MCP-STDIO-05".to_string(),
            "output" => "FC-STRICT-JSON".to_string(),
            "leak" => "FC-NOLEAK".to_string(),
            "alive" => "FC-ALIVE".to_string(),
            _ => r.requirements.first().cloned().unwrap_or_default(),
        };
        Some(Cause {
            rank,
            requirement,
            check,
        })
    }

    pub fn severity(&self) -> &'static str {
        match self.rank {
            0 => "the denied tool ran",
            1 => "must",
            2 => "fail",
            _ => "warn",
        }
    }

    /// The rule, in the catalogue's words.
    pub fn rule(&self) -> String {
        let oracle = match self.requirement.as_str() {
            "FC-NOLEAK" => Some("an error carries no stack trace, file path, parser offset or other internal detail"),
            "FC-ALIVE" => Some("after a hostile input the target still answers a ping (or, on stdio, has ended as the case allows)"),
            "FC-STRICT-JSON" => Some("what an HTTP answer carries is strict JSON: UTF-8, no lone surrogates"),
            _ => None,
        };
        if let Some(text) = oracle {
            return format!("{} (fail-closed oracle): {text}", self.requirement);
        }
        match crate::case::requirements().get(&self.requirement) {
            Some(r) => format!("{} ({}): {}", r.id, r.level, r.summary),
            None if self.requirement.is_empty() => "(no requirement cited)".into(),
            None => self.requirement.clone(),
        }
    }
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
    out.push_str(&by_cause(records));
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

/// The line of the findings by cause (the rule a case cites first and the check that failed),
/// worst first: the denied tool ran, must-level failures, other failures, warnings; each with
/// its trials, the most shown first within a severity.
fn by_cause(records: &[Record]) -> String {
    let mut causes: std::collections::BTreeMap<Cause, usize> = Default::default();
    for r in records.iter().filter(|r| r.verdict != TrialVerdict::Known) {
        if let Some(c) = Cause::of(r) {
            *causes.entry(c).or_default() += 1;
        }
    }
    let mut rows: Vec<(Cause, usize)> = causes.into_iter().collect();
    rows.sort_by(|a, b| (a.0.rank, b.1, &a.0).cmp(&(b.0.rank, a.1, &b.0)));
    const SHOWN: usize = 8;
    let mut parts: Vec<String> = Vec::new();
    let mut severity = "";
    for (c, n) in rows.iter().take(SHOWN) {
        let head = if c.severity() == severity {
            String::new()
        } else {
            severity = c.severity();
            format!("{severity}: ")
        };
        let rule = if c.requirement.is_empty() {
            "-"
        } else {
            &c.requirement
        };
        parts.push(format!("{head}{rule} {} {n}", c.check));
    }
    if rows.len() > SHOWN {
        parts.push(format!("and {} more", rows.len() - SHOWN));
    }
    if parts.is_empty() {
        return String::new();
    }
    format!("  by cause, worst first: {}\n", parts.join("; "))
}

/// Whether a trial of a case citing advisory `a` shows its weakness: a failure (known to the
/// baseline or not), or a warning on a `should` case (the rule it broke is a SHOULD), with one
/// of the advisory's own checks among the oracles that did not pass (`unpassed`).
pub fn shows(
    a: &crate::advisory::Advisory,
    verdict: TrialVerdict,
    level: Level,
    mut unpassed: impl Iterator<Item = Check>,
) -> bool {
    let counted = match verdict {
        TrialVerdict::Fail | TrialVerdict::Known => true,
        TrialVerdict::Warn => level == Level::Should,
        TrialVerdict::Pass | TrialVerdict::Skip | TrialVerdict::Stale => false,
    };
    counted && unpassed.any(|c| a.checks.iter().any(|name| name == c.as_str()))
}

/// The oracles of a record's findings that did not pass.
pub(crate) fn unpassed(r: &Record) -> impl Iterator<Item = Check> + '_ {
    r.findings
        .iter()
        .filter(|f| f.status != Status::Pass)
        .map(|f| f.check)
}

/// Whether a trial's case went out at all: one whose handshake failed tested nothing.
fn was_sent(r: &Record) -> bool {
    !r.findings
        .iter()
        .any(|f| f.check == crate::verdict::Check::Setup)
}

/// Case id -> the lanes where it showed an advisory's weakness.
type Shown = std::collections::BTreeMap<String, std::collections::BTreeSet<String>>;

/// What a run's trials showed of one advisory.
#[derive(Default)]
struct AdvisorySeen {
    by: Shown,
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
            if shows(a, r.verdict, r.level, unpassed(r)) {
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

/// What a run's records show of one advisory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdvisoryShown {
    /// A case citing it failed on one of the advisory's own checks: the weakness is there.
    Reproduced,
    /// A case citing it was sent, and none showed the weakness.
    Clean,
    /// No case citing it was sent.
    NotTested,
}

/// What `records` show of the advisory `id` (its id or an alias): whether its weakness is
/// there, whoever the target is (an advisory row's target is the advisory's package).
pub fn advisory_shown(records: &[Record], id: &str) -> AdvisoryShown {
    let seen = advisories_seen(records);
    let entry = crate::advisory::find(id).and_then(|a| seen.get(a.id.as_str()));
    match entry {
        Some(s) if !s.by.is_empty() => AdvisoryShown::Reproduced,
        Some(s) if s.tested => AdvisoryShown::Clean,
        _ => AdvisoryShown::NotTested,
    }
}

/// The end of a run's list of advisories: the ones the target reproduced (it is the advisory's
/// package, and a case failed on the advisory's own check), the weaknesses it shares with an
/// advisory of another package ("as in"), the ones its trials tested without showing, and the
/// ones none could test; each shown one with its cases and the lanes and versions where it
/// showed. Empty when no trial's case cites an advisory.
pub(crate) fn advisory_summary(records: &[Record], subject: &crate::advisory::Subject) -> String {
    let seen = advisories_seen(records);
    if seen.is_empty() {
        return String::new();
    }
    let shown: Vec<(&crate::advisory::Advisory, &AdvisorySeen)> = seen
        .iter()
        .filter(|(_, s)| !s.by.is_empty())
        .filter_map(|(id, s)| Some((crate::advisory::find(id)?, s)))
        .collect();
    let reproduced = shown.iter().filter(|(a, _)| subject.is(a)).count();
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
        "\nadvisories: {reproduced} reproduced, {} weaknesses as in another package's advisory{}, {} tested and not reproduced, {} not tested on this target\n",
        shown.len() - reproduced,
        subject
            .package_line()
            .map_or(String::new(), |p| format!(" (this target is {p})")),
        clean.len(),
        untested.len()
    );
    let by_lines = |out: &mut String, by: &Shown| {
        for (case, lanes) in by {
            let lanes: Vec<&str> = lanes.iter().map(String::as_str).collect();
            out.push_str(&format!("    by {case} [{}]\n", lanes.join(", ")));
        }
    };
    for (a, s) in shown.iter().filter(|(a, _)| subject.is(a)) {
        out.push_str(&format!(
            "  REPRODUCED {}: {}\n    affects {}\n",
            a.ids(),
            a.summary,
            a.affects()
        ));
        by_lines(&mut out, &s.by);
    }
    // Another package's advisories, grouped by the cases that showed them: one weakness of
    // this target is often the one several SDKs' advisories name.
    let mut as_in: std::collections::BTreeMap<&Shown, Vec<&crate::advisory::Advisory>> =
        Default::default();
    for (a, s) in shown.iter().filter(|(a, _)| !subject.is(a)) {
        as_in.entry(&s.by).or_default().push(a);
    }
    for (by, advisories) in as_in {
        for a in advisories {
            out.push_str(&format!("  WEAKNESS as in {}: {}\n", a.whose(), a.summary));
        }
        by_lines(&mut out, by);
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
            "    (cases citing {} failed, but not on what the advisory is about: see their findings)\n",
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
    /// The package the target is (`npm @modelcontextprotocol/sdk`), when known.
    #[serde(default)]
    pub package: Option<String>,
    /// The `serverInfo` names the target answered with.
    #[serde(default)]
    pub server_names: Vec<String>,
    /// The versions the run spoke, comma-separated.
    #[serde(default)]
    pub spec: String,
    pub results: Vec<Record>,
}

fn must() -> Level {
    Level::Must
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
    /// Who the report's target is, for its advisories.
    pub fn subject(&self) -> crate::advisory::Subject {
        crate::advisory::Subject {
            package: self.package.as_deref().and_then(|p| {
                let (eco, name) = p.split_once(' ')?;
                Some((eco.to_string(), name.to_string()))
            }),
            servers: self.server_names.clone(),
        }
    }

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
