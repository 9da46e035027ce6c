//! Reports: the per-trial record the runner keeps, the JSON report (`--report`), and the
//! warning summary printed after libtest's own output.

use crate::case::{Case, Level, Profile, TransportKind};
use crate::verdict::{Finding, Observed, Status, Verdict};
use serde::Serialize;
use std::sync::{Arc, Mutex};

/// The version of the JSON report format; bumped on any incompatible change.
pub const REPORT_FORMAT: &str = "mcp-gauntlet-report/1";

/// One trial's result.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub id: String,
    pub transport: TransportKind,
    pub profile: Profile,
    pub title: String,
    pub requirements: Vec<String>,
    pub level: Level,
    /// `pass`, `warn`, `fail` or `skip`.
    pub verdict: String,
    pub observed: Option<Observed>,
    pub http_status: Option<u16>,
    pub error_code: Option<i64>,
    pub elapsed_ms: u64,
    pub findings: Vec<Finding>,
}

impl Record {
    pub fn new(
        case: &Case,
        transport: TransportKind,
        profile: Profile,
        verdict: Option<&Verdict>,
        elapsed_ms: u64,
    ) -> Record {
        Record {
            id: case.id.clone(),
            transport,
            profile,
            title: case.spec.title.clone(),
            requirements: case.spec.requirements.clone(),
            level: case.spec.level,
            verdict: match verdict.map(|v| v.status) {
                None => "skip",
                Some(Status::Pass) => "pass",
                Some(Status::Warn) => "warn",
                Some(Status::Fail) => "fail",
            }
            .into(),
            observed: verdict.map(|v| v.observed.clone()),
            http_status: verdict.and_then(|v| v.http_status),
            error_code: verdict.and_then(|v| v.error_code),
            elapsed_ms,
            findings: verdict.map(|v| v.findings.clone()).unwrap_or_default(),
        }
    }
}

/// Records collected by trials running on several threads.
#[derive(Debug, Clone, Default)]
pub struct Collector {
    inner: Arc<Mutex<Vec<Record>>>,
}

impl Collector {
    pub fn push(&self, r: Record) {
        if let Ok(mut v) = self.inner.lock() {
            v.push(r);
        }
    }

    /// All records, sorted by case id then transport.
    pub fn records(&self) -> Vec<Record> {
        let mut v = self.inner.lock().map(|v| v.clone()).unwrap_or_default();
        v.sort_by(|a, b| (&a.id, a.profile, a.transport).cmp(&(&b.id, b.profile, b.transport)));
        v
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
    profile: &'a str,
    spec: &'a str,
    strict: bool,
    summary: Summary,
    results: &'a [Record],
}

/// What the report says about the run itself.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub target: String,
    pub profile: String,
    pub spec: String,
    pub strict: bool,
}

/// The JSON report text.
pub fn json_report(info: &RunInfo, records: &[Record]) -> String {
    let count = |v: &str| records.iter().filter(|r| r.verdict == v).count();
    let report = Report {
        format: REPORT_FORMAT,
        tool_version: env!("CARGO_PKG_VERSION"),
        target: &info.target,
        profile: &info.profile,
        spec: &info.spec,
        strict: info.strict,
        summary: Summary {
            pass: count("pass"),
            warn: count("warn"),
            fail: count("fail"),
            skip: count("skip"),
        },
        results: records,
    };
    serde_json::to_string_pretty(&report).unwrap_or_default()
}

/// Lines summarising the warnings (libtest shows them as passed).
pub fn warning_summary(records: &[Record]) -> String {
    let warned: Vec<&Record> = records.iter().filter(|r| r.verdict == "warn").collect();
    if warned.is_empty() {
        return String::new();
    }
    let mut out = format!("\nwarnings ({}; they fail under --strict):\n", warned.len());
    for r in warned {
        let first = r.findings.first().map_or(String::new(), |f| {
            format!("[{}] {}", f.check.as_str(), f.message)
        });
        out.push_str(&format!(
            "    [{}] {}: {}\n",
            r.transport.as_str(),
            r.id,
            first
        ));
    }
    out
}
