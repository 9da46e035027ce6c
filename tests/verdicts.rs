//! Verdicts on real servers: each oracle added for servers that are not the witness can fail,
//! and nothing fails for what a correct server may do (statelessness, the versions it offers).

use crate::util::{bin, run_with_report, HttpWitness, Report, Trial};
use crate::util::{Status, TrialVerdict};

/// The trials of `report` for case `id`.
fn trials<'a>(report: &'a Report, id: &str) -> Vec<&'a Trial> {
    report.results.iter().filter(|t| t.id == id).collect()
}

/// A run that failed nothing: exit 0, and the failing trials shown if not.
fn assert_clean(code: i32, report: &Report) {
    let failed: Vec<_> = report
        .results
        .iter()
        .filter(|t| t.verdict == TrialVerdict::Fail)
        .collect();
    assert_eq!(code, 0, "{failed:?}");
}

/// The trials of `report` whose case id starts with `prefix`.
fn family<'a>(report: &'a Report, prefix: &str) -> Vec<&'a Trial> {
    report
        .results
        .iter()
        .filter(|t| t.id.starts_with(prefix))
        .collect()
}

/// Whether a trial has a failing finding from `check`.
fn failed_by(t: &Trial, check: &str) -> bool {
    t.verdict == TrialVerdict::Fail
        && t.findings
            .iter()
            .any(|f| f.check.as_str() == check && f.status == Status::Fail)
}

#[test]
fn a_denied_tool_that_answers_a_plain_result_is_caught_without_its_marker() {
    // The canary answers "done", not CANARY-EXECUTED, and the runner reads no witness record:
    // only the protocol shows it ran (a successful result for the denied call's id).
    let w = HttpWitness::start_with(&["--broken", "batch", "--canary-text", "done"]);
    let (code, report) = run_with_report(
        &["--http", &w.url, "--spec", "2025-11-25"],
        &["batch/one-denied-call-in-array", "--exact"],
    );
    assert_eq!(code, 1);
    let t = trials(&report, "batch/one-denied-call-in-array");
    assert_eq!(t.len(), 1);
    assert!(failed_by(t[0], "canary"), "{:?}", t[0]);
    // The same server, correct about batches, runs nothing: no canary finding anywhere.
    let ok = HttpWitness::start_with(&["--canary-text", "done"]);
    let (code, report) = run_with_report(&["--http", &ok.url, "--spec", "2025-11-25"], &[]);
    assert_clean(code, &report);
}

#[test]
fn a_call_smuggled_after_a_400_on_a_kept_connection_is_caught() {
    // uvicorn's and puma's way: 400 for Content-Length + Transfer-Encoding, the connection
    // kept, the pipelined call served. No marker text: the answer to the smuggled request is
    // the evidence.
    let w = HttpWitness::start_with(&["--broken", "keep-after-400", "--canary-text", "done"]);
    let id = "framing/content-length-and-chunked-smuggle-a-denied-call";
    let (code, report) = run_with_report(
        &["--http", &w.url, "--spec", "2025-11-25"],
        &[id, "--exact"],
    );
    assert_eq!(code, 1);
    let t = trials(&report, id);
    assert_eq!(t.len(), 1);
    assert!(failed_by(t[0], "canary"), "{:?}", t[0]);
    assert!(failed_by(t[0], "framing"), "{:?}", t[0]);
}

#[test]
fn the_side_channel_log_shows_a_run() {
    // The target appends to a file only when the denied tool runs, and says no marker text.
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("runs.log");
    let log = log.to_str().expect("utf-8 path");
    let run = |broken: &[&str]| {
        let mut args = vec!["--canary-text", "done", "--canary-log", log];
        args.extend_from_slice(broken);
        let w = HttpWitness::start_with(&args);
        run_watching_the_log(&w.url, log, &[])
    };
    // A server that executes batches runs the denied call inside one: the log grows.
    let (_, report) = run(&["--broken", "batch"]);
    let t = trials(&report, "batch/two-requests-with-denied-call");
    assert!(failed_by(t[0], "canary"), "{:?}", t[0]);
    // The log is named as the evidence (it is checked before the protocol's answer).
    assert!(
        t[0].findings
            .iter()
            .any(|f| f.message.contains("side-channel log")),
        "{:?}",
        t[0]
    );
    // A correct server never runs it: the log stays as it is and nothing fails.
    let (code, report) = run(&[]);
    assert_clean(code, &report);
}

/// The batch family against `url`, the denied tool watched through the side-channel `log` alone
/// (no canary text), with `extra` flags.
fn run_watching_the_log(url: &str, log: &str, extra: &[&str]) -> (i32, Report) {
    let mut args = vec![
        "--http",
        url,
        "--spec",
        "2025-11-25",
        "--canary-text",
        "",
        "--canary-log",
        log,
    ];
    args.extend_from_slice(extra);
    run_with_report(&args, &["batch/"])
}

