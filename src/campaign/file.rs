//! A target file: one package (or program) a campaign installs, starts and runs the catalogue
//! against, lane by lane. The JSON format as Rust types, its schema, and its checks.
//!
//! A target is `DIR/NAME.json` or `DIR/NAME/target.json` (`DIR/schema.json` is the format's
//! schema); NAME heads its columns. Paths in the
//! file are relative to the folder that holds it (`{dir}` in commands).

use crate::case::TransportKind;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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
    /// The exact release the recipe pins (`2.3.0`). Absent for `none` (the suite itself), and
    /// for a target of `advisories`, whose rows name its releases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
    pub install: Recipe,
    /// How to speak to it, when not as to the suite's own peers.
    #[serde(default)]
    pub speak: Speak,
    /// How to start it, one entry per column of the matrix (for a target of `advisories`: the
    /// lanes its rows start, not columns).
    #[schemars(length(min = 1))]
    pub lanes: Vec<LaneSpec>,
    /// The advisories of `cases/advisories.json` this package is proven against, each on a
    /// release it affects (which must reproduce it) and one it does not (which must not). The
    /// recipe's paths take `{release}`; the file has no `release` of its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub advisories: Vec<AdvisoryRow>,
    /// A proxy or gateway whose lanes front the suite's witness (`{gauntlet} witness
    /// --stdio`): after its cases, each HTTP lane is loaded, and so is the reference gate in
    /// front of the same witness, side by side (`OUT/COLUMN.side.json`, a column of the
    /// ecosystem pages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fronts_witness: Option<SideBySideSpec>,
}

/// How hard a gateway and the reference gate are loaded, alike.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SideBySideSpec {
    /// Concurrent clients, each with its own session.
    #[schemars(range(min = 1, max = 256))]
    pub concurrency: usize,
    /// Requests in all, spread over the clients.
    #[schemars(range(min = 1, max = 1000000))]
    pub requests: u64,
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
    /// A fixture token issuer the campaign makes (an ES256 key, `run --auth-issuer-key`): its
    /// public keys are `{jwks}` in the lanes' commands, and the runner mints the tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<IssuerSpec>,
}

/// The token issuer a target trusts (`run --auth-issuer`, `--auth-audience`, `--auth-kid`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IssuerSpec {
    /// The `iss` of the tokens (`https://issuer.test`).
    pub issuer: String,
    /// Their `aud`: the resource URI the target is told it is (not tied to its port).
    pub audience: String,
    /// Their key id.
    pub kid: String,
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
    pub(crate) fn required(self) -> &'static [&'static str] {
        match self {
            LaneKind::Http | LaneKind::Sse => &["port"],
            LaneKind::Gate => &["port", "downstream_url"],
            LaneKind::Stdio | LaneKind::GateStdio | LaneKind::Embedded => &[],
        }
    }

    /// The placeholders its command may hold: the runner's, and the campaign's own.
    pub(crate) fn allowed(self) -> &'static [&'static str] {
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
    /// program), `{jwks}` (the public keys of `speak.issuer`), `{release}` (the release an
    /// advisory row runs).
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

    /// Whether it is a target of advisory rows (run at the releases they name, not as columns).
    pub fn proves_advisories(&self) -> bool {
        !self.spec.advisories.is_empty()
    }

    /// The release, or `-` for the suite itself.
    pub fn release(&self) -> &str {
        self.spec.release.as_deref().unwrap_or("-")
    }

    /// The target file at one release: `{release}` in its recipe's paths and packages filled.
    pub fn at_release(&self, release: &str) -> TargetFile {
        let fill = |s: &String| s.replace("{release}", release);
        let mut out = self.clone();
        out.spec.release = Some(release.to_string());
        out.spec.install = match &self.spec.install {
            Recipe::Pypi {
                requirements,
                packages,
            } => Recipe::Pypi {
                requirements: requirements.as_ref().map(fill),
                packages: packages.iter().map(fill).collect(),
            },
            Recipe::Npm {
                folder,
                packages,
                copy,
            } => Recipe::Npm {
                folder: folder.as_ref().map(fill),
                packages: packages.iter().map(fill).collect(),
                copy: copy.iter().map(fill).collect(),
            },
            Recipe::Cargo { manifest } => Recipe::Cargo {
                manifest: fill(manifest),
            },
            other => other.clone(),
        };
        out
    }

    /// A path the file names, from its folder.
    pub fn beside(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }
}

/// One advisory the target is proven against.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdvisoryRow {
    /// The advisory, by its id or an alias in `cases/advisories.json`.
    pub id: String,
    /// A release inside the advisory's affected range: it must reproduce the advisory.
    pub affected: String,
    /// A release outside it (the first fixed one, or a later one): it must not.
    pub fixed: String,
    /// The lane (by name) the releases are started with.
    pub lane: String,
    /// What shows the advisory: its cases, or load.
    #[serde(default)]
    pub check: AdvisoryCheck,
    /// What a release comes to when it is not the usual (affected: reproduced, fixed: clean),
    /// and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Expect>,
}

/// What shows an advisory on a release.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum AdvisoryCheck {
    /// The cases that cite it (`run --advisory ID`), as the campaign runs the lane.
    #[default]
    Cases,
    /// Clients whose request ids collide, as SDK clients' do (`load --same-ids`): an answer
    /// that reaches the wrong client reproduces it.
    LoadSameIds {
        concurrency: usize,
        requests: u64,
        /// Each request's deadline, in seconds.
        request_timeout: u64,
    },
}

/// Which check an advisory run was (a record's `check`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckKind {
    Cases,
    LoadSameIds,
}

impl AdvisoryCheck {
    pub fn kind(&self) -> CheckKind {
        match self {
            AdvisoryCheck::Cases => CheckKind::Cases,
            AdvisoryCheck::LoadSameIds { .. } => CheckKind::LoadSameIds,
        }
    }

    pub(crate) fn describe(&self, id: &str) -> String {
        match self {
            AdvisoryCheck::Cases => format!("run --advisory {id}"),
            AdvisoryCheck::LoadSameIds {
                concurrency,
                requests,
                ..
            } => format!("load --same-ids, {concurrency} clients, {requests} requests"),
        }
    }
}

/// What a row's releases come to, when not the usual.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affected: Option<Shown>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed: Option<Shown>,
    /// Why (printed in the table).
    pub because: String,
}

/// What a release showed of an advisory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Shown {
    /// The check failed as the advisory says.
    Reproduced,
    /// The check ran and passed.
    Clean,
    /// None of the advisory's cases could be sent.
    NotTested,
    /// Nothing answered: the target did not start, or the run could not be set up.
    NoServer,
}

impl Shown {
    pub fn as_str(self) -> &'static str {
        match self {
            Shown::Reproduced => "reproduced",
            Shown::Clean => "clean",
            Shown::NotTested => "not-tested",
            Shown::NoServer => "no-server",
        }
    }
}

/// Which of a row's releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Affected,
    Fixed,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Affected => "affected",
            Role::Fixed => "fixed",
        }
    }
}

/// The target format's schema, kept in the folder for editors (`$schema`): not a target.
pub const SCHEMA_FILE: &str = "schema.json";

/// The schema of the target format (`mcp-gauntlet schema --targets`).
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(TargetSpec);
    serde_json::to_string_pretty(&schema).expect("a JSON schema serializes") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

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
