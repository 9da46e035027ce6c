//! One invocation of `mcp-gauntlet run`, in named steps: load the catalogue, fix the settings,
//! open the target's lanes ([`crate::target`]), plan one libtest trial per (case, lane), run each
//! ([`crate::trial`], then the baseline's decision, [`crate::report::baseline`]), and write the
//! reports.

use crate::case::{Case, Catalogue, Profile};
pub use crate::error::RunError;
use crate::report::baseline::{Baseline, Decision};
use crate::report::{self, Collector, Record, RunInfo, RunProfile, TrialVerdict};
use crate::settings::{Settings, Speaking};
pub use crate::target::Target;
use crate::target::{self, Lane, NotRun, Restarts};
use crate::trial::Judging;
use crate::verdict::{self, Status};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of `run`.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub target: Target,
    pub profile: Profile,
    pub strict: bool,
    pub extra_cases: Vec<PathBuf>,
    pub headers: Vec<String>,
    pub settings: Settings,
    /// Which protocol versions to run.
    pub spec: crate::versions::Spec,
    pub total_timeout: Duration,
    pub report: Option<PathBuf>,
    /// JUnit XML output.
    pub junit: Option<PathBuf>,
    /// SARIF 2.1.0 output (code scanning).
    pub sarif: Option<PathBuf>,
    /// A Markdown summary, appended (`$GITHUB_STEP_SUMMARY`).
    pub summary_md: Option<PathBuf>,
    /// Known failures.
    pub baseline: Option<PathBuf>,
    /// Write the run's failures as a baseline.
    pub write_baseline: Option<PathBuf>,
    /// `(k, n)`: run only shard k of n (1-based).
    pub shard: Option<(usize, usize)>,
    /// Which cases run, by the advisories they cite (`--advisories`, `--advisory ID`).
    pub advisories: crate::advisory::Selection,
    /// The package the target is (`--package npm:@modelcontextprotocol/sdk`; a campaign takes
    /// its target file's): its own advisories are REPRODUCED, others' "as in".
    pub package: Option<(String, String)>,
    /// Arguments for libtest (after `--`).
    pub libtest_args: Vec<String>,
    /// How many trials run at once (`--jobs`; libtest's `--test-threads` in `libtest_args`
    /// wins). `None`: as many as the machine has cores.
    pub jobs: Option<usize>,
    /// No trial lines (libtest's output is dropped): the end of the run lists the failed
    /// trials, and a terminal shows a live counter instead.
    pub quiet: bool,
    /// The program to run as the stdio witness for the embedded default (normally this binary).
    pub self_exe: Option<PathBuf>,
    /// HTTP targets: how to restart the target after a case killed it (`sh -c`).
    pub restart_cmd: Option<String>,
    /// The command line that ran this, without its libtest arguments (`mcp-gauntlet run
    /// --http URL`), for the summary's command that reruns only the failed trials (the run
    /// adds the libtest options that are not filters).
    pub rerun_base: Option<Vec<String>>,
    /// Write libtest's lines and the end of the run to this file instead of stdout (a campaign
    /// runs several targets at once, each lane with its own log).
    pub log: Option<PathBuf>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            target: Target::Embedded,
            profile: Profile::Server,
            strict: false,
            extra_cases: Vec::new(),
            headers: Vec::new(),
            settings: Settings::default(),
            spec: crate::versions::Spec::Accepted,
            total_timeout: Duration::from_secs(1800),
            report: None,
            junit: None,
            sarif: None,
            summary_md: None,
            baseline: None,
            write_baseline: None,
            shard: None,
            advisories: crate::advisory::Selection::All,
            package: None,
            libtest_args: Vec::new(),
            jobs: None,
            quiet: false,
            self_exe: None,
            restart_cmd: None,
            rerun_base: None,
            log: None,
        }
    }
}

/// What a run concluded.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub failed: bool,
    pub records: Vec<Record>,
    /// Trials not run because their target died and was not brought back: why, and how many.
    pub not_run: Vec<(NotRun, usize)>,
    /// Every trial the run selected was not applicable to the target (a filter of gate-profile
    /// cases against a server, say): nothing was tested, which is not a pass.
    pub tested_nothing: bool,
}