/// The side channel says the denied tool ran, not which request ran it: only the trial that
/// sent a call the server ran is blamed, however many jobs the run has (they then run one at a
/// time), and never a GET, a ping or a refused batch that was in flight beside it.
#[test]
fn the_side_channel_log_is_blamed_only_on_the_trial_that_ran_the_tool() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("runs.log");
    let log = log.to_str().expect("utf-8 path");
    let w = HttpWitness::start_with(&[
        "--canary-text",
        "done",
        "--canary-log",
        log,
        "--broken",
        "batch",
    ]);
    let blamed = |jobs: &str| {
        let (_, report) = run_watching_the_log(&w.url, log, &["--jobs", jobs]);
        let side_channel: std::collections::BTreeSet<String> = report
            .results
            .iter()
            .filter(|t| {
                t.findings
                    .iter()
                    .any(|f| f.message.contains("side-channel log"))
            })
            .map(|t| t.id.clone())
            .collect();
        side_channel
    };
    let serial = blamed("1");
    assert!(
        serial.contains("batch/two-requests-with-denied-call"),
        "{serial:?}"
    );
    // Only batches that carry a call of the denied tool can have run it.
    for id in &serial {
        assert!(id.contains("denied"), "{id} blamed: {serial:?}");
    }
    for _ in 0..2 {
        assert_eq!(blamed("8"), serial);
    }
}

#[test]
fn a_stateless_server_fails_no_session_case() {
    let w = HttpWitness::start_with(&["--stateless"]);
    let (code, report) = run_with_report(&["--http", &w.url], &[]);
    assert_clean(code, &report);
    // Session cases are shown, as not applicable, at every version.
    let t = trials(&report, "headers/session-id-unknown");
    assert!(
        !t.is_empty() && t.iter().all(|t| t.verdict == TrialVerdict::Skip),
        "{t:?}"
    );
    // The same cases still run, and pass, against a server that keeps sessions.
    let stateful = HttpWitness::start_with(&[]);
    let (_, report) = run_with_report(&["--http", &stateful.url], &[]);
    let t = trials(&report, "headers/session-id-unknown");
    assert!(t.iter().any(|t| t.verdict == TrialVerdict::Pass), "{t:?}");
}

#[test]
fn the_default_tests_every_version_the_target_accepts_and_no_other() {
    for (versions, want) in [
        ("2025-11-25", vec!["2025-11-25"]),
        ("2025-06-18,2025-11-25", vec!["2025-06-18", "2025-11-25"]),
        ("2026-07-28", vec!["2026-07-28"]),
        (
            "2025-06-18,2025-11-25,2026-07-28",
            vec!["2025-06-18", "2025-11-25", "2026-07-28"],
        ),
    ] {
        let w = HttpWitness::start_with(&["--versions", versions]);
        let (code, report) = run_with_report(&["--http", &w.url], &[]);
        let mut seen: Vec<&str> = report.results.iter().map(|t| t.version.as_str()).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen, want, "witness speaking {versions}");
        assert_eq!(code, 0, "witness speaking {versions}");
    }
}

#[test]
fn a_target_that_dies_is_named_once_and_the_rest_is_not_run_or_restarted() {
    // `exits`: the witness process exits on deep nesting. The first nesting case kills it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let addr = format!("127.0.0.1:{port}");
    let w = HttpWitness::start_at(&addr, &["--broken", "exits"]);
    let (code, report) = run_with_report(
        &["--http", &w.url, "--spec", "2025-11-25"],
        &["nesting/", "--test-threads", "1"],
    );
    // The trials after its death were not run: the run is incomplete, not only failed.
    assert_eq!(code, i32::from(mcp_gauntlet::exit::INCOMPLETE));
    let nesting = family(&report, "nesting/");
    let killed: Vec<_> = nesting.iter().filter(|t| failed_by(t, "alive")).collect();
    assert_eq!(killed.len(), 1, "{nesting:?}");
    let not_run = nesting
        .iter()
        .filter(|t| t.verdict == TrialVerdict::Skip)
        .count();
    assert_eq!(not_run, nesting.len() - 1, "{nesting:?}");
    drop(w);

    // With --restart-cmd the runner starts it again and goes on: every nesting case runs.
    let w = HttpWitness::start_at(&addr, &["--broken", "exits"]);
    let restart = format!(
        "exec {} witness --http {addr} --broken exits",
        shell_words::quote(&bin().to_string_lossy())
    );
    let (code, report) = run_with_report(
        &[
            "--http",
            &w.url,
            "--spec",
            "2025-11-25",
            "--restart-cmd",
            &restart,
        ],
        &["nesting/", "--test-threads", "1"],
    );
    assert_eq!(code, 1);
    let nesting = family(&report, "nesting/");
    assert!(
        nesting.iter().all(|t| t.verdict != TrialVerdict::Skip),
        "{nesting:?}"
    );
    assert!(
        nesting.iter().filter(|t| failed_by(t, "alive")).count() >= 2,
        "{nesting:?}"
    );
}

