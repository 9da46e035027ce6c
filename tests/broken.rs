//! Every case can fail: the catalogue against deliberately wrong witnesses.
//!
//! Each broken mode of the witness is one bug class real servers have. For each mode the exact
//! set of trials that fail (or warn) is a snapshot under `tests/expect/broken/`; a change in the
//! set fails the test (refresh with `UPDATE_EXPECT=1` after reading the diff). A last test checks
//! that every applicable (case, transport) pair fails under at least one mode: a case that no
//! wrong server can fail is a defect.

use crate::util::TrialVerdict;
use crate::util::{
    run_with_report, stdio_witness_command, version, Failing, HttpWitness, SERIES_SKIPPED,
};
use mcp_gauntlet::case::{Catalogue, Profile, TransportKind};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// Modes that only an HTTP witness has (their stdio run would be the plain witness's).
const HTTP_ONLY: &[&str] = &["plain-refusals", "get-stream", "shared-transport"];

/// Modes of the HTTP+SSE front only (their HTTP and stdio runs would be the plain witness's).
const SSE_ONLY: &[&str] = &[
    "sse-any-session",
    "sse-prototype-sessions",
    "sse-wrong-stream",
    "sse-keep-ended-sessions",
    "sse-unbounded-queue",
    "sse-any-path",
    "sse-foreign-endpoint",
    "batch-first-only",
];

/// Modes the HTTP+SSE front does not have (a framing, header or session rule of Streamable HTTP
/// or stdio): their SSE run would be the plain witness's, and is not made.
const NOT_OVER_SSE: &[&str] = &[
    "lax-framing",
    "banner",
    "lax-http",
    "keep-after-400",
    "lax-binding",
    "legacy-batch",
    "plain-refusals",
    "get-stream",
    "shared-transport",
];

/// Modes whose bug shows only on a server that keeps no sessions: their witness is `--stateless`.
const STATELESS: &[&str] = &["get-stream"];

/// The versions every mode is run at: the newest legacy one and the first modern one (2025-06-18
/// differs from 2025-11-25 in nothing a mode exercises).
const VERSIONS: &str = "2025-11-25,2026-07-28";

/// Modes that fail (nearly) every case whatever it checks: they prove the runner notices
/// silence and stdout noise, not that a case catches its own bug class.
const BLANKET: &[&str] = &["mute", "banner"];

/// Cases only a blanket mode fails, and why no targeted mode is built for them.
const BLANKET_ONLY: &[(&str, &str)] = &[
    ("stdio 2025-11-25 stdio/crlf-terminated-ping",
    "a positive control: it fails against a server that refuses CRLF framing; no SDK does that \
     (TS and rmcp strip the CR), so no witness mode imitates it",),
    (
        "stdio 2025-11-25 lifecycle/call-right-after-initialized-is-answered",
        DROPPED_FIRST_CALL,
    ),
    (
        "http 2025-11-25 lifecycle/call-right-after-initialized-is-answered",
        DROPPED_FIRST_CALL,
    ),
    (
        "sse 2024-11-05 lifecycle/call-right-after-initialized-is-answered",
        DROPPED_FIRST_CALL,
    ),
];

/// Why the case about a call right after the handshake is caught only by the blanket modes
/// here.
const DROPPED_FIRST_CALL: &str = "a positive control on every lane: the `drop-first-call` \
     mode, which drops it over stdio, fails nearly every stdio case and is proven on its own \
     (`a_server_that_drops_the_first_call_after_initialized_fails_the_case_naming_it`); the \
     HTTP witness keeps no per-session state between POSTs to drop it by";

fn expect_path(mode: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/expect/broken/{mode}.txt"))
}

