//! The matrix: reports read back (one column each), cases by target, as Markdown, HTML and JSON.

use super::{shows, unpassed, LaneName, Record, ReportFile, TrialVerdict};
use serde::Serialize;

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
    pub advisories: Vec<AdvisoryLine>,
}

/// One advisory of the matrix: per column, whether its weakness showed there.
#[derive(Debug, Clone)]
pub struct AdvisoryLine {
    pub advisory: &'static crate::advisory::Advisory,
    /// Per column: `Some(true)` a row citing it failed on the advisory's own check there,
    /// `Some(false)` rows citing it were tested and none did, `None` none was tested.
    pub cells: Vec<Option<bool>>,
    /// Per column: whether its target is the advisory's package (its report's `package` or
    /// `serverInfo` names), where a shown weakness is REPRODUCED; elsewhere it is "as in".
    pub theirs: Vec<bool>,
}

impl AdvisoryLine {
    /// The word of column `col`'s cell.
    fn word(&self, col: usize) -> &'static str {
        match (self.cells[col], self.theirs[col]) {
            (Some(true), true) => "REPRODUCED",
            (Some(true), false) => "as in",
            (Some(false), _) => "not reproduced",
            (None, _) => "",
        }
    }
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

/// Per advisory the reports' rows cite: per report, shown, tested only, or not tested, and
/// whether the report's target is the advisory's package.
fn advisory_columns(reports: &[(String, ReportFile)]) -> Vec<AdvisoryLine> {
    let mut out: std::collections::BTreeMap<&'static str, AdvisoryLine> = Default::default();
    let subjects: Vec<crate::advisory::Subject> =
        reports.iter().map(|(_, r)| r.subject()).collect();
    for (col, (_, r)) in reports.iter().enumerate() {
        for row in &r.results {
            for cited in &row.advisories {
                let Some(a) = crate::advisory::find(cited) else {
                    continue;
                };
                let line = out.entry(a.id.as_str()).or_insert_with(|| AdvisoryLine {
                    advisory: a,
                    cells: vec![None; reports.len()],
                    theirs: subjects.iter().map(|s| s.is(a)).collect(),
                });
                if row.verdict != TrialVerdict::Skip {
                    let was = line.cells[col].unwrap_or(false);
                    line.cells[col] = Some(was || shows(a, row.verdict, row.level, unpassed(row)));
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
            out.push_str("\nAdvisories (REPRODUCED: a row citing it failed there on the advisory's own check, and the target is its package; as in: the same weakness in another package):\n\n| advisory | affects |");
            for name in &self.columns {
                out.push_str(&format!(" {} |", name.replace('|', "/")));
            }
            out.push_str("\n|---|---|");
            for _ in &self.columns {
                out.push_str("---|");
            }
            out.push('\n');
            for line in &self.advisories {
                let a = line.advisory;
                out.push_str(&format!("| {} | {} |", a.ids(), a.affects()));
                for col in 0..line.cells.len() {
                    let w = line.word(col);
                    if line.cells[col] == Some(true) {
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
            out.push_str("<p>Advisories (REPRODUCED: a row citing it failed there on the advisory's own check, and the target is its package; as in: the same weakness in another package):</p>\n<table>\n<thead><tr><th>advisory</th><th>affects</th>");
            for name in &self.columns {
                out.push_str(&format!("<th>{}</th>", html_escape(name)));
            }
            out.push_str("</tr></thead>\n<tbody>\n");
            for line in &self.advisories {
                let a = line.advisory;
                out.push_str(&format!(
                    "<tr><td>{}</td><td class=\"req\">{}</td>",
                    html_escape(&a.ids()),
                    html_escape(&a.affects())
                ));
                for col in 0..line.cells.len() {
                    let class = match line.cells[col] {
                        Some(true) => "FAIL",
                        Some(false) => "pass",
                        None => "",
                    };
                    out.push_str(&format!("<td class=\"{class}\">{}</td>", line.word(col)));
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

/// The format of the matrix's JSON form.
pub const MATRIX_FORMAT: &str = "mcp-gauntlet-matrix/1";

/// One column of the JSON form.
#[derive(Debug, Serialize)]
struct JsonColumn<'a> {
    name: &'a str,
    pass: usize,
    fail: usize,
    warn: usize,
    known: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    spelling: Option<&'a str>,
}

/// One row of the JSON form: the lane, the case, what it cites, and one word per column
/// (`pass`, `FAIL`, `warn`, `known`, `-` for not applicable, empty for absent).
#[derive(Debug, Serialize)]
struct JsonRow<'a> {
    lane: &'a str,
    case: &'a str,
    requirements: &'a [String],
    advisories: &'a [String],
    cells: Vec<&'static str>,
}

/// One advisory of the JSON form: per column `true` (its weakness shown), `false` (tested,
/// not shown) or `null` (not tested); and per column whether the target is its package (a
/// shown weakness is then reproduced, else "as in").
#[derive(Debug, Serialize)]
struct JsonAdvisory<'a> {
    id: &'a str,
    aliases: &'a [String],
    affects: String,
    cells: &'a [Option<bool>],
    their_package: &'a [bool],
}

impl Matrix {
    /// The matrix as a JSON value another tool can read (format [`MATRIX_FORMAT`]).
    pub fn json(&self) -> serde_json::Value {
        let columns: Vec<JsonColumn> = self
            .columns
            .iter()
            .zip(&self.summary)
            .map(|(name, [pass, fail, warn, known])| JsonColumn {
                name,
                pass: *pass,
                fail: *fail,
                warn: *warn,
                known: *known,
                spelling: self
                    .spellings
                    .iter()
                    .find(|(c, _)| c == name)
                    .map(|(_, how)| how.as_str()),
            })
            .collect();
        let rows: Vec<JsonRow> = self
            .rows
            .iter()
            .map(|r| JsonRow {
                lane: &r.lane,
                case: &r.id,
                requirements: &r.requirements,
                advisories: &r.advisories,
                cells: r.cells.iter().map(|c| c.word()).collect(),
            })
            .collect();
        let advisories: Vec<JsonAdvisory> = self
            .advisories
            .iter()
            .map(|line| JsonAdvisory {
                id: &line.advisory.id,
                aliases: &line.advisory.aliases,
                affects: line.advisory.affects(),
                cells: &line.cells,
                their_package: &line.theirs,
            })
            .collect();
        serde_json::json!({
            "format": MATRIX_FORMAT,
            "columns": columns,
            "rows": rows,
            "advisories": advisories,
        })
    }
}
