//! SARIF 2.1.0 for code scanning (`run --sarif FILE`): one rule per case that ran, one result per
//! failed or warned trial, located at the case file, fingerprinted by case and lane.
//!
//! The log is built from `serde-sarif`'s types. What GitHub's upload action asks of it holds by
//! construction: every location is a path relative to the repository (`cases/<id>.json`, never
//! absolute), and each result carries a partial fingerprint made of the case id and the lane
//! alone, so a rerun that finds the same failure updates its alert instead of adding one. The
//! texts are the records' own, already redacted by the runner.

use super::{kind_of, Record, RunInfo, TrialVerdict};
use crate::case::{Case, Catalogue, Level, Source};
use serde_sarif::sarif::{
    ArtifactLocation, Location, Message, MultiformatMessageString, PhysicalLocation, PropertyBag,
    ReportingConfiguration, ReportingDescriptor, Result as SarifResult, ResultLevel, Run, Sarif,
    Tool, ToolComponent,
};
use std::collections::{BTreeMap, BTreeSet};

/// The key of the partial fingerprint every result carries: `<case id>|<lane>`.
pub(crate) const FINGERPRINT_KEY: &str = "mcpGauntletTrial/v1";

/// Where SARIF 2.1.0's schema lives (the log's `$schema`).
const SCHEMA: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

/// The SARIF log of a run, as pretty-printed JSON.
pub fn sarif(info: &RunInfo, records: &[Record], catalogue: &Catalogue) -> String {
    let cases: BTreeMap<&str, &Case> = catalogue.cases.iter().map(|c| (c.id.as_str(), c)).collect();
    // The cases that ran here (a trial filtered out or not applicable tested nothing).
    let ids: BTreeSet<&str> = records
        .iter()
        .filter(|r| r.verdict != TrialVerdict::Skip)
        .map(|r| r.id.as_str())
        .collect();
    let index: BTreeMap<&str, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let rules: Vec<ReportingDescriptor> = ids
        .iter()
        .map(|id| {
            let first = records.iter().find(|r| r.id == *id);
            rule(id, first, cases.get(id).copied())
        })
        .collect();
    let results: Vec<SarifResult> = records
        .iter()
        .filter(|r| {
            matches!(
                r.verdict,
                TrialVerdict::Fail | TrialVerdict::Warn | TrialVerdict::Stale
            )
        })
        .map(|r| {
            result(
                r,
                index.get(r.id.as_str()).copied().unwrap_or(0),
                cases.get(r.id.as_str()).copied(),
            )
        })
        .collect();
    let driver = ToolComponent::builder()
        .name("mcp-gauntlet")
        .version(env!("CARGO_PKG_VERSION"))
        .semantic_version(env!("CARGO_PKG_VERSION"))
        .rules(rules)
        .build();
    let mut bag = BTreeMap::new();
    bag.insert(
        "target".to_string(),
        serde_json::Value::from(info.target.clone()),
    );
    bag.insert(
        "profile".to_string(),
        serde_json::Value::from(info.profile.to_string()),
    );
    bag.insert("strict".to_string(), serde_json::Value::from(info.strict));
    let run = Run::builder()
        .tool(Tool::builder().driver(driver).build())
        .results(results)
        .properties(PropertyBag::builder().additional_properties(bag).build())
        .build();
    let log = Sarif::builder()
        .schema(SCHEMA)
        .version(serde_json::Value::from("2.1.0"))
        .runs(vec![run])
        .build();
    // The log holds strings, numbers and maps with string keys only: it always serializes.
    let mut text = serde_json::to_string_pretty(&log).expect("a SARIF log serializes");
    text.push('\n');
    text
}

/// The case file, relative: `cases/<id>.json` for the embedded catalogue, the file's path
/// relative to the working directory for `--cases` (or `<id>.json` when it lies outside it).
fn case_uri(id: &str, case: Option<&Case>) -> String {
    match case.map(|c| &c.source) {
        Some(Source::File(path)) => std::env::current_dir()
            .ok()
            .and_then(|cwd| {
                path.strip_prefix(cwd)
                    .ok()
                    .map(std::path::Path::to_path_buf)
            })
            .filter(|p| p.is_relative())
            .map_or_else(
                || format!("{id}.json"),
                |p| p.to_string_lossy().replace('\\', "/"),
            ),
        _ => format!("cases/{id}.json"),
    }
}

fn level_of(level: Level) -> &'static str {
    match level {
        Level::Must => "error",
        Level::Should => "warning",
        Level::Info => "note",
    }
}