/// Lines `transport id verdict` for every trial that did not pass.
fn failing(mode: &str) -> Vec<Failing> {
    let broken = [mode];
    // A mute server never answers: every deadline scaled down to a twentieth (cases 0.5 s, the
    // 1 GiB ones 3 s, probes 0.25 s) and many jobs keep this run short; every case fails
    // whatever the machine's speed, since nothing ever comes back.
    // `shared-transport` swaps the answers of any two requests with one id in flight at once:
    // one trial at a time, so that only a `clients` case's own clients meet.
    let (scale, jobs) = match mode {
        "mute" => ("0.05", "16"),
        "shared-transport" => ("1", "1"),
        _ => ("1", "2"),
    };
    let witness = if STATELESS.contains(&mode) {
        HttpWitness::start_with(&["--broken", mode, "--stateless"])
    } else {
        HttpWitness::start(&broken, None)
    };
    let over_sse = HttpWitness::start_sse(&["--broken", mode]);
    let mut lines = Vec::new();
    let stdio_cmd = stdio_witness_command(&broken);
    let mut runs = Vec::new();
    if !SSE_ONLY.contains(&mode) {
        runs.push(vec!["--http", witness.url.as_str(), "--spec", VERSIONS]);
    }
    if !HTTP_ONLY.contains(&mode) && !SSE_ONLY.contains(&mode) {
        runs.push(vec!["--stdio", stdio_cmd.as_str(), "--spec", VERSIONS]);
    }
    // An HTTP+SSE run speaks its one version. Modes that route by session or id alone run one
    // trial at a time, so that a trial meets only its own requests.
    if !NOT_OVER_SSE.contains(&mode) {
        let routing = ["sse-any-session", "sse-wrong-stream"].contains(&mode);
        let sse_jobs = if routing { "1" } else { jobs };
        runs.push(vec!["--sse", over_sse.url.as_str(), "--jobs", sse_jobs]);
    }
    for args in runs {
        let mut args = args;
        args.extend(["--timeout-scale", scale]);
        if !args.contains(&"--jobs") {
            args.extend(["--jobs", jobs]);
        }
        // Series cases are proven in tests/series.rs, against the witness's process.
        let (_, report) = run_with_report(&args, &SERIES_SKIPPED);
        for t in report.results {
            if t.verdict == TrialVerdict::Fail || t.verdict == TrialVerdict::Warn {
                lines.push(Failing::of(&t));
            }
        }
    }
    lines.sort_by(|a, b| a.line.cmp(&b.line));
    lines
}

fn check_mode(mode: &str) {
    let path = expect_path(mode);
    crate::util::check_snapshot(&format!("broken mode `{mode}`"), &path, failing(mode));
}

/// One snapshot test per mode, and `MODES`, the modes that have one: the test list is the one
/// list of snapshotted modes, checked against the witness's own (`every_witness_mode_is_tested`).
macro_rules! broken_mode {
    ($($name:ident => $mode:literal),* $(,)?) => {
        /// The modes with a snapshot test.
        const MODES: &[&str] = &[$($mode),*];
        $(#[test]
        fn $name() {
            check_mode($mode);
        })*
    };
}

/// Witness modes without a snapshot here, and why.
const NOT_SNAPSHOTTED: &[(&str, &str)] = &[
    (
        "drop-first-call",
        "it fails nearly every stdio case (each case's request is the first after the handshake): \
         `a_server_that_drops_the_first_call_after_initialized_fails_the_case_naming_it` proves \
         the case about it fails on it",
    ),
    (
        "exits",
        "the witness process exits: tests/verdicts.rs proves the runner names the case that killed it",
    ),
    (
        "late",
        "not wrong in itself: `late_answers_are_still_judged` pairs it with lax-json",
    ),
    (
        "keep-sessions",
        "a series mode: tests/series.rs proves sessions/abandoned-sessions-are-bounded fails on it",
    ),
    (
        "leak-refused",
        "a series mode: tests/series.rs proves sessions/refused-opens-leave-nothing fails on it",
    ),
    (
        "cache-names",
        "a series mode: tests/series.rs proves state/unknown-tool-names-are-not-kept fails on it",
    ),
    (
        "keep-deleted",
        "a series mode: tests/series.rs proves sessions/ended-sessions-are-freed fails on it",
    ),
    (
        "keep-notified",
        "a series mode: tests/series.rs proves state/cancelled-request-ids-are-not-kept fails on it",
    ),
    (
        "quadratic-reader",
        "a series mode: tests/series.rs proves the cpu/ cases with a baseline fail on it",
    ),
    (
        "backtracking-matcher",
        "a series mode: tests/series.rs proves cpu/uri-template-with-many-separators fails on it",
    ),
    (
        "one-at-a-time",
        "a series mode: tests/series.rs proves the connections/ cases that trickle fail on it",
    ),
    (
        "get-stream-per-request",
        "a series mode: tests/series.rs proves connections/get-streams-on-one-session-are-bounded fails on it",
    ),
    (
        "keep-closed-connections",
        "a series mode: tests/series.rs proves connections/idle-keep-alive-connections-hold-no-one-up fails on it",
    ),
];

