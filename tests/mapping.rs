//! Gates that do not look like the reference gate: their own error codes (judged fail-closed
//! unless `--gate-codes` gives the table), tools renamed (`--tool-name`) or wrapped in a
//! meta-tool (`--meta-tool`). The renaming and wrapping gate is `tests/fixtures/mapping_gate.py`
//! in front of the reference gate (allow-all tool policy, so the fixture's own policy decides);
//! each of its broken modes is caught by the cases it breaks.

use crate::util::{bin, python3, run_with_report, InProcessGate, Report};
use crate::util::{Check, Status, TrialVerdict};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// The version the mapping runs speak (one legacy version keeps them short).
const SPEC: &str = "2025-11-25";

/// The reference gate's own warning (its stdio front answers a second `initialize` in a
/// session), which the embedded default shows too.
const REFERENCE_GATE_WARNINGS: &[&str] = &["lifecycle/second-initialize-on-initialized-session"];

/// `(id, verdict)` of every trial that did not pass or was not skipped, but for the reference
/// gate's own warnings.
fn not_passed(report: &Report) -> BTreeSet<(String, String)> {
    report
        .results
        .iter()
        .filter(|t| t.verdict != TrialVerdict::Pass && t.verdict != TrialVerdict::Skip)
        .filter(|t| {
            !(t.verdict == TrialVerdict::Warn && REFERENCE_GATE_WARNINGS.contains(&t.id.as_str()))
        })
        .map(|t| (t.id.clone(), t.verdict.to_string()))
        .collect()
}

/// The ids of the failed trials.
fn failed_ids(report: &Report) -> BTreeSet<String> {
    report
        .results
        .iter()
        .filter(|t| t.verdict == TrialVerdict::Fail)
        .map(|t| t.id.clone())
        .collect()
}

/// A reference gate in this process whose error table is its own (legacy and modern; the
/// malformed code stays -32600: the gate answers unreadable bytes with the legacy table's
/// malformed code in a modern lane too, which a 2026-07-28 lane warns of when it is in
/// -32000..-32019).
fn gate_with_its_own_codes() -> InProcessGate {
    InProcessGate::start(
        |cfg, _| {
            cfg.errors.denied = -32011;
            cfg.errors.downstream = -32012;
            cfg.errors_modern.denied = -31011;
            cfg.errors_modern.downstream = -31012;
        },
        |cfg| reference_gate::cli::build_proxy(cfg).unwrap(),
    )
}

/// A gate that refuses with codes of its own is not wrong for it: without its table it is judged
/// fail-closed and passes; told the reference table it fails on codes alone; given its own table
/// it passes again, judged exactly.
#[test]
fn a_gate_with_its_own_error_codes_is_judged_fail_closed_unless_its_table_is_given() {
    let gate = gate_with_its_own_codes();
    let url = format!("http://{}/mcp", gate.addr);
    let log = gate.witness_log.display().to_string();
    let base = [
        "--profile",
        "gate",
        "--http",
        url.as_str(),
        "--witness-log",
        log.as_str(),
        "--spec",
        "2025-11-25,2026-07-28",
    ];
    // The series through a gate are tests/series.rs's (each sends thousands of requests).
    let run = |extra: &[&str]| {
        run_with_report(&[&base[..], extra].concat(), &crate::util::SERIES_SKIPPED)
    };

    let (code, report) = run(&[]);
    assert_eq!(not_passed(&report), BTreeSet::new(), "fail-closed judging");
    assert_eq!(code, 0);

    let (code, report) = run(&["--gate-codes", "reference"]);
    assert_eq!(code, 1);
    let failures: Vec<_> = report
        .results
        .iter()
        .filter(|t| t.verdict == TrialVerdict::Fail)
        .collect();
    assert!(failures.len() > 20, "{}", failures.len());
    // Every failure is about the code alone: what the gate did is right.
    for t in &failures {
        assert!(
            t.findings
                .iter()
                .filter(|f| f.status == Status::Fail)
                .all(|f| f.check == Check::ErrorCode),
            "{} {:?}",
            t.id,
            t.findings
        );
    }

    let (code, report) = run(&[
        "--gate-codes",
        "-32600,-32011,-32012",
        "--gate-modern-codes",
        "-32600,-31011,-31012",
    ]);
    assert_eq!(not_passed(&report), BTreeSet::new(), "its own table");
    assert_eq!(code, 0);
}

