//! One lane of a campaign: its `run`, in this process, and the record of what it came to.

use super::file::{DenyStyleSpec, LaneKind, LaneSpec, Recipe, TargetFile};
use super::CampaignOptions;
use crate::case::Profile;
use crate::report::TrialVerdict;
use crate::run::RunOptions;
use crate::settings::{DenyStyle, Settings};
use crate::target::{SseAt, Target, DEFAULT_SSE_PATH};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The format of a lane record (`OUT/COLUMN.lane.json`).
pub const LANE_FORMAT: &str = "mcp-gauntlet-lane/1";

/// What a lane came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LaneOutcome {
    /// Every trial passed or failed as its baseline says.
    Matched,
    /// A failure its baseline does not list, or a listed one that passes now.
    Differs,
    /// The target died and was not brought back: trials were not run.
    Incomplete,
    /// The target could not be tested (it did not start, or speaks no version the suite knows).
    Untestable,
    /// The run could not be set up (a baseline or a speak setting the runner refuses).
    Error,
}

impl LaneOutcome {
    pub fn describe(self) -> &'static str {
        match self {
            LaneOutcome::Matched => "matches its baseline",
            LaneOutcome::Differs => "DIFFERS from its baseline",
            LaneOutcome::Incomplete => "INCOMPLETE: the target died and was not brought back",
            LaneOutcome::Untestable => "UNTESTABLE: it did not start, or speaks no known version",
            LaneOutcome::Error => "ERROR: the run could not be set up",
        }
    }
}

/// What one lane came to, written beside its report once the report is complete.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LaneRecord {
    pub format: String,
    pub target: String,
    pub column: String,
    pub package: String,
    pub ecosystem: String,
    pub release: String,
    /// What the lane was run with, hashed: the build of the suite, the release, the lane's
    /// entry and files, the versions and the libtest arguments. A campaign started again runs
    /// the lane again when it differs.
    pub key: String,
    pub outcome: LaneOutcome,
    /// What went wrong, when the run did not finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub seconds: u64,
    /// Trials by verdict: pass, fail (stale included), warn, known, skip.
    pub counts: [usize; 5],
}

impl LaneRecord {
    /// The record of lane `l` of `t`: what it came to, no time spent and no trials counted.
    fn of(
        t: &TargetFile,
        l: &LaneSpec,
        key: String,
        outcome: LaneOutcome,
        detail: Option<String>,
    ) -> LaneRecord {
        LaneRecord {
            format: LANE_FORMAT.to_string(),
            target: t.name.clone(),
            column: t.column(l),
            package: t.spec.package.clone(),
            ecosystem: t.spec.ecosystem.as_str().to_string(),
            release: t.release().to_string(),
            key,
            outcome,
            detail,
            seconds: 0,
            counts: [0; 5],
        }
    }
}

/// A lane already done in `opts.out` with this key (only one that finished its run).
pub(crate) fn done(column: &str, key: &str, opts: &CampaignOptions) -> Option<LaneRecord> {
    finished(&opts.out, column).filter(|r| r.key == key)
}

/// The record of a finished lane `column` in `dir`: it says the lane matched or differed from
/// its baseline, and its report is there.
pub(crate) fn finished(dir: &Path, column: &str) -> Option<LaneRecord> {
    let text = std::fs::read_to_string(dir.join(format!("{column}.lane.json"))).ok()?;
    let r: LaneRecord = serde_json::from_str(&text).ok()?;
    (r.format == LANE_FORMAT
        && matches!(r.outcome, LaneOutcome::Matched | LaneOutcome::Differs)
        && dir.join(format!("{column}.json")).is_file())
    .then_some(r)
}

/// The record of lane `column` in `dir`, whatever it came to (a lane that could not be tested
/// has one too, with why).
pub(crate) fn any_record(dir: &Path, column: &str) -> Option<LaneRecord> {
    let text = std::fs::read_to_string(dir.join(format!("{column}.lane.json"))).ok()?;
    serde_json::from_str::<LaneRecord>(&text)
        .ok()
        .filter(|r| r.format == LANE_FORMAT)
}

