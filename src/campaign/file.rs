//! A target file: one package (or program) a campaign installs, starts and runs the catalogue
//! against, lane by lane. The JSON format as Rust types, its schema, and its checks.
//!
//! A target is `DIR/NAME.json` or `DIR/NAME/target.json` (`DIR/schema.json` is the format's
//! schema); NAME heads its columns. Paths in the
//! file are relative to the folder that holds it (`{dir}` in commands).

use crate::case::TransportKind;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One target file.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    /// The schema this file follows (`mcp-gauntlet schema --targets`), for editors.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// One sentence for the matrix's header: what it is.
    pub about: String,
    /// The package as its registry names it (`mcp`, `@modelcontextprotocol/sdk`, `rmcp`).
    pub package: String,
    pub ecosystem: Ecosystem,
    /// The exact release the recipe pins (`2.3.0`). Absent only for `none` (the suite itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    pub install: Recipe,
    /// How to speak to it, when not as to the suite's own peers.
    #[serde(default)]
    pub speak: Speak,
    /// How to start it, one entry per column of the matrix.
    #[schemars(length(min = 1))]
    pub lanes: Vec<LaneSpec>,
}

/// Where the package comes from, spelled as `cases/advisories.json` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Ecosystem {
    #[serde(rename = "PyPI")]
    PyPi,
    #[serde(rename = "npm")]
    Npm,
    #[serde(rename = "crates.io")]
    Crates,
    /// Not from a registry (the suite's own reference gate and witness).
    #[serde(rename = "none")]
    None,
}

impl Ecosystem {
    pub fn as_str(self) -> &'static str {
        match self {
            Ecosystem::PyPi => "PyPI",
            Ecosystem::Npm => "npm",
            Ecosystem::Crates => "crates.io",
            Ecosystem::None => "none",
        }
    }
}

/// How to get it: installed once per campaign into a cache under `target/` (`{env}`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Recipe {
    /// A virtual environment (`python3 -m venv`) with `pip install`: the requirements file
    /// beside the target file (every package pinned with `==`), or `packages`. `{python}` in
    /// commands is its interpreter.
    Pypi {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        requirements: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        packages: Vec<String>,
    },
    /// A folder with `package.json` (and `package-lock.json`, then `npm ci`) copied from
    /// `folder`, or made from `packages` (`NAME@RELEASE`), then installed; `copy` lists more
    /// files of `folder` to copy beside it (a server script that imports the package).
    Npm {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        folder: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        packages: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        copy: Vec<String>,
    },
    /// `cargo build --locked --release` of `manifest` (its `Cargo.lock` beside it) into
    /// `{env}`: its binaries are `{env}/release/NAME`.
    Cargo { manifest: String },
    /// Nothing to install: the commands are on this machine already.
    Command,
    /// The suite itself: the embedded default.
    Builtin,
}

impl Recipe {
    pub fn kind(&self) -> &'static str {
        match self {
            Recipe::Pypi { .. } => "pypi",
            Recipe::Npm { .. } => "npm",
            Recipe::Cargo { .. } => "cargo",
            Recipe::Command => "command",
            Recipe::Builtin => "builtin",
        }
    }
}

/// How the runner speaks to the target (the `run` flags of the same names).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Speak {
    /// The tool the target must refuse to run (`--denied-tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied_tool: Option<String>,
    /// A harmless tool (`--allowed-tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_tool: Option<String>,
    /// The argument the allowed tool takes its text in (`--allowed-arg`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_arg: Option<String>,
    /// How a gate names its downstream's tools (`--tool-name`, `{tool}` and `{server}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// `{server}` in the tool name (`--tool-server`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_server: Option<String>,
    /// How it refuses a tool call (`--deny-style`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny_style: Option<DenyStyleSpec>,
    /// A token it accepts, sent on every request (`--auth-token`; a fixture's, never a secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_token: Option<String>,
    /// Text the denied tool answers when it runs (`--canary-text`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary_text: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DenyStyleSpec {
    Error,
    Result,
}