/// Parse `--header 'Name: value'`.
pub(crate) fn parse_header(h: &str) -> Result<(String, String), RunError> {
    let (k, v) = h
        .split_once(':')
        .ok_or_else(|| RunError::BadHeader("(redacted)".into()))?;
    let k = k.trim();
    if k.is_empty()
        || !k
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(RunError::BadHeader(k.to_string()));
    }
    Ok((k.to_string(), v.trim().to_string()))
}

/// The libtest arguments without their positional filters, and the filters: every word that
/// is neither an option nor the value of one that takes a value.
fn split_filters(args: &[String]) -> (Vec<String>, Vec<String>) {
    const TAKES_VALUE: &[&str] = &[
        "--test-threads",
        "--logfile",
        "--skip",
        "--color",
        "--format",
        "-Z",
    ];
    let (mut rest, mut filters) = (Vec::new(), Vec::new());
    let mut value_next = false;
    for a in args {
        if value_next {
            rest.push(a.clone());
            value_next = false;
        } else if a.starts_with('-') {
            value_next = TAKES_VALUE.contains(&a.as_str());
            rest.push(a.clone());
        } else {
            filters.push(a.clone());
        }
    }
    (rest, filters)
}

/// Run the catalogue. Blocks; prints libtest output to stdout.
pub fn run(opts: RunOptions) -> Result<RunOutcome, RunError> {
    make_log(&opts)?;
    let catalogue = load_catalogue(&opts)?;
    let settings = Arc::new(run_settings(&opts)?);
    let secrets = secrets_of(&settings);
    // Held until the run ends: the runtime, per-case witness logs, child processes, server tasks.
    // A target that never came up, or that speaks no MCP, is not tested at all (and no rule is
    // said broken); a target `--restart-cmd` can start is left to it, and a listing needs none.
    let check = opts.restart_cmd.is_none() && !opts.libtest_args.iter().any(|a| a == "--list");
    let (mut opened, picked) = target::open_lanes(
        &opts.target,
        opts.profile,
        opts.self_exe.as_ref(),
        &opts.spec,
        &settings,
        check,
    )
    .map_err(|mut e| {
        // What the target answered may echo a credential.
        if let RunError::Untestable { reason, .. } = &mut e {
            *reason = report::redact(reason, &secrets);
        }
        e
    })?;
    let baseline = match &opts.baseline {
        Some(p) => Some(Arc::new(Baseline::load(p)?)),
        None => None,
    };
    let shared = Arc::new(Shared {
        rt: opened.rt.clone(),
        collector: Collector::default(),
        restarts: Restarts::new(opts.restart_cmd.clone()),
        baseline,
        secrets,
        strict: opts.strict,
        deadline: Instant::now() + opts.total_timeout,
        in_flight: std::sync::Mutex::new(Vec::new()),
        not_run: std::sync::Mutex::new(std::collections::BTreeMap::new()),
        done: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
    });
    let lanes = std::mem::take(&mut opened.lanes);
    let mut trials = plan(&opts, &catalogue, &settings, lanes, &shared);

    let args = libtest_arguments(&opts, &settings, &mut trials);
    let listing = args.list;
    let counter = counter(&opts, &args, &trials, &shared);
    let conclusion = libtest_mimic::run(&args, trials);
    drop(counter);
    shared.restarts.stop();
    let records = shared.collector.records();
    let not_run: Vec<(NotRun, usize)> = crate::sync::lock(&shared.not_run)
        .iter()
        .map(|(why, n)| (why.clone(), *n))
        .collect();
    let tested_nothing = !listing && tested_nothing(&records);
    let info = run_info(&opts, &opened.name, &picked);
    if !listing {
        say_end(&end_text(&records, &not_run, &opts, &info, &shared), &opts)?;
    }
    write_outputs(
        &opts,
        &info,
        &records,
        &not_run,
        &catalogue,
        &shared.secrets,
    )?;
    Ok(RunOutcome {
        failed: conclusion.has_failed(),
        records,
        not_run,
        tested_nothing,
    })
}

