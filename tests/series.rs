//! Series cases (`sessions/`, `state/`, `cpu/`, `connections/`): what accumulates over many
//! requests and connections. Each is run against the witness started by the runner itself
//! (`--serve`, so its process is read): the strict witness passes every one, and each fails on
//! the broken modes made for it (that each mode fails nothing else is an ignored sweep the series
//! workflow runs). Without the process (a plain `--http`), memory is said to be not observed,
//! never passed in silence. The reference gate in front of the runner's witness (`--gate`)
//! passes every one.

use crate::util::{bin, run_with_report, stdio_witness_command, HttpWitness, Trial};
use crate::util::{Status, TransportKind, TrialVerdict};
use mcp_gauntlet::case::Catalogue;

/// Which broken witness modes each series case must fail on (the bug classes it exists to
/// find), and for each the one oracle that must say so.
const PROVEN_BY: &[(&str, &[(&str, &str)])] = &[
    (
        "connections/get-streams-on-one-session-are-bounded",
        &[
            ("get-stream-per-request", "resources"),
            ("keep-closed-connections", "resources"),
            ("one-at-a-time", "latency"),
        ],
    ),
    (
        "connections/idle-keep-alive-connections-hold-no-one-up",
        &[
            ("one-at-a-time", "latency"),
            ("keep-closed-connections", "resources"),
        ],
    ),
    (
        "connections/trickled-bodies-hold-no-one-up",
        &[
            ("one-at-a-time", "latency"),
            ("keep-closed-connections", "resources"),
        ],
    ),
    (
        "connections/trickled-headers-hold-no-one-up",
        &[
            ("one-at-a-time", "latency"),
            ("keep-closed-connections", "resources"),
        ],
    ),
    ("cpu/long-number-literals", &[("quadratic-reader", "cpu")]),
    ("cpu/long-runs-of-escapes", &[("quadratic-reader", "cpu")]),
    ("cpu/many-duplicate-members", &[("quadratic-reader", "cpu")]),
    (
        "cpu/uri-template-with-many-separators",
        &[("backtracking-matcher", "cpu")],
    ),
    (
        "sessions/abandoned-sessions-are-bounded",
        &[("keep-sessions", "memory")],
    ),
    (
        "sessions/ended-sessions-are-freed",
        &[("keep-deleted", "memory")],
    ),
    (
        "sessions/refused-opens-leave-nothing",
        &[("leak-refused", "memory")],
    ),
    (
        "state/cancelled-request-ids-are-not-kept",
        &[("keep-notified", "memory")],
    ),
    (
        "state/mcp-name-header-values-are-not-kept",
        &[("cache-names", "memory")],
    ),
    (
        "state/mcp-param-header-values-are-not-kept",
        &[("cache-names", "memory")],
    ),
    (
        "state/unknown-progress-tokens-are-not-kept",
        &[("keep-notified", "memory")],
    ),
    (
        "state/unknown-prompt-names-are-not-kept",
        &[("cache-names", "memory")],
    ),
    (
        "state/unknown-resource-subscriptions-are-not-kept",
        &[("cache-names", "memory")],
    ),
    (
        "state/unknown-resource-uris-are-not-kept",
        &[("cache-names", "memory")],
    ),
    (
        "state/unknown-tool-names-are-not-kept",
        &[("cache-names", "memory")],
    ),
];

/// Every mode named in [`PROVEN_BY`], once.
fn modes() -> Vec<&'static str> {
    let mut modes: Vec<&str> = PROVEN_BY
        .iter()
        .flat_map(|(_, by)| by.iter().map(|(m, _)| *m))
        .collect();
    modes.sort_unstable();
    modes.dedup();
    modes
}

/// Besides its own oracle, what the same bug may also show: a mode that burns CPU may hold up
/// the other connection's ping (on a loaded machine its threads are all busy); one that shuts
/// other clients out may also leave the request sent whole at the end of a hold unanswered.
fn also_shows(check: &str, other: &str) -> bool {
    matches!((check, other), ("cpu", "latency") | ("latency", "outcome"))
}

/// The witness as a process the runner starts (`--serve`), with these broken modes.
fn served(broken: &str) -> String {
    let witness = bin().display().to_string();
    if broken.is_empty() {
        format!("{witness} witness --http 127.0.0.1:{{port}}")
    } else {
        format!("{witness} witness --http 127.0.0.1:{{port}} --broken {broken}")
    }
}

/// The series trials of a run against `target` args (one version: a series runs once per target).
fn series_trials(args: &[&str]) -> Vec<Trial> {
    series_trials_of(args, &["sessions/", "state/", "cpu/", "connections/"])
}

/// The trials of the series `filters` pick, as [`series_trials`].
fn series_trials_of(args: &[&str], filters: &[&str]) -> Vec<Trial> {
    let mut args = args.to_vec();
    args.extend(["--spec", "2025-11-25,2026-07-28"]);
    let (_, report) = run_with_report(&args, filters);
    report
        .results
        .into_iter()
        .filter(|t| t.verdict != TrialVerdict::Skip)
        .collect()
}