/// Every broken mode the witness has is snapshotted here or has a written reason not to be,
/// and nothing else is listed: the witness's `Broken` is the one source of the modes.
#[test]
fn every_witness_mode_is_tested() {
    use clap::ValueEnum;
    let modes: BTreeSet<String> = mcp_gauntlet::witness::Broken::value_variants()
        .iter()
        .filter_map(|b| b.to_possible_value())
        .map(|v| v.get_name().to_string())
        .collect();
    let listed: BTreeSet<String> = MODES
        .iter()
        .chain(NOT_SNAPSHOTTED.iter().map(|(m, _)| m))
        .map(|m| m.to_string())
        .collect();
    assert_eq!(modes, listed);
    assert_eq!(
        listed.len(),
        MODES.len() + NOT_SNAPSHOTTED.len(),
        "a mode listed twice"
    );
}

broken_mode! {
    executes_batches => "batch",
    answers_500_with_stack_trace => "crash500",
    accepts_any_id => "any-id",
    ignores_origin => "no-origin",
    never_answers => "mute",
    parses_json_leniently => "lax-json",
    ignores_transport_headers => "lax-headers",
    has_no_size_limit => "unbounded",
    crashes_on_deep_nesting => "fragile",
    frames_stdio_leniently => "lax-framing",
    prints_a_banner => "banner",
    leaks_internals => "leaky",
    reads_the_envelope_carelessly => "lax-envelope",
    agrees_to_any_version => "any-version",
    answers_notifications => "reply-to-all",
    frames_http_carelessly => "lax-http",
    serves_what_follows_a_400 => "keep-after-400",
    ignores_header_body_binding => "lax-binding",
    batches_for_a_2025_03_26_claim => "legacy-batch",
    refuses_in_plain_text => "plain-refusals",
    streams_nothing_on_get_without_sessions => "get-stream",
    routes_answers_by_id_alone => "shared-transport",
    takes_any_session_over_sse => "sse-any-session",
    crashes_on_prototype_session_ids => "sse-prototype-sessions",
    routes_sse_answers_by_id_alone => "sse-wrong-stream",
    keeps_sessions_after_their_stream => "sse-keep-ended-sessions",
    queues_for_an_unread_stream => "sse-unbounded-queue",
    takes_messages_on_any_path_over_sse => "sse-any-path",
    names_an_endpoint_on_another_host => "sse-foreign-endpoint",
    answers_a_batch_by_its_first_member => "batch-first-only",
}

