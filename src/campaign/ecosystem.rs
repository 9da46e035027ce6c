//! The ecosystem pages (`campaign --ecosystem DIR`, `campaign merge --ecosystem DIR`): what a
//! campaign over packages found, written for their maintainers and users.
//!
//! - `DIR/README.md`: when and with which suite commit, how to run it again, the matrix (each
//!   lane at each version it spoke by case family, each cell linking to its evidence), the most
//!   common defects (each counted once per package and cause), what could not be tested and
//!   why, and the packages left out (`left-out.md` beside the target files).
//! - `DIR/packages/NAME.md`: one page per package: its pin, how each lane started it, what
//!   could and could not be checked, and each cause of failure with every trial it failed and,
//!   for each unlisted failure, what was sent, what came back and the rule it breaks.
//!
//! A lane that did not start, was not installed or did not finish is "could not test", never a
//! red cell: the matrix shows only lanes whose run completed.

use super::file::{LaneSpec, TargetFile};
use super::lane::{LaneOutcome, LaneRecord};
use super::CampaignError;
use crate::case::Level;
use crate::report::{Cause, Record, ReportFile, TrialVerdict};
use crate::verdict::Status;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The hand-written list of packages left out, beside the target files.
pub const LEFT_OUT_FILE: &str = "left-out.md";

/// When and from what the pages were made.
#[derive(Debug, Clone)]
pub struct Provenance {
    /// The day, `YYYY-MM-DD` (UTC).
    pub date: String,
    /// The suite's commit (and whether its checkout had changes).
    pub commit: String,
    /// The command that makes them again.
    pub command: String,
}

impl Provenance {
    /// Today, and the commit of the checkout in the working directory (with `+changes` when
    /// its tracked files differ from it; `unknown` outside a checkout).
    pub fn here(command: String) -> Provenance {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .args(args)
                .stderr(std::process::Stdio::null())
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        };
        let commit = match git(&["rev-parse", "--short=12", "HEAD"]) {
            Some(c) => match git(&["status", "--porcelain", "--untracked-files=no"]) {
                Some(s) if !s.is_empty() => format!("{c}+changes"),
                _ => c,
            },
            None => "unknown".to_string(),
        };
        Provenance {
            date: utc_date(secs),
            commit,
            command,
        }
    }
}

/// What was written.
#[derive(Debug, Clone)]
pub struct EcosystemFiles {
    pub index: PathBuf,
    pub packages: usize,
    /// Lanes with a completed run, and lanes that could not be tested.
    pub tested: usize,
    pub untested: usize,
}

/// One lane of one package, as the campaign's folders hold it.
struct Seen<'a> {
    target: &'a TargetFile,
    lane: &'a LaneSpec,
    column: String,
    /// Its record (absent: never run here, or its install was skipped).
    record: Option<LaneRecord>,
    /// Its report, when its run completed.
    report: Option<ReportFile>,
    /// A gateway's load beside the reference gate's, when its target fronts the witness.
    side: Option<super::side_by_side::SideBySide>,
}

impl Seen<'_> {
    /// Why it could not be tested, when it could not.
    fn untested(&self) -> Option<String> {
        if self.report.is_some() {
            return None;
        }
        Some(match &self.record {
            None => "no record of a run: not installed or not run (see the campaign's log)".into(),
            Some(r) => match &r.detail {
                Some(d) => format!("{}: {}", r.outcome.describe(), one_line(d, 300)),
                None => r.outcome.describe().to_string(),
            },
        })
    }
}

impl Seen<'_> {
    /// Why part of it was not tested: its run ended early (the target died, was not brought
    /// back, and its later trials were not run).
    fn partial(&self) -> Option<String> {
        let r = self.record.as_ref()?;
        (self.report.is_some() && r.outcome == LaneOutcome::Incomplete).then(|| {
            let detail = r.detail.as_deref().map(|d| format!(": {}", one_line(d, 300)));
            format!(
                "partly tested: the target stopped answering and was not brought back; the trials after that were not run{}",
                detail.unwrap_or_default()
            )
        })
    }
}