/// Whether trials were selected and none of them tested anything: each was not applicable, or
/// its case could not be sent (a target whose handshake is never answered).
fn tested_nothing(records: &[Record]) -> bool {
    !records.is_empty()
        && records
            .iter()
            .all(|r| r.verdict == TrialVerdict::Skip || r.not_sent())
}

/// The live counter of a quiet run (drawn only on a terminal), over the trials libtest will run.
fn counter(
    opts: &RunOptions,
    args: &Arguments,
    trials: &[Trial],
    shared: &Shared,
) -> Option<crate::progress::Progress> {
    if !opts.quiet || args.list {
        return None;
    }
    let total = trials
        .iter()
        .filter(|t| !args.is_ignored(t) && !args.is_filtered_out(t))
        .count();
    crate::progress::Progress::on_terminal(total, shared.done.clone())
}

/// The command that reruns this run's failed trials, without their names: the command line
/// without the files it wrote (a rerun must not overwrite the full reports with a partial
/// one), then `--` and the libtest options that are not filters.
fn rerun_command(opts: &RunOptions) -> Option<Vec<String>> {
    const WRITES: &[&str] = &[
        "--report",
        "--junit",
        "--sarif",
        "--summary-md",
        "--write-baseline",
    ];
    let base = opts.rerun_base.as_ref()?;
    let mut out = Vec::new();
    let mut words = base.iter();
    while let Some(w) = words.next() {
        if WRITES.contains(&w.as_str()) {
            words.next();
        } else if !WRITES.iter().any(|f| w.starts_with(&format!("{f}="))) {
            out.push(w.clone());
        }
    }
    let (options, _filters) = split_filters(&opts.libtest_args);
    out.push("--".to_string());
    out.extend(options);
    Some(out)
}

/// libtest's arguments from the run's: several filters (libtest takes one) applied to `trials`
/// here, the run's `--jobs`, and one trial at a time under `--canary-log`.
fn libtest_arguments(opts: &RunOptions, settings: &Settings, trials: &mut Vec<Trial>) -> Arguments {
    // libtest takes one filter; as `cargo test` does, the runner takes several (a trial runs
    // when any of them matches its name).
    let (libtest_args, filters) = split_filters(&opts.libtest_args);
    let mut args = Arguments::from_iter(
        std::iter::once("mcp-gauntlet".to_string()).chain(libtest_args.iter().cloned()),
    );
    if filters.len() > 1 {
        let exact = args.exact;
        // As libtest matches one filter: the case id, or the name with its lane (`[http] x`).
        trials.retain(|t| {
            let full = format!("[{}] {}", t.kind(), t.name());
            filters.iter().any(|f| {
                if exact {
                    t.name() == f || full == *f
                } else {
                    full.contains(f.as_str())
                }
            })
        });
    } else {
        args.filter = filters.into_iter().next();
    }
    if args.test_threads.is_none() {
        args.test_threads = opts
            .jobs
            .map(|n| n.max(1))
            .or_else(|| opts.target.default_jobs());
    }
    // A campaign's lane: libtest's lines go to the lane's log. Quiet: nowhere (the end of the
    // run names the failures).
    if let (Some(log), None) = (&opts.log, &args.logfile) {
        args.logfile = Some(log.display().to_string());
    } else if opts.quiet && args.logfile.is_none() && !args.list {
        args.logfile = Some(NULL_DEVICE.to_string());
    }
    // A side-channel log says that the denied tool ran, not which request ran it: only with one
    // trial in flight is its growth that trial's.
    if settings.canary_log.is_some() && args.test_threads != Some(1) && !args.list {
        eprintln!(
            "--canary-log: trials run one at a time, so the log's growth is the running trial's"
        );
        args.test_threads = Some(1);
    }
    args
}

/// Where a quiet run sends libtest's lines.
const NULL_DEVICE: &str = if cfg!(windows) { "NUL" } else { "/dev/null" };

