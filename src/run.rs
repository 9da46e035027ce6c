//! One invocation of `mcp-gauntlet run`: resolve the target, turn (case, transport) pairs into
//! libtest trials, run them, and write the reports.

use crate::case::{Catalogue, Profile};
use crate::lanes;
use crate::report::{self, Collector, Record, RunInfo};
use crate::transport::exchange::{self, Settings};
use crate::verdict::{self, Context, Status};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    #[error(transparent)]
    Case(#[from] crate::case::CaseError),
    #[error(transparent)]
    Transport(#[from] crate::transport::TransportError),
    #[error("cannot start the embedded witness: {0}")]
    Witness(#[source] std::io::Error),
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`--header` wants `Name: value`, got `{0}`")]
    BadHeader(String),
    #[error("cannot set up the run: {0}")]
    Setup(#[source] std::io::Error),
    #[error("not a command the runner can start: {0}")]
    BadTarget(String),
    #[error("the gate did not accept connections on 127.0.0.1:{0} within 10 s")]
    GateDidNotStart(u16),
    #[error(transparent)]
    Baseline(#[from] report::baseline::BaselineError),
    #[error("{url}: the TLS handshake failed (pass --ca FILE to trust the CA that signed its certificate, or --insecure to check none)")]
    Certificate {
        url: String,
        #[source]
        source: std::io::Error,
    },
}

/// Where the cases go.
#[derive(Debug, Clone, Default)]
pub enum Target {
    /// The embedded default: the witness, in-process over HTTP and as a child process over stdio.
    #[default]
    Embedded,
    Http {
        url: String,
        witness_log: Option<PathBuf>,
        /// How an `https` URL's certificate is checked.
        tls: crate::transport::tls::TlsOptions,
    },
    Stdio {
        command: String,
    },
    /// An HTTP gate the runner starts in front of its own witness (`{downstream_url}`, `{port}`).
    Gate {
        command: String,
    },
    /// A stdio gate the runner starts per case (`{downstream_cmd}`).
    GateStdio {
        command: String,
    },
}

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
    /// Known failures.
    pub baseline: Option<PathBuf>,
    /// Write the run's failures as a baseline.
    pub write_baseline: Option<PathBuf>,
    /// `(k, n)`: run only shard k of n (1-based).
    pub shard: Option<(usize, usize)>,
    /// Arguments for libtest (after `--`).
    pub libtest_args: Vec<String>,
    /// How many trials run at once (`--jobs`; libtest's `--test-threads` in `libtest_args`
    /// wins). `None`: as many as the machine has cores.
    pub jobs: Option<usize>,
    /// The program to run as the stdio witness for the embedded default (normally this binary).
    pub self_exe: Option<PathBuf>,
    /// HTTP targets: how to restart the target after a case killed it (`sh -c`).
    pub restart_cmd: Option<String>,
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
            baseline: None,
            write_baseline: None,
            shard: None,
            libtest_args: Vec::new(),
            jobs: None,
            self_exe: None,
            restart_cmd: None,
        }
    }
}

/// What a run concluded.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub failed: bool,
    pub records: Vec<Record>,
}