/// The messages of `t`'s findings by `check`.
fn said<'t>(t: &'t Trial, check: &'t str) -> impl Iterator<Item = &'t str> + 't {
    t.findings
        .iter()
        .filter(move |f| f.check.as_str() == check)
        .map(|f| f.message.as_str())
}

/// The oracle by which `mode` must fail case `id`, if it is one of the modes made for it.
fn proving_check(id: &str, mode: &str) -> Option<&'static str> {
    let (_, by) = PROVEN_BY.iter().find(|(case, _)| *case == id)?;
    by.iter().find(|(m, _)| *m == mode).map(|(_, check)| *check)
}

/// The ids of the catalogue's series cases that `keep` keeps, in catalogue order.
fn series_cases(keep: impl Fn(&mcp_gauntlet::case::Case) -> bool) -> Vec<String> {
    let cat = Catalogue::embedded().expect("the catalogue loads");
    cat.cases
        .iter()
        .filter(|c| c.spec.series.is_some() && keep(c))
        .map(|c| c.id.clone())
        .collect()
}

fn checks_not_passed(t: &Trial) -> Vec<String> {
    t.findings
        .iter()
        .filter(|f| f.status != Status::Pass)
        .map(|f| f.check.as_str().to_string())
        .collect()
}

/// Every series case in the catalogue is listed with the mode that proves it can fail.
#[test]
fn every_series_case_has_a_mode_that_fails_it() {
    let series = series_cases(|_| true);
    let listed: Vec<&str> = PROVEN_BY.iter().map(|(id, _)| *id).collect();
    assert_eq!(
        series, listed,
        "tests/series.rs PROVEN_BY lists every series case, in order"
    );
}

#[test]
fn the_witness_passes_every_series_case_and_each_fails_on_its_mode() {
    let good = series_trials(&["--serve", &served("")]);
    assert_eq!(good.len(), PROVEN_BY.len(), "{good:?}");
    for t in &good {
        assert_eq!(t.verdict, TrialVerdict::Pass, "{t:?}");
        // Each measurement is said, observed: the process was read.
        let summary = said(t, "series").next().unwrap_or_default();
        assert!(
            summary.contains("resident memory") && summary.contains("CPU"),
            "{t:?}"
        );
    }
    // Each mode against the cases made for it (that it fails them all, each on its own
    // oracle); that it fails nothing else is the sweep below, run by the series workflow.
    for mode in modes() {
        let own = cases_made_for(mode);
        let trials = series_trials_of(&["--serve", &served(mode)], &own);
        judge_mode(mode, &trials);
    }
}

/// Every mode against every series case: it fails those made for it and passes every other (a
/// mode that fails every series proves nothing). About seven minutes, so not in `.ci/run`:
/// `.github/workflows/series.yml` runs it (`cargo test --release --test tests -- --ignored
/// series::`).
#[test]
#[ignore = "the full sweep, every mode against every series case: the series workflow runs it"]
fn each_mode_fails_only_the_series_made_for_it() {
    for mode in modes() {
        let trials = series_trials(&["--serve", &served(mode)]);
        judge_mode(mode, &trials);
    }
}

/// The ids of the series cases `mode` is made to fail.
fn cases_made_for(mode: &str) -> Vec<&'static str> {
    PROVEN_BY
        .iter()
        .filter(|(_, by)| by.iter().any(|(m, _)| *m == mode))
        .map(|(id, _)| *id)
        .collect()
}

/// `trials`, run on the witness broken by `mode`: each case made for it warns on its own oracle
/// (and what the same bug may also show), every other passes, and every case made for it ran.
fn judge_mode(mode: &str, trials: &[Trial]) {
    for t in trials {
        match proving_check(&t.id, mode) {
            Some(check) => {
                let id = &t.id;
                assert_eq!(t.verdict, TrialVerdict::Warn, "{id} on {mode}: {t:?}");
                // Its own oracle says so; nothing else fails but what the same bug shows.
                let found = checks_not_passed(t);
                assert!(found.contains(&check.to_string()), "{id} on {mode}: {t:?}");
                assert!(
                    found.iter().all(|c| c == check || also_shows(check, c)),
                    "{id} on {mode}: {t:?}"
                );
            }
            None => assert_eq!(
                t.verdict,
                TrialVerdict::Pass,
                "{mode} fails only its own cases: {t:?}"
            ),
        }
    }
    let ran = trials
        .iter()
        .filter(|t| t.verdict == TrialVerdict::Warn)
        .count();
    assert_eq!(
        ran,
        cases_made_for(mode).len(),
        "every case made for {mode} ran and warned: {trials:?}"
    );
}