/// What the reports say of the run itself.
fn run_info(opts: &RunOptions, target: &str, picked: &target::Picked) -> RunInfo {
    RunInfo {
        target: target.to_string(),
        profile: match &opts.target {
            Target::Embedded => RunProfile::ServerAndGate,
            Target::Gate { .. } | Target::GateStdio { .. } => RunProfile::One(Profile::Gate),
            _ => RunProfile::One(opts.profile),
        },
        spec: crate::versions::list(&picked.versions, ","),
        strict: opts.strict,
        spelling: opts.settings.spelling(),
        subject: crate::advisory::Subject {
            package: opts.package.clone(),
            servers: picked.servers.clone(),
        },
    }
}

/// What a person reads after libtest's lines: the warnings, the summary (with the rerun
/// command, secrets redacted) and the trials a dead target left not run. A quiet run, which
/// printed no trial lines, first lists the failed trials and always prints its counts.
fn end_text(
    records: &[Record],
    not_run: &[(NotRun, usize)],
    opts: &RunOptions,
    info: &RunInfo,
    shared: &Shared,
) -> String {
    let mut out = String::new();
    if opts.quiet {
        out.push_str(&report::redact(
            &report::failure_lines(records),
            &shared.secrets,
        ));
    }
    out.push_str(&report::warning_summary(records));
    out.push_str(&report::advisory_summary(records, &info.subject));
    // The command line may hold secrets (`--header`, `--auth-token`): redacted.
    let summary = report::run_summary(records, rerun_command(opts).as_deref());
    if summary.is_empty() && (opts.quiet || opts.log.is_some()) {
        out.push_str(&format!("\n{}\n", report::count_line(records)));
    }
    out.push_str(&report::redact(&summary, &shared.secrets));
    for (why, n) in not_run {
        out.push_str(&format!(
            "incomplete: {n} trial{} {why}, which was not brought back\n",
            if *n == 1 { " was" } else { "s were" }
        ));
    }
    if tested_nothing(records) {
        let unsent = records.iter().filter(|r| r.not_sent()).count();
        out.push_str(&format!(
            "nothing was tested: of the {} trials selected, {} are not applicable to this target (its profile, transport, versions or credentials) and {unsent} could not be sent (its handshake was not answered)\n",
            records.len(),
            records.len() - unsent
        ));
    }
    out
}

/// The lane's log, made before libtest makes it (libtest panics when it cannot).
fn make_log(opts: &RunOptions) -> Result<(), RunError> {
    match &opts.log {
        Some(log) => std::fs::File::create(log)
            .map(drop)
            .map_err(|source| RunError::Write {
                path: log.display().to_string(),
                source,
            }),
        None => Ok(()),
    }
}

/// The end of the run, on stdout, or after libtest's lines in the lane's log.
fn say_end(end: &str, opts: &RunOptions) -> Result<(), RunError> {
    match &opts.log {
        Some(log) => append(log, end).map_err(|source| RunError::Write {
            path: log.display().to_string(),
            source,
        }),
        None => {
            print!("{end}");
            Ok(())
        }
    }
}

/// `text` appended to the file at `path` (made when missing): a step summary file may already
/// hold other steps' summaries.
fn append(path: &PathBuf, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(text.as_bytes())
}

/// The embedded catalogue and every `--cases` directory.
fn load_catalogue(opts: &RunOptions) -> Result<Catalogue, RunError> {
    let mut catalogue = Catalogue::embedded()?;
    for dir in &opts.extra_cases {
        catalogue.add_dir(dir)?;
    }
    catalogue
        .cases
        .retain(|c| opts.advisories.takes(&c.spec.advisories));
    Ok(catalogue)
}

/// The run's settings: the reference gate's table known for the embedded default, `--header`
/// values added, and the good token (when there is one and no
/// `Authorization` header was given) on every request, handshakes and probes too; `auth/`
/// cases replace or remove it.
fn run_settings(opts: &RunOptions) -> Result<Settings, RunError> {
    let mut settings = opts.settings.clone();
    settings.run_deadline = Some(Instant::now() + opts.total_timeout);
    // The embedded default's gate is the reference gate: its table is known.
    settings.exact_codes |= opts.target.runs_the_reference_gate();
    for h in &opts.headers {
        settings.extra_headers.push(parse_header(h)?);
    }
    let good = settings
        .auth_tokens
        .get(crate::auth::TokenKind::Good)
        .map(str::to_string);
    // A gate that reads the caller from the bearer token gets the identity's token instead.
    let has_authorization = settings
        .extra_headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        || settings
            .identity
            .as_ref()
            .is_some_and(crate::identity::Identity::uses_bearer);
    if let (Some(token), false) = (good, has_authorization) {
        settings
            .extra_headers
            .push(("authorization".into(), format!("Bearer {token}")));
    }
    Ok(settings)
}