/// Parse `--header 'Name: value'`.
pub fn parse_header(h: &str) -> Result<(String, String), RunError> {
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

/// Run the catalogue. Blocks; prints libtest output to stdout.
pub fn run(opts: RunOptions) -> Result<RunOutcome, RunError> {
    let mut catalogue = Catalogue::embedded()?;
    for dir in &opts.extra_cases {
        catalogue.add_dir(dir)?;
    }
    let mut settings = opts.settings.clone();
    for h in &opts.headers {
        settings.extra_headers.push(parse_header(h)?);
    }
    // An endpoint that wants a token gets the good one on every request (handshakes and probes
    // too); `auth/` cases replace or remove it.
    let good = settings
        .auth_tokens
        .iter()
        .find(|(n, _)| *n == "token_good")
        .map(|(_, t)| t.clone());
    let has_authorization = settings
        .extra_headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
    if let (Some(token), false) = (good, has_authorization) {
        settings
            .extra_headers
            .push(("authorization".into(), format!("Bearer {token}")));
    }
    let secrets: Vec<String> = settings
        .extra_headers
        .iter()
        .map(|(_, v)| v.clone())
        .chain(settings.auth_tokens.iter().map(|(_, t)| t.clone()))
        .collect();

    // Held until the run ends: the runtime, per-case witness logs, child processes, server tasks.
    let mut opened = lanes::open(&opts.target, opts.profile, opts.self_exe.as_ref())?;
    let picked = lanes::pick_versions(&opened, &opts.spec, &settings);
    opened.lanes = lanes::with_versions(std::mem::take(&mut opened.lanes), &picked);
    let versions = picked.versions.clone();
    let rt = opened.rt.clone();
    let target_name = opened.name.clone();

    let baseline = match &opts.baseline {
        Some(p) => Some(Arc::new(report::baseline::Baseline::load(p)?)),
        None => None,
    };
    let collector = Collector::default();
    let restarts = Arc::new(Restarts {
        command: opts.restart_cmd.clone(),
        children: std::sync::Mutex::new(Vec::new()),
    });
    let global_deadline = Instant::now() + opts.total_timeout;
    let mut trials = Vec::new();
    for lane in std::mem::take(&mut opened.lanes) {
        let lane = Arc::new(lane);
        // Cases that read a shared witness record run one at a time, so each sees only its own.
        let serial = lane.serial.clone();
        let mut settings = settings.clone();
        settings.spec_version = lane.version.clone();
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
            let applies = case.applies_to_transport(lane.transport)
                && case.applies_to_profile(lane.profile)
                && case.applies_to_version(&settings.spec_version)
                && !(case.spec.stateful && lane.stateless)
                && settings.has_auth(case.spec.auth);
            let ordinal = trials.len();
            let case = case.clone();
            let name = case.id.clone();
            let kind = lane.kind.clone();
            if !applies {
                collector.push(ordinal, lane.record(&case, None, 0));
                trials.push(
                    Trial::test(name, || Ok(()))
                        .with_kind(kind)
                        .with_ignored_flag(true),
                );
                continue;
            }
            let (rt, lane, settings, collector, secrets, serial, baseline, restarts) = (
                rt.clone(),
                lane.clone(),
                settings.clone(),
                collector.clone(),
                secrets.clone(),
                serial.clone(),
                baseline.clone(),
                restarts.clone(),
            );
            let (profile, strict) = (lane.profile, opts.strict);
            trials.push(
                Trial::ignorable_test(name, move || {
                    // A target that died earlier in the run: this trial is not run, and says why.
                    if let Some(why) = lane_down(&lane) {
                        let mut record = lane.record(&case, None, 0);
                        record.findings.push(verdict::Finding {
                            check: verdict::Check::Setup,
                            status: Status::Warn,
                            message: why.clone(),
                        });
                        collector.push(ordinal, record);
                        return Ok(Completion::ignored_with(why));
                    }
                    if Instant::now() > global_deadline {
                        let msg = "the run's total deadline passed before this case started";
                        let mut record = lane.record(&case, None, 0);
                        record.verdict = "fail".into();
                        record.findings.push(verdict::Finding {
                            check: verdict::Check::Setup,
                            status: Status::Fail,
                            message: msg.into(),
                        });
                        collector.push(ordinal, record);
                        return Err(Failed::from(msg));
                    }
                    let check_alive = case
                        .expectation(profile, strict, &settings.spec_version)
                        .alive.unwrap_or(true);
                    let obs = rt.block_on(async {
                        let _guard = match &lane.witness {
                            Some(_) => Some(serial.lock().await),
                            None => None,
                        };
                        exchange::run_case(
                            &case,
                            &lane.endpoint,
                            &settings,
                            lane.witness.as_ref(),
                            check_alive,
                        )
                        .await
                    });
                    let ctx = Context {
                        profile,
                        strict,
                        transport: lane.transport,
                        secrets: secrets.clone(),
                        codes: settings.code_table(),
                        version: settings.spec_version.clone(),
                        method: case
                            .spec
                            .request
                            .method
                            .clone()
                            .unwrap_or_else(|| "POST".into()),
                        placeholders: exchange::base_placeholders(&settings),
                        canary_text: settings.canary_text.clone(),
                        deny_style: settings.deny_style,
                    };
                    let mut v = verdict::judge(&case, &obs, &ctx);
                    // The case that killed an HTTP target fails with the evidence, once; the
                    // target is restarted (`--restart-cmd`) or the lane's later trials not run.
                    let found_gone = matches!(obs.ending, crate::transport::Ending::Unreachable(_))
                        || obs.setup_error.is_some();
                    let gone = obs.alive == Some(false) || found_gone;
                    if gone && lane.transport == crate::case::TransportKind::Http && !lane.reachable()
                    {
                        let note = mark_dead(&lane, &case.id, found_gone, &restarts);
                        v.findings.push(verdict::Finding {
                            check: verdict::Check::Alive,
                            status: Status::Fail,
                            message: note,
                        });
                        v.status = Status::Fail;
                    }
                    let mut record = lane.record(&case, Some(&v), obs.elapsed.as_millis() as u64);
                    // Whatever came back may echo a `--header` value: never into any output.
                    for f in &mut record.findings {
                        f.message = report::redact(&f.message, &secrets);
                    }
                    let known = baseline
                        .as_ref()
                        .is_some_and(|b| b.lists(&case.id, lane.transport, profile, &lane.version));
                    let result = match (v.status, known) {
                        (Status::Fail, true) => {
                            record.verdict = "known".into();
                            Ok(())
                        }
                        (Status::Fail, false) => {
                            let text = report::redact(&v.explain(&case, &obs), &secrets);
                            record.explanation = Some(text.clone());
                            Err(Failed::from(text))
                        }
                        (_, true) => {
                            let text = format!(
                                "[{}] {}: listed in the baseline as a known failure, but it passes now: remove it from the baseline",
                                lane.kind, case.id
                            );
                            record.verdict = "stale".into();
                            record.explanation = Some(text.clone());
                            Err(Failed::from(text))
                        }
                        (Status::Warn | Status::Pass, false) => Ok(()),
                    };
                    collector.push(ordinal, record);
                    result.map(|()| Completion::Completed)
                })
                .with_kind(kind),
            );
        }
    }

    let mut args = Arguments::from_iter(
        std::iter::once("mcp-gauntlet".to_string()).chain(opts.libtest_args.iter().cloned()),
    );
    if args.test_threads.is_none() {
        args.test_threads = opts.jobs.map(|n| n.max(1));
    }
    let listing = args.list;
    let conclusion = libtest_mimic::run(&args, trials);
    restarts.stop();
    let records = collector.records();
    if !listing {
        print!("{}", report::warning_summary(&records));
    }
    let info = RunInfo {
        target: target_name,
        profile: match &opts.target {
            Target::Embedded => "server and gate".into(),
            Target::Gate { .. } | Target::GateStdio { .. } => Profile::Gate.as_str().into(),
            _ => opts.profile.as_str().into(),
        },
        spec: versions.join(","),
        strict: opts.strict,
    };
    let write = |path: &PathBuf, text: String| {
        std::fs::write(path, text).map_err(|source| RunError::Write {
            path: path.display().to_string(),
            source,
        })
    };
    if let Some(path) = &opts.report {
        write(path, report::json_report(&info, &records))?;
    }
    if let Some(path) = &opts.junit {
        write(path, report::junit(&info, &records))?;
    }
    if let Some(path) = &opts.write_baseline {
        let known_failures = records
            .iter()
            .filter(|r| r.verdict == "fail" || r.verdict == "known")
            .map(|r| report::baseline::KnownFailure {
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
                        |f| {
                            format!(
                                "[{}] {}",
                                f.check.as_str(),
                                report::redact(&f.message, &secrets)
                            )
                        },
                    ),
            })
            .collect();
        let b = report::baseline::Baseline {
            format: report::baseline::BASELINE_FORMAT.into(),
            known_failures,
        };
        write(path, b.render_for(path))?;
    }
    Ok(RunOutcome {
        failed: conclusion.has_failed(),
        records,
    })
}