#[test]
fn a_gate_the_runner_started_is_started_again_when_a_case_ends_it() {
    if !crate::util::python3("the fragile gate fixture") {
        return;
    }
    // The fixture relays to the runner's witness and exits on a call of fault_close.
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fragile_http_gate.py");
    let gate = format!("python3 {} {{port}} {{downstream_url}}", script.display());
    let (code, report) = run_with_report(
        &["--gate", &gate, "--spec", "2025-11-25"],
        &[
            "--exact",
            "downstream/fault-close",
            "downstream/fault-empty",
            "canonical/string-id",
            "--test-threads",
            "1",
        ],
    );
    assert_eq!(code, 1);
    let trial = |id: &str| {
        report
            .results
            .iter()
            .find(|t| t.id == id && t.downstream.is_none())
            .unwrap_or_else(|| panic!("no trial of {id}: {:?}", report.results))
    };
    let killer = trial("downstream/fault-close");
    assert!(failed_by(killer, "alive"), "{killer:?}");
    assert!(
        killer
            .findings
            .iter()
            .any(|f| Some(f.message.as_str()).is_some_and(|m| m.contains("restarted"))),
        "{killer:?}"
    );
    // fault-empty, planned after it, ran against the gate started again (it fails on its own
    // merits: the relay passes the empty body on), not left out as "not run".
    let after = trial("downstream/fault-empty");
    assert_eq!(after.verdict, TrialVerdict::Fail, "{after:?}");
    assert!(!failed_by(after, "alive"), "{after:?}");
    // The relay itself is sound: an allowed call through it passes.
    assert_eq!(trial("canonical/string-id").verdict, TrialVerdict::Pass);
}

/// The trials of `report` that did not pass, as `case@version verdict`, sorted.
fn not_passing(report: &Report) -> Vec<String> {
    let mut out: Vec<String> = report
        .results
        .iter()
        .filter(|t| t.verdict == TrialVerdict::Fail || t.verdict == TrialVerdict::Warn)
        .map(|t| format!("{}@{} {}", t.id, t.version, t.verdict))
        .collect();
    out.sort();
    out
}

#[test]
fn a_server_that_repairs_invalid_utf8_is_warned_unless_the_denied_tool_runs() {
    // REQUIREMENTS 13 A18: replacing invalid UTF-8 is not sanctioned but a lenient pass where
    // it changes no tool that runs. The echo calls are read and answered: warnings by default,
    // failures under --strict. The denied calls run the canary from bytes that are not UTF-8:
    // failures either way, on the canary.
    let w = HttpWitness::start_with(&["--quirk", "repair-utf8"]);
    let args = ["--http", w.url.as_str(), "--spec", "2025-11-25"];
    let filter = ["encoding/"];
    let (code, report) = run_with_report(&args, &filter);
    assert_eq!(code, 1);
    let echo = [
        "encoding/invalid-utf8-ff-in-echo-argument",
        "encoding/overlong-utf8-c0-af-in-echo-argument",
        "encoding/truncated-utf8-sequence-in-echo-argument",
        "encoding/cesu8-surrogate-ed-a0-80-in-echo-argument",
    ];
    for id in &echo {
        let t = trials(&report, id);
        assert_eq!(t[0].verdict, TrialVerdict::Warn, "{:?}", t[0]);
    }
    let denied = echo.map(|id| id.replace("-in-echo-argument", "-in-denied-call"));
    let failed: Vec<String> = not_passing(&report)
        .into_iter()
        .filter(|t| t.ends_with(" fail"))
        .collect();
    for t in &failed {
        assert!(t.contains("-in-denied-call@"), "{failed:?}");
    }
    let ran = |report: &Report| {
        for id in &denied {
            let t = trials(report, id);
            assert_eq!(t[0].verdict, TrialVerdict::Fail, "{:?}", t[0]);
            assert!(failed_by(t[0], "canary"), "{id}");
        }
    };
    ran(&report);
    let mut strict = args.to_vec();
    strict.push("--strict");
    let (code, report) = run_with_report(&strict, &filter);
    assert_eq!(code, 1);
    for id in &echo {
        assert_eq!(trials(&report, id)[0].verdict, TrialVerdict::Fail, "{id}");
    }
    ran(&report);
}