/// How a lane reaches the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LaneKind {
    /// Streamable HTTP, started by the runner (`run --serve`): `{port}` in the command.
    Http,
    /// HTTP+SSE (2024-11-05), started by the runner with its stream at `path` (`/sse`).
    Sse,
    /// stdio, started per case (`run --stdio`).
    Stdio,
    /// An HTTP gate in front of the runner's witness (`run --gate`): `{port}` and
    /// `{downstream_url}`. Gate profile.
    Gate,
    /// A stdio gate per case (`run --gate-stdio`): `{downstream_cmd}` or `{downstream_argv}`.
    GateStdio,
    /// The embedded default: the reference gate and the witness (no command).
    Embedded,
}

impl LaneKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LaneKind::Http => "http",
            LaneKind::Sse => "sse",
            LaneKind::Stdio => "stdio",
            LaneKind::Gate => "gate",
            LaneKind::GateStdio => "gate-stdio",
            LaneKind::Embedded => "embedded",
        }
    }

    /// The placeholders its command must hold (the runner fills them).
    fn required(self) -> &'static [&'static str] {
        match self {
            LaneKind::Http | LaneKind::Sse => &["port"],
            LaneKind::Gate => &["port", "downstream_url"],
            LaneKind::Stdio | LaneKind::GateStdio | LaneKind::Embedded => &[],
        }
    }

    /// The placeholders its command may hold: the runner's, and the campaign's own.
    fn allowed(self) -> &'static [&'static str] {
        match self {
            LaneKind::Http | LaneKind::Sse => &["port", "dir", "env", "python", "gauntlet"],
            LaneKind::Gate => &["port", "downstream_url", "dir", "env", "python", "gauntlet"],
            LaneKind::GateStdio => &[
                "downstream_cmd",
                "downstream_argv",
                "dir",
                "env",
                "python",
                "gauntlet",
            ],
            LaneKind::Stdio => &["dir", "env", "python", "gauntlet"],
            LaneKind::Embedded => &[],
        }
    }

    /// The transport the lane's records are over (HTTP for the HTTP gate).
    pub fn transport(self) -> Option<TransportKind> {
        match self {
            LaneKind::Http | LaneKind::Gate => Some(TransportKind::Http),
            LaneKind::Sse => Some(TransportKind::Sse),
            LaneKind::Stdio | LaneKind::GateStdio => Some(TransportKind::Stdio),
            LaneKind::Embedded => None,
        }
    }
}

/// One column: the target started one way.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LaneSpec {
    /// The column is `TARGET-NAME` (`python-http-stateless`). Default: the kind's word
    /// (`http`, `stdio`, `sse`, `gate`, `gate-stdio`); none for `embedded` (the column is
    /// the target's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub kind: LaneKind,
    /// The command, one string split as a shell would (no shell runs it). Placeholders:
    /// `{port}` (http, sse, gate), `{downstream_url}` (gate), `{downstream_cmd}` and
    /// `{downstream_argv}` (gate-stdio), and the campaign's: `{dir}` (the target file's folder),
    /// `{env}` (its install), `{python}` (the pypi recipe's interpreter), `{gauntlet}` (this
    /// program).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// http: the MCP endpoint's path (`/mcp`); sse: the event stream's (`/sse`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The lane's known failures (`run --baseline`), beside the target file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// A file of case ids (one per line, `#` comments) whose verdict on this lane depends on
    /// its scheduling: left out, so the lane is deterministic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unstable: Option<String>,
    /// A lane that takes minutes (every case starts a heavy interpreter): `campaign --slow`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub slow: bool,
}

impl LaneSpec {
    /// The lane's part of its column's name (`None`: the column is the target's name).
    pub fn name(&self) -> Option<&str> {
        match (&self.name, self.kind) {
            (Some(n), _) => Some(n),
            (None, LaneKind::Embedded) => None,
            (None, k) => Some(k.as_str()),
        }
    }
}

/// A target file read and checked: its name (the file's, or its folder's) and where it is.
#[derive(Debug, Clone)]
pub struct TargetFile {
    pub name: String,
    pub path: PathBuf,
    /// The folder that holds it (`{dir}`), absolute.
    pub dir: PathBuf,
    pub spec: TargetSpec,
}

impl TargetFile {
    /// A column's name: `TARGET-LANE`, or the target's name for a lane without one.
    pub fn column(&self, lane: &LaneSpec) -> String {
        match lane.name() {
            Some(l) => format!("{}-{l}", self.name),
            None => self.name.clone(),
        }
    }

