//! A campaign: the catalogue against every target of a folder of target files, lane by lane,
//! several targets at once, one report per lane, and the matrix built from those reports.
//!
//! Each lane (a target started one way, a column of the matrix) is a `run` in this process,
//! written to `OUT/COLUMN.json` (its report), `.xml` (JUnit), `.log` (libtest's lines and the
//! end of the run) and `.lane.json` (what the lane came to, written last: a lane with one is
//! done, and a campaign started again with the same release and arguments does not run it
//! again). `--shard K/N` runs every Nth lane; `campaign merge` builds the matrix from several
//! shards' folders.
//!
//! A target of advisory rows (`advisories`, see [`advisory`]) is run at each release its rows
//! name instead, and the rows make the advisory table (`OUT/advisories.md`).

pub mod advisory;
pub mod ecosystem;
pub mod file;
pub mod install;
mod lane;
pub mod load;
mod matrix;
pub mod side_by_side;

pub use advisory::AdvisoryRecord;
pub use ecosystem::{write_ecosystem, EcosystemFiles, Provenance};
pub use file::{schema_json, LaneKind, LaneSpec, Role, Shown, TargetFile};
pub use install::{InstallError, Installed};
pub use lane::{LaneOutcome, LaneRecord};
pub use load::{load_dir, load_file, Problem, TargetError};
pub use matrix::{write_matrix, MatrixFiles};

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Mutex;

/// Which lanes a campaign runs by their speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Slow {
    /// Every lane.
    #[default]
    With,
    /// Every lane but the slow ones (what CI runs).
    Without,
    /// Only the slow ones.
    Only,
}

impl std::str::FromStr for Slow {
    type Err = String;
    fn from_str(s: &str) -> Result<Slow, String> {
        match s {
            "with" => Ok(Slow::With),
            "without" => Ok(Slow::Without),
            "only" => Ok(Slow::Only),
            _ => Err(format!("`{s}`: with, without or only")),
        }
    }
}

/// What a campaign runs, and where it writes.
#[derive(Debug, Clone)]
pub struct CampaignOptions {
    /// The folder of target files.
    pub targets: PathBuf,
    /// Where the lanes' reports, logs and records go (and the matrix).
    pub out: PathBuf,
    /// Where recipes install (`{env}`).
    pub cache: PathBuf,
    /// Only these targets (by name); empty: all.
    pub only: Vec<String>,
    pub slow: Slow,
    /// How many targets run at once (each its lanes one after the other).
    pub targets_at_once: usize,
    /// How many trials of one lane run at once (`run --jobs`; `None`: the cores).
    pub jobs: Option<usize>,
    /// `(k, n)`: only every nth lane from the kth (1-based), for a CI matrix.
    pub shard: Option<(usize, usize)>,
    /// The versions each lane speaks (`run --spec`).
    pub spec: crate::versions::Spec,
    /// libtest arguments for every lane (filters, `--skip`), after its own unstable skips.
    pub libtest_args: Vec<String>,
    /// Also write the matrix's Markdown here (its HTML beside it, `.html`).
    pub matrix: Option<PathBuf>,
    /// This program (`{gauntlet}` in commands, and the embedded default's stdio witness).
    pub self_exe: Option<PathBuf>,
    /// Also write the ecosystem pages here (see [`ecosystem`]), made as this says.
    pub ecosystem: Option<(PathBuf, Provenance)>,
}

/// One lane to run: its target and which of its lanes.
#[derive(Debug, Clone)]
pub struct Planned {
    pub target: usize,
    pub lane: usize,
}

/// The lanes `opts` selects from `targets`, in the campaign's order (target by name, then as
/// its file lists them), this shard's only.
pub fn plan(targets: &[TargetFile], opts: &CampaignOptions) -> Vec<Planned> {
    let mut all = Vec::new();
    for (ti, t) in targets.iter().enumerate() {
        if !selected(t, opts) || t.proves_advisories() {
            continue;
        }
        for (li, l) in t.spec.lanes.iter().enumerate() {
            let keep = match opts.slow {
                Slow::With => true,
                Slow::Without => !l.slow,
                Slow::Only => l.slow,
            };
            if keep {
                all.push(Planned {
                    target: ti,
                    lane: li,
                });
            }
        }
    }
    match opts.shard {
        Some((k, n)) => all
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % n == k - 1)
            .map(|(_, p)| p)
            .collect(),
        None => all,
    }
}

/// Whether `--target` selects `t`.
fn selected(t: &TargetFile, opts: &CampaignOptions) -> bool {
    opts.only.is_empty() || opts.only.contains(&t.name)
}