/// Every header value and token: secrets, never shown in any output.
fn secrets_of(settings: &Settings) -> Vec<String> {
    settings
        .extra_headers
        .iter()
        .map(|(_, v)| v.clone())
        .chain(settings.auth_tokens.iter().map(|(_, t)| t.to_string()))
        .chain(
            settings
                .identity
                .iter()
                .flat_map(crate::identity::Identity::secrets),
        )
        .collect()
}

/// What every trial of the run shares.
struct Shared {
    rt: Arc<tokio::runtime::Runtime>,
    collector: Collector,
    restarts: Restarts,
    baseline: Option<Arc<Baseline>>,
    secrets: Vec<String>,
    strict: bool,
    /// The run's total deadline: trials that have not started by then fail.
    deadline: Instant,
    /// The trials under way (ordinal, `[lane] case`): when a target dies with several jobs in
    /// flight, any of them may have ended it, and the message names them.
    /// Each entry also names its target (lanes over one target share their `serial` lock).
    in_flight: std::sync::Mutex<Vec<InFlight>>,
    /// Trials not run because their target was down, by the reason they were given.
    not_run: std::sync::Mutex<std::collections::BTreeMap<NotRun, usize>>,
    /// Trials finished (run, or found not runnable), for the live counter.
    done: Arc<std::sync::atomic::AtomicUsize>,
}

/// A trial under way.
struct InFlight {
    ordinal: usize,
    /// Which target its lane sends to (the address of the lane's `serial` lock).
    target: usize,
    /// `[lane] case`.
    name: String,
}

/// One libtest trial per (lane, case): ignored when the case does not apply to the lane (its
/// record says `skip`), left out when the lane runs other families only or `--shard` takes
/// another case. Trials are numbered in this order; the records are sorted by that number.
fn plan(
    opts: &RunOptions,
    catalogue: &Catalogue,
    settings: &Arc<Settings>,
    lanes: Vec<Lane>,
    shared: &Arc<Shared>,
) -> Vec<Trial> {
    let mut trials = Vec::new();
    let ids: Vec<crate::report::LaneId> = lanes.iter().map(|l| l.id).collect();
    for lane in lanes {
        let lane = Arc::new(lane);
        let settings = lane.settings(settings);
        for (index, case) in catalogue.cases.iter().enumerate() {
            // `--shard K/N`: this run takes every N-th case, starting at the K-th.
            if let Some((k, n)) = opts.shard {
                if index % n != k - 1 {
                    continue;
                }
            }
            // A lane for one family only (a gate in front of a lenient downstream) lists no
            // other cases, not even as ignored.
            if !lane.takes(&case.id) {
                continue;
            }
            let ordinal = trials.len();
            let (name, kind) = (case.id.clone(), lane.id.to_string());
            let runs_here = applies(case, &lane, &settings) && series_here(case, &lane, &ids);
            let legal = legal_here(case, &lane, shared.strict).filter(|_| runs_here);
            if !runs_here || legal.is_some() {
                let mut record = lane.record(case, None, 0);
                if let Some(why) = legal {
                    record.findings.push(verdict::Finding {
                        check: verdict::Check::Setup,
                        status: Status::Pass,
                        message: why.into(),
                    });
                }
                shared.collector.push(ordinal, record);
                trials.push(
                    Trial::test(name, || Ok(()))
                        .with_kind(kind)
                        .with_ignored_flag(true),
                );
                continue;
            }
            let one = OneTrial {
                case: case.clone(),
                lane: lane.clone(),
                settings: settings.clone(),
                shared: shared.clone(),
                ordinal,
            };
            trials.push(
                Trial::ignorable_test(name, move || {
                    // Counted when the trial ends, however it ends (a panic included).
                    let _counted = Counted(one.shared.done.clone());
                    one.execute()
                })
                .with_kind(kind),
            );
        }
    }
    trials
}

