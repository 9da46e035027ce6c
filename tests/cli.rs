//! The command line: the witness is the positive control over HTTP (JSON and SSE) and stdio, the
//! embedded default passes, libtest flags work after `--`, and exit codes are the documented ones.

use crate::util::{bin, run_with_report, stdio_witness_command, HttpWitness};
use crate::util::{Check, Count, Status, TransportKind, TrialVerdict};
use assert_cmd::Command;
use mcp_gauntlet::exit;

fn assert_all_pass(report: &crate::util::Report) {
    assert_eq!(report.format, "mcp-gauntlet-report/1");
    let bad: Vec<String> = report
        .results
        .iter()
        .filter(|t| t.verdict == TrialVerdict::Fail || t.verdict == TrialVerdict::Warn)
        .map(|t| format!("{} {} {:?}", t.transport.as_str(), t.id, t.findings))
        .collect();
    assert!(
        bad.is_empty(),
        "the witness must pass its own catalogue:\n{}",
        bad.join("\n")
    );
    assert!(report.count(TrialVerdict::Pass) >= 60);
}

#[test]
fn witness_passes_over_http() {
    let w = HttpWitness::start(&[], None);
    let (code, report) = run_with_report(&["--http", &w.url], &[]);
    assert_eq!(code, i32::from(exit::SUCCESS));
    assert_all_pass(&report);
}

/// The witness over HTTP+SSE passes the catalogue (its strictest reading too), every trial in
/// the `[sse 2024-11-05]` lane, the `sse/` family among them; a `--http` URL that opens such a
/// stream is found to be one and tested over that transport.
#[test]
fn witness_passes_over_sse() {
    let w = HttpWitness::start_sse(&[]);
    for target in ["--sse", "--http"] {
        let (code, report) = run_with_report(&[target, &w.url, "--strict"], &[]);
        assert_eq!(code, i32::from(exit::SUCCESS), "{target}");
        assert_all_pass(&report);
        assert!(report
            .results
            .iter()
            .all(|t| t.transport == TransportKind::Sse && t.version == "2024-11-05"));
        let family = report
            .results
            .iter()
            .filter(|t| t.id.starts_with("sse/") && t.verdict == TrialVerdict::Pass)
            .count();
        assert!(family >= 10, "{target}: {family} sse/ trials passed");
    }
}

/// A gate served over HTTP+SSE is judged, as over Streamable HTTP, by what reached the witness
/// behind it (`--witness-log`): a "gate" that lets everything through (here the witness itself,
/// its log its own record) fails a denied call by the `forwarded` oracle, and passes where it
/// refuses the POST (a session that was never opened).
#[test]
fn a_gate_over_sse_is_judged_by_its_witness_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("witness.jsonl").display().to_string();
    let w = HttpWitness::start_sse(&["--log", &log]);
    let args = [
        "--sse",
        &w.url,
        "--profile",
        "gate",
        "--witness-log",
        &log,
        "--jobs",
        "1",
    ];
    let filters = [
        "smuggling/escaped-slash-in-method",
        "sse/unknown-session-id",
    ];
    let (_, report) = run_with_report(&args, &filters);
    let trial = |id: &str| {
        report
            .results
            .iter()
            .find(|t| t.id == id)
            .unwrap_or_else(|| panic!("{id} ran: {:?}", report.results))
    };
    let let_through = trial("smuggling/escaped-slash-in-method");
    assert_eq!(let_through.transport, TransportKind::Sse);
    assert_eq!(let_through.verdict, TrialVerdict::Fail, "{let_through:?}");
    let forwarded = let_through
        .findings
        .iter()
        .any(|f| f.check == Check::Forwarded && f.status == Status::Fail);
    assert!(forwarded, "{let_through:?}");
    let refused = trial("sse/unknown-session-id");
    assert_eq!(refused.verdict, TrialVerdict::Pass, "{refused:?}");
}