/// Write the pages for every lane of `targets` found in `dirs` (the first folder with a record
/// of it) into `out`.
pub fn write_ecosystem(
    targets: &[TargetFile],
    dirs: &[PathBuf],
    left_out: Option<&Path>,
    out: &Path,
    made: &Provenance,
) -> Result<EcosystemFiles, CampaignError> {
    let seen = gather(targets, dirs)?;
    let pages = out.join("packages");
    std::fs::create_dir_all(&pages).map_err(write_error(&pages))?;
    let mut by_target: BTreeMap<&str, Vec<&Seen>> = BTreeMap::new();
    for s in &seen {
        by_target.entry(&s.target.name).or_default().push(s);
    }
    for (name, lanes) in &by_target {
        let path = pages.join(format!("{name}.md"));
        std::fs::write(&path, package_page(lanes, made)).map_err(write_error(&path))?;
    }
    let left = left_out
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    let index = out.join("README.md");
    std::fs::write(&index, index_page(&seen, &left, made)).map_err(write_error(&index))?;
    let tested = seen.iter().filter(|s| s.report.is_some()).count();
    Ok(EcosystemFiles {
        index,
        packages: by_target.len(),
        tested,
        untested: seen.len() - tested,
    })
}

fn write_error(path: &Path) -> impl FnOnce(std::io::Error) -> CampaignError {
    let path = path.display().to_string();
    move |source| CampaignError::Write { path, source }
}

/// Every lane of the targets (not advisory rows), with its record and report where found.
fn gather<'a>(targets: &'a [TargetFile], dirs: &[PathBuf]) -> Result<Vec<Seen<'a>>, CampaignError> {
    let mut out = Vec::new();
    for t in targets.iter().filter(|t| !t.proves_advisories()) {
        for lane in &t.spec.lanes {
            let column = t.column(lane);
            // The first folder with a run of it that came to an end (an incomplete run's
            // report holds the trials it did run), else the first with any record of it.
            let ended = dirs.iter().find_map(|d| {
                let r = super::lane::any_record(d, &column)?;
                let path = d.join(format!("{column}.json"));
                let whole = matches!(
                    r.outcome,
                    LaneOutcome::Matched | LaneOutcome::Differs | LaneOutcome::Incomplete
                );
                (whole && path.is_file()).then_some((path, r))
            });
            let (record, report) = match ended {
                Some((path, record)) => {
                    let arg = format!("{column}={}", path.display());
                    let report = ReportFile::read_all(&[arg])?.pop().map(|(_, r)| r);
                    (Some(record), report)
                }
                None => (
                    dirs.iter()
                        .find_map(|d| super::lane::any_record(d, &column)),
                    None,
                ),
            };
            let side = dirs
                .iter()
                .find_map(|d| super::side_by_side::SideBySide::read(d, &column));
            out.push(Seen {
                target: t,
                lane,
                column,
                record,
                report,
                side,
            });
        }
    }
    Ok(out)
}

/// The family of a case: the first part of its id.
fn family(id: &str) -> &str {
    id.split('/').next().unwrap_or(id)
}

/// A record's version, as its lane spoke it.
fn version_of(r: &Record) -> &str {
    r.lane_version.as_deref().unwrap_or(&r.version)
}

/// The anchor of a lane at a version on its package's page.
fn anchor(column: &str, version: &str) -> String {
    format!("{column}-{version}").to_ascii_lowercase()
}

fn one_line(text: &str, n: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}

/// A Markdown table cell: no pipes, no line breaks.
fn cell(text: &str) -> String {
    one_line(text, 400).replace('|', "\\|")
}

