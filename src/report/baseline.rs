//! Baselines: known failures, so CI goes red only on regressions. A listed failure does not fail
//! the run; an unlisted one does; a listed case that now passes fails as stale, so the baseline
//! only ever shrinks.

use crate::case::{Profile, TransportKind};
use crate::report::{Record, TrialVerdict};
use crate::verdict::Status;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The version of the baseline format.
pub(crate) const BASELINE_FORMAT: &str = "mcp-gauntlet-baseline/1";

/// One known failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnownFailure {
    /// The case id.
    pub id: String,
    /// Only on this transport (both when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportKind>,
    /// Only under this profile (both when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    /// Only at this protocol version (every version when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why it fails: the bug, and where it is tracked.
    pub reason: String,
}

/// A baseline file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    #[serde(default = "format_name")]
    pub format: String,
    pub known_failures: Vec<KnownFailure>,
}

fn format_name() -> String {
    BASELINE_FORMAT.into()
}

/// Why a baseline could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BaselineError {
    #[error("cannot read the baseline {path} (check the path given to --baseline)")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: unknown baseline format `{format}`")]
    Format { path: String, format: String },
}

impl Baseline {
    /// Reads a baseline: YAML when the file name ends in `.yaml` or `.yml`, JSON otherwise.
    pub fn load(path: &Path) -> Result<Baseline, BaselineError> {
        let display = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| BaselineError::Read {
            path: display.clone(),
            source,
        })?;
        Baseline::parse(&text, is_yaml(path), &display)
    }

    /// Parses a baseline from text; `path` only names it in errors.
    pub fn parse(text: &str, yaml: bool, path: &str) -> Result<Baseline, BaselineError> {
        let parse_error = |line: usize, column: usize, message: String| BaselineError::Parse {
            path: path.to_string(),
            line,
            column,
            message,
        };
        let b: Baseline = if yaml {
            yaml_serde::from_str(text).map_err(|e| {
                let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
                parse_error(line, column, e.to_string())
            })?
        } else {
            serde_json::from_str(text)
                .map_err(|e| parse_error(e.line(), e.column(), e.to_string()))?
        };
        if b.format != BASELINE_FORMAT {
            return Err(BaselineError::Format {
                path: path.to_string(),
                format: b.format,
            });
        }
        Ok(b)
    }

    /// Whether a failure of `id` on `transport` under `profile` at `version` is known.
    pub fn lists(
        &self,
        id: &str,
        transport: TransportKind,
        profile: Profile,
        version: &str,
    ) -> bool {
        self.known_failures.iter().any(|k| {
            k.id == id
                && k.transport.is_none_or(|t| t == transport)
                && k.profile.is_none_or(|p| p == profile)
                && k.version.as_deref().is_none_or(|v| v == version)
        })
    }

    /// What this baseline (or none) makes of a trial whose judged status is `status`.
    pub fn decide(baseline: Option<&Baseline>, status: Status, record: &Record) -> Decision {
        let listed = baseline.is_some_and(|b| {
            b.lists(
                &record.id,
                record.transport,
                record.profile,
                &record.version,
            )
        });
        match (status, listed) {
            (Status::Fail, true) => Decision::Known,
            (Status::Fail, false) => Decision::Fails,
            (_, true) => Decision::Stale,
            (Status::Warn | Status::Pass, false) => Decision::Passes,
        }
    }

    /// A baseline listing every failure (known ones included) of `records`, each with its first
    /// failing finding as the reason; `redact` hides secrets in those reasons.
    pub(crate) fn of_failures(records: &[Record], redact: impl Fn(&str) -> String) -> Baseline {
        let known_failures = records
            .iter()
            .filter(|r| matches!(r.verdict, TrialVerdict::Fail | TrialVerdict::Known))
            .map(|r| KnownFailure {
                id: r.id.clone(),
                transport: Some(r.transport),
                profile: Some(r.profile),
                version: r.lane_version.clone(),
                reason: r
                    .findings
                    .iter()
                    .find(|f| f.status == Status::Fail)
                    .map_or_else(
                        || "known failure".into(),
                        |f| format!("[{}] {}", f.check.as_str(), redact(&f.message)),
                    ),
            })
            .collect();
        Baseline {
            format: BASELINE_FORMAT.into(),
            known_failures,
        }
    }

    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a baseline serializes: strings and lists only")
    }

    /// The baseline as YAML, with a header comment saying what it is.
    pub(crate) fn to_yaml(&self) -> String {
        let body =
            yaml_serde::to_string(self).expect("a baseline serializes: strings and lists only");
        format!("# mcp-gauntlet baseline: known failures, each with the reason it fails.\n{body}")
    }

    /// The baseline in the format its file name asks for (see [`Baseline::load`]).
    pub(crate) fn render_for(&self, path: &Path) -> String {
        if is_yaml(path) {
            self.to_yaml()
        } else {
            self.to_json()
        }
    }
}