/// The reference gate with `faults`, judged fail-closed (no table given) on `filter`.
fn faulty_gate_run(faults: reference_gate::proxy::Faults, filter: &str) -> (i32, Report) {
    use reference_gate::forward::ConfiguredForwarder;
    use reference_gate::proxy::Proxy;
    use std::sync::Arc;
    let gate = InProcessGate::start(
        |_, _| {},
        |cfg| {
            let forwarder = Arc::new(ConfiguredForwarder::new(&cfg.servers, cfg.deadlines));
            Arc::new(
                Proxy::new(
                    Arc::new(cfg.policy.clone()),
                    forwarder,
                    cfg.limits,
                    cfg.errors,
                    reference_gate::trace::Tracer::none(),
                )
                .with_faults(faults),
            )
        },
    );
    let url = format!("http://{}/mcp", gate.addr);
    let log = gate.witness_log.display().to_string();
    let args = [
        "--profile",
        "gate",
        "--http",
        url.as_str(),
        "--witness-log",
        log.as_str(),
        "--spec",
        SPEC,
    ];
    run_with_report(&args, &[filter])
}

/// Judged fail-closed, what the gate did is still judged: the reference gate reading duplicate
/// names last-wins and forwarding the bytes as the client wrote them passes the ambiguity on to
/// a downstream that reads first-wins (the denied name), and fails; the same gate forwarding
/// only what it read, re-encoded, passes no differential on, and is warned (refusing is
/// preferred), as the reference gate's own table would fail it.
#[test]
fn fail_closed_judging_still_fails_a_gate_that_forwards_a_denied_call() {
    use reference_gate::proxy::Faults;
    let id = "smuggling/dup-name-denied-then-allowed";
    let (code, report) = faulty_gate_run(
        Faults {
            last_duplicate_wins: true,
            forward_raw: true,
            ..Faults::default()
        },
        "smuggling/dup-name",
    );
    assert_eq!(code, 1);
    let failed = failed_ids(&report);
    assert!(failed.contains(id), "{failed:?}");
    let (_, report) = faulty_gate_run(
        Faults {
            last_duplicate_wins: true,
            ..Faults::default()
        },
        "smuggling/dup-name",
    );
    let trial = report
        .results
        .iter()
        .find(|t| t.id == id)
        .unwrap_or_else(|| panic!("no {id}: {:?}", report.results));
    assert_eq!(trial.verdict, TrialVerdict::Warn, "{trial:?}");
}

/// The reference gate's configuration behind the fixture: the witness policy with every tool
/// and prompt allowed (the fixture decides on them itself).
fn allow_all_tools(dir: &Path) -> String {
    let mut cfg: serde_json::Value =
        serde_json::from_str(mcp_gauntlet::target::WITNESS_POLICY).unwrap();
    let rules = cfg["policy"]["rules"].as_array_mut().unwrap();
    rules.retain(|r| r.get("tool").is_none() && r.get("prompt").is_none());
    rules.insert(0, serde_json::json!({"effect": "allow", "tool": "*"}));
    rules.insert(
        0,
        serde_json::json!({"effect": "allow", "server": "witness", "prompt": "*"}),
    );
    cfg.as_object_mut().unwrap().remove("trace");
    let path = dir.join("allow-all-tools.json");
    std::fs::write(&path, cfg.to_string()).unwrap();
    path.display().to_string()
}

/// The `--gate-stdio` command of the fixture with `flags`, in front of the reference gate.
pub(crate) fn mapping_gate(dir: &Path, flags: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mapping_gate.py");
    format!(
        "python3 {} {flags} -- {} reference-gate --config {} --stdio --downstream-cmd {{downstream_cmd}}",
        script.display(),
        shell_words::quote(&bin().to_string_lossy()),
        allow_all_tools(dir)
    )
}

const META_ARGUMENTS: &str =
    r#"{"server": "{server}", "tool": "{tool}", "arguments": "{arguments}"}"#;

/// The runner's flags for the fixture's meta-tool.
fn meta_flags() -> Vec<&'static str> {
    vec![
        "--meta-tool",
        "execute_tool",
        "--meta-arguments",
        META_ARGUMENTS,
        "--tool-server",
        "lab",
    ]
}

/// Run the catalogue (`filter`) through the renaming fixture `gate`, its calls spelled `lab_{tool}`.
fn run_renamed(gate: &str, filter: &[&str]) -> (i32, Report) {
    run_with_report(
        &[
            "--gate-stdio",
            gate,
            "--tool-name",
            "lab_{tool}",
            "--spec",
            SPEC,
        ],
        filter,
    )
}