fn index_page(seen: &[Seen], left_out: &str, made: &Provenance) -> String {
    let packages: BTreeSet<&str> = seen.iter().map(|s| s.target.name.as_str()).collect();
    let tested = seen.iter().filter(|s| s.report.is_some()).count();
    let mut out = format!(
        "# MCP transport safety across the ecosystem\n\n\
         Made on {} by the suite at commit `{}`, from the target files under `targets/ecosystem/`:\n\
         {} packages, {} lanes (a package started one way), {tested} of them tested; the others\n\
         are listed under \"Could not test\" with why. To make these pages again:\n\n\
         ```sh\n{}\n```\n\n\
         A cell counts the trials of a case family that failed (**FAIL**, a must- or should-level\n\
         rule broken where the catalogue says it fails) or warned (`warn`: a should-level rule, or\n\
         internal detail in an answer) on that lane at that version, and links to the evidence on\n\
         the package's page: what was sent, what came back, and the rule. `pass`: every trial of\n\
         the family passed; `n/a`: none applied; empty: the family has no case for that transport.\n\
         A package without the suite's canary tools is checked on everything but what needs them;\n\
         its page says how many trials that left out and why.\n\n",
        made.date,
        made.commit,
        packages.len(),
        seen.len(),
        made.command
    );
    out.push_str(&defects(seen));
    out.push_str(&matrix(seen));
    out.push_str(&untested(seen));
    if !left_out.trim().is_empty() {
        out.push_str("## Left out\n\n");
        out.push_str(left_out.trim_start_matches(|c| c != '\n').trim());
        out.push('\n');
    }
    out
}

/// The most common defects: each cause once per package, the worst first, then by how many
/// packages have it.
fn defects(seen: &[Seen]) -> String {
    let mut causes: BTreeMap<Cause, (BTreeSet<&str>, usize, usize)> = BTreeMap::new();
    for s in seen {
        let Some(report) = &s.report else { continue };
        for r in &report.results {
            if let Some(c) = Cause::of(r) {
                let e = causes.entry(c).or_default();
                e.0.insert(&s.target.name);
                e.2 += 1;
            }
        }
    }
    for (_, v) in causes.iter_mut() {
        v.1 = v.0.len();
    }
    let mut rows: Vec<_> = causes.into_iter().collect();
    rows.sort_by(|a, b| (a.0.rank, b.1 .1, &a.0).cmp(&(b.0.rank, a.1 .1, &b.0)));
    let mut out = String::from(
        "## The most common defects\n\n\
         Each row is one cause (the rule a case cites first, and the check that failed), counted\n\
         once per package however many trials showed it; the denied tool running comes first,\n\
         then must-level failures, then the rest.\n\n\
         | severity | rule | check | packages | trials | packages with it |\n|---|---|---|---|---|---|\n",
    );
    for (c, (names, n, trials)) in &rows {
        let links: Vec<String> = names
            .iter()
            .take(8)
            .map(|n| format!("[{n}](packages/{n}.md)"))
            .collect();
        let more = if names.len() > 8 { ", …" } else { "" };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {n} | {trials} | {}{more} |",
            c.severity(),
            cell(&c.rule()),
            c.check,
            links.join(", ")
        );
    }
    if rows.is_empty() {
        out.push_str("| - | no failure in any lane | | 0 | 0 | |\n");
    }
    out.push('\n');
    out
}

/// Per lane and version, per family: the failing and warning trials.
fn matrix(seen: &[Seen]) -> String {
    let mut families = BTreeSet::new();
    for s in seen.iter().filter_map(|s| s.report.as_ref()) {
        families.extend(s.results.iter().map(|r| family(&r.id).to_string()));
    }
    // Gateways loaded side by side with the reference gate: a column of their own.
    let sides = seen.iter().any(|s| s.side.is_some());
    let mut out = String::from("## The matrix\n\n| package | lane | version |");
    for f in &families {
        let _ = write!(out, " {f} |");
    }
    if sides {
        out.push_str(" vs the reference gate (load) |");
    }
    out.push_str("\n|---|---|---|");
    out.push_str(&"---|".repeat(families.len() + usize::from(sides)));
    out.push('\n');
    for s in seen {
        let Some(report) = &s.report else { continue };
        let mut versions: Vec<&str> = report.results.iter().map(version_of).collect();
        versions.dedup();
        let versions: BTreeSet<&str> = versions.into_iter().collect();
        for v in versions {
            let _ = write!(
                out,
                "| [{}](packages/{}.md) | {} | {v} |",
                s.target.name,
                s.target.name,
                s.lane.kind.as_str()
            );
            for f in &families {
                let rows = report
                    .results
                    .iter()
                    .filter(|r| version_of(r) == v && family(&r.id) == f);
                let link = format!("packages/{}.md#{}", s.target.name, anchor(&s.column, v));
                let _ = write!(out, " {} |", family_cell(rows, &link));
            }
            if sides {
                let side = s.side.as_ref().map_or(String::new(), |side| {
                    format!(
                        "[{}](packages/{}.md#side-by-side-with-the-reference-gate)",
                        cell(&side.short()),
                        s.target.name
                    )
                });
                let _ = write!(out, " {side} |");
            }
            out.push('\n');
        }
    }
    out.push('\n');
    out
}