/// What a baseline makes of one trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Not listed, and it did not fail: it passes (or warns) as judged.
    Passes,
    /// Not listed, and it failed: the run fails.
    Fails,
    /// Listed, and it failed: a known failure, which does not fail the run.
    Known,
    /// Listed, but it no longer fails: the entry is stale, which fails the run.
    Stale,
}

/// Whether `path` names a YAML file.
pub(crate) fn is_yaml(path: &Path) -> bool {
    matches!(
        path.extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("yaml" | "yml")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_by_id_then_optional_transport_profile_and_version() {
        let b = Baseline {
            format: BASELINE_FORMAT.into(),
            known_failures: vec![
                KnownFailure {
                    id: "a".into(),
                    transport: None,
                    profile: None,
                    version: None,
                    reason: "r".into(),
                },
                KnownFailure {
                    id: "b".into(),
                    transport: Some(TransportKind::Http),
                    profile: None,
                    version: Some("2026-07-28".into()),
                    reason: "r".into(),
                },
            ],
        };
        let v = "2026-07-28";
        assert!(b.lists("a", TransportKind::Stdio, Profile::Gate, "2025-11-25"));
        assert!(b.lists("b", TransportKind::Http, Profile::Server, v));
        assert!(!b.lists("b", TransportKind::Http, Profile::Server, "2025-11-25"));
        assert!(!b.lists("b", TransportKind::Stdio, Profile::Server, v));
        assert!(!b.lists("c", TransportKind::Http, Profile::Server, v));
    }

    #[test]
    fn yaml_and_json_read_the_same_and_round_trip() {
        let json = r#"{"format":"mcp-gauntlet-baseline/1","known_failures":[
            {"id":"batch/empty-array","transport":"http","reason":"answers 415"},
            {"id":"stdio/bare-cr","reason":"splits lines"}]}"#;
        let yaml = "format: mcp-gauntlet-baseline/1\nknown_failures:\n  - id: batch/empty-array\n    transport: http\n    reason: answers 415\n  - id: stdio/bare-cr\n    reason: splits lines\n";
        let a = Baseline::parse(json, false, "b.json").unwrap();
        let b = Baseline::parse(yaml, true, "b.yaml").unwrap();
        assert_eq!(a, b);
        assert_eq!(Baseline::parse(&a.to_yaml(), true, "x.yml").unwrap(), a);
        assert_eq!(Baseline::parse(&a.to_json(), false, "x.json").unwrap(), a);
        assert!(is_yaml(Path::new("a/b.YML")) && !is_yaml(Path::new("b.json")));
    }

    #[test]
    fn yaml_errors_are_typed_with_a_position() {
        let unknown_key =
            "format: mcp-gauntlet-baseline/1\nknown_failures:\n  - id: a\n    reasn: typo\n";
        match Baseline::parse(unknown_key, true, "b.yaml") {
            Err(BaselineError::Parse { line, .. }) => assert_eq!(line, 4),
            other => panic!("expected a parse error, got {other:?}"),
        }
        let wrong_format = "format: other/9\nknown_failures: []\n";
        assert!(matches!(
            Baseline::parse(wrong_format, true, "b.yaml"),
            Err(BaselineError::Format { .. })
        ));
    }
}