/// A target that serves both transports on one origin (Streamable HTTP, and HTTP+SSE at
/// `/sse`) is tested over both by default, and the report tells them apart; `--sse-path none`
/// looks for no stream.
#[test]
fn a_target_serving_both_transports_is_tested_on_both() {
    let w = HttpWitness::start_with(&["--also-sse"]);
    // One Streamable HTTP version is enough here; the HTTP+SSE lane speaks its own.
    let (code, report) = run_with_report(&["--http", &w.url, "--spec", "2025-11-25"], &[]);
    assert_eq!(code, i32::from(exit::SUCCESS));
    assert_all_pass(&report);
    let ran = |transport: TransportKind| {
        report
            .results
            .iter()
            .filter(|t| t.transport == transport && t.verdict == TrialVerdict::Pass)
            .count()
    };
    assert!(ran(TransportKind::Http) >= 60 && ran(TransportKind::Sse) >= 60);
    let (_, report) = run_with_report(
        &[
            "--http",
            &w.url,
            "--spec",
            "2025-11-25",
            "--sse-path",
            "none",
        ],
        &["batch/"],
    );
    assert!(!report.results.is_empty());
    assert!(report
        .results
        .iter()
        .all(|t| t.transport == TransportKind::Http));
}

#[test]
fn witness_passes_over_http_with_sse_answers() {
    let w = HttpWitness::start_with(&["--sse-answers"]);
    let (code, report) = run_with_report(&["--http", &w.url, "--strict"], &[]);
    assert_eq!(code, i32::from(exit::SUCCESS));
    assert_all_pass(&report);
}

#[test]
fn witness_passes_over_stdio() {
    let (code, report) = run_with_report(&["--stdio", &stdio_witness_command(&[])], &[]);
    assert_eq!(code, i32::from(exit::SUCCESS));
    assert_all_pass(&report);
}

#[test]
fn embedded_default_passes() {
    let out = Command::new(bin()).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(i32::from(exit::SUCCESS)),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Every version the embedded default accepts has its lanes.
    for v in mcp_gauntlet::versions::KNOWN {
        assert!(stdout
            .lines()
            .any(|l| l.contains(&format!("[http {v}]")) && l.contains("batch/")));
        assert!(stdout
            .lines()
            .any(|l| l.contains(&format!("[stdio {v}]")) && l.contains("batch/")));
    }
}

#[test]
fn libtest_flags_after_the_separator() {
    let w = HttpWitness::start(&[], None);
    let out = Command::new(bin())
        .args([
            "run",
            "--http",
            &w.url,
            "--spec",
            "2025-11-25",
            "--",
            "--list",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(listing
        .lines()
        .any(|l| l.starts_with("[http] batch/two-requests-with-denied-call: test")));

    // A filter runs only what it names.
    let (code, report) = run_with_report(&["--http", &w.url], &["batch/"]);
    assert_eq!(code, 0);
    let ran: Vec<_> = report
        .results
        .iter()
        .filter(|t| t.verdict != TrialVerdict::Skip)
        .collect();
    assert!(!ran.is_empty() && ran.iter().all(|t| t.id.starts_with("batch/")));
}

#[test]
fn failing_cases_exit_with_cases_failed() {
    let w = HttpWitness::start(&["batch"], None);
    let (code, report) = run_with_report(&["--http", &w.url], &["batch/"]);
    assert_eq!(code, i32::from(exit::CASES_FAILED));
    assert!(report
        .results
        .iter()
        .any(|t| t.verdict == TrialVerdict::Fail));
}

/// A target that never came up is not tested (exit 4, no trial, no rule said broken), whether
/// nothing listens at its URL, its command cannot be found, or the program of a gate the runner
/// starts cannot be found.
#[test]
fn a_target_that_cannot_be_tested_has_its_own_code() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    for target in [
        vec!["--http", url.as_str()],
        vec!["--stdio", "/nonexistent/mcp-server --flag"],
        vec!["--stdio", "no-such-program-anywhere-on-path"],
        vec!["--gate", "/nonexistent/gate --port {port} {downstream_url}"],
    ] {
        let out = Command::new(bin())
            .arg("run")
            .args(&target)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(i32::from(exit::UNTESTABLE)),
            "{target:?}: {stdout}"
        );
        assert!(!stdout.contains("test result"), "{target:?}: {stdout}");
    }
}