/// A matrix cell: failures and warnings, linked; `pass`; `n/a`; or empty.
fn family_cell<'a>(rows: impl Iterator<Item = &'a Record>, link: &str) -> String {
    let (mut fail, mut warn, mut pass, mut any) = (0, 0, 0, false);
    for r in rows {
        any = true;
        if r.not_sent() {
            continue;
        }
        match r.verdict {
            TrialVerdict::Fail | TrialVerdict::Stale | TrialVerdict::Known => fail += 1,
            TrialVerdict::Warn => warn += 1,
            TrialVerdict::Pass => pass += 1,
            TrialVerdict::Skip => {}
        }
    }
    match (fail, warn) {
        (0, 0) if pass > 0 => "pass".into(),
        (0, 0) if any => "n/a".into(),
        (0, 0) => String::new(),
        (0, w) => format!("[{w} warn]({link})"),
        (f, 0) => format!("[**{f} FAIL**]({link})"),
        (f, w) => format!("[**{f} FAIL**, {w} warn]({link})"),
    }
}

/// The lanes that could not be tested, with why.
fn untested(seen: &[Seen]) -> String {
    let rows: Vec<(&Seen, String)> = seen
        .iter()
        .filter_map(|s| Some((s, s.untested().or_else(|| s.partial())?)))
        .collect();
    let mut out = String::from(
        "## Could not test\n\n\
         A lane here has no cell in the matrix: the harness could not run it to the end, which\n\
         says nothing about the package.\n\n",
    );
    if rows.is_empty() {
        out.push_str("Every lane was tested.\n\n");
        return out;
    }
    out.push_str("| lane | package | why |\n|---|---|---|\n");
    for (s, why) in rows {
        let _ = writeln!(
            out,
            "| {} | [{}](packages/{}.md) | {} |",
            s.column,
            s.target.spec.package,
            s.target.name,
            cell(&why)
        );
    }
    out.push('\n');
    out
}

fn package_page(lanes: &[&Seen], made: &Provenance) -> String {
    let t = lanes[0].target;
    let mut out = format!(
        "# {} {} ({})\n\n{}\n\nMade on {} by the suite at commit `{}`; [all packages](../README.md).\n\n\
         ## How it was started\n\n| lane | command | versions spoken | outcome |\n|---|---|---|---|\n",
        t.spec.package,
        t.release(),
        t.spec.ecosystem.as_str(),
        t.spec.about,
        made.date,
        made.commit,
    );
    for s in lanes {
        let command = s.lane.command.as_deref().unwrap_or("(built in)");
        let spoken = s.report.as_ref().map_or("-", |r| r.spec.as_str());
        let outcome = match s.untested() {
            Some(why) => format!("could not test: {why}"),
            None => {
                let n = counts(s.report.as_ref().map_or(&[][..], |r| &r.results));
                match s.partial() {
                    Some(p) => format!("{n}; {p}"),
                    None => n,
                }
            }
        };
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} |",
            s.column,
            cell(command),
            spoken.replace(',', ", "),
            cell(&outcome)
        );
    }
    out.push('\n');
    out.push_str(&side_section(lanes));
    out.push_str(&not_checked(lanes));
    out.push_str(&causes_section(lanes));
    for s in lanes {
        out.push_str(&lane_section(s));
    }
    out
}