    /// The release, or `-` for the suite itself.
    pub fn release(&self) -> &str {
        self.spec.release.as_deref().unwrap_or("-")
    }

    /// A path the file names, from its folder.
    pub fn beside(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }
}

/// Why a target file (or a folder of them) was refused: file, line and column, and what.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    #[error("cannot read {path}")]
    Read {
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
    #[error("{path}:{line}:{column}: {problem}")]
    Invalid {
        path: String,
        line: usize,
        column: usize,
        problem: Problem,
    },
    #[error("{dir}: no target files (NAME.json or NAME/target.json)")]
    Empty { dir: String },
    #[error("{path}: a target's name is letters, digits, `-`, `_` and `.`")]
    BadName { path: String },
    #[error("{first} and {second} both make the column `{column}` (two targets of one name, or a lane name that makes another target's column)")]
    SameColumn {
        column: String,
        first: String,
        second: String,
    },
}

/// What is wrong in a target file that parses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    #[error("`release` is required: the exact release the recipe pins")]
    NoRelease,
    #[error("recipe `{recipe}` does not install from {ecosystem}")]
    RecipeEcosystem {
        recipe: &'static str,
        ecosystem: &'static str,
    },
    #[error("`{0}` does not exist beside the target file")]
    Missing(String),
    #[error("the recipe does not pin {package} {release} (`{found}`)")]
    Pin {
        package: String,
        release: String,
        found: String,
    },
    #[error("a pypi or npm recipe needs a requirements file, a folder or packages")]
    NoRecipeSource,
    #[error("two lanes are named `{0}`")]
    DuplicateLane(String),
    #[error("an `{0}` lane needs a command")]
    NoCommand(&'static str),
    #[error("an embedded lane takes no command")]
    EmbeddedCommand,
    #[error("the command of an `{kind}` lane lacks `{{{placeholder}}}`")]
    MissingPlaceholder {
        kind: &'static str,
        placeholder: &'static str,
    },
    #[error("unknown placeholder `{{{placeholder}}}` in an `{kind}` lane's command")]
    UnknownPlaceholder {
        kind: &'static str,
        placeholder: String,
    },
    #[error("the command does not split as a shell would: {0}")]
    Unsplittable(String),
    #[error("a lane name is letters, digits and `-`: `{0}`")]
    BadLaneName(String),
}

/// The target format's schema, kept in the folder for editors (`$schema`): not a target.
pub const SCHEMA_FILE: &str = "schema.json";

/// The schema of the target format (`mcp-gauntlet schema --targets`).
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(TargetSpec);
    serde_json::to_string_pretty(&schema).expect("a JSON schema serializes") + "\n"
}

/// Every target file under `dir` (`NAME.json`, `NAME/target.json`), read and checked, by name.
pub fn load_dir(dir: &Path) -> Result<Vec<TargetFile>, TargetError> {
    let read = |source| TargetError::Read {
        path: dir.display().to_string(),
        source,
    };
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read)? {
        let path = entry.map_err(read)?.path();
        let inner = path.join("target.json");
        if path.is_dir() && inner.is_file() {
            paths.push(inner);
        } else if path.is_file()
            && path.extension().is_some_and(|e| e == "json")
            && path.file_name().is_some_and(|n| n != SCHEMA_FILE)
        {
            paths.push(path);
        }
    }
    if paths.is_empty() {
        return Err(TargetError::Empty {
            dir: dir.display().to_string(),
        });
    }
    let mut out = paths
        .iter()
        .map(|p| load_file(p))
        .collect::<Result<Vec<_>, _>>()?;
    out.sort_by(|a, b| a.name.cmp(&b.name));
    // Names and columns name files under the campaign's folder and its cache: each one once.
    let mut columns = std::collections::BTreeMap::new();
    for t in &out {
        for lane in &t.spec.lanes {
            if let Some(first) = columns.insert(t.column(lane), t.path.display().to_string()) {
                return Err(TargetError::SameColumn {
                    column: t.column(lane),
                    first,
                    second: t.path.display().to_string(),
                });
            }
        }
    }
    Ok(out)
}