/// A case as a rule: its title, what it cites (as tags) and its acceptable set (as help).
fn rule(id: &str, first: Option<&Record>, case: Option<&Case>) -> ReportingDescriptor {
    let title = first.map_or_else(String::new, |r| r.title.clone());
    let (requirements, advisories, level) = first
        .map_or((Vec::new(), Vec::new(), Level::Must), |r| {
            (r.requirements.clone(), r.advisories.clone(), r.level)
        });
    let acceptable = case
        .and_then(|c| serde_json::to_value(&c.spec.expect).ok())
        .map_or_else(
            || "(not known)".to_string(),
            |v| without_nulls(v).to_string(),
        );
    let mut help = format!(
        "{title}\n\nThe acceptable set (`expect`): {acceptable}\nRequirements: {}",
        requirements.join(", ")
    );
    if !advisories.is_empty() {
        help.push_str(&format!("\nAdvisories: {}", advisories.join(", ")));
    }
    help.push_str(&format!("\nThe case: {}", case_uri(id, case)));
    let family = id.split('/').next().unwrap_or(id).to_string();
    let tags: Vec<String> = std::iter::once(family)
        .chain(requirements)
        .chain(advisories)
        .collect();
    ReportingDescriptor::builder()
        .id(id)
        .short_description(
            MultiformatMessageString::builder()
                .text(title.clone())
                .build(),
        )
        .full_description(MultiformatMessageString::builder().text(title).build())
        .help(MultiformatMessageString::builder().text(help).build())
        .default_configuration(
            ReportingConfiguration::builder()
                .level(serde_json::Value::from(level_of(level)))
                .build(),
        )
        .properties(PropertyBag::builder().tags(tags).build())
        .build()
}

/// A JSON value without its `null` members: the keys a case left out are not part of its set.
fn without_nulls(v: serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => m
            .into_iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k, without_nulls(v)))
            .collect(),
        other => other,
    }
}

/// A failed or warned trial as a result at its case file.
fn result(r: &Record, rule_index: usize, case: Option<&Case>) -> SarifResult {
    let lane = kind_of(r);
    let level = match r.verdict {
        TrialVerdict::Stale => ResultLevel::Note,
        TrialVerdict::Fail if r.level == Level::Must => ResultLevel::Error,
        _ if r.level == Level::Info => ResultLevel::Note,
        _ => ResultLevel::Warning,
    };
    let mut text = r
        .explanation
        .clone()
        .unwrap_or_else(|| warning_text(r, &lane));
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!("  lane: {lane}; protocol version: {}", r.version));
    let location = Location::builder()
        .physical_location(
            PhysicalLocation::builder()
                .artifact_location(
                    ArtifactLocation::builder()
                        .uri(case_uri(&r.id, case))
                        .build(),
                )
                .build(),
        )
        .build();
    let mut fingerprints = BTreeMap::new();
    fingerprints.insert(FINGERPRINT_KEY.to_string(), format!("{}|{lane}", r.id));
    let mut bag = BTreeMap::new();
    bag.insert("lane".to_string(), serde_json::Value::from(lane));
    bag.insert(
        "version".to_string(),
        serde_json::Value::from(r.version.clone()),
    );
    bag.insert(
        "verdict".to_string(),
        serde_json::Value::from(r.verdict.as_str()),
    );
    if let Some(s) = r.http_status {
        bag.insert("httpStatus".to_string(), serde_json::Value::from(s));
    }
    if let Some(c) = r.error_code {
        bag.insert("errorCode".to_string(), serde_json::Value::from(c));
    }
    SarifResult::builder()
        .rule_id(r.id.clone())
        .rule_index(i64::try_from(rule_index).unwrap_or(0))
        .level(level)
        .message(Message::builder().text(text).build())
        .locations(vec![location])
        .partial_fingerprints(fingerprints)
        .properties(PropertyBag::builder().additional_properties(bag).build())
        .build()
}

/// What a warned trial says (only failures keep a full explanation): the lane, the case and
/// each check that did not pass, then what was observed.
fn warning_text(r: &Record, lane: &str) -> String {
    let mut out = format!("[{lane}] {}: {}\n", r.id, r.title);
    for f in &r.findings {
        if f.status != crate::verdict::Status::Pass {
            let tag = if f.status == crate::verdict::Status::Fail {
                "FAIL"
            } else {
                "warn"
            };
            out.push_str(&format!("  {tag} [{}] {}\n", f.check.as_str(), f.message));
        }
    }
    if let Some(o) = &r.observed {
        out.push_str(&format!("  observed: {o}\n"));
    }
    out
}