/// The targets of advisory rows this campaign runs: selected, not only slow lanes, and on the
/// first shard only (their rows are short).
fn advisory_targets(targets: &[TargetFile], opts: &CampaignOptions) -> Vec<usize> {
    let here = opts.shard.is_none_or(|(k, _)| k == 1) && opts.slow != Slow::Only;
    (0..targets.len())
        .filter(|&i| here && targets[i].proves_advisories() && selected(&targets[i], opts))
        .collect()
}

/// Why a campaign could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CampaignError {
    #[error(transparent)]
    Targets(#[from] TargetError),
    #[error("cannot write {path}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{0}` is not a target in the folder")]
    UnknownTarget(String),
    #[error("libtest's --logfile is not for a campaign: each lane's lines go to OUT/COLUMN.log")]
    Logfile,
    #[error(transparent)]
    Report(#[from] crate::report::ReportReadError),
}

/// What a campaign came to: each lane it ran or found done, and the targets it skipped.
#[derive(Debug, Default)]
pub struct CampaignOutcome {
    pub lanes: Vec<LaneRecord>,
    /// Targets not tested, with why (a registry unreachable, a tool missing).
    pub skipped: Vec<(String, String)>,
    /// Targets whose install failed although it could have worked.
    pub failed: Vec<(String, String)>,
    /// The advisory rows' runs, one per release of a row.
    pub advisories: Vec<AdvisoryRecord>,
    /// Where the matrix was written (only when every lane of the folder has a report here).
    pub matrix: Option<MatrixFiles>,
    /// Where the ecosystem pages were written, when asked for.
    pub ecosystem: Option<EcosystemFiles>,
}

impl CampaignOutcome {
    /// Whether every lane matched its baseline and every install that could work did.
    pub fn passed(&self) -> bool {
        self.failed.is_empty()
            && self.lanes.iter().all(|l| l.outcome == LaneOutcome::Matched)
            && self.advisories.iter().all(AdvisoryRecord::ok)
    }

    /// What it came to, in a few lines: the lanes (each that did not match, with why) and the
    /// advisory rows (each release that did not show what it should).
    pub fn summary(&self, seconds: u64) -> String {
        let matched = self
            .lanes
            .iter()
            .filter(|l| l.outcome == LaneOutcome::Matched)
            .count();
        let mut out = format!(
            "campaign: {} lanes, {matched} matched their baselines, {} did not; {} targets skipped, {} failed to install; {seconds} s\n",
            self.lanes.len(),
            self.lanes.len() - matched,
            self.skipped.len(),
            self.failed.len(),
        );
        for l in self
            .lanes
            .iter()
            .filter(|l| l.outcome != LaneOutcome::Matched)
        {
            let detail = l.detail.as_deref().map(|d| format!(": {d}"));
            out.push_str(&format!(
                "  {}: {}{}\n",
                l.column,
                l.outcome.describe(),
                detail.unwrap_or_default()
            ));
        }
        if !self.advisories.is_empty() {
            let wrong: Vec<_> = self.advisories.iter().filter(|r| !r.ok()).collect();
            out.push_str(&format!(
                "advisory rows: {} releases run, {} as they should be, {} not\n",
                self.advisories.len(),
                self.advisories.len() - wrong.len(),
                wrong.len()
            ));
            for r in wrong {
                out.push_str(&format!(
                    "  {} on {} {}: {}, should be {}\n",
                    r.advisory,
                    r.package,
                    r.release,
                    r.got.as_str(),
                    r.want.as_str()
                ));
            }
        }
        out
    }

    /// Whether nothing was tested at all (every target skipped, or none selected).
    pub fn tested_nothing(&self) -> bool {
        self.lanes.is_empty() && self.advisories.is_empty() && self.failed.is_empty()
    }
}

/// Run a campaign. Prints a line per lane as it starts and ends.
pub fn run(opts: &CampaignOptions) -> Result<CampaignOutcome, CampaignError> {
    let targets = load_dir(&opts.targets)?;
    if let Some(name) = opts
        .only
        .iter()
        .find(|n| !targets.iter().any(|t| &t.name == *n))
    {
        return Err(CampaignError::UnknownTarget(name.clone()));
    }
    let write = |path: &PathBuf| {
        let path = path.display().to_string();
        move |source| CampaignError::Write { path, source }
    };
    std::fs::create_dir_all(&opts.out).map_err(write(&opts.out))?;
    let planned = plan(&targets, opts);
    // One queue entry per target: its lanes run one after the other, on one install (a target
    // of advisory rows: no lanes, its rows, one install per release).
    let mut queue: VecDeque<(usize, Vec<usize>)> = VecDeque::new();
    for p in &planned {
        match queue.back_mut() {
            Some((t, lanes)) if *t == p.target => lanes.push(p.lane),
            _ => queue.push_back((p.target, vec![p.lane])),
        }
    }
    queue.extend(
        advisory_targets(&targets, opts)
            .into_iter()
            .map(|t| (t, Vec::new())),
    );
    let queue = Mutex::new(queue);
    let outcome = Mutex::new(CampaignOutcome::default());
    let workers = opts.targets_at_once.max(1);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let Some((t, lanes)) = crate::sync::lock(&queue).pop_front() else {
                    break;
                };
                if targets[t].proves_advisories() {
                    run_advisories(&targets[t], opts, &outcome);
                } else {
                    run_target(&targets[t], &lanes, opts, &outcome);
                }
            });
        }
    });
    let mut outcome = outcome.into_inner().unwrap_or_else(|p| p.into_inner());
    // The lanes in the campaign's order, whatever order they ended in.
    let order = |r: &LaneRecord| {
        planned.iter().position(|p| {
            targets[p.target].column(&targets[p.target].spec.lanes[p.lane]) == r.column
        })
    };
    outcome.lanes.sort_by_key(order);
    if !outcome.advisories.is_empty() {
        write_advisory_table(&mut outcome, &targets, opts)?;
    }
    // The matrix of what this folder holds; copied to `--matrix` only from a full campaign
    // (every lane of every target, every case, none missing), the one a matrix is published from.
    if !outcome.lanes.is_empty() {
        let full = opts.shard.is_none()
            && opts.only.is_empty()
            && opts.slow == Slow::With
            && opts.libtest_args.is_empty();
        outcome.matrix = Some(write_matrix(
            &targets,
            std::slice::from_ref(&opts.out),
            &opts.out,
            opts.matrix.as_deref().filter(|_| full),
        )?);
    }
    if let Some((dir, made)) = &opts.ecosystem {
        let left_out = opts.targets.join(ecosystem::LEFT_OUT_FILE);
        outcome.ecosystem = Some(write_ecosystem(
            &targets,
            std::slice::from_ref(&opts.out),
            Some(&left_out),
            dir,
            made,
        )?);
    }
    Ok(outcome)
}

