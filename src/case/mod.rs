//! Case files: the model (`model.rs`), the catalogue and how it is loaded (`catalogue.rs`),
//! validation beyond the syntax (`validation.rs`), placeholders (`placeholders.rs`) and body
//! generation (`body.rs`); here, the case itself and what it applies to.
//!
//! **Architecture invariant:** nothing here does network or process I/O; the only I/O is reading
//! case files. A loaded [`Case`] is plain data that the runner hands to a transport.

mod body;
mod catalogue;
mod model;
mod placeholders;
mod validation;

pub use body::Body;
pub use catalogue::Catalogue;
use catalogue::EMBEDDED;
pub(crate) use placeholders::is_placeholder;
// The case format, as the case files write it (the schema is generated from these types).
pub use model::{
    AliveProbe, AuthNeed, BodySpec, Caller, CaseSpec, ChallengeSpec, CodePattern, ContentCoding,
    Discover, EitherWord, Expect, Forwarding, HoldSpec, IdRule, Level, MappingNeed, NestSpec,
    OneOrMany, Outcome, Profile, RepeatSpec, RequestSpec, SeriesExpect, SeriesSpec, SessionMode,
    SseSpec, SseStream, StatusPattern, TransportKind, Trickle, VersionRange,
};

use crate::versions::Version;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Longest body a case may describe (a little over 4 GiB).
pub(crate) const MAX_BODY_LEN: u64 = 4 << 30;

/// Why a case file was refused. Messages name the file (and line and column where known); tests
/// match on the variant, never on the text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaseError {
    #[error("{path}: cannot read the case file")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error(
        "{path}:{line}:{column}: unknown requirement ID `{id}` (not in cases/requirements.json)"
    )]
    UnknownRequirement {
        path: String,
        id: String,
        line: usize,
        column: usize,
    },
    #[error(
        "{path}:{line}:{column}: `{id}` is not an advisory id (CVE-YYYY-N, GHSA-xxxx-xxxx-xxxx, RUSTSEC-YYYY-NNNN, or owner/repo#N for an upstream issue)"
    )]
    AdvisoryId {
        path: String,
        id: String,
        line: usize,
        column: usize,
    },
    #[error("{path}:{line}:{column}: unknown advisory `{id}` (not in cases/advisories.json)")]
    UnknownAdvisory {
        path: String,
        id: String,
        line: usize,
        column: usize,
    },
    #[error("{path}:{line}:{column}: unknown placeholder `{{{{{name}}}}}`")]
    UnknownPlaceholder {
        path: String,
        name: String,
        line: usize,
        column: usize,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    #[error("{path}: case id `{id}` is defined twice (also in {other})")]
    Duplicate {
        path: String,
        id: String,
        other: String,
    },
}

/// One requirement of the project's catalogue (`cases/requirements.json`).
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
pub struct Requirement {
    pub id: String,
    pub section: String,
    pub source: String,
    pub level: String,
    pub summary: String,
}

#[derive(serde::Deserialize)]
struct RequirementsFile {
    requirements: Vec<Requirement>,
}

/// The requirement catalogue embedded from `cases/requirements.json`.
pub fn requirements() -> &'static BTreeMap<String, Requirement> {
    static REQS: OnceLock<BTreeMap<String, Requirement>> = OnceLock::new();
    REQS.get_or_init(|| {
        let text = EMBEDDED
            .get_file("requirements.json")
            .and_then(|f| f.contents_utf8())
            .unwrap_or("{\"requirements\":[]}");
        // The file is part of the build and checked by a test; an unreadable one yields an
        // empty catalogue, which makes every case fail validation loudly.
        let parsed: RequirementsFile = serde_json::from_str(text).unwrap_or(RequirementsFile {
            requirements: Vec::new(),
        });
        parsed
            .requirements
            .into_iter()
            .map(|r| (r.id.clone(), r))
            .collect()
    })
}

/// Where a case came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Embedded,
    File(PathBuf),
}

/// A validated case.
#[derive(Debug, Clone)]
pub struct Case {
    /// Path under its cases root without `.json`, e.g. `batch/two-requests`.
    pub id: String,
    pub spec: CaseSpec,
    pub source: Source,
}