/// Every case that applies somewhere fails under at least one targeted broken mode (not only
/// under a blanket one), on every transport it applies to, at one of the versions it applies to
/// at least (a case that applies to both eras sends the same bytes in both; a modern-only case
/// must fail in the modern lane).
#[test]
fn every_case_can_fail() {
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        // The snapshots are being rewritten by the other tests right now.
        return;
    }
    let caught_by = |modes: &mut dyn Iterator<Item = &&str>| -> BTreeSet<String> {
        modes
            .flat_map(|mode| {
                let text = std::fs::read_to_string(expect_path(mode)).unwrap_or_default();
                text.lines()
                    .map(|l| {
                        l.rsplit_once(' ')
                            .map_or(l, |(key, _verdict)| key)
                            .to_string()
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let targeted = caught_by(&mut MODES.iter().filter(|m| !BLANKET.contains(m)));
    let blanket = caught_by(&mut BLANKET.iter());
    let cat = Catalogue::embedded().expect("the catalogue loads");
    let mut never = Vec::new();
    for case in &cat.cases {
        for t in TransportKind::ALL {
            // Authorization cases apply only to runs with auth inputs: tests/auth.rs proves
            // each of them fails against broken gates and a witness without auth. Series
            // cases are proven in tests/series.rs.
            if !(case.applies_to_transport(t) && case.applies_to_profile(Profile::Server))
                || case.spec.auth.is_some()
                || case.spec.series.is_some()
            {
                continue;
            }
            // HTTP+SSE lanes speak 2024-11-05 only.
            let versions = if t == TransportKind::Sse {
                "2024-11-05"
            } else {
                VERSIONS
            };
            let keys: Vec<String> = versions
                .split(',')
                .filter(|v| case.applies_to_version(version(v)))
                .map(|v| format!("{} {v} {}", t.as_str(), case.id))
                .collect();
            let caught = keys.iter().any(|k| {
                targeted.contains(k)
                    || (BLANKET_ONLY.iter().any(|(b, _)| b == k) && blanket.contains(k))
            });
            if !keys.is_empty() && !caught {
                never.push(format!("{} {}", t.as_str(), case.id));
            }
        }
    }
    assert!(
        never.is_empty(),
        "cases no targeted broken witness fails:\n  {}",
        never.join("\n  ")
    );
}

/// A stdio server that answers a tool call after its barrier (the `late` mode: 40 ms after, as
/// SDKs that run each request in a task do) is judged as if it answered in time: the settle
/// window learned from the order probe covers the lag. Capped below the lag (`--settle-ms 10`),
/// the same run misses those answers, which shows the comparison can fail.
#[test]
fn late_answers_are_still_judged() {
    let failing = |broken: &str, settle: &str| -> BTreeSet<String> {
        let cmd = stdio_witness_command(&[broken]);
        let args = [
            "--stdio",
            cmd.as_str(),
            "--spec",
            "2025-11-25",
            "--settle-ms",
            settle,
        ];
        let (_, report) = run_with_report(&args, &["encoding/"]);
        report
            .results
            .into_iter()
            .filter(|t| t.verdict == TrialVerdict::Fail)
            .map(|t| t.id)
            .collect()
    };
    let on_time = failing("lax-json", "5000");
    assert!(
        on_time.len() >= 3,
        "lax-json fails encoding cases: {on_time:?}"
    );
    assert_eq!(failing("lax-json,late", "5000"), on_time);
    let cut_short = failing("lax-json,late", "10");
    assert!(
        cut_short.is_subset(&on_time) && cut_short.len() < on_time.len(),
        "a window shorter than the lag misses late answers: {cut_short:?} of {on_time:?}"
    );
}

/// The case about a call sent right after `notifications/initialized` fails on a stdio server
/// that drops that call, and passes on one that answers it.
#[test]
fn a_server_that_drops_the_first_call_after_initialized_fails_the_case_naming_it() {
    const CASE: &str = "[stdio] lifecycle/call-right-after-initialized-is-answered";
    for (broken, want) in [
        (&[][..], TrialVerdict::Pass),
        (&["drop-first-call"][..], TrialVerdict::Fail),
    ] {
        let cmd = stdio_witness_command(broken);
        let (_, report) = run_with_report(
            &["--stdio", &cmd, "--spec", "2025-11-25"],
            &["--exact", CASE],
        );
        let got: Vec<TrialVerdict> = report
            .results
            .iter()
            .filter(|t| t.id == "lifecycle/call-right-after-initialized-is-answered")
            .map(|t| t.verdict)
            .collect();
        assert_eq!(got, [want], "{broken:?}: {:?}", report.results);
    }
}