/// A gateway's lanes loaded beside the reference gate in front of the same witness.
fn side_section(lanes: &[&Seen]) -> String {
    let sides: Vec<_> = lanes
        .iter()
        .filter_map(|s| s.side.as_ref().map(|side| (&s.column, side)))
        .collect();
    if sides.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "## Side by side with the reference gate\n\nThe same load (`mcp-gauntlet load`: concurrent clients, each with its own session, calling the\nwitness's `echo` with a token only that request carries) against this lane and against the\nsuite's reference gate in front of the same witness over stdio, one after the other in the\nsame campaign. Throughput is a ratio, latency the difference; wrong answers (another\nrequest's) and lost ones (none, or an error status) are counted, not averaged.\n\n| lane | clients | requests | result |\n|---|---|---|---|\n",
    );
    for (column, side) in sides {
        let _ = writeln!(
            out,
            "| {column} | {} | {} | {} |",
            side.concurrency,
            side.requests,
            cell(&side.cell())
        );
    }
    out.push('\n');
    out
}

/// Trials by verdict, in words.
fn counts(results: &[Record]) -> String {
    let n = |v: &[TrialVerdict]| results.iter().filter(|r| v.contains(&r.verdict)).count();
    let unsent = results.iter().filter(|r| r.not_sent()).count();
    format!(
        "{} trials: {} pass, {} fail, {} warn, {} not applicable, {unsent} not sent",
        results.len(),
        n(&[TrialVerdict::Pass]),
        n(&[TrialVerdict::Fail, TrialVerdict::Stale, TrialVerdict::Known]) - unsent,
        n(&[TrialVerdict::Warn]),
        n(&[TrialVerdict::Skip]),
    )
}

/// What could not be checked: the trials that did not apply, by reason.
fn not_checked(lanes: &[&Seen]) -> String {
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for r in lanes
        .iter()
        .filter_map(|s| s.report.as_ref())
        .flat_map(|r| &r.results)
        .filter(|r| r.verdict == TrialVerdict::Skip || r.not_sent())
    {
        let why = r
            .findings
            .iter()
            .find(|f| f.check == crate::verdict::Check::Setup)
            .map_or("not applicable to this lane", |f| f.message.as_str());
        let why = if r.not_sent() {
            format!("not sent, the harness could not test it: {why}")
        } else {
            why.to_string()
        };
        *reasons.entry(one_line(&why, 200)).or_default() += 1;
    }
    // Calls of a tool it does not have: refused or answered as such, and what the tool would
    // have done is not checked.
    let in_part = [
        (
            crate::verdict::UNKNOWN_DENIED_TOOL,
            "checked only in part: a call of the denied tool was refused as a tool the target does not have, so whether it would run is not checked",
        ),
        (
            crate::verdict::UNKNOWN_ALLOWED_TOOL,
            "checked only in part: a call of the allowed tool was answered as a tool the target does not have, so what it answers is not checked",
        ),
    ];
    for (note, why) in in_part {
        let n = lanes
            .iter()
            .filter_map(|s| s.report.as_ref())
            .flat_map(|r| &r.results)
            .filter(|r| r.findings.iter().any(|f| f.message == note))
            .count();
        if n > 0 {
            reasons.insert(why.into(), n);
        }
    }
    let mut out = String::from("## What could not be checked\n\n");
    if reasons.is_empty() {
        out.push_str("Every trial selected for its lanes applied.\n\n");
        return out;
    }
    let mut rows: Vec<_> = reasons.into_iter().collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out.push_str("| trials | why they did not apply |\n|---|---|\n");
    for (why, n) in rows {
        let _ = writeln!(out, "| {n} | {} |", cell(&why));
    }
    out.push('\n');
    out
}