/// The lane's key (see [`LaneRecord::key`]), taken before it runs.
pub(crate) fn key(t: &TargetFile, l: &LaneSpec, opts: &CampaignOptions) -> String {
    let mut parts = vec![
        env!("CARGO_PKG_VERSION").to_string(),
        build_id(opts),
        t.release().to_string(),
        serde_json::to_string(l).expect("a lane serializes: strings"),
        serde_json::to_string(&t.spec.speak).expect("speak settings serialize: strings"),
        format!("{:?}", opts.spec),
    ];
    parts.extend(opts.libtest_args.iter().cloned());
    // What the recipe installs, and everything the target's files hold (its server, its
    // baselines): a changed server reruns its lanes even at the same release.
    parts.push(super::install::fingerprint(t));
    parts.push(files_hash(t));
    super::install::fnv(parts.join("\n").as_bytes())
}

/// The target's own files, hashed: the whole folder of a `NAME/target.json` or of a target of
/// advisory rows (its peers and recipes beside it; but what builds and installs leave there),
/// or the one file of a `NAME.json`.
fn files_hash(t: &TargetFile) -> String {
    let mut files = Vec::new();
    if t.path.file_name().is_some_and(|n| n == "target.json") || t.proves_advisories() {
        walk(&t.dir, &mut files);
    } else {
        files.push(t.path.clone());
    }
    files.sort();
    let mut all = Vec::new();
    for f in files {
        all.extend(f.display().to_string().into_bytes());
        all.extend(std::fs::read(&f).unwrap_or_default());
    }
    super::install::fnv(&all)
}

/// Every file under `dir`, but in the folders builds and installs make.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    const LEFT_OUT: &[&str] = &["target", "node_modules", ".git", "__pycache__", ".venv"];
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        let p = e.path();
        if p.is_dir() {
            if !p
                .file_name()
                .is_some_and(|n| LEFT_OUT.iter().any(|l| n == *l))
            {
                walk(&p, out);
            }
        } else {
            out.push(p);
        }
    }
}

/// This build of the suite: its program's size and time (a rebuilt suite runs every lane again).
fn build_id(opts: &CampaignOptions) -> String {
    let exe = opts
        .self_exe
        .clone()
        .or_else(|| std::env::current_exe().ok());
    exe.and_then(|e| std::fs::metadata(e).ok())
        .map(|m| {
            let t = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs());
            format!("{}-{t}", m.len())
        })
        .unwrap_or_default()
}

/// Run one lane of `t`, installed at `env`; its report, JUnit, log and record (with `key`) go
/// to `opts.out`.
pub(crate) fn run_lane(
    t: &TargetFile,
    l: &LaneSpec,
    env: &Path,
    key: String,
    opts: &CampaignOptions,
) -> LaneRecord {
    let column = t.column(l);
    let at = |ext: &str| opts.out.join(format!("{column}{ext}"));
    let (report, partial, log) = (at(".json"), at(".json.partial"), at(".log"));
    for stale in [&report, &at(".lane.json"), &log, &partial, &at(".xml")] {
        let _ = std::fs::remove_file(stale);
    }
    let started = Instant::now();
    let files = LaneFiles {
        report: partial.clone(),
        junit: at(".xml"),
        log: log.clone(),
    };
    let run = options(t, l, env, opts, &files)
        .map_err(|why| (LaneOutcome::Error, why))
        .and_then(|o| {
            crate::run::run(o).map_err(|e| {
                let kind = if e.target_untestable() {
                    LaneOutcome::Untestable
                } else {
                    LaneOutcome::Error
                };
                (kind, crate::error::error_chain(&e))
            })
        });
    let (outcome, detail, counts) = match run {
        Ok(o) => {
            let n = |v: TrialVerdict| o.records.iter().filter(|r| r.verdict == v).count();
            let counts = [
                n(TrialVerdict::Pass),
                n(TrialVerdict::Fail) + n(TrialVerdict::Stale),
                n(TrialVerdict::Warn),
                n(TrialVerdict::Known),
                n(TrialVerdict::Skip),
            ];
            let outcome = if !o.not_run.is_empty() {
                LaneOutcome::Incomplete
            } else if o.tested_nothing {
                LaneOutcome::Untestable
            } else if o.failed {
                LaneOutcome::Differs
            } else {
                LaneOutcome::Matched
            };
            // The report is whole: only now does it take its name.
            let detail = std::fs::rename(&partial, &report)
                .err()
                .map(|e| format!("cannot move the report into place: {e}"));
            (outcome, detail, counts)
        }
        Err((outcome, why)) => (outcome, Some(why), [0; 5]),
    };
    let record = LaneRecord {
        seconds: started.elapsed().as_secs(),
        counts,
        ..LaneRecord::of(t, l, key, outcome, detail)
    };
    let text = serde_json::to_string_pretty(&record).expect("a lane record serializes") + "\n";
    write_whole(&at(".lane.json"), &text);
    record
}