/// Counts a trial as done when dropped.
struct Counted(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Whether `case` runs on `lane` at the settings' version with the run's credentials, its
/// tool calls can be spelled through the run's call mapping, and its caller presented.
fn applies(case: &Case, lane: &Lane, settings: &Speaking) -> bool {
    case.applies_to_transport(lane.id.transport)
        && case.applies_to_profile(lane.id.profile)
        && case.applies_to_version(settings.version)
        && !(case.spec.stateful && lane.stateless)
        && (lane.stateless || !case.spec.stateless)
        && settings.has_auth(case.spec.auth)
        && settings.mapping.can_send(&case.spec)
        && crate::identity::Identity::can_send(settings.identity.as_ref(), &case.spec)
}

/// Why what `case` sends is legal on `lane`'s target, if it is: a batch claiming 2025-03-26
/// sent to a server that agrees to 2025-03-26 (a gate must still hold the denied call in it;
/// `--strict` holds a server to the session's version, MCP-HTTP-VER-05's strict reading).
fn legal_here(case: &Case, lane: &Lane, strict: bool) -> Option<&'static str> {
    let server = lane.id.profile == Profile::Server && !strict;
    (server && lane.batch_era && case.claims_batch_era()).then_some(
        "the target agrees to 2025-03-26, where a batch is legal: a batch claiming that version is not judged",
    )
}

/// A series runs once per target, not once per version (what accumulates does not depend on
/// the version spoken), at the newest version the case applies to; and only on a target the
/// run was given (`--serve`, `--http`, `--stdio`, `--gate`...), never on the embedded default
/// (its in-process copies would measure the runner's own process, and its series over stdio
/// would slow its ten-second run).
fn series_here(case: &Case, lane: &Lane, lanes: &[crate::report::LaneId]) -> bool {
    if case.spec.series.is_none() {
        return true;
    }
    if lane.copies.is_some() || lane.embedded {
        return false;
    }
    let same_target = |id: &crate::report::LaneId| {
        id.profile == lane.id.profile
            && id.transport == lane.id.transport
            && id.downstream == lane.id.downstream
    };
    let newest = lanes
        .iter()
        .filter(|id| same_target(id) && case.applies_to_version(id.version))
        .map(|id| id.version)
        .max();
    newest == Some(lane.id.version)
}

/// One (case, lane) trial with what it needs to run on any thread.
struct OneTrial {
    case: Case,
    lane: Arc<Lane>,
    /// The run's settings at the lane's version.
    settings: Speaking,
    shared: Arc<Shared>,
    ordinal: usize,
}