/// The causes of failure on this package, each once, with where it showed.
fn causes_section(lanes: &[&Seen]) -> String {
    let mut causes: BTreeMap<Cause, Vec<(String, &Record)>> = BTreeMap::new();
    for s in lanes {
        let Some(report) = &s.report else { continue };
        for r in &report.results {
            if let Some(c) = Cause::of(r) {
                causes.entry(c).or_default().push((s.column.clone(), r));
            }
        }
    }
    let mut out = String::from("## Findings, once per cause\n\n");
    if causes.is_empty() {
        out.push_str("None: every trial that applied passed.\n\n");
        return out;
    }
    out.push_str("| severity | rule | check | trials | where |\n|---|---|---|---|---|\n");
    for (c, trials) in &causes {
        let mut lanes: Vec<String> = trials
            .iter()
            .map(|(col, r)| format!("[{col} {}](#{})", version_of(r), anchor(col, version_of(r))))
            .collect();
        lanes.dedup();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            c.severity(),
            cell(&c.rule()),
            c.check,
            trials.len(),
            lanes.join(", ")
        );
    }
    out.push('\n');
    out
}

/// A lane's failing and warning trials, per version, each with its evidence.
fn lane_section(s: &Seen) -> String {
    let Some(report) = &s.report else {
        return String::new();
    };
    let mut out = String::new();
    let versions: BTreeSet<&str> = report.results.iter().map(version_of).collect();
    for v in versions {
        let bad: Vec<&Record> = report
            .results
            .iter()
            .filter(|r| version_of(r) == v && Cause::of(r).is_some())
            .collect();
        let _ = write!(
            out,
            "<a id=\"{}\"></a>\n\n## {} at {v}\n\n",
            anchor(&s.column, v),
            s.column
        );
        if bad.is_empty() {
            out.push_str("Nothing failed or warned.\n\n");
            continue;
        }
        for r in bad {
            out.push_str(&trial(r));
        }
    }
    out
}

/// One failing or warning trial: its case, verdict, rule, and what was sent and came back.
fn trial(r: &Record) -> String {
    let word = match r.verdict {
        TrialVerdict::Warn => "warn",
        _ => "FAIL",
    };
    let mut out = format!(
        "- **{word}** [`{}`](../../../cases/{}.json) ({} over {}): {}\n",
        r.id,
        r.id,
        match r.level {
            Level::Must => "must",
            Level::Should => "should",
            Level::Info => "info",
        },
        r.transport.as_str(),
        r.title
    );
    match &r.explanation {
        Some(text) => {
            out.push_str("\n  ```text\n");
            for line in text.lines() {
                let _ = writeln!(out, "  {line}");
            }
            out.push_str("  ```\n\n");
        }
        None => {
            for f in r.findings.iter().filter(|f| f.status != Status::Pass) {
                let _ = writeln!(
                    out,
                    "  - {}: {}",
                    f.check.as_str(),
                    one_line(&f.message, 400)
                );
            }
        }
    }
    out
}