/// Record that lane `l` could not be run because its target was not installed (why: a
/// registry unreachable, an install that failed), so that the pages made from the folder say so.
pub(crate) fn not_installed(t: &TargetFile, l: &LaneSpec, key: String, why: &str, out: &Path) {
    let column = t.column(l);
    let record = LaneRecord::of(
        t,
        l,
        key,
        LaneOutcome::Untestable,
        Some(format!("not installed: {why}")),
    );
    let _ = std::fs::remove_file(out.join(format!("{column}.json")));
    let text = serde_json::to_string_pretty(&record).expect("a lane record serializes") + "\n";
    write_whole(&out.join(format!("{column}.lane.json")), &text);
}

/// Write a record whole or not at all (under a temporary name, then renamed): a record is what
/// says a run is done. A record that cannot be written is said on stderr; the run is redone.
pub(crate) fn write_whole(path: &Path, text: &str) {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let written = std::fs::write(&partial, text).and_then(|()| std::fs::rename(&partial, path));
    if let Err(e) = written {
        eprintln!("cannot write {}: {e}", path.display());
    }
}

/// Where a run of a lane writes: its report (as it is written), JUnit and log.
pub(crate) struct LaneFiles {
    pub report: PathBuf,
    pub junit: PathBuf,
    pub log: PathBuf,
}

/// The `run` of one lane.
pub(crate) fn options(
    t: &TargetFile,
    l: &LaneSpec,
    env: &Path,
    opts: &CampaignOptions,
    files: &LaneFiles,
) -> Result<RunOptions, String> {
    let issuer = issuer(t, opts)?;
    let jwks = issuer.as_ref().map(|(_, _, jwks)| jwks.as_path());
    let command = l.command.as_deref().map(|c| fill(c, t, env, jwks, opts));
    let (target, profile) = match (l.kind, command) {
        (LaneKind::Http, Some(command)) => (
            Target::Serve {
                command,
                path: l.path.clone().unwrap_or_else(|| "/mcp".into()),
                sse: SseAt::default(),
            },
            Profile::Server,
        ),
        (LaneKind::Sse, Some(command)) => (
            Target::Serve {
                command,
                path: l.path.clone().unwrap_or_else(|| DEFAULT_SSE_PATH.into()),
                sse: SseAt::default(),
            },
            Profile::Server,
        ),
        (LaneKind::Stdio, Some(command)) => (Target::Stdio { command }, Profile::Server),
        (LaneKind::Gate, Some(command)) => (Target::Gate { command }, Profile::Gate),
        (LaneKind::GateStdio, Some(command)) => (Target::GateStdio { command }, Profile::Gate),
        (LaneKind::Embedded, _) => (Target::Embedded, Profile::Server),
        (k, None) => return Err(format!("an {} lane without a command", k.as_str())),
    };
    let mut libtest_args = unstable_skips(t, l)?;
    libtest_args.extend(opts.libtest_args.iter().cloned());
    Ok(RunOptions {
        target,
        profile,
        settings: settings(t, issuer.map(|(i, aud, _)| (i, aud)))?,
        spec: opts.spec.clone(),
        report: Some(files.report.clone()),
        junit: Some(files.junit.clone()),
        baseline: l.baseline.as_ref().map(|b| t.beside(b)),
        libtest_args,
        jobs: opts.jobs,
        self_exe: opts.self_exe.clone(),
        log: Some(files.log.clone()),
        package: Some((
            t.spec.ecosystem.as_str().to_string(),
            t.spec.package.clone(),
        )),
        ..RunOptions::default()
    })
}