/// A gate that renames its tools passes the catalogue when the runner spells the calls its
/// way; the cases that spell a tool literally (escaped names, raw HTTP) are not applicable, and
/// without the mapping the allowed tool is unknown to it.
#[test]
fn a_renaming_gate_passes_when_the_calls_are_spelled_its_way() {
    if !python3("the mapping gate fixture") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let gate = mapping_gate(dir.path(), "--prefix lab_");
    let (code, report) = run_renamed(&gate, &[]);
    assert_eq!(not_passed(&report), BTreeSet::new());
    assert_eq!(code, 0);
    let ran = |id: &str| {
        report
            .results
            .iter()
            .any(|t| t.id == id && t.verdict == TrialVerdict::Pass)
    };
    // Spelled through the mapping: placeholders in text, JSON bodies rewritten whatever tool
    // they name (the downstream fault cases call `fault_*` by name).
    for id in [
        "smuggling/dup-name-denied-then-allowed",
        "smuggling/escaped-first-letter-in-denied-name",
        "smuggling/decoy-name-inside-arguments",
        "downstream/fault-leak",
    ] {
        assert!(ran(id), "{id} did not run");
    }
    // Spelled literally: not applicable.
    for id in [
        "smuggling/fully-escaped-denied-name",
        "canonical/add-call-with-numbers",
    ] {
        assert!(!ran(id), "{id} ran");
    }
    // Without the mapping the gate knows no `echo`: an allowed call is refused.
    let (code, report) = run_with_report(
        &["--gate-stdio", &gate, "--spec", SPEC],
        &["--exact", "canonical/string-id"],
    );
    assert_eq!(code, 1);
    assert!(failed_ids(&report).contains("canonical/string-id"));
}

/// A renaming gate whose policy decides on the name the client called (not the downstream
/// tool's) lets the denied tool through under its new name: caught, the canary run; and the
/// denied prompt, asked for by its new name, served.
#[test]
fn a_renaming_gate_that_decides_on_the_exposed_name_is_caught() {
    if !python3("the mapping gate fixture") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let gate = mapping_gate(dir.path(), "--prefix lab_ --broken policy-on-exposed-name");
    let (code, report) = run_renamed(&gate, &["prompts/"]);
    assert_eq!(code, 1);
    assert!(
        failed_ids(&report).contains("prompts/get-prompt-not-allowed"),
        "{:?}",
        report.results
    );
    // Its prompts keep their own names (`--prompt-name '{prompt}'`): the denied one is asked
    // for as `leak_secrets`, which this gate does not expose, and refused.
    let (_, report) = run_with_report(
        &[
            "--gate-stdio",
            &gate,
            "--tool-name",
            "lab_{tool}",
            "--prompt-name",
            "{prompt}",
            "--spec",
            SPEC,
        ],
        &["--exact", "prompts/get-prompt-not-allowed"],
    );
    assert_eq!(failed_ids(&report), BTreeSet::new());
    let (code, report) = run_renamed(&gate, &["smuggling/"]);
    assert_eq!(code, 1);
    let ran: BTreeSet<&String> = report
        .results
        .iter()
        .filter(|t| {
            t.findings
                .iter()
                .any(|f| f.check == Check::Canary && f.status == Status::Fail)
        })
        .map(|t| &t.id)
        .collect();
    for id in [
        "smuggling/decoy-name-inside-arguments",
        "smuggling/escaped-first-letter-in-denied-name",
    ] {
        assert!(ran.iter().any(|r| *r == id), "{id}: {ran:?}");
    }
}