/// The advisory rows in the folder's order, their table printed and written to
/// `OUT/advisories.md`.
fn write_advisory_table(
    outcome: &mut CampaignOutcome,
    targets: &[TargetFile],
    opts: &CampaignOptions,
) -> Result<(), CampaignError> {
    let order = |r: &AdvisoryRecord| {
        let t = targets.iter().position(|t| t.name == r.target);
        let row = t.and_then(|t| {
            targets[t]
                .spec
                .advisories
                .iter()
                .position(|a| a.id == r.advisory && a.check.kind() == r.check)
        });
        (t, row, r.role)
    };
    outcome.advisories.sort_by_key(order);
    let table = advisory::table(&outcome.advisories, targets);
    println!("\n{table}");
    let path = opts.out.join("advisories.md");
    let text = format!(
        "# Advisories on the releases they name\n\nEach row: an advisory of `cases/advisories.json` on a release it affects (which must reproduce it) and one it does not (which must not), by `mcp-gauntlet campaign`.\n\n{table}"
    );
    std::fs::write(&path, text).map_err(|source| CampaignError::Write {
        path: path.display().to_string(),
        source,
    })
}

/// Run a target's advisory rows: each release installed once, each of its rows' checks run.
fn run_advisories(t: &TargetFile, opts: &CampaignOptions, out: &Mutex<CampaignOutcome>) {
    for (release, runs) in advisory::plan(t) {
        let at = t.at_release(&release);
        let mut todo = Vec::new();
        for p in runs {
            let Some(key) = advisory::key(&at, &p, opts) else {
                continue;
            };
            match advisory::done(&at, &p, &key, opts) {
                Some(record) => {
                    println!("== {} {}: done already", record.advisory, record.release);
                    crate::sync::lock(out).advisories.push(record);
                }
                None => todo.push((p, key)),
            }
        }
        if todo.is_empty() {
            continue;
        }
        let name = format!("{} {release}", t.name);
        let env = match install::install(&at, &opts.cache) {
            Ok(Installed::At(env)) => env,
            Ok(Installed::Skipped(why)) => {
                println!("SKIP {name}: {why}");
                crate::sync::lock(out).skipped.push((name, why));
                continue;
            }
            Err(e) => {
                let why = crate::error::error_chain(&e);
                println!("FAIL {name}: the install failed: {why}");
                crate::sync::lock(out).failed.push((name, why));
                continue;
            }
        };
        for (p, key) in todo {
            println!("== {} on {} {release}", p.row.id, t.spec.package);
            let record = advisory::run(&at, &p, &env, key, opts);
            println!(
                "   {}: {} (should be {})",
                record.advisory,
                record.got.as_str(),
                record.want.as_str()
            );
            crate::sync::lock(out).advisories.push(record);
        }
    }
}