impl Case {
    /// Whether the case can be carried over `t`: it lists `t` (or no transports at all), and
    /// over HTTP+SSE (whose every session is a stream, and whose answers come on it) it is not
    /// about a server without sessions (`stateless`), a series, or raw bytes.
    pub fn applies_to_transport(&self, t: TransportKind) -> bool {
        let s = &self.spec;
        let streamable_only = s.stateless || s.series.is_some();
        s.transports.as_ref().is_none_or(|v| v.contains(&t))
            && !(s.request.raw_http.is_some() && t != TransportKind::Http)
            && !(t == TransportKind::Sse && streamable_only)
    }

    /// Whether any of the case's expectations bounds the server's memory growth.
    pub(crate) fn bounds_memory(&self) -> bool {
        let s = &self.spec;
        std::iter::once(&s.expect)
            .chain(s.strict.iter())
            .chain(s.prefer.iter())
            .chain(s.gate.iter())
            .chain(s.modern.iter())
            .any(|e| e.max_memory_growth_kib.is_some())
    }

    pub fn applies_to_profile(&self, p: Profile) -> bool {
        self.spec.profiles.as_ref().is_none_or(|v| v.contains(&p))
    }

    /// Whether the case sends a batch array claiming a version that had batches (its
    /// `MCP-Protocol-Version` header, or its `handshake_version`, is 2025-03-26 or before). A
    /// server that accepts that version may take the batch: it is legal there.
    pub fn claims_batch_era(&self) -> bool {
        let s = &self.spec;
        let batch = matches!(&s.request.body, Some(BodySpec::Json(v)) if v.is_array());
        let header = s
            .request
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("mcp-protocol-version"))
            .and_then(|(_, v)| v.as_deref())
            .and_then(Version::parse);
        batch
            && header
                .or(s.handshake_version)
                .is_some_and(Version::has_batches)
    }

    pub fn applies_to_version(&self, version: Version) -> bool {
        self.spec
            .versions
            .as_ref()
            .is_none_or(|r| r.contains(version))
    }

    /// The acceptable set in force: `expect`, narrowed when `narrows` (`--strict`, or a gate
    /// whose error table is known) by `gate` (or, without one, `strict`) under the gate profile
    /// and by `strict` under the server profile; then, when `version` is modern, with
    /// `modern`'s keys in force over all of them.
    pub fn expectation(&self, profile: Profile, narrows: bool, version: Version) -> Expect {
        let narrower = match profile {
            _ if !narrows => None,
            Profile::Gate => self.spec.gate.as_ref().or(self.spec.strict.as_ref()),
            Profile::Server => self.spec.strict.as_ref(),
        };
        let mut expect = self.spec.expect.clone();
        if narrows {
            // A narrowed reading holds the endpoint to what is preferred, then to its own set.
            if let Some(p) = &self.spec.prefer {
                expect = expect.narrowed_by(p);
            }
        }
        if let Some(n) = narrower {
            expect = expect.narrowed_by(n);
        }
        self.modern_part(expect, version)
    }

    /// The case's `prefer` set in a reading that does not narrow (see [`Case::expectation`]):
    /// what the judge checks a second time, a miss being a warning. `None` when the case has
    /// none or the reading narrows anyway.
    pub fn preferred(&self, narrows: bool, version: Version) -> Option<Expect> {
        let p = self.spec.prefer.as_ref().filter(|_| !narrows)?;
        Some(self.modern_part(self.spec.expect.narrowed_by(p), version))
    }

    fn modern_part(&self, expect: Expect, version: Version) -> Expect {
        match &self.spec.modern {
            Some(m) if version.is_modern() => expect.narrowed_by(m),
            _ => expect,
        }
    }
}

/// The values placeholders are replaced with.
#[derive(Debug, Clone, Default)]
pub(crate) struct Placeholders {
    values: BTreeMap<&'static str, String>,
}

/// Line and column (1-based) of byte offset `at` in `text`.
pub(crate) fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.len(), |n| before.len() - n - 1)
        + 1;
    (line, column)
}

/// Parse and validate one case file's text. `path` is only used in errors.
pub fn parse_case(path: &str, text: &str) -> Result<CaseSpec, CaseError> {
    let spec: CaseSpec = serde_json::from_str(text).map_err(|e| CaseError::Syntax {
        path: path.to_string(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    validation::validate(path, text, &spec)?;
    Ok(spec)
}

/// The JSON Schema of a case file, generated from the model (kept in `cases/schema.json`).
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(CaseSpec);
    serde_json::to_string_pretty(&schema).expect("a JSON schema serializes") + "\n"
}