/// How a run brings a dead HTTP target back (`--restart-cmd`), and the processes it started.
struct Restarts {
    command: Option<String>,
    children: std::sync::Mutex<Vec<std::process::Child>>,
}

impl Restarts {
    /// Start the restart command and wait (30 s at most) until the lane's endpoint accepts
    /// connections again. Whether it did.
    fn restart(&self, lane: &lanes::Lane) -> bool {
        let Some(command) = &self.command else {
            return false;
        };
        let child = std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        match child {
            Ok(c) => {
                if let Ok(mut kids) = self.children.lock() {
                    kids.push(c);
                }
            }
            Err(e) => {
                eprintln!("the restart command could not be started: {e}");
                return false;
            }
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if lane.reachable() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// Kill every process the restart command left running.
    fn stop(&self) {
        if let Ok(mut kids) = self.children.lock() {
            for c in kids.iter_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// Record that the lane's target died during `case_id` (said once on stderr), and restart it
/// when the run can. `already` says the case found it gone before its own bytes were sent. The
/// text for the trial.
fn mark_dead(lane: &lanes::Lane, case_id: &str, already: bool, restarts: &Restarts) -> String {
    let when = if already {
        "was not accepting connections when this case began (a trial before it ended it)"
    } else {
        "stopped accepting connections after this case"
    };
    let Ok(mut died) = lane.died_during.lock() else {
        return format!("the target {when}");
    };
    if died.is_none() {
        eprintln!(
            "the target {when}: [{}] {case_id}; this trial fails with the evidence",
            lane.kind
        );
        *died = Some(case_id.to_string());
    }
    if restarts.restart(lane) {
        eprintln!("the target was restarted with --restart-cmd; the run goes on");
        *died = None;
        format!("the target {when} (it was restarted)")
    } else {
        format!(
            "the target {when}; the lane's later trials are not run{}",
            if restarts.command.is_some() {
                " (the restart command did not bring it back within 30 s)"
            } else {
                " (give --restart-cmd to restart it)"
            }
        )
    }
}

/// Why a trial on `lane` is not run: its target died earlier and was not brought back.
fn lane_down(lane: &lanes::Lane) -> Option<String> {
    let killer = lane.died_during.lock().ok()?.clone()?;
    Some(format!(
        "not run: the target stopped accepting connections after [{}] {killer}",
        lane.kind
    ))
}