/// Install one target and run its lanes.
fn run_target(
    t: &TargetFile,
    lanes: &[usize],
    opts: &CampaignOptions,
    out: &Mutex<CampaignOutcome>,
) {
    // Lanes already done (same release, same arguments) are not run again, nor installed for.
    // Each lane's key is taken once, before it runs, and is the one its record keeps.
    let todo: Vec<(&LaneSpec, String)> = lanes
        .iter()
        .map(|&i| {
            let l = &t.spec.lanes[i];
            (l, lane::key(t, l, opts))
        })
        .filter(|(l, key)| match lane::done(&t.column(l), key, opts) {
            Some(record) => {
                println!(
                    "== {}: done already ({})",
                    record.column,
                    record.outcome.describe()
                );
                crate::sync::lock(out).lanes.push(record);
                false
            }
            None => true,
        })
        .collect();
    if todo.is_empty() {
        return;
    }
    let not_installed = |why: &str, todo: Vec<(&LaneSpec, String)>| {
        for (l, key) in todo {
            lane::not_installed(t, l, key, why, &opts.out);
        }
    };
    let env = match install::install(t, &opts.cache) {
        Ok(Installed::At(env)) => env,
        Ok(Installed::Skipped(why)) => {
            println!("SKIP {}: {why}", t.name);
            not_installed(&format!("skipped: {why}"), todo);
            crate::sync::lock(out).skipped.push((t.name.clone(), why));
            return;
        }
        Err(e) => {
            let why = crate::error::error_chain(&e);
            println!("FAIL {}: the install failed: {why}", t.name);
            not_installed(&format!("the install failed: {why}"), todo);
            crate::sync::lock(out).failed.push((t.name.clone(), why));
            return;
        }
    };
    for (l, key) in todo {
        let release = t.spec.release.as_deref().unwrap_or("this build");
        println!("== {} ({} {release})", t.column(l), t.spec.package);
        let record = lane::run_lane(t, l, &env, key, opts);
        println!("   {}: {}", record.column, record.outcome.describe());
        crate::sync::lock(out).lanes.push(record);
        let command = lane::command(t, l, &env, opts);
        if let Some(side) = side_by_side::run(t, l, command, opts) {
            println!("   {} side by side: {}", side.column, side.cell());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(name: &str, lanes: usize) -> TargetFile {
        let text = format!(
            r#"{{"about": "a", "package": "p", "ecosystem": "none", "install": {{"kind": "builtin"}},
               "lanes": [{}]}}"#,
            (0..lanes)
                .map(|i| format!(
                    r#"{{"name": "l{i}", "kind": "stdio", "command": "x", "slow": {}}}"#,
                    i == 0
                ))
                .collect::<Vec<_>>()
                .join(",")
        );
        TargetFile {
            name: name.to_string(),
            path: PathBuf::from(format!("{name}.json")),
            dir: PathBuf::from("."),
            spec: serde_json::from_str(&text).expect("a target"),
        }
    }

    fn opts() -> CampaignOptions {
        CampaignOptions {
            targets: PathBuf::new(),
            out: PathBuf::new(),
            cache: PathBuf::new(),
            only: Vec::new(),
            slow: Slow::With,
            targets_at_once: 1,
            jobs: None,
            shard: None,
            spec: crate::versions::Spec::Accepted,
            libtest_args: Vec::new(),
            matrix: None,
            self_exe: None,
            ecosystem: None,
        }
    }

    fn columns(targets: &[TargetFile], o: &CampaignOptions) -> Vec<String> {
        plan(targets, o)
            .iter()
            .map(|p| targets[p.target].column(&targets[p.target].spec.lanes[p.lane]))
            .collect()
    }

    #[test]
    fn shards_split_the_lanes_and_together_are_all_of_them() {
        let targets = [target("a", 3), target("b", 2)];
        let all = columns(&targets, &opts());
        assert_eq!(all, ["a-l0", "a-l1", "a-l2", "b-l0", "b-l1"]);
        let mut merged = Vec::new();
        for k in 1..=3 {
            let part = columns(
                &targets,
                &CampaignOptions {
                    shard: Some((k, 3)),
                    ..opts()
                },
            );
            assert!(!part.is_empty() && part.len() < all.len());
            merged.extend(part);
        }
        merged.sort();
        assert_eq!(merged, all);
    }

    #[test]
    fn slow_lanes_and_targets_are_chosen_by_the_options() {
        let targets = [target("a", 2), target("b", 2)];
        let without = CampaignOptions {
            slow: Slow::Without,
            ..opts()
        };
        assert_eq!(columns(&targets, &without), ["a-l1", "b-l1"]);
        let only = CampaignOptions {
            slow: Slow::Only,
            only: vec!["b".into()],
            ..opts()
        };
        assert_eq!(columns(&targets, &only), ["b-l0"]);
    }
}