impl OneTrial {
    /// Run the trial: refuse it when its target died or the run's deadline passed; else send,
    /// judge, watch the target, apply the baseline, and keep the record.
    fn execute(&self) -> Result<Completion, Failed> {
        let (case, lane, shared) = (&self.case, &*self.lane, &*self.shared);
        // A target that died earlier in the run: this trial is not run, and says why.
        if let Some(why) = lane.down() {
            let said = why.to_string();
            *crate::sync::lock(&shared.not_run).entry(why).or_default() += 1;
            self.keep(self.setup_record(Status::Warn, &said));
            return Ok(Completion::ignored_with(said));
        }
        if Instant::now() > shared.deadline {
            let msg = "the run's total deadline passed before this case started";
            self.keep(self.setup_record(Status::Fail, msg));
            return Err(Failed::from(msg));
        }
        let judging = Judging {
            settings: &self.settings,
            strict: shared.strict,
            secrets: &shared.secrets,
        };
        let me = format!("[{}] {}", lane.id, case.id);
        crate::sync::lock(&shared.in_flight).push(InFlight {
            ordinal: self.ordinal,
            target: Arc::as_ptr(&lane.serial) as usize,
            name: me,
        });
        let (facts, context) = judging.prepare(case, lane);
        let (mut obs, held) = shared.rt.block_on(judging.observe(&facts, lane, &context));
        if let Some(why) = obs.sent.inapplicable.take() {
            drop(held);
            crate::sync::lock(&shared.in_flight).retain(|t| t.ordinal != self.ordinal);
            self.keep(self.setup_record(Status::Pass, &why));
            return Ok(Completion::ignored_with(why));
        }
        if !held.on_copy {
            self.watch_target(&mut obs);
        }
        // A series leaves its state behind (sessions, caches): a target the runner started
        // meets the next case afresh, while this trial still holds the lane alone.
        if case.spec.series.is_some()
            && obs.after.target_down.is_none()
            && lane.start_afresh() == Some(false)
        {
            eprintln!(
                "the target could not be started again after the series {}",
                case.id
            );
        }
        let v = verdict::judge(case, &obs, &context);
        drop(held);
        crate::sync::lock(&shared.in_flight).retain(|t| t.ordinal != self.ordinal);
        let mut record = lane.record(case, Some(&v), obs.elapsed.as_millis() as u64);
        // Whatever came back may echo a `--header` value: never into any output.
        for f in &mut record.findings {
            f.message = report::redact(&f.message, &shared.secrets);
        }
        let result = match Baseline::decide(shared.baseline.as_deref(), v.status, &record) {
            Decision::Known => {
                record.verdict = TrialVerdict::Known;
                Ok(())
            }
            Decision::Fails => {
                let text = report::redact(
                    &v.explain(&lane.id.to_string(), case, &obs),
                    &shared.secrets,
                );
                record.explanation = Some(text.clone());
                Err(Failed::from(text))
            }
            Decision::Stale => {
                let text = format!(
                    "[{}] {}: listed in the baseline as a known failure, but it passes now: remove it from the baseline",
                    lane.id, case.id
                );
                record.verdict = TrialVerdict::Stale;
                record.explanation = Some(text.clone());
                Err(Failed::from(text))
            }
            Decision::Passes => Ok(()),
        };
        self.keep(record);
        result.map(|()| Completion::Completed)
    }

    /// An HTTP target that this case left gone (or, started by the runner, unable to answer) is
    /// restarted (`--restart-cmd`, or the runner's own gate) or its lane's later trials are not
    /// run; the observation says so (`target_down`), for the judge to fail the case that did it,
    /// once.
    fn watch_target(&self, obs: &mut crate::transport::Observation) {
        let lane = &*self.lane;
        let found_gone = obs.found_gone();
        let gone = obs.after.alive == Some(false) || found_gone;
        let over_http = matches!(
            lane.id.transport,
            crate::case::TransportKind::Http | crate::case::TransportKind::Sse
        );
        if !gone || !over_http {
            return;
        }
        // A gate the runner started is started again when a case leaves it unable to answer,
        // even while it still takes connections; any other target only when it is gone.
        let listening = lane.reachable();
        if !listening || lane.process.is_some() {
            // Only trials on the same target could have ended it, and none when its cases run
            // one at a time (the others in flight are waiting for it).
            let target = Arc::as_ptr(&lane.serial) as usize;
            let others: Vec<String> = if lane.witness.is_some() {
                Vec::new()
            } else {
                crate::sync::lock(&self.shared.in_flight)
                    .iter()
                    .filter(|t| t.ordinal != self.ordinal && t.target == target)
                    .map(|t| t.name.clone())
                    .collect()
            };
            let note = self.shared.restarts.mark_dead(
                lane,
                &self.case.id,
                crate::target::Gone {
                    already: found_gone,
                    listening,
                },
                &others,
            );
            obs.after.target_down = Some(note);
        }
    }

    /// The record of a trial that did not run: one setup finding saying why.
    fn setup_record(&self, status: Status, why: &str) -> Record {
        let mut record = self.lane.record(&self.case, None, 0);
        if status == Status::Fail {
            record.verdict = TrialVerdict::Fail;
        }
        record.findings.push(verdict::Finding {
            check: verdict::Check::Setup,
            status,
            message: why.to_string(),
        });
        record
    }