/// One target file, read and checked.
pub fn load_file(path: &Path) -> Result<TargetFile, TargetError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| TargetError::Read {
        path: shown.clone(),
        source,
    })?;
    let spec: TargetSpec = serde_json::from_str(&text).map_err(|e| TargetError::Syntax {
        path: shown.clone(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let dir = path
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let dir = std::path::absolute(&dir).unwrap_or(dir);
    let name = if path.file_name().is_some_and(|n| n == "target.json") {
        dir.file_name()
    } else {
        path.file_stem()
    }
    .map(|n| n.to_string_lossy().into_owned())
    .unwrap_or_default();
    let named = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || name.starts_with('.') || !name.chars().all(named) {
        return Err(TargetError::BadName { path: shown });
    }
    let file = TargetFile {
        name,
        path: path.to_path_buf(),
        dir,
        spec,
    };
    if let Err((problem, key)) = check(&file) {
        let (line, column) = locate(&text, &key);
        return Err(TargetError::Invalid {
            path: shown,
            line,
            column,
            problem,
        });
    }
    Ok(file)
}

/// Where `key` (a member's name, or a string value) first appears in `text`.
fn locate(text: &str, key: &str) -> (usize, usize) {
    let at = text.find(&format!("\"{key}\"")).unwrap_or(0);
    crate::case::line_col(text, at)
}

type Located = (Problem, String);

/// The file's checks; on the first problem, it and the member (or value) to point at.
fn check(f: &TargetFile) -> Result<(), Located> {
    let s = &f.spec;
    if s.release.is_none() && s.ecosystem != Ecosystem::None {
        return Err((Problem::NoRelease, "package".into()));
    }
    check_recipe(f)?;
    let mut names = std::collections::BTreeSet::new();
    for lane in &s.lanes {
        let name = lane.name().unwrap_or("").to_string();
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        {
            return Err((Problem::BadLaneName(name.clone()), name));
        }
        if !names.insert(name.clone()) {
            return Err((Problem::DuplicateLane(name.clone()), name));
        }
        check_lane(f, lane)?;
    }
    Ok(())
}

fn check_recipe(f: &TargetFile) -> Result<(), Located> {
    let s = &f.spec;
    let ok = matches!(
        (&s.install, s.ecosystem),
        (Recipe::Pypi { .. }, Ecosystem::PyPi)
            | (Recipe::Npm { .. }, Ecosystem::Npm)
            | (Recipe::Cargo { .. }, Ecosystem::Crates)
            | (Recipe::Command, _)
            | (Recipe::Builtin, Ecosystem::None)
    );
    if !ok {
        return Err((
            Problem::RecipeEcosystem {
                recipe: s.install.kind(),
                ecosystem: s.ecosystem.as_str(),
            },
            "install".into(),
        ));
    }
    check_pin(f)
}

/// The pin is typed once, in the recipe's own file, and the target file's release must be it;
/// the files the recipe reads exist.
fn check_pin(f: &TargetFile) -> Result<(), Located> {
    let s = &f.spec;
    let release = f.release();
    let exists = |rel: &str| -> Result<PathBuf, Located> {
        let p = f.beside(rel);
        if p.exists() {
            Ok(p)
        } else {
            Err((Problem::Missing(rel.to_string()), rel.to_string()))
        }
    };
    // The pin is typed once, in the recipe's own file, and the target file's release must be it.
    let pinned = |text: &str, want: &str, key: &str| -> Result<(), Located> {
        if text.contains(want) {
            Ok(())
        } else {
            Err((
                Problem::Pin {
                    package: s.package.clone(),
                    release: release.to_string(),
                    found: key.to_string(),
                },
                key.to_string(),
            ))
        }
    };
    match &s.install {
        Recipe::Pypi {
            requirements,
            packages,
        } => {
            let want = format!("{}=={release}", s.package);
            let mut listed = packages.join("\n");
            if let Some(r) = requirements {
                listed.push_str(&std::fs::read_to_string(exists(r)?).unwrap_or_default());
            } else if packages.is_empty() {
                return Err((Problem::NoRecipeSource, "install".into()));
            }
            let lines: Vec<&str> = listed.lines().map(str::trim).collect();
            if !lines.iter().any(|l| l.eq_ignore_ascii_case(&want)) {
                let key = requirements.clone().unwrap_or_else(|| "packages".into());
                return Err((
                    Problem::Pin {
                        package: s.package.clone(),
                        release: release.to_string(),
                        found: key.clone(),
                    },
                    key,
                ));
            }
        }
        Recipe::Npm {
            folder,
            packages,
            copy,
        } => {
            if let Some(d) = folder {
                let manifest = exists(&format!("{d}/package.json"))?;
                let text = std::fs::read_to_string(manifest).unwrap_or_default();
                pinned(&text, &format!("\"{}\": \"{release}\"", s.package), d)?;
                for c in copy {
                    exists(&format!("{d}/{c}"))?;
                }
            } else if packages.is_empty() {
                return Err((Problem::NoRecipeSource, "install".into()));
            } else if !packages.contains(&format!("{}@{release}", s.package)) {
                pinned("", "-", "packages")?;
            }
        }
        Recipe::Cargo { manifest } => {
            let text = std::fs::read_to_string(exists(manifest)?).unwrap_or_default();
            // The package's own dependency line pins it (`rmcp = { version = "=3.11.0", … }`).
            let own = dependency_lines(&text, &s.package);
            pinned(&own, &format!("\"={release}\""), manifest)?;
        }
        Recipe::Command | Recipe::Builtin => {}
    }
    Ok(())
}

/// The lines of a Cargo manifest that name `package` as a dependency (`NAME = …`).
fn dependency_lines(manifest: &str, package: &str) -> String {
    manifest
        .lines()
        .filter(|l| {
            l.trim_start()
                .strip_prefix(package)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .collect()
}

fn check_lane(f: &TargetFile, lane: &LaneSpec) -> Result<(), Located> {
    let kind = lane.kind.as_str();
    for rel in [&lane.baseline, &lane.unstable].into_iter().flatten() {
        if !f.beside(rel).is_file() {
            return Err((Problem::Missing(rel.clone()), rel.clone()));
        }
    }
    let command = match (&lane.command, lane.kind) {
        (None, LaneKind::Embedded) => return Ok(()),
        (Some(c), LaneKind::Embedded) => return Err((Problem::EmbeddedCommand, c.clone())),
        (None, _) => return Err((Problem::NoCommand(kind), "lanes".into())),
        (Some(c), _) => c,
    };
    if let Err(e) = shell_words::split(command) {
        return Err((Problem::Unsplittable(e.to_string()), command.clone()));
    }
    let used = placeholders(command);
    for p in lane.kind.required() {
        if !used.iter().any(|u| u == p) {
            return Err((
                Problem::MissingPlaceholder {
                    kind,
                    placeholder: p,
                },
                command.clone(),
            ));
        }
    }
    if let Some(p) = used
        .iter()
        .find(|u| !lane.kind.allowed().contains(&u.as_str()))
    {
        return Err((
            Problem::UnknownPlaceholder {
                kind,
                placeholder: p.clone(),
            },
            command.clone(),
        ));
    }
    if used.iter().any(|u| u == "python") && !matches!(f.spec.install, Recipe::Pypi { .. }) {
        return Err((
            Problem::UnknownPlaceholder {
                kind,
                placeholder: "python".into(),
            },
            command.clone(),
        ));
    }
    Ok(())
}

/// The `{name}` placeholders of a command, in order.
pub(crate) fn placeholders(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = command;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        let name = &after[..close];
        if !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
            out.push(name.to_string());
        }
        rest = &after[close + 1..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_the_braced_lower_case_words() {
        assert_eq!(
            placeholders("{python} {dir}/s.py http {port} {X} {} {a-b} {downstream_url}"),
            ["python", "dir", "port", "downstream_url"]
        );
        assert!(placeholders("no {braces").is_empty());
    }

    #[test]
    fn a_lane_is_named_by_its_kind_unless_it_says_otherwise() {
        let lane = |name: Option<&str>, kind| LaneSpec {
            name: name.map(str::to_string),
            kind,
            command: None,
            path: None,
            baseline: None,
            unstable: None,
            slow: false,
        };
        assert_eq!(lane(None, LaneKind::GateStdio).name(), Some("gate-stdio"));
        assert_eq!(
            lane(Some("http-stateless"), LaneKind::Http).name(),
            Some("http-stateless")
        );
        assert_eq!(lane(None, LaneKind::Embedded).name(), None);
    }
}