/// The target's token issuer, when its `speak` has one: a key made once per campaign folder
/// (`OUT/TARGET.issuer/`), the audience, and the public keys' file (`{jwks}`).
fn issuer(
    t: &TargetFile,
    opts: &CampaignOptions,
) -> Result<Option<(crate::auth::Issuer, String, PathBuf)>, String> {
    let Some(spec) = &t.spec.speak.issuer else {
        return Ok(None);
    };
    let dir = opts.out.join(format!("{}.issuer", t.name));
    let (key, jwks) = (dir.join("issuer-key.pem"), dir.join("jwks.json"));
    if !key.is_file() || !jwks.is_file() {
        let made = crate::auth::Issuer::generate(&spec.issuer, &spec.kid)
            .map_err(|e| crate::error::error_chain(&e))?;
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&key, made.private_pem()))
            .and_then(|()| std::fs::write(&jwks, made.jwks()))
            .map_err(|e| format!("cannot write {}: {e}", dir.display()))?;
    }
    let pem = std::fs::read_to_string(&key).map_err(|e| format!("{}: {e}", key.display()))?;
    let issuer = crate::auth::Issuer::from_pem(&spec.issuer, &spec.kid, &pem)
        .map_err(|e| crate::error::error_chain(&e))?;
    Ok(Some((issuer, spec.audience.clone(), jwks)))
}

/// The run's settings from the target's `speak` (and its token issuer, with the audience).
fn settings(
    t: &TargetFile,
    issuer: Option<(crate::auth::Issuer, String)>,
) -> Result<Settings, String> {
    let s = &t.spec.speak;
    let defaults = Settings::default();
    let mapping = crate::mapping::CallMapping::new(
        s.tool_name.as_deref(),
        s.tool_server.as_deref().unwrap_or("witness"),
        None,
    )
    .map_err(|e| crate::error::error_chain(&e))?;
    let inputs = crate::auth::AuthInputs {
        token: s.auth_token.clone(),
        issuer,
        ..Default::default()
    };
    let auth_tokens = inputs.tokens().map_err(|e| crate::error::error_chain(&e))?;
    Ok(Settings {
        denied_tool: s
            .denied_tool
            .clone()
            .unwrap_or(defaults.denied_tool.clone()),
        allowed_tool: s
            .allowed_tool
            .clone()
            .unwrap_or(defaults.allowed_tool.clone()),
        allowed_arg: s
            .allowed_arg
            .clone()
            .unwrap_or(defaults.allowed_arg.clone()),
        canary_text: s
            .canary_text
            .clone()
            .unwrap_or(defaults.canary_text.clone()),
        deny_style: match s.deny_style {
            Some(DenyStyleSpec::Result) => DenyStyle::Result,
            Some(DenyStyleSpec::Error) | None => DenyStyle::Error,
        },
        mapping,
        auth_tokens,
        ..defaults
    })
}

/// `--skip ID` for each case the lane's unstable file lists.
fn unstable_skips(t: &TargetFile, l: &LaneSpec) -> Result<Vec<String>, String> {
    let Some(rel) = &l.unstable else {
        return Ok(Vec::new());
    };
    let text = std::fs::read_to_string(t.beside(rel)).map_err(|e| format!("{rel}: {e}"))?;
    Ok(text
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|id| !id.starts_with('#'))
        .flat_map(|id| ["--skip".to_string(), id.to_string()])
        .collect())
}

/// This suite's binary, as `{gauntlet}` names it.
pub(crate) fn gauntlet(opts: &CampaignOptions) -> PathBuf {
    opts.self_exe
        .clone()
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("mcp-gauntlet"))
}

/// Lane `l`'s command with the campaign's placeholders filled (no token issuer: for a lane
/// started again outside its run, as a gateway loaded side by side).
pub(crate) fn command(
    t: &TargetFile,
    l: &LaneSpec,
    env: &Path,
    opts: &CampaignOptions,
) -> Option<String> {
    l.command.as_deref().map(|c| fill(c, t, env, None, opts))
}

/// The command with the campaign's placeholders filled, each value quoted for the split.
fn fill(
    command: &str,
    t: &TargetFile,
    env: &Path,
    jwks: Option<&Path>,
    opts: &CampaignOptions,
) -> String {
    let quote = |p: &Path| shell_words::quote(&p.display().to_string()).into_owned();
    let gauntlet = gauntlet(opts);
    let mut out = command
        .replace("{dir}", &quote(&t.dir))
        .replace("{env}", &quote(env))
        .replace("{gauntlet}", &quote(&gauntlet));
    if matches!(t.spec.install, Recipe::Pypi { .. }) {
        out = out.replace("{python}", &quote(&env.join("bin/python")));
    }
    if let Some(jwks) = jwks {
        out = out.replace("{jwks}", &quote(jwks));
    }
    if t.proves_advisories() {
        out = out.replace("{release}", &shell_words::quote(t.release()));
    }
    out
}