/// `YYYY-MM-DD` of `secs` after the Unix epoch (UTC).
pub fn utc_date(secs: u64) -> String {
    // Days to the civil date, after Howard Hinnant's `civil_from_days`.
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(dir: &Path, name: &str) -> TargetFile {
        let text = r#"{"about": "A package.", "package": "pkg", "ecosystem": "npm",
            "release": "1.0.0", "install": {"kind": "command"},
            "lanes": [{"kind": "stdio", "command": "x"}, {"kind": "http", "command": "x {port}"}]}"#;
        TargetFile {
            name: name.to_string(),
            path: dir.join(format!("{name}.json")),
            dir: dir.to_path_buf(),
            spec: serde_json::from_str(text).expect("a target"),
        }
    }

    /// A failing record of `id` at `version`, with its evidence.
    fn failed(id: &str, version: &str) -> serde_json::Value {
        serde_json::json!({
            "id": id, "transport": "stdio", "requirements": ["MCP-MSG-03"], "level": "must",
            "verdict": "fail", "version": version, "lane_version": version,
            "findings": [{"check": "outcome", "status": "fail", "message": "expected reject; observed silent"}],
            "explanation": "sent (3 bytes): abc\n  observed: silent"
        })
    }

    #[test]
    fn pages_count_a_cause_once_show_its_evidence_and_say_what_could_not_be_tested() {
        let dir = std::env::temp_dir().join(format!("gauntlet-ecosystem-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        let t = target(&dir, "pkg");
        let skipped = serde_json::json!({
            "id": "batch/two", "transport": "stdio", "verdict": "skip", "version": "2025-06-18",
            "findings": [{"check": "setup", "status": "pass", "message": "needs the canary tools"}]
        });
        let report = serde_json::json!({
            "format": crate::report::REPORT_FORMAT, "target": "pkg", "spec": "2025-06-18,2025-11-25",
            "results": [failed("envelope/id-null", "2025-06-18"), failed("envelope/id-null", "2025-11-25"), skipped]
        });
        std::fs::write(dir.join("pkg-stdio.json"), report.to_string()).expect("a report");
        let record = |column: &str, outcome: &str, detail: Option<&str>| {
            serde_json::json!({
                "format": super::super::lane::LANE_FORMAT, "target": "pkg", "column": column,
                "package": "pkg", "ecosystem": "npm", "release": "1.0.0", "key": "k",
                "outcome": outcome, "detail": detail, "seconds": 1, "counts": [0, 2, 0, 0, 1]
            })
            .to_string()
        };
        std::fs::write(
            dir.join("pkg-stdio.lane.json"),
            record("pkg-stdio", "differs", None),
        )
        .expect("a record");
        std::fs::write(
            dir.join("pkg-http.lane.json"),
            record("pkg-http", "untestable", Some("did not accept connections")),
        )
        .expect("a record");
        std::fs::write(
            dir.join("left.md"),
            "# Left out\n\n- `other`: needs a key\n",
        )
        .expect("a list");
        let made = Provenance {
            date: "2026-12-07".into(),
            commit: "abc".into(),
            command: "mcp-gauntlet campaign".into(),
        };
        let out = dir.join("pages");
        let files = write_ecosystem(
            std::slice::from_ref(&t),
            std::slice::from_ref(&dir),
            Some(&dir.join("left.md")),
            &out,
            &made,
        )
        .expect("pages written");
        assert_eq!((files.packages, files.tested, files.untested), (1, 1, 1));
        let index = std::fs::read_to_string(&files.index).expect("the index");
        // One cause, one package, two trials; the untested lane is not a cell but a reason.
        assert!(index.contains("| must | MCP-MSG-03"), "{index}");
        assert!(index.contains("| outcome | 1 | 2 |"), "{index}");
        assert!(
            index.contains("[**1 FAIL**](packages/pkg.md#pkg-stdio-2025-06-18)"),
            "{index}"
        );
        assert!(
            index.contains("| pkg-http | [pkg](packages/pkg.md) | UNTESTABLE"),
            "{index}"
        );
        assert!(
            !index.contains("| [pkg](packages/pkg.md) | http |"),
            "{index}"
        );
        assert!(index.contains("- `other`: needs a key"), "{index}");
        assert!(
            index.contains("2026-12-07") && index.contains("`abc`"),
            "{index}"
        );
        let page = std::fs::read_to_string(out.join("packages/pkg.md")).expect("the page");
        assert!(
            page.contains("<a id=\"pkg-stdio-2025-11-25\"></a>"),
            "{page}"
        );
        assert!(page.contains("sent (3 bytes): abc"), "{page}");
        assert!(page.contains("| 1 | needs the canary tools |"), "{page}");
        assert!(page.contains("could not test: UNTESTABLE"), "{page}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(1_796_601_600), "2026-12-07");
    }

    #[test]
    fn one_line_cuts_and_flattens() {
        assert_eq!(one_line("a\n  b", 10), "a b");
        assert_eq!(one_line("abcdef", 3), "abc…");
        assert_eq!(cell("a|b"), "a\\|b");
    }
}