/// A meta-tool gate passes the catalogue with the mapping given (its own cases included), and
/// each way of misreading the wrapper's members is caught by the case written for it.
#[test]
fn a_meta_tool_gate_passes_and_each_wrapper_bug_is_caught() {
    if !python3("the mapping gate fixture") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = |flags: &str, filter: &[&str]| {
        let gate = mapping_gate(dir.path(), flags);
        let mut args = vec!["--gate-stdio", gate.as_str(), "--spec", SPEC];
        args.extend(meta_flags());
        run_with_report(&args, filter)
    };
    let (code, report) = run("--meta execute_tool", &[]);
    assert_eq!(not_passed(&report), BTreeSet::new());
    assert_eq!(code, 0);
    let meta_cases: BTreeSet<String> = report
        .results
        .iter()
        .filter(|t| t.id.starts_with("smuggling/meta-tool-") && t.verdict == TrialVerdict::Pass)
        .map(|t| t.id.clone())
        .collect();
    assert_eq!(meta_cases.len(), 4, "{meta_cases:?}");
    // Text bodies that call a tool go through the meta-tool where the text allows it, every
    // hostile byte kept; what it does not allow is not applicable.
    let verdicts = |id: &str| -> BTreeSet<String> {
        report
            .results
            .iter()
            .filter(|t| t.id == id)
            .map(|t| t.verdict.to_string())
            .collect()
    };
    for id in [
        "malformed/infinity-in-arguments",
        "malformed/truncated-object",
        "smuggling/dup-params-allowed-then-denied",
        "smuggling/escaped-first-letter-in-denied-name",
        "encoding/utf16le-denied-call",
        "encoding/invalid-utf8-ff-in-echo-argument",
        "stdio/pretty-printed-denied-call",
        "canonical/spaces-and-tabs-between-tokens",
        "nesting/10000-nested-arrays-in-echo-arguments",
    ] {
        assert_eq!(verdicts(id), BTreeSet::from(["pass".to_string()]), "{id}");
    }
    for id in [
        "smuggling/dup-name-allowed-then-denied",
        "malformed/single-quotes",
        "malformed/unterminated-string",
        "canonical/add-call-with-numbers",
    ] {
        assert_eq!(verdicts(id), BTreeSet::from(["skip".to_string()]), "{id}");
    }
    for (mode, caught) in [
        (
            "trusts-last-tool-key",
            "smuggling/meta-tool-tool-member-denied-then-allowed",
        ),
        (
            "trusts-first-tool-key",
            "smuggling/meta-tool-tool-member-allowed-then-denied",
        ),
        (
            "unwraps-nested",
            "smuggling/meta-tool-denied-name-in-nested-arguments",
        ),
        (
            "matches-raw-text",
            "smuggling/meta-tool-escaped-denied-name",
        ),
    ] {
        let (code, report) = run(
            &format!("--meta execute_tool --broken {mode}"),
            &["smuggling/meta-tool-"],
        );
        assert_eq!(code, 1, "{mode}");
        assert!(failed_ids(&report).contains(caught), "{mode}: {report:?}");
    }
    // A text case, its call wrapped: the escaped denied name in the meta-tool's tool member
    // passes a gate that matches the raw text, and the denied tool runs.
    let (code, report) = run(
        "--meta execute_tool --broken matches-raw-text",
        &["--exact", "smuggling/escaped-first-letter-in-denied-name"],
    );
    assert_eq!(code, 1);
    assert!(failed_ids(&report).contains("smuggling/escaped-first-letter-in-denied-name"));
}

