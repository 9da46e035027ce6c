//! Case files: the model, strict loading and validation, placeholders, and body generation.
//!
//! **Architecture invariant:** nothing here does network or process I/O; the only I/O is reading
//! case files. A loaded [`Case`] is plain data that the runner hands to a transport.

mod body;
mod model;

pub use body::Body;
// The case format, as the case files write it (the schema is generated from these types).
pub use model::{
    AliveProbe, AuthNeed, BodySpec, Caller, CaseSpec, ChallengeSpec, CodePattern, ContentCoding,
    Discover, EitherWord, Expect, Forwarding, HoldSpec, IdRule, Level, MappingNeed, NestSpec,
    OneOrMany, Outcome, Profile, RepeatSpec, RequestSpec, SeriesExpect, SeriesSpec, SessionMode,
    SseSpec, SseStream, StatusPattern, TransportKind, Trickle, VersionRange,
};

use crate::versions::Version;
use base64::Engine as _;
use bytes::Bytes;
use include_dir::{include_dir, Dir};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The built-in catalogue, embedded at build time.
static EMBEDDED: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/cases");

/// Placeholder names a case may use.
pub(crate) const PLACEHOLDERS: &[&str] = &[
    "denied_tool",
    "allowed_tool",
    "protocol_version",
    "session_id",
    "meta",
    "denied_tool_b64",
    "allowed_tool_b64",
    "host",
    "path",
    "path_upper",
    "code_malformed",
    "code_denied",
    "code_downstream",
    "scoped_tool",
    "auth_header",
    "allowed_arg",
    "denied_tool_escaped",
    "denied_prompt",
    "denied_prompt_upper",
    "meta_tool",
    "meta_tool_key",
    "meta_arguments_key",
    "meta_arguments_open",
    "client",
    "step",
    "fresh",
    "template_prefix",
    "liveness_method",
    "message_path",
    "session_param",
];

/// Whether `name` is a placeholder a case may use: one of [`PLACEHOLDERS`] or a token of the
/// `auth/` cases ([`crate::auth::TOKEN_PLACEHOLDERS`]).
pub(crate) fn is_placeholder(name: &str) -> bool {
    PLACEHOLDERS.contains(&name) || crate::auth::TOKEN_PLACEHOLDERS.contains(&name)
}

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