    fn keep(&self, record: Record) {
        self.shared.collector.push(self.ordinal, record);
    }
}

/// The JSON report, JUnit XML, SARIF and the written baseline, as the options ask.
fn write_outputs(
    opts: &RunOptions,
    info: &RunInfo,
    records: &[Record],
    not_run: &[(NotRun, usize)],
    catalogue: &Catalogue,
    secrets: &[String],
) -> Result<(), RunError> {
    let write = |path: &PathBuf, text: String| {
        std::fs::write(path, text).map_err(|source| RunError::Write {
            path: path.display().to_string(),
            source,
        })
    };
    if let Some(path) = &opts.report {
        write(path, report::json_report(info, records))?;
    }
    if let Some(path) = &opts.junit {
        write(path, report::junit(info, records))?;
    }
    if let Some(path) = &opts.sarif {
        write(path, report::sarif(info, records, catalogue))?;
    }
    if let Some(path) = &opts.summary_md {
        // Redacted before the Markdown escapes anything (a secret holding `_` or `&` would no
        // longer match after); the records' texts were redacted when they were kept.
        let info = RunInfo {
            target: report::redact(&info.target, secrets),
            ..info.clone()
        };
        let not_run: Vec<(String, usize)> = not_run
            .iter()
            .map(|(why, n)| (report::redact(&why.to_string(), secrets), *n))
            .collect();
        let text = report::step_summary(&info, records, &not_run);
        append(path, &text).map_err(|source| RunError::Write {
            path: path.display().to_string(),
            source,
        })?;
    }
    if let Some(path) = &opts.write_baseline {
        let b = Baseline::of_failures(records, |m| report::redact(m, secrets));
        write(path, b.render_for(path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::record;
    use crate::verdict::{Check, Finding, Status};

    /// A trial whose case could not be sent: its only failure is the setup's.
    fn unsent(id: &str) -> Record {
        let mut r = record(id, TrialVerdict::Fail, "");
        r.findings = vec![Finding {
            check: Check::Setup,
            status: Status::Fail,
            message: "the case could not be sent: initialize was not answered".into(),
        }];
        r
    }

    #[test]
    fn trials_that_could_not_be_sent_test_nothing() {
        let skipped = record("b", TrialVerdict::Skip, "");
        assert!(tested_nothing(&[unsent("a"), skipped.clone()]));
        assert!(unsent("a").not_sent());
        // One trial that was sent and failed on its own account is a test.
        let failed = record("c", TrialVerdict::Fail, "expected reject; observed accept");
        assert!(!failed.not_sent());
        assert!(!tested_nothing(&[unsent("a"), failed]));
        assert!(!tested_nothing(&[]));
        // And no cause of a finding is made of it.
        assert!(report::Cause::of(&unsent("a")).is_none());
    }

    #[test]
    fn the_summary_names_the_causes_worst_first() {
        let mut must = record("envelope/x", TrialVerdict::Fail, "observed silent");
        must.requirements = vec!["MCP-MSG-03".into()];
        let mut ran = record("batch/y", TrialVerdict::Fail, "ran");
        ran.requirements = vec!["MCP-HTTP-POST-03".into()];
        ran.findings.push(Finding {
            check: Check::Canary,
            status: Status::Fail,
            message: "the denied tool ran".into(),
        });
        let mut warned = record("lifecycle/z", TrialVerdict::Warn, "accepted");
        warned.requirements = vec!["MCP-LIFE-09".into()];
        warned.findings[0].status = Status::Warn;
        let text = report::run_summary(&[warned, must.clone(), must, ran], None);
        let line = text
            .lines()
            .find(|l| l.contains("by cause"))
            .expect("a line of causes");
        let at = |s: &str| line.find(s).unwrap_or(usize::MAX);
        assert!(
            at("the denied tool ran: MCP-HTTP-POST-03") < at("must: MCP-MSG-03 outcome 2"),
            "{line}"
        );
        assert!(
            at("must: MCP-MSG-03 outcome 2") < at("warn: MCP-LIFE-09"),
            "{line}"
        );
    }
}
