//! Baselines: known failures, so CI goes red only on regressions. A listed failure does not fail
//! the run; an unlisted one does; a listed case that now passes fails as stale, so the baseline
//! only ever shrinks.

use crate::case::{Profile, TransportKind};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The version of the baseline format.
pub const BASELINE_FORMAT: &str = "mcp-gauntlet-baseline/1";

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
    #[error("cannot read the baseline {path}: {source}")]
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
    pub fn load(path: &Path) -> Result<Baseline, BaselineError> {
        let display = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| BaselineError::Read {
            path: display.clone(),
            source,
        })?;
        let b: Baseline = serde_json::from_str(&text).map_err(|e| BaselineError::Parse {
            path: display.clone(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
        if b.format != BASELINE_FORMAT {
            return Err(BaselineError::Format {
                path: display,
                format: b.format,
            });
        }
        Ok(b)
    }

    /// Whether a failure of `id` on `transport` under `profile` is known.
    pub fn lists(&self, id: &str, transport: TransportKind, profile: Profile) -> bool {
        self.known_failures.iter().any(|k| {
            k.id == id
                && k.transport.is_none_or(|t| t == transport)
                && k.profile.is_none_or(|p| p == profile)
        })
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_by_id_then_optional_transport_and_profile() {
        let b = Baseline {
            format: BASELINE_FORMAT.into(),
            known_failures: vec![
                KnownFailure {
                    id: "a".into(),
                    transport: None,
                    profile: None,
                    reason: "r".into(),
                },
                KnownFailure {
                    id: "b".into(),
                    transport: Some(TransportKind::Http),
                    profile: None,
                    reason: "r".into(),
                },
            ],
        };
        assert!(b.lists("a", TransportKind::Stdio, Profile::Gate));
        assert!(b.lists("b", TransportKind::Http, Profile::Server));
        assert!(!b.lists("b", TransportKind::Stdio, Profile::Server));
        assert!(!b.lists("c", TransportKind::Http, Profile::Server));
    }
}