/// The meta-tool cases apply only when the run names a meta-tool (a run of only those, without
/// one, tested nothing: exit 4, not a pass); the mapping flags are checked before anything runs.
#[test]
fn meta_tool_cases_need_a_meta_tool_and_bad_templates_are_refused() {
    let (code, report) = run_with_report(&[], &["smuggling/meta-tool-"]);
    assert_eq!(code, i32::from(mcp_gauntlet::exit::UNTESTABLE));
    assert!(report
        .results
        .iter()
        .all(|t| t.verdict == TrialVerdict::Skip));
    assert!(!report.results.is_empty());
    for bad in [
        &["--tool-name", "lab_"][..],
        &[
            "--meta-tool",
            "x",
            "--meta-arguments",
            r#"{"tool": "{tool}"}"#,
        ][..],
    ] {
        let out = Command::new(bin()).arg("run").args(bad).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
}

/// The fixture's grants: the run's principal (alice) the witness policy's allowed tools, the
/// granted principal (bob) the denied tool too.
const GRANTS: &str = "--identity argument:agent_id --identity argument:principal \
    --grant alice=echo,add,fault_hang,fault_oversize,fault_empty,fault_garbage,fault_close,fault_leak,ask_client \
    --grant bob=echo,delete_everything";

/// A meta-tool gate that decides per principal passes with the identity given, and each way of
/// trusting the wrong caller is caught by the `identity/` cases: an unknown principal (or none)
/// granted everything, principals matched ignoring case, spaces and compatibility forms, and
/// the identity taken from a second place over the first.
#[test]
fn a_gate_that_decides_per_principal_is_caught_where_it_trusts_the_wrong_caller() {
    if !python3("the mapping gate fixture") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = |broken: &str, filter: &[&str]| {
        let gate = mapping_gate(
            dir.path(),
            &format!("--meta execute_tool {GRANTS} {broken}"),
        );
        let mut args = vec!["--gate-stdio", gate.as_str(), "--spec", SPEC];
        args.extend(meta_flags());
        args.extend([
            "--identity",
            "argument:agent_id",
            "--identity",
            "argument:principal",
            "--principal",
            "alice",
            "--granted-principal",
            "bob",
        ]);
        run_with_report(&args, filter)
    };
    let (code, report) = run("", &[]);
    assert_eq!(not_passed(&report), BTreeSet::new());
    assert_eq!(code, 0);
    let identity_cases = report
        .results
        .iter()
        .filter(|t| t.id.starts_with("identity/") && t.verdict == TrialVerdict::Pass)
        .count();
    assert_eq!(identity_cases, 6);
    let id = |s: &str| format!("identity/{s}-calls-the-denied-tool");
    for (mode, caught) in [
        (
            "grants-unknown",
            vec![id("unknown-principal"), id("no-principal")],
        ),
        (
            "folds-principal",
            vec![
                id("granted-principal-in-the-other-case"),
                id("granted-principal-between-spaces"),
                id("granted-principal-in-fullwidth-letters"),
            ],
        ),
        (
            "trusts-second-place",
            vec![id("granted-principal-in-a-second-place")],
        ),
    ] {
        let (code, report) = run(&format!("--broken {mode}"), &["identity/"]);
        assert_eq!(code, 1, "{mode}");
        let failed = failed_ids(&report);
        for c in &caught {
            assert!(failed.contains(c), "{mode}: {c} not caught: {failed:?}");
        }
        // Each failure is the denied tool running.
        for t in report
            .results
            .iter()
            .filter(|t| t.verdict == TrialVerdict::Fail)
        {
            assert!(
                t.findings
                    .iter()
                    .any(|f| f.check == Check::Canary && f.status == Status::Fail),
                "{mode}: {} {:?}",
                t.id,
                t.findings
            );
        }
    }
}

/// A header place is sent on every request, the case's caller's value on the case's own: the
/// witness's record shows what a gate would have read.
#[test]
fn identity_headers_carry_the_principal_and_each_cases_caller() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("witness.jsonl");
    let w = crate::util::HttpWitness::start(&[], Some(&log));
    let log_arg = log.display().to_string();
    let (_, report) = run_with_report(
        &[
            "--http",
            &w.url,
            "--witness-log",
            &log_arg,
            "--profile",
            "gate",
            "--identity",
            "header:X-Agent-Id",
            "--principal",
            "alice",
            "--granted-principal",
            "bob",
            "--spec",
            SPEC,
        ],
        &[
            "--exact",
            "identity/granted-principal-in-the-other-case-calls-the-denied-tool",
        ],
    );
    // The witness is no gate: it runs the call, which is how the case can fail.
    assert_eq!(failed_ids(&report).len(), 1);
    let record = std::fs::read_to_string(&log).unwrap();
    let agents: BTreeSet<String> = record
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|e| {
            e["headers"].as_array().and_then(|hs| {
                hs.iter()
                    .find(|h| h[0] == "x-agent-id")
                    .and_then(|h| h[1].as_str().map(str::to_string))
            })
        })
        .collect();
    assert_eq!(
        agents,
        ["BOB".to_string(), "alice".to_string()]
            .into_iter()
            .collect()
    );
}

/// The `--gate` command of the HTTP identity fixture with `flags`.
fn identity_http_gate(flags: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/identity_http_gate.py");
    format!(
        "python3 {} {{port}} {{downstream_url}} {flags} \
         --grant alice=echo,add --grant bob=echo,delete_everything",
        script.display()
    )
}