/// A run whose every trial is not applicable (gate cases against a server) tested nothing: it
/// says so and exits as untestable, not as a pass; one applicable family beside them passes.
#[test]
fn a_run_of_only_inapplicable_trials_is_not_a_pass() {
    let w = HttpWitness::start(&[], None);
    let run = |filters: &[&str]| {
        Command::new(bin())
            .args(["run", "--http", &w.url, "--spec", "2025-11-25", "--"])
            .args(filters)
            .output()
            .unwrap()
    };
    let out = run(&["canonical/"]);
    assert_eq!(
        out.status.code(),
        Some(i32::from(exit::UNTESTABLE)),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing was tested"));
    let out = run(&["canonical/", "batch/"]);
    assert_eq!(out.status.code(), Some(i32::from(exit::SUCCESS)));
}

/// An HTTP server that is not an MCP server (every request answered 404) gives the version
/// probe nothing it speaks: not tested (exit 4), unless the versions are named, when the cases
/// run and fail (exit 1).
#[test]
fn a_target_that_speaks_no_mcp_is_not_tested_unless_versions_are_named() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let _ = s.set_read_timeout(Some(std::time::Duration::from_millis(200)));
            let mut buf = [0u8; 65536];
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                b"HTTP/1.1 404 Not Found\r\ncontent-type: text/plain\r\ncontent-length: 9\r\nconnection: close\r\n\r\nnot found",
            );
        }
    });
    let out = Command::new(bin())
        .args(["run", "--http", &url])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(i32::from(exit::UNTESTABLE)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("test result"));
    let out = Command::new(bin())
        .args([
            "run",
            "--http",
            &url,
            "--spec",
            "2025-11-25",
            "--",
            "batch/",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(i32::from(exit::CASES_FAILED)));
}