impl Placeholders {
    pub fn set(&mut self, name: &'static str, value: impl Into<String>) -> &mut Self {
        self.values.insert(name, value.into());
        self
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The values of `names` that are set, to be set again elsewhere.
    pub(crate) fn values_of(&self, names: &[&'static str]) -> Vec<(&'static str, String)> {
        names
            .iter()
            .filter_map(|&n| Some((n, self.get(n)?.to_string())))
            .collect()
    }

    /// Replace every known `{{name}}` in `text`. Unknown names were refused at load time.
    pub fn apply(&self, text: &str) -> String {
        if !text.contains("{{") {
            return text.to_string();
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("{{") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            match after.find("}}") {
                Some(end) if self.values.contains_key(&after[..end]) => {
                    out.push_str(&self.values[&after[..end]]);
                    rest = &after[end + 2..];
                }
                _ => {
                    out.push_str("{{");
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// Raw bytes with every known `{{name}}` replaced where it is spelled in UTF-8 (or ASCII), in
    /// UTF-32LE, UTF-32BE, UTF-16LE or UTF-16BE, by the value in the same encoding; the bytes around it (invalid
    /// UTF-8, a BOM) are kept as they are. This is how a base64 body carries `{{meta}}`.
    pub(crate) fn apply_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = bytes.to_vec();
        for (name, value) in &self.values {
            let key = format!("{{{{{name}}}}}");
            let utf16 = |s: &str, le: bool| -> Vec<u8> {
                s.encode_utf16()
                    .flat_map(|u| if le { u.to_le_bytes() } else { u.to_be_bytes() })
                    .collect()
            };
            let utf32 = |s: &str, le: bool| -> Vec<u8> {
                s.chars()
                    .map(u32::from)
                    .flat_map(|u| if le { u.to_le_bytes() } else { u.to_be_bytes() })
                    .collect()
            };
            for (pattern, replacement) in [
                (key.as_bytes().to_vec(), value.as_bytes().to_vec()),
                (utf32(&key, true), utf32(value, true)),
                (utf32(&key, false), utf32(value, false)),
                (utf16(&key, true), utf16(value, true)),
                (utf16(&key, false), utf16(value, false)),
            ] {
                out = replace_bytes(&out, &pattern, &replacement);
            }
        }
        out
    }

    /// A JSON value with placeholders replaced in its strings and member names.
    pub(crate) fn apply_json_value(&self, value: &serde_json::Value) -> serde_json::Value {
        self.apply_json(value)
    }

    fn apply_json(&self, value: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match value {
            Value::String(s) => Value::String(self.apply(s)),
            Value::Array(a) => Value::Array(a.iter().map(|v| self.apply_json(v)).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, v)| (self.apply(k), self.apply_json(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    /// The case body with placeholders replaced, as streamable bytes.
    pub fn body(&self, spec: Option<&BodySpec>) -> Body {
        let Some(spec) = spec else {
            return Body::empty();
        };
        match spec {
            BodySpec::Json(v) => {
                // Serializing a Value cannot fail (keys are strings).
                let bytes =
                    serde_json::to_vec(&self.apply_json(v)).expect("a JSON value serializes");
                Body::from_bytes(bytes)
            }
            BodySpec::Text(t) => Body::from_bytes(self.apply(t).into_bytes()),
            // Validated at load time.
            BodySpec::Base64(b) => Body::from_bytes(
                self.apply_bytes(
                    &base64::engine::general_purpose::STANDARD
                        .decode(b)
                        .unwrap_or_default(),
                ),
            ),
            BodySpec::Repeat(r) => {
                let mut body = Body::default();
                body.push(Bytes::from(self.apply(&r.prefix)));
                body.push_repeat(Bytes::from(self.apply(&r.unit)), r.count);
                body.push(Bytes::from(self.apply(&r.suffix)));
                body
            }
            BodySpec::Nest(n) => {
                let mut body = Body::default();
                body.push(Bytes::from(self.apply(&n.prefix)));
                body.push_repeat(Bytes::from(self.apply(&n.open)), n.depth);
                body.push(Bytes::from(self.apply(&n.inner)));
                body.push_repeat(Bytes::from(self.apply(&n.close)), n.depth);
                body.push(Bytes::from(self.apply(&n.suffix)));
                body
            }
        }
    }
}

/// `bytes` with every occurrence of `pattern` replaced by `replacement`.
fn replace_bytes(bytes: &[u8], pattern: &[u8], replacement: &[u8]) -> Vec<u8> {
    if pattern.is_empty() || bytes.len() < pattern.len() {
        return bytes.to_vec();
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(pattern) {
            out.extend_from_slice(replacement);
            i += pattern.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// The set of cases a run uses.
#[derive(Debug, Clone, Default)]
pub struct Catalogue {
    pub cases: Vec<Case>,
}

impl Catalogue {
    /// The catalogue built into the binary.
    pub fn embedded() -> Result<Catalogue, CaseError> {
        let mut files = Vec::new();
        collect_embedded(&EMBEDDED, &mut files);
        let mut cat = Catalogue::default();
        for (rel, text) in files {
            let id = rel.trim_end_matches(".json").to_string();
            let display = format!("cases/{rel}");
            let spec = parse_case(&display, text)?;
            cat.insert(Case {
                id,
                spec,
                source: Source::Embedded,
            })?;
        }
        cat.sort();
        Ok(cat)
    }

    /// Add every case file under `dir` (recursively). Ids are paths relative to `dir`.
    pub fn add_dir(&mut self, dir: &Path) -> Result<usize, CaseError> {
        let mut files = Vec::new();
        walk(dir, dir, &mut files)?;
        let n = files.len();
        for (rel, path) in files {
            let display = path.display().to_string();
            let text = std::fs::read_to_string(&path).map_err(|source| CaseError::Io {
                path: display.clone(),
                source,
            })?;
            let spec = parse_case(&display, &text)?;
            self.insert(Case {
                id: rel,
                spec,
                source: Source::File(path),
            })?;
        }
        self.sort();
        Ok(n)
    }

    fn insert(&mut self, case: Case) -> Result<(), CaseError> {
        if let Some(other) = self.cases.iter().find(|c| c.id == case.id) {
            return Err(CaseError::Duplicate {
                path: source_name(&case),
                id: case.id,
                other: source_name(other),
            });
        }
        self.cases.push(case);
        Ok(())
    }

    fn sort(&mut self) {
        self.cases.sort_by(|a, b| a.id.cmp(&b.id));
    }
}

fn source_name(case: &Case) -> String {
    match &case.source {
        Source::Embedded => format!("cases/{}.json", case.id),
        Source::File(p) => p.display().to_string(),
    }
}

fn collect_embedded(dir: &'static Dir<'static>, out: &mut Vec<(String, &'static str)>) {
    for file in dir.files() {
        let rel = file.path().to_string_lossy().replace('\\', "/");
        // Top-level JSON files (requirements.json, schema.json, advisories.json) are not cases.
        if rel.ends_with(".json") && rel.contains('/') {
            out.push((rel, file.contents_utf8().unwrap_or("")));
        }
    }
    for sub in dir.dirs() {
        collect_embedded(sub, out);
    }
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) -> Result<(), CaseError> {
    let io = |source| CaseError::Io {
        path: dir.display().to_string(),
        source,
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io)?
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort_by_key(|e| e.path());
    for entry in entries {
        let path = entry.path();
        if path.is_dir() {
            walk(root, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "json") {
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .with_extension("")
                .to_string_lossy()
                .replace('\\', "/");
            // Catalogue metadata at the root of a cases folder is not a case.
            if rel == "requirements" || rel == "schema" || rel == "advisories" {
                continue;
            }
            out.push((rel, path));
        }
    }
    Ok(())
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
    validate(path, text, &spec)?;
    Ok(spec)
}

fn invalid(path: &str, message: impl Into<String>) -> CaseError {
    CaseError::Invalid {
        path: path.to_string(),
        message: message.into(),
    }
}

/// A case's meaning beyond its syntax, in the order a reader checks it: what it is, what it
/// sends, its body, what it expects, which versions and profiles its keys apply to, and its
/// placeholders. The first problem is the error.
fn validate(path: &str, text: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    validate_metadata(path, text, spec)?;
    validate_request(path, spec)?;
    validate_body(path, &spec.request)?;
    validate_expectations(path, spec)?;
    validate_version_keys(path, spec)?;
    validate_placeholders(path, text)?;
    validate_mapping(path, text, spec)?;
    validate_probe(path, spec)
}

/// A probe that goes through to the downstream needs what it probes: a process or session the
/// runner opened (`session: initialized`), kept open after the case (no `close_input`), and an
/// alive check at all (`alive` not false): otherwise it could never run, or always fail.
fn validate_probe(path: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    if spec.alive_probe != AliveProbe::Downstream {
        return Ok(());
    }
    let sets = [
        Some(&spec.expect),
        spec.strict.as_ref(),
        spec.gate.as_ref(),
        spec.prefer.as_ref(),
        spec.modern.as_ref(),
    ];
    let alive_off = sets.into_iter().flatten().any(|e| e.alive == Some(false));
    if spec.session == SessionMode::None || spec.request.close_input || alive_off {
        return Err(invalid(
            path,
            "`alive_probe: downstream` needs `session: initialized`, no `close_input`, and `alive` not false",
        ));
    }
    Ok(())
}

/// The meta-tool's placeholders are known only under a meta-tool mapping: a case that uses them
/// says it is written for one (`"mapping": "meta-tool"`).
fn validate_mapping(path: &str, text: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    let uses_meta = ["{{meta_tool", "{{meta_arguments"]
        .iter()
        .any(|p| text.contains(p));
    if uses_meta && spec.mapping != Some(MappingNeed::MetaTool) {
        return Err(invalid(
            path,
            "the meta-tool placeholders need `\"mapping\": \"meta-tool\"`",
        ));
    }
    Ok(())
}

/// Title, cited requirement IDs (known ones, reported where they are written), transports,
/// profiles, version range and timeout.
fn validate_metadata(path: &str, text: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    if spec.title.trim().is_empty() {
        return Err(invalid(path, "`title` is empty"));
    }
    if spec.stateful && spec.stateless {
        return Err(invalid(
            path,
            "`stateful` and `stateless` together: the case would apply to no HTTP target",
        ));
    }
    if spec.requirements.is_empty() {
        return Err(invalid(
            path,
            "`requirements` is empty: cite at least one ID",
        ));
    }
    let reqs = requirements();
    for id in &spec.requirements {
        if !reqs.contains_key(id) {
            let at = text.find(&format!("\"{id}\"")).unwrap_or(0);
            let (line, column) = line_col(text, at);
            return Err(CaseError::UnknownRequirement {
                path: path.to_string(),
                id: id.clone(),
                line,
                column,
            });
        }
    }
    validate_advisories(path, text, spec)?;
    if spec.transports.as_ref().is_some_and(Vec::is_empty) {
        return Err(invalid(path, "`transports` is empty"));
    }
    if spec.profiles.as_ref().is_some_and(Vec::is_empty) {
        return Err(invalid(path, "`profiles` is empty"));
    }
    if spec.timeout_ms.is_some_and(|t| t == 0 || t > 600_000) {
        return Err(invalid(path, "`timeout_ms` must be 1..=600000"));
    }
    validate_clients(path, text, spec)?;
    if spec.sse.is_some() && spec.transports.as_deref() != Some(&[TransportKind::Sse]) {
        return Err(invalid(
            path,
            "`sse` says what becomes of an HTTP+SSE stream: its `transports` are `[\"sse\"]`",
        ));
    }
    let elsewhere = [spec.prefer.as_ref(), spec.strict.as_ref()]
        .into_iter()
        .flatten()
        .any(|e| e.endpoint_same_origin.is_some());
    let endpoint = spec.expect.endpoint_same_origin;
    if elsewhere
        || endpoint == Some(false)
        || (endpoint.is_some() && spec.transports.as_deref() != Some(&[TransportKind::Sse]))
    {
        return Err(invalid(
            path,
            "`endpoint_same_origin` is `true` in `expect` only, and judges an HTTP+SSE stream's endpoint event: its `transports` are `[\"sse\"]`",
        ));
    }
    if let Some(sse) = &spec.sse {
        let unread = sse.stream == SseStream::Unread;
        if sse
            .posts
            .is_some_and(|n| !unread || !(1..=5000).contains(&n))
        {
            return Err(invalid(
                path,
                "`sse.posts` (1..=5000) goes with `\"stream\": \"unread\"`",
            ));
        }
    }
    validate_series(path, text, spec)
}

/// What a series' expectation may say: no one forwarded message (each step sends its own), and
/// a CPU ratio only to a baseline it has.
fn validate_series_expect(
    path: &str,
    spec: &CaseSpec,
    series: &SeriesSpec,
) -> Result<(), CaseError> {
    if spec.expect.forwarded_json.is_some() {
        return Err(invalid(
            path,
            "`forwarded_json` names one message; a series sends a new one each step (use `forwarded`)",
        ));
    }
    let ratio = spec.expect.series.as_ref().and_then(|e| e.cpu_ratio);
    if ratio.is_some() != series.baseline.is_some()
        || ratio.is_some_and(|r| !(2..=1000).contains(&r))
    {
        return Err(invalid(
            path,
            "`expect.series.cpu_ratio` (2..=1000) and `series.baseline` go together: the ratio is to the baseline's CPU",
        ));
    }
    let streams = spec.expect.series.as_ref().and_then(|e| e.open_streams);
    if streams.is_some() && series.hold.is_none() {
        return Err(invalid(
            path,
            "`expect.series.open_streams` counts the event streams of held connections: it needs `series.hold`",
        ));
    }
    Ok(())
}

/// Whether the case names its transports, and each is one over HTTP connections (Streamable
/// HTTP, or HTTP+SSE's POSTs).
fn over_http_only(spec: &CaseSpec) -> bool {
    spec.transports.as_deref().is_some_and(|t| {
        !t.is_empty()
            && t.iter()
                .all(|t| matches!(t, TransportKind::Http | TransportKind::Sse))
    })
}

/// A series: over HTTP (each step a request of its own), within its bounds, its per-step
/// placeholders only where steps are.
fn validate_series(path: &str, text: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    let Some(series) = &spec.series else {
        return if ["{{step}}", "{{fresh}}", "{{template_prefix}}"]
            .iter()
            .any(|p| text.contains(p))
        {
            Err(invalid(
                path,
                "`{{step}}`, `{{fresh}}` and `{{template_prefix}}` are a series step's: they need `series`",
            ))
        } else if spec.expect.series.is_some() {
            Err(invalid(path, "`expect.series` needs `series`"))
        } else {
            Ok(())
        };
    };
    if !(1..=20_000).contains(&series.count) || series.warmup >= series.count {
        return Err(invalid(
            path,
            "`series.count` must be 1..=20000 and `series.warmup` below it",
        ));
    }
    if !(1..=16).contains(&series.connections) {
        return Err(invalid(path, "`series.connections` must be 1..=16"));
    }
    if series.rate.is_some_and(|r| !(1..=100_000).contains(&r))
        || series
            .budget_ms
            .is_some_and(|b| !(1..=600_000).contains(&b))
    {
        return Err(invalid(
            path,
            "`series.rate` must be 1..=100000 steps a second and `series.budget_ms` 1..=600000",
        ));
    }
    validate_series_transports(path, spec, series)?;
    if spec.request.raw_http.is_some()
        || spec.clients.is_some()
        || series
            .baseline
            .as_ref()
            .is_some_and(|b| b.raw_http.is_some())
    {
        return Err(invalid(
            path,
            "a series sends a request the runner builds, from one client",
        ));
    }
    if text.contains("{{template_prefix}}") && series.discover != Some(Discover::ResourceTemplate) {
        return Err(invalid(
            path,
            "`{{template_prefix}}` is learned from the server: it needs `\"discover\": \"resource-template\"`",
        ));
    }
    validate_series_expect(path, spec, series)?;
    if let Some(hold) = &series.hold {
        validate_hold(path, spec, series, hold)?;
    }
    if series
        .cap
        .as_ref()
        .is_some_and(|c| c.as_slice().iter().any(|s| !s.is_valid()))
    {
        return Err(invalid(path, "`series.cap` holds an invalid HTTP status"));
    }
    Ok(())
}

/// A series names its transports: HTTP, and stdio where each step is a line to one process;
/// what is HTTP's (held connections, sessions closed, status caps, headers) or ends a stdio
/// process's input is not for stdio.
fn validate_series_transports(
    path: &str,
    spec: &CaseSpec,
    series: &SeriesSpec,
) -> Result<(), CaseError> {
    let transports = spec.transports.as_deref().unwrap_or_default();
    let over_stdio = transports.contains(&TransportKind::Stdio);
    if transports.is_empty() {
        return Err(invalid(
            path,
            "a series names its transports: `http`, and `stdio` where each step is a line to one process",
        ));
    }
    if over_stdio
        && (series.hold.is_some()
            || series.close_each
            || series.close_sessions
            || series.cap.is_some()
            || !spec.request.headers.is_empty()
            || spec.request.raw_line
            || spec.request.close_input
            || spec.request.chunked
            || spec.request.content_encoding.is_some()
            || spec.request.path.is_some())
    {
        return Err(invalid(
            path,
            "over stdio a series writes each step as a line to one process that stays open: `hold`, `close_each`, `close_sessions`, `cap` and request `headers`, `path`, `chunked` and `content_encoding` are HTTP's, and `raw_line` and `close_input` are not for it",
        ));
    }
    Ok(())
}

/// Held connections (`series.hold`): at most 1000 of them, held 0.1 to 60 s, a byte every 10
/// ms to 10 s; the request is the steps' own, so what only a stepped series has (a cap, a
/// warm-up, sessions closed, a baseline, discovery, a rate) is not for them.
fn validate_hold(
    path: &str,
    spec: &CaseSpec,
    series: &SeriesSpec,
    hold: &HoldSpec,
) -> Result<(), CaseError> {
    if hold.trickle == Trickle::Body && (spec.request.body.is_none() || spec.request.chunked) {
        return Err(invalid(
            path,
            "`hold.trickle: body` trickles a body of the case's own, sent with its length (not chunked)",
        ));
    }
    if hold.in_turn && hold.trickle != Trickle::Idle {
        return Err(invalid(
            path,
            "`hold.in_turn` waits for each answer before the next request: only a whole request (`trickle: idle`) is answered",
        ));
    }
    if series.count > 1000
        || !(100..=60_000).contains(&hold.for_ms)
        || !(10..=10_000).contains(&hold.every_ms)
    {
        return Err(invalid(
            path,
            "`series.hold` holds at most 1000 connections (`count`), for 100..=60000 ms, a byte every 10..=10000 ms",
        ));
    }
    if series.budget_ms.is_some_and(|b| b < hold.for_ms + 10_000) {
        return Err(invalid(
            path,
            "`series.budget_ms` leaves the hold and the request sent after it at least 10 s: at least `hold.for_ms` + 10000",
        ));
    }
    if series.warmup > 0
        || series.cap.is_some()
        || series.close_sessions
        || series.close_each
        || series.discover.is_some()
        || series.baseline.is_some()
        || series.rate.is_some()
        || series.connections != 1
    {
        return Err(invalid(
            path,
            "`series.hold` takes only `count` (the connections held) and `budget_ms` beside it",
        ));
    }
    Ok(())
}

/// Concurrent clients: 2 to 16, over HTTP, each with a mark of its own in what it sends.
fn validate_clients(path: &str, text: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    let Some(n) = spec.clients else {
        return if text.contains("{{client}}") {
            Err(invalid(
                path,
                "`{{client}}` is a client's mark: it needs `clients`",
            ))
        } else {
            Ok(())
        };
    };
    if !(2..=16).contains(&n) {
        return Err(invalid(path, "`clients` must be 2..=16"));
    }
    if !over_http_only(spec) {
        return Err(invalid(
            path,
            "a `clients` case needs `\"transports\"` of `http`, `sse` or both (a stdio process has one client)",
        ));
    }
    if spec.request.raw_http.is_some() || spec.caller.is_some() {
        return Err(invalid(
            path,
            "a `clients` case sends a request the runner builds, as the run's principal",
        ));
    }
    if !text.contains("{{client}}") {
        return Err(invalid(
            path,
            "a `clients` case writes `{{client}}` in its request: without a mark, crossed answers cannot be told apart",
        ));
    }
    Ok(())
}

/// Cited advisories: each well formed, in `cases/advisories.json`, and cited once.
fn validate_advisories(path: &str, text: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    let mut seen: Vec<&'static crate::advisory::Advisory> = Vec::new();
    for id in &spec.advisories {
        let at = text.find(&format!("\"{id}\"")).unwrap_or(0);
        let (line, column) = line_col(text, at);
        let (path, id) = (path.to_string(), id.clone());
        if crate::advisory::shape(&id).is_none() {
            return Err(CaseError::AdvisoryId {
                path,
                id,
                line,
                column,
            });
        }
        let Some(a) = crate::advisory::find(&id) else {
            return Err(CaseError::UnknownAdvisory {
                path,
                id,
                line,
                column,
            });
        };
        if seen.contains(&a) {
            return Err(invalid(
                &path,
                format!("`advisories`: `{id}` names {} again", a.id),
            ));
        }
        seen.push(a);
    }
    Ok(())
}

/// The request: `raw_http` alone or `method`/`path`/`headers`, each an HTTP token or path.
fn validate_request(path: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    let req = &spec.request;
    if req.raw_http.is_some() {
        if req.method.is_some() || req.path.is_some() || !req.headers.is_empty() {
            return Err(invalid(
                path,
                "`raw_http` replaces `method`, `path` and `headers`",
            ));
        }
        if req.body.is_some() || req.chunked || req.content_encoding.is_some() {
            return Err(invalid(
                path,
                "`raw_http` replaces `body`, `chunked` and `content_encoding`",
            ));
        }
        if spec.transports.as_deref() != Some(&[TransportKind::Http]) {
            return Err(invalid(
                path,
                "a `raw_http` case needs `\"transports\": [\"http\"]`",
            ));
        }
    }
    if req.content_encoding.is_some() && !over_http_only(spec) {
        return Err(invalid(
            path,
            "a `content_encoding` case needs `\"transports\": [\"http\"]` (or `[\"http\", \"sse\"]`)",
        ));
    }
    if let Some(m) = &req.method {
        if m.is_empty()
            || !m
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(invalid(
                path,
                format!("`method` `{m}` is not an HTTP token"),
            ));
        }
    }
    if let Some(p) = &req.path {
        // `{{path}}` or `{{path_upper}}` (the target's own path, as it is or in capitals) may
        // start it: a case adds a query or another spelling to it.
        let rooted = ["/", "{{path}}", "{{path_upper}}", "{{message_path}}"]
            .iter()
            .any(|start| p.starts_with(start));
        if !rooted || p.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(invalid(
                path,
                "`path` must start with `/`, `{{path}}`, `{{path_upper}}` or `{{message_path}}` and hold no spaces or controls",
            ));
        }
    }
    for name in req.headers.keys() {
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        {
            return Err(invalid(
                path,
                format!("header name `{name}` is not an HTTP token"),
            ));
        }
    }
    Ok(())
}

/// Bodies: base64 that decodes, generated bodies under 4 GiB.
fn validate_body(path: &str, req: &RequestSpec) -> Result<(), CaseError> {
    match &req.body {
        Some(BodySpec::Base64(b))
            if base64::engine::general_purpose::STANDARD.decode(b).is_err() =>
        {
            return Err(invalid(path, "`base64` body is not valid base64"));
        }
        Some(BodySpec::Repeat(r)) => {
            if r.unit.is_empty() {
                return Err(invalid(path, "`repeat.unit` is empty"));
            }
            let len = (r.unit.len() as u64).saturating_mul(r.count);
            if len > MAX_BODY_LEN {
                return Err(invalid(path, "`repeat` body is longer than 4 GiB"));
            }
        }
        Some(BodySpec::Nest(n)) => {
            let len = ((n.open.len() + n.close.len()) as u64).saturating_mul(n.depth);
            if len > MAX_BODY_LEN {
                return Err(invalid(path, "`nest` body is longer than 4 GiB"));
            }
        }
        _ => {}
    }
    Ok(())
}

/// `expect` (an outcome required) and its narrowings (`strict`, `gate`, `modern`), none empty.
fn validate_expectations(path: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    check_expect(path, "expect", &spec.expect)?;
    if spec.expect.outcome.is_none() {
        return Err(invalid(path, "`expect.outcome` is required"));
    }
    // `closed` is an HTTP connection's; a stdio case that meant it says `alive: false`.
    let lists_closed = |e: &Expect| {
        e.outcome
            .as_ref()
            .is_some_and(|o| o.as_slice().contains(&Outcome::Closed))
    };
    // A POST over HTTP+SSE is an HTTP connection too.
    let http_only = over_http_only(spec);
    let sets = std::iter::once(&spec.expect)
        .chain(spec.strict.iter())
        .chain(spec.prefer.iter())
        .chain(spec.gate.iter())
        .chain(spec.modern.iter());
    if !http_only && sets.into_iter().any(lists_closed) {
        return Err(invalid(
            path,
            "outcome `closed` is an HTTP connection's: the case must say `\"transports\": [\"http\"]` (or `[\"http\", \"sse\"]`)",
        ));
    }
    for (key, narrower) in [
        ("strict", &spec.strict),
        ("prefer", &spec.prefer),
        ("gate", &spec.gate),
        ("modern", &spec.modern),
    ] {
        if let Some(n) = narrower {
            check_expect(path, key, n)?;
            if *n == Expect::default() {
                return Err(invalid(path, format!("`{key}` is empty")));
            }
        }
    }
    Ok(())
}

/// Keys that only make sense for some versions or profiles: `handshake_version` (a legacy
/// session), `modern` (a case reaching 2026-07-28), `gate` (a case for the gate profile).
fn validate_version_keys(path: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    if spec.handshake_version.is_some() {
        if spec.session == SessionMode::None {
            return Err(invalid(
                path,
                "`handshake_version` on a case without a session",
            ));
        }
        let reaches_modern = spec
            .versions
            .as_ref()
            .is_none_or(|r| r.to.is_none_or(Version::is_modern));
        if reaches_modern {
            return Err(invalid(
                path,
                "`handshake_version` on a case that applies to 2026-07-28 (no handshake there): give it `versions.to`",
            ));
        }
    }
    if spec.modern.is_some()
        && spec
            .versions
            .as_ref()
            .is_some_and(|r| r.to.is_some_and(|t| !t.is_modern()))
    {
        return Err(invalid(
            path,
            "`modern` set on a case that does not apply to 2026-07-28 or later",
        ));
    }
    if spec.gate.is_some()
        && spec
            .profiles
            .as_ref()
            .is_some_and(|p| !p.contains(&Profile::Gate))
    {
        return Err(invalid(
            path,
            "`gate` set on a case that does not apply to the gate profile",
        ));
    }
    Ok(())
}

/// Every `{{name}}` in the file must be a known placeholder.
fn validate_placeholders(path: &str, text: &str) -> Result<(), CaseError> {
    let mut rest = text;
    let mut offset = 0;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        if let Some(end) = after.find("}}") {
            let name = &after[..end];
            if !is_placeholder(name) {
                let (line, column) = line_col(text, offset + start);
                return Err(CaseError::UnknownPlaceholder {
                    path: path.to_string(),
                    name: name.to_string(),
                    line,
                    column,
                });
            }
        }
        offset += start + 2;
        rest = after;
    }
    Ok(())
}

fn check_expect(path: &str, key: &str, e: &Expect) -> Result<(), CaseError> {
    fn nonempty<T>(v: &Option<OneOrMany<T>>) -> bool {
        v.as_ref().is_none_or(|v| !v.as_slice().is_empty())
    }
    if !nonempty(&e.outcome)
        || !nonempty(&e.http_status)
        || !nonempty(&e.error_code)
        || !nonempty(&e.id)
    {
        return Err(invalid(
            path,
            format!("`{key}`: an acceptable set is empty"),
        ));
    }
    if let Some(s) = &e.http_status {
        if let Some(bad) = s.as_slice().iter().find(|p| !p.is_valid()) {
            return Err(invalid(
                path,
                format!("`{key}.http_status`: `{bad}` is not a status or a class like \"4xx\""),
            ));
        }
    }
    if let Some(codes) = &e.error_code {
        for c in codes.as_slice() {
            if let CodePattern::Placeholder(p) = c {
                let known = [
                    "{{code_malformed}}",
                    "{{code_denied}}",
                    "{{code_downstream}}",
                ];
                if !known.contains(&p.as_str()) {
                    return Err(invalid(
                        path,
                        format!("`{key}.error_code`: `{p}` is neither an integer nor a code placeholder"),
                    ));
                }
            }
        }
    }
    if e.leak == Some(true) {
        return Err(invalid(
            path,
            format!("`{key}.leak`: only `false` is meaningful (a case cannot require a leak)"),
        ));
    }
    Ok(())
}

/// The JSON Schema of a case file, generated from the model (kept in `cases/schema.json`).
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(CaseSpec);
    serde_json::to_string_pretty(&schema).expect("a JSON schema serializes") + "\n"
}