/// Where an identity fixture reads the caller, the runner's extra flags, a broken mode and the
/// cases that catch it.
type Setup<'a> = (&'a [&'a str], &'a [&'a str], &'a str, Vec<String>);

/// An HTTP gate that decides per principal, wherever it reads the caller (a header, a query
/// parameter, the bearer token, or the subject of a token the runner mints), passes the
/// `identity/` cases and a plain allowed call; each way of trusting the wrong caller is caught,
/// among them an argument trusted over the header.
#[test]
fn an_http_gate_is_caught_wherever_it_reads_the_caller_and_trusts_the_wrong_one() {
    if !python3("the mapping gate fixture") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("issuer.pem");
    let issuer = mcp_gauntlet::auth::Issuer::generate("https://issuer.test", "k1").unwrap();
    std::fs::write(&key, issuer.private_pem()).unwrap();
    let key = key.display().to_string();
    let minted = [
        "--auth-issuer-key",
        key.as_str(),
        "--auth-issuer",
        "https://issuer.test",
        "--auth-audience",
        "http://127.0.0.1/mcp",
    ];
    let id = |s: &str| format!("identity/{s}-calls-the-denied-tool");
    // (where the gate reads the caller, the runner's extra flags, what a broken mode misses)
    let setups: [Setup; 4] = [
        (
            &["header:x-agent-id", "argument:agent_id"],
            &[],
            "trusts-second-place",
            vec![id("granted-principal-in-a-second-place")],
        ),
        (
            &["query:agent", "header:x-agent-id"],
            &[],
            "folds-principal",
            vec![
                id("granted-principal-in-the-other-case"),
                id("granted-principal-between-spaces"),
                id("granted-principal-in-fullwidth-letters"),
            ],
        ),
        (
            &["bearer"],
            &[],
            "grants-unknown",
            // The granted principal spelled otherwise is a principal it does not know too
            // (between spaces it is not sent: a token is read without them).
            vec![
                id("unknown-principal"),
                id("no-principal"),
                id("granted-principal-in-the-other-case"),
                id("granted-principal-in-fullwidth-letters"),
            ],
        ),
        (
            &["bearer", "argument:agent_id"],
            &minted,
            "trusts-second-place",
            vec![id("granted-principal-in-a-second-place")],
        ),
    ];
    for setup in setups {
        identity_setup_passes_and_its_broken_mode_is_caught(setup);
    }
}

/// One setup of the HTTP identity fixture: passes as it is, caught in its broken mode.
fn identity_setup_passes_and_its_broken_mode_is_caught((places, extra, mode, caught): Setup) {
    let place_flags: Vec<String> = places.iter().map(|p| format!("--identity {p}")).collect();
    let run = |broken: &str| {
        let gate = identity_http_gate(&format!("{} {broken}", place_flags.join(" ")));
        let mut args = vec!["--gate", gate.as_str(), "--spec", SPEC];
        for p in places {
            args.extend(["--identity", p]);
        }
        args.extend(["--principal", "alice", "--granted-principal", "bob"]);
        args.extend(extra);
        run_with_report(
            &args,
            &[
                "identity/",
                "canonical/string-id",
                "canonical/max-safe-integer-id",
            ],
        )
    };
    let (code, report) = run("");
    assert_eq!(not_passed(&report), BTreeSet::new(), "{places:?}");
    assert_eq!(code, 0, "{places:?}");
    // The report says as whom, and where, the run called; an opaque token's principals are
    // credentials, and it does not name them.
    let spelling = report.spelling.clone().unwrap_or_default();
    let opaque = places.contains(&"bearer") && extra.is_empty();
    if opaque {
        assert!(
            !spelling.contains("alice") && !spelling.contains("bob"),
            "{spelling}"
        );
    } else {
        assert!(
            spelling.contains("caller `alice`") && spelling.contains("`bob` granted"),
            "{spelling}"
        );
    }
    let passed = |prefix: &str| {
        report
            .results
            .iter()
            .filter(|t| t.id.starts_with(prefix) && t.verdict == TrialVerdict::Pass)
            .count()
    };
    // Every identity case applies with a second place; without one, all but that case; the
    // granted principal between spaces not where spaces are trimmed (a header, an opaque token).
    let trimmed = places[0].starts_with("header:") || (places[0] == "bearer" && extra.is_empty());
    assert_eq!(
        passed("identity/"),
        4 + usize::from(places.len() > 1) + usize::from(!trimmed),
        "{places:?}"
    );
    if !extra.is_empty() {
        assert!(spelling.contains("bearer token subject"), "{spelling}");
    }
    assert_eq!(passed("canonical/"), 2, "{places:?}");
    let (code, report) = run(&format!("--broken {mode}"));
    assert_eq!(code, 1, "{places:?} {mode}");
    let failed = failed_ids(&report);
    assert_eq!(
        failed,
        caught.iter().cloned().collect::<BTreeSet<_>>(),
        "{places:?} {mode}"
    );
    for t in report
        .results
        .iter()
        .filter(|t| t.verdict == TrialVerdict::Fail)
    {
        assert!(
            t.findings
                .iter()
                .any(|f| f.check == Check::Canary && f.status == Status::Fail),
            "{places:?} {mode}: {} {:?}",
            t.id,
            t.findings
        );
    }
}