/// The end of a failing run names each failing family with its counts and the checks that
/// failed, and prints a command that reruns exactly the failed trials.
#[test]
fn the_summary_names_the_failing_families_and_reruns_exactly_the_failures() {
    let w = HttpWitness::start(&["batch"], None);
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let out = Command::new(bin())
        .args(["run", "--http", &w.url, "--spec", "2025-11-25", "--report"])
        .arg(&report)
        .args(["--", "batch/", "smuggling/"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(i32::from(exit::CASES_FAILED)));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let failed: std::collections::BTreeSet<String> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["verdict"] == "fail")
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect();
    assert!(!failed.is_empty());
    let summary = stdout
        .split("\nsummary: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no summary: {stdout}"));
    let batch = failed.iter().filter(|id| id.starts_with("batch/")).count();
    assert!(
        summary.contains(&format!("batch {batch} failed")),
        "{summary}"
    );
    assert!(summary.contains("failed checks: "), "{summary}");
    let rerun = summary
        .lines()
        .find_map(|l| l.trim().strip_prefix("rerun the failed trials: "))
        .unwrap_or_else(|| panic!("no rerun command: {summary}"));
    let words = shell_words::split(rerun).unwrap();
    // The rerun does not overwrite the first run's report.
    assert!(!words.iter().any(|w| w == "--report"), "{rerun}");
    let libtest = words.iter().position(|w| w == "--").unwrap();
    let again = dir.path().join("again.json");
    let out = Command::new(bin())
        .args(&words[1..libtest])
        .args(["--report"])
        .arg(&again)
        .args(&words[libtest..])
        .output()
        .unwrap();
    let again: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&again).unwrap()).unwrap();
    let ran: std::collections::BTreeSet<String> = again["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["verdict"] != "skip")
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ran, failed, "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn usage_and_setup_errors_have_their_codes() {
    let out = Command::new(bin())
        .args(["run", "--no-such-flag"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(i32::from(exit::USAGE)));

    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("bad")).unwrap();
    std::fs::write(
        dir.path().join("bad/x.json"),
        r#"{"title": "t", "oops": 1}"#,
    )
    .unwrap();
    let out = Command::new(bin())
        .arg("check-cases")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(i32::from(exit::SETUP_FAILED)));
    let out = Command::new(bin())
        .args(["run", "--cases"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(i32::from(exit::SETUP_FAILED)));

    let out = Command::new(bin())
        .args(["check-cases", concat!(env!("CARGO_MANIFEST_DIR"), "/cases")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(i32::from(exit::SUCCESS)));
}

/// The run's total deadline bounds a run against a server that never answers: cases that had
/// not started when it passed fail at once, saying so.
#[test]
fn total_deadline_bounds_the_run() {
    let w = HttpWitness::start(&["mute"], None);
    let (code, report) = run_with_report(
        &[
            "--http",
            &w.url,
            "--case-timeout",
            "1",
            "--total-timeout",
            "2",
        ],
        &["--test-threads", "1"],
    );
    assert_eq!(code, i32::from(exit::CASES_FAILED));
    let late = report
        .results
        .iter()
        .filter(|t| {
            t.findings.iter().any(|f| {
                f.check == Check::Setup
                    && Some(f.message.as_str()).is_some_and(|m| m.contains("total deadline"))
            })
        })
        .count();
    // Every case waits at least its 1 s deadline, so most of ~100 cannot start within 2 s.
    assert!(late > 50, "{late} cases hit the total deadline");
}

/// `--gate` starts a gate in front of the runner's witness; the gate profile passes for the
/// reference gate, and a credential the client sends never reaches the witness.
#[test]
fn gate_target_with_client_credentials() {
    let gate = crate::util::reference_gate_command();
    let (code, report) = run_with_report(
        &[
            "--gate",
            &gate,
            "--gate-codes",
            "reference",
            "--header",
            "Authorization: Bearer gauntlet-client-secret-1234",
        ],
        &[],
    );
    assert_eq!(
        code,
        i32::from(exit::SUCCESS),
        "{:?}",
        report
            .results
            .iter()
            .filter(|t| t.verdict == TrialVerdict::Fail)
            .collect::<Vec<_>>()
    );
    assert!(report.count(TrialVerdict::Pass) >= 150);
}

#[test]
fn several_filters_after_the_double_dash_each_select_trials() {
    let w = HttpWitness::start(&[], None);
    let ids = |report: &crate::util::Report| -> std::collections::BTreeSet<String> {
        report
            .results
            .iter()
            .filter(|t| t.verdict != TrialVerdict::Skip)
            .map(|t| t.id.clone())
            .collect()
    };
    let args = ["--http", w.url.as_str(), "--spec", "2025-11-25"];
    let (code, report) = run_with_report(&args, &["batch/one-ping", "empty/no-body"]);
    assert_eq!(code, i32::from(exit::SUCCESS));
    let got = ids(&report);
    assert!(
        got.contains("batch/one-ping-in-array") && got.contains("empty/no-body"),
        "{got:?}"
    );
    assert!(
        got.iter()
            .all(|id| id.contains("batch/one-ping") || id.contains("empty/no-body")),
        "{got:?}"
    );
    // With --exact (and an option that takes a value among them) each names one case.
    let (code, report) = run_with_report(
        &args,
        &[
            "primitive/true",
            "--test-threads",
            "2",
            "primitive/null",
            "--exact",
        ],
    );
    assert_eq!(code, i32::from(exit::SUCCESS));
    let want: std::collections::BTreeSet<String> = ["primitive/null", "primitive/true"]
        .map(String::from)
        .into();
    assert_eq!(ids(&report), want);
}

/// `--quiet` prints no trial lines: the end of the run lists each failed trial (the report's
/// failures, one line each) and the counts, and nothing is drawn when stdout is not a terminal.
#[test]
fn quiet_lists_only_the_failures_and_draws_nothing_into_a_pipe() {
    let w = HttpWitness::start(&["batch"], None);
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let out = Command::new(bin())
        .args(["run", "--quiet", "--http", &w.url, "--spec", "2025-11-25"])
        .arg("--report")
        .arg(&report)
        .args(["--", "batch/", "nesting/"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(i32::from(exit::CASES_FAILED)));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stdout.lines().any(|l| l.starts_with("test ")), "{stdout}");
    assert!(!stdout.contains("test result"), "{stdout}");
    assert!(!stdout.contains('\r') && !stderr.contains('\r'), "{stderr}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let failed: Vec<String> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["verdict"] == "fail")
        .map(|t| format!("    FAIL [http] {}: ", t["id"].as_str().unwrap()))
        .collect();
    assert!(!failed.is_empty());
    assert!(
        stdout.contains(&format!("\nfailed ({}):\n", failed.len())),
        "{stdout}"
    );
    for line in &failed {
        assert!(
            stdout.lines().any(|l| l.starts_with(line)),
            "{line}: {stdout}"
        );
    }
    assert!(stdout.contains("\nsummary: "), "{stdout}");

    // A quiet run with nothing failed still says what it ran.
    let good = HttpWitness::start(&[], None);
    let out = Command::new(bin())
        .args([
            "run",
            "-q",
            "--http",
            &good.url,
            "--spec",
            "2025-11-25",
            "--",
            "batch/",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(i32::from(exit::SUCCESS)));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\nsummary: "), "{stdout}");
    assert!(!stdout.contains("failed ("), "{stdout}");
}

/// On a terminal (a pseudo-terminal from util-linux `script`), a quiet run draws its counter
/// of trials against the number it will run, then clears it.
#[test]
fn quiet_on_a_terminal_draws_a_trial_counter() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        crate::util::skip("no `script` (util-linux) to give the run a terminal");
        return;
    }
    let w = HttpWitness::start(&[], None);
    let command = format!(
        "{} run -q --http {} --spec 2025-11-25 -- batch/",
        shell_words::quote(&bin().to_string_lossy()),
        w.url
    );
    let out = assert_cmd::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    // The batch family's trials at one version over HTTP.
    let ran = Command::new(bin())
        .args([
            "run",
            "--http",
            &w.url,
            "--spec",
            "2025-11-25",
            "--",
            "batch/",
        ])
        .output()
        .unwrap();
    let passed = String::from_utf8_lossy(&ran.stdout)
        .lines()
        .filter(|l| l.ends_with(" ok"))
        .count();
    assert!(passed > 0);
    // Drawn at once (a loaded machine may have finished trials by then), then cleared.
    let drawn = regex::Regex::new(&format!("\r\x1b\\[2K[0-9]+/{passed} trials, [0-9]+ s")).unwrap();
    assert!(drawn.is_match(&text), "{text:?}");
    assert!(text.contains(&format!("/{passed} trials, ")), "{text:?}");
}

/// A target that lists 2026-07-28 in its answer to server/discover but refuses that version's
/// requests is said once ("advertises … but refuses its requests") and tested at the versions it
/// speaks, not failed case by case at the one it refuses.
#[test]
fn a_version_advertised_but_refused_is_said_once_and_not_tested() {
    if !crate::util::python3("the advertising stand-in") {
        return;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/advertises_modern_refuses.py");
    let out = std::process::Command::new(crate::util::bin())
        .args(["run", "--stdio"])
        .arg(format!("python3 {}", script.display()))
        .args(["--", "envelope/method-unknown"])
        .output()
        .expect("the runner runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stderr.contains("advertises 2026-07-28 but refuses its requests"),
        "{stderr}"
    );
    // One version left, 2025-11-25: the trial's name carries none.
    assert!(
        stdout.contains("[stdio] envelope/method-unknown"),
        "{stdout}"
    );
    assert!(!stdout.contains("2026-07-28"), "{stdout}");
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
}

/// A server that agrees to 2025-03-26 (the `legacy-batch` witness) may take a batch that claims
/// that version: the case sending one does not apply there, and its record says why; held to
/// the session's version (`--strict`), it is judged and fails.
#[test]
fn a_batch_claiming_2025_03_26_is_legal_on_a_server_that_agrees_to_it() {
    const CASE: &str = "versions/batch-with-version-header-2025-03-26";
    let w = HttpWitness::start(&["legacy-batch"], None);
    let trial = |strict: bool| {
        let mut args = vec!["--http", w.url.as_str(), "--spec", "2025-11-25"];
        if strict {
            args.push("--strict");
        }
        let (_, report) = run_with_report(&args, &["--exact", &format!("[http] {CASE}")]);
        report
            .results
            .into_iter()
            .find(|t| t.id == CASE)
            .expect("the case's record")
    };
    let legal = trial(false);
    assert_eq!(legal.verdict, TrialVerdict::Skip, "{legal:?}");
    assert!(
        legal
            .findings
            .iter()
            .any(|f| f.check == Check::Setup && f.status == Status::Pass),
        "the record says why: {legal:?}"
    );
    let strict = trial(true);
    assert_eq!(strict.verdict, TrialVerdict::Fail, "{strict:?}");
}