/// The series that apply over stdio (per-name state, CPU), each its steps written as lines to
/// one witness process: the strict witness passes every one, and each fails on the modes made
/// for it that are not HTTP's, on the same oracle as over HTTP. The process is the runner's
/// child, so it is read without `--serve`; there is no other connection to ping.
#[test]
fn over_stdio_the_witness_passes_and_each_fails_on_its_mode() {
    let over_stdio =
        series_cases(|c| c.applies_to_transport(mcp_gauntlet::case::TransportKind::Stdio));
    assert!(over_stdio.len() >= 10, "{over_stdio:?}");
    let stdio_trials = |broken: &[&str]| {
        let trials = series_trials(&["--stdio", &stdio_witness_command(broken)]);
        assert!(
            trials.iter().all(|t| t.transport == TransportKind::Stdio),
            "{trials:?}"
        );
        trials
    };
    let good = stdio_trials(&[]);
    assert_eq!(good.len(), over_stdio.len(), "{good:?}");
    for t in &good {
        assert_eq!(t.verdict, TrialVerdict::Pass, "{t:?}");
        let summary = said(t, "series").next().unwrap_or_default();
        assert!(
            summary.contains("resident memory") && summary.contains("one client"),
            "{t:?}"
        );
    }
    for mode in [
        "cache-names",
        "keep-notified",
        "quadratic-reader",
        "backtracking-matcher",
    ] {
        let trials = stdio_trials(&[mode]);
        for t in &trials {
            match proving_check(&t.id, mode) {
                Some(check) => {
                    assert_eq!(t.verdict, TrialVerdict::Warn, "{mode}: {t:?}");
                    assert_eq!(checks_not_passed(t), [check.to_string()], "{mode}: {t:?}");
                }
                None => assert_eq!(
                    t.verdict,
                    TrialVerdict::Pass,
                    "{mode} fails only its own cases: {t:?}"
                ),
            }
        }
        assert!(
            trials.iter().any(|t| t.verdict == TrialVerdict::Warn),
            "{mode} fails a case over stdio: {trials:?}"
        );
    }
}

/// Through the reference gate (`--gate`, in front of the runner's witness) every series case
/// passes, judged on the gate's own process (read, as `--serve`'s is) and on what reached the
/// witness: the refusals forwarded nothing, the reads at most once a step.
#[test]
fn the_reference_gate_passes_every_series_case() {
    let gate = crate::util::reference_gate_command();
    let trials = series_trials(&["--gate", &gate, "--gate-codes", "reference"]);
    // Every series written for gates (the idle keep-alive one is not: a gate's own pool of
    // connections to its server may rightly keep what its clients' requests opened; nor the
    // GET streams one: a gate relays each GET to its server's own bound).
    let for_gates = series_cases(|c| c.applies_to_profile(mcp_gauntlet::case::Profile::Gate)).len();
    assert_eq!(for_gates, PROVEN_BY.len() - 2);
    assert_eq!(trials.len(), for_gates, "{trials:?}");
    for t in &trials {
        assert_eq!(t.transport, TransportKind::Http, "{t:?}");
        assert_eq!(t.verdict, TrialVerdict::Pass, "{t:?}");
        let observed = said(t, "series").any(|m| m.contains("resident memory"));
        assert!(observed, "the gate's process was read: {t:?}");
        // What the steps let through was read from the witness, and said.
        let counted = said(t, "forwarded").any(|m| m.contains("reached the witness over"));
        assert!(counted, "what reached the witness was judged: {t:?}");
    }
}

/// The same cases against a URL whose process the runner does not know: memory is "not
/// observed" in each trial's findings, the answers are still judged, and the cases still pass
/// (nothing was seen to fail).
#[test]
fn without_the_process_memory_is_said_not_observed() {
    let witness = HttpWitness::start(&["keep-sessions"], None);
    let trials = series_trials(&["--http", &witness.url]);
    assert_eq!(trials.len(), PROVEN_BY.len(), "{trials:?}");
    for t in trials.iter().filter(|t| !t.id.starts_with("cpu/")) {
        assert_eq!(t.verdict, TrialVerdict::Pass, "{t:?}");
        // Held connections judge descriptors, the other series memory.
        let unseen = if t.id.starts_with("connections/") {
            said(t, "resources").any(|m| m.starts_with("descriptors not observed"))
        } else {
            said(t, "memory").any(|m| m.starts_with("memory not observed"))
        };
        assert!(unseen, "{t:?}");
    }
    let cpu = trials
        .iter()
        .find(|t| t.id.starts_with("cpu/"))
        .expect("the cpu case ran");
    assert!(
        said(cpu, "cpu").any(|m| m.starts_with("CPU not observed")),
        "{cpu:?}"
    );
}

/// With `--pid`, a server started elsewhere is read as one the runner started: the broken
/// witness's sessions are seen to accumulate.
#[test]
fn a_pid_given_is_read() {
    let witness = HttpWitness::start(&["keep-sessions"], None);
    let pid = witness.pid().to_string();
    let case = "sessions/abandoned-sessions-are-bounded";
    let args = [
        "--http",
        &witness.url,
        "--pid",
        &pid,
        "--spec",
        "2025-11-25",
    ];
    let (_, report) = run_with_report(&args, &["--exact", case]);
    let t = report
        .results
        .iter()
        .find(|t| t.id == case && t.verdict != TrialVerdict::Skip)
        .expect("the sessions case ran");
    assert_eq!(checks_not_passed(t), ["memory"], "{t:?}");
}