#[test]
fn what_a_server_may_do_in_the_order_of_its_checks_and_its_ids_fails_nothing() {
    // The TypeScript SDK's way: a request without a session is refused with -32000 before the
    // body is read (so an initialize wrapped in an array gets -32000, not -32600); and an error
    // about a body that is JSON once its invalid UTF-8 is replaced echoes the id found in it.
    // Both are allowed: nothing fails by default. --strict wants the best answer, so there both
    // fail, which shows the relaxation is this rule and nothing broader.
    let w = HttpWitness::start_with(&["--quirk", "session-code,echo-detectable-id"]);
    let args = ["--http", w.url.as_str(), "--spec", "2025-11-25"];
    let (code, report) = run_with_report(&args, &[]);
    assert_clean(code, &report);
    let array = trials(&report, "batch/initialize-in-array");
    assert_eq!(array.len(), 1);
    assert_eq!(array[0].verdict, TrialVerdict::Pass, "{:?}", array[0]);
    let utf8 = trials(&report, "encoding/invalid-utf8-ff-in-echo-argument");
    assert_eq!(utf8.len(), 1);
    assert_eq!(utf8[0].verdict, TrialVerdict::Warn, "{:?}", utf8[0]);
    let warned = not_passing(&report);
    assert!(
        warned.iter().all(|t| t.starts_with("encoding/")),
        "{warned:?}"
    );
    let mut strict = args.to_vec();
    strict.push("--strict");
    let (code, report) = run_with_report(&strict, &[]);
    assert_eq!(code, 1);
    assert!(failed_by(
        trials(&report, "batch/initialize-in-array")[0],
        "error_code"
    ));
    assert!(failed_by(
        trials(&report, "encoding/invalid-utf8-ff-in-echo-argument")[0],
        "id"
    ));
}

/// A stdio server that answers `initialize` and then never reads its input again (it sleeps
/// far longer than any deadline of the run).
const DEAF_SERVER: &str = r#"import json, sys, time
req = json.loads(sys.stdin.readline())
v = req["params"]["protocolVersion"]
print(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {"protocolVersion": v, "capabilities": {"tools": {}}, "serverInfo": {"name": "deaf", "version": "0"}}}), flush=True)
time.sleep(600)
"#;

#[test]
fn a_server_that_stops_reading_its_input_does_not_hold_the_runner_past_its_deadlines() {
    if !crate::util::python3("the deaf server fixture") {
        return;
    }
    // The 100 MiB line fills the pipe after 64 KiB; the runner's next write (the barrier) and
    // the end of the case wait for it only until the case's deadline (6 s at this scale), then
    // the server is killed. Before, that wait had no deadline: the run lasted as long as the
    // server (here ten minutes; the bound below is far under that and far over the deadline).
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("deaf.py");
    std::fs::write(&script, DEAF_SERVER).expect("write the fixture");
    let cmd = format!("python3 {}", script.display());
    let mut child = std::process::Command::new(bin())
        .args(["run", "--stdio", &cmd, "--spec", "2025-11-25"])
        .args(["--timeout-scale", "0.1", "--report"])
        .arg(dir.path().join("report.json"))
        .args(["--", "oversize/100mib-line-with-bounded-memory", "--exact"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the runner");
    let limit = std::time::Instant::now() + std::time::Duration::from_secs(240);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if std::time::Instant::now() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let status = status.expect("the runner was still waiting on a server that reads nothing");
    // A should case: the unanswered line is a warning, and the run's exit says so (0).
    assert_eq!(status.code(), Some(0));
    let text = std::fs::read_to_string(dir.path().join("report.json")).expect("report");
    let report: Report = serde_json::from_str(&text).expect("report parses");
    let t = trials(&report, "oversize/100mib-line-with-bounded-memory");
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].verdict, TrialVerdict::Warn, "{:?}", t[0]);
}

#[test]
fn a_version_probe_that_hears_nothing_says_it_could_not_tell() {
    // A listener that accepts connections and never answers: every probe times out, three
    // times each. The run says which versions it could not tell, instead of "not offered".
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = held.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            if let Ok(mut held) = keep.lock() {
                held.push(conn);
            }
        }
    });
    let out = std::process::Command::new(bin())
        .args(["run", "--http", &url, "--timeout-scale", "0.05"])
        .args(["--", "primitive/true", "--exact"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("could not tell"), "{stderr}");
    for v in ["2025-06-18", "2025-11-25", "2026-07-28"] {
        let line = stderr
            .lines()
            .find(|l| l.starts_with("versions:"))
            .unwrap_or_default();
        let unclear = line.split("could not tell").nth(1).unwrap_or_default();
        assert!(unclear.contains(v), "{line}");
    }
    assert!(!stderr.contains("not offered"), "{stderr}");
}
