//! What CI consumes: JUnit that a JUnit parser accepts, baselines that pass known failures and
//! fail regressions and stale entries, shards that split a run, and the matrix.

use crate::util::{bin, run_with_report, HttpWitness, TrialVerdict};
use mcp_gauntlet::exit;
use std::collections::BTreeSet;
use std::process::Command;

fn run(args: &[&str]) -> i32 {
    Command::new(bin())
        .arg("run")
        .args(args)
        .output()
        .unwrap()
        .status
        .code()
        .unwrap_or(-1)
}

#[test]
fn junit_is_well_formed_and_complete() {
    let w = HttpWitness::start(&["batch"], None);
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("junit.xml");
    let code = run(&[
        "--http",
        &w.url,
        "--junit",
        junit.to_str().unwrap(),
        "--",
        "batch/",
    ]);
    assert_eq!(code, i32::from(exit::CASES_FAILED));
    let text = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("JUnit parses as XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let cases: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    let failures = doc
        .descendants()
        .filter(|n| n.has_tag_name("failure"))
        .count();
    assert!(!cases.is_empty());
    assert!(failures > 0);
    assert_eq!(
        root.attribute("failures"),
        Some(failures.to_string().as_str())
    );
    let failure = doc
        .descendants()
        .find(|n| n.has_tag_name("failure"))
        .unwrap();
    assert!(
        failure.text().is_some_and(|t| t.contains("requirements:")),
        "a failure carries its explanation"
    );
}

#[test]
fn baselines_pass_known_failures_and_fail_regressions_and_stale_entries() {
    let broken = HttpWitness::start(&["batch"], None);
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("baseline.json");
    let b = base.to_str().unwrap();
    assert_eq!(
        run(&["--http", &broken.url, "--write-baseline", b, "--", "batch/"]),
        i32::from(exit::CASES_FAILED)
    );
    assert_eq!(
        run(&["--http", &broken.url, "--baseline", b, "--", "batch/"]),
        i32::from(exit::SUCCESS)
    );

    // One line fewer: that failure is a regression again.
    let mut parsed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    let list = parsed["known_failures"].as_array_mut().unwrap();
    assert!(list.len() > 1);
    list.remove(0);
    let shorter = dir.path().join("shorter.json");
    std::fs::write(&shorter, parsed.to_string()).unwrap();
    assert_eq!(
        run(&[
            "--http",
            &broken.url,
            "--baseline",
            shorter.to_str().unwrap(),
            "--",
            "batch/"
        ]),
        i32::from(exit::CASES_FAILED)
    );

    // A fixed server: every entry is stale.
    let fixed = HttpWitness::start(&[], None);
    let (code, report) = run_with_report(&["--http", &fixed.url, "--baseline", b], &["batch/"]);
    assert_eq!(code, i32::from(exit::CASES_FAILED));
    assert!(report
        .results
        .iter()
        .any(|t| t.verdict == TrialVerdict::Stale));

    // A malformed baseline is a setup error.
    std::fs::write(&shorter, "{\"known_failures\": 1}").unwrap();
    assert_eq!(
        run(&[
            "--http",
            &fixed.url,
            "--baseline",
            shorter.to_str().unwrap()
        ]),
        i32::from(exit::SETUP_FAILED)
    );
}

#[test]
fn yaml_baselines_work_like_json_ones() {
    let broken = HttpWitness::start(&["batch"], None);
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("baseline.yaml");
    let b = base.to_str().unwrap();
    assert_eq!(
        run(&["--http", &broken.url, "--write-baseline", b, "--", "batch/"]),
        i32::from(exit::CASES_FAILED)
    );
    let text = std::fs::read_to_string(&base).unwrap();
    assert!(text.contains("known_failures:") && !text.trim_start().starts_with('{'));
    assert_eq!(
        run(&["--http", &broken.url, "--baseline", b, "--", "batch/"]),
        i32::from(exit::SUCCESS)
    );
    // Drop the first entry (its three lines): that failure is a regression again.
    let lines: Vec<&str> = text.lines().collect();
    let first = lines.iter().position(|l| l.starts_with("- id:")).unwrap();
    let next = first
        + 1
        + lines[first + 1..]
            .iter()
            .position(|l| l.starts_with("- id:"))
            .unwrap();
    let shorter: Vec<&str> = lines[..first]
        .iter()
        .chain(&lines[next..])
        .copied()
        .collect();
    std::fs::write(&base, shorter.join("\n")).unwrap();
    assert_eq!(
        run(&["--http", &broken.url, "--baseline", b, "--", "batch/"]),
        i32::from(exit::CASES_FAILED)
    );
    // A malformed YAML baseline is a setup error.
    std::fs::write(&base, "known_failures: [ {id: a, reasn: typo} ]\n").unwrap();
    assert_eq!(
        run(&["--http", &broken.url, "--baseline", b]),
        i32::from(exit::SETUP_FAILED)
    );
}

#[test]
fn shards_split_a_run_without_overlap() {
    let w = HttpWitness::start(&[], None);
    let ran = |shard: &str| -> BTreeSet<String> {
        let (_, r) = run_with_report(&["--http", &w.url, "--shard", shard], &[]);
        r.results.into_iter().map(|t| t.id).collect()
    };
    let (a, b) = (ran("1/2"), ran("2/2"));
    let all = ran("1/1");
    assert!(a.is_disjoint(&b));
    assert_eq!(a.union(&b).cloned().collect::<BTreeSet<_>>(), all);
    assert_eq!(
        run(&["--http", &w.url, "--shard", "3/2"]),
        i32::from(exit::USAGE)
    );
}

#[test]
fn matrix_renders_reports_side_by_side() {
    let good = HttpWitness::start(&[], None);
    let bad = HttpWitness::start(&["batch"], None);
    let dir = tempfile::tempdir().unwrap();
    let (g, b) = (dir.path().join("g.json"), dir.path().join("b.json"));
    run(&[
        "--http",
        &good.url,
        "--report",
        g.to_str().unwrap(),
        "--",
        "batch/",
    ]);
    run(&[
        "--http",
        &bad.url,
        "--report",
        b.to_str().unwrap(),
        "--",
        "batch/",
    ]);
    let html = dir.path().join("m.html");
    let out = Command::new(bin())
        .args([
            "matrix",
            &format!("good={}", g.display()),
            &format!("batching={}", b.display()),
            "--html",
            html.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table
        .lines()
        .next()
        .unwrap()
        .contains("| good | batching |"));
    let row = table
        .lines()
        .find(|l| l.contains("batch/one-ping-in-array"))
        .unwrap();
    assert!(row.ends_with("| pass | **FAIL** |"), "{row}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<th>good</th><th>batching</th>"));
    let row = page
        .lines()
        .find(|l| l.contains("batch/one-ping-in-array"))
        .unwrap();
    assert!(
        row.ends_with("<td class=\"pass\">pass</td><td class=\"FAIL\">FAIL</td></tr>"),
        "{row}"
    );
}

/// A server that echoes request headers into its answers: the `--header` value must not appear
/// in stdout, stderr, the JSON report or the JUnit file, while the leak itself is reported.
#[test]
fn header_secrets_never_reach_any_output() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut buf = vec![0u8; 65536];
            let n = s.read(&mut buf).unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]).into_owned();
            let auth = head
                .lines()
                .find(|l| l.to_ascii_lowercase().starts_with("authorization"))
                .unwrap_or("");
            let body = format!("bad request, you sent {auth}");
            let _ = write!(s, "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        }
    });
    let secret = "s3cr3t-token-value-9d1f";
    let dir = tempfile::tempdir().unwrap();
    let (report, junit) = (dir.path().join("r.json"), dir.path().join("j.xml"));
    let url = format!("http://{addr}/mcp");
    // Unprobed, it is not tested (it speaks no MCP), and that message keeps the secret too.
    let untested = Command::new(bin())
        .args(["run", "--http", &url])
        .args(["--header", &format!("Authorization: Bearer {secret}")])
        .output()
        .unwrap();
    assert_eq!(untested.status.code(), Some(i32::from(exit::UNTESTABLE)));
    let untested = String::from_utf8_lossy(&untested.stderr).into_owned()
        + &String::from_utf8_lossy(&untested.stdout);
    assert!(!untested.contains(secret), "{untested}");
    // With the version named, every case runs and is answered with the secret.
    let out = Command::new(bin())
        .args(["run", "--http", &url, "--strict", "--spec", "2025-11-25"])
        .args(["--header", &format!("Authorization: Bearer {secret}")])
        .arg("--report")
        .arg(&report)
        .arg("--junit")
        .arg(&junit)
        .args(["--", "l"])
        .output()
        .unwrap();
    let everything = [
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        std::fs::read_to_string(&report).unwrap(),
        std::fs::read_to_string(&junit).unwrap(),
    ];
    for text in &everything {
        assert!(!text.contains(secret), "the secret leaked into an output");
    }
    assert!(
        everything[2].contains("a credential passed with --header"),
        "the leak is reported"
    );
}

/// A parallel run's JSON report is the serial run's, record for record and in the same order,
/// but for the time each trial took: on the embedded default (the witness and the gate, over
/// HTTP and stdio, each downstream personality, a legacy and the modern version), a third of
/// the catalogue.
#[test]
fn reports_do_not_depend_on_the_number_of_jobs() {
    let report = |jobs: &str| -> serde_json::Value {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        let out = Command::new(bin())
            .args(["run", "--spec", "2025-11-25,2026-07-28", "--shard", "1/3"])
            .args(["--jobs", jobs, "--report"])
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(i32::from(exit::SUCCESS)),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for r in v["results"].as_array_mut().unwrap() {
            r.as_object_mut().unwrap().remove("elapsed_ms");
            // Measured quantities vary from run to run as times do (how many 64 KiB POSTs a
            // server took before its queue was full depends on how fast it drained it): their
            // numbers are blanked, their checks and statuses still compared.
            for f in r["findings"].as_array_mut().into_iter().flatten() {
                let measured = matches!(
                    f["check"].as_str(),
                    Some("resources" | "memory" | "cpu" | "latency" | "series")
                );
                if let (true, Some(text)) = (measured, f["message"].as_str()) {
                    let blanked: String = text
                        .chars()
                        .map(|c| if c.is_ascii_digit() { '#' } else { c })
                        .collect();
                    f["message"] = serde_json::Value::String(blanked);
                }
            }
        }
        v
    };
    let serial = report("1");
    let parallel = report("8");
    let results = serial["results"].as_array().unwrap();
    assert!(results.len() > 300, "{} records", results.len());
    let lanes: BTreeSet<String> = results
        .iter()
        .map(|r| format!("{} {} {}", r["transport"], r["profile"], r["downstream"]))
        .collect();
    assert!(lanes.len() >= 6, "every kind of lane ran: {lanes:?}");
    if serial != parallel {
        let (s, p) = (
            serial["results"].as_array().unwrap(),
            parallel["results"].as_array().unwrap(),
        );
        let first = s.iter().zip(p).position(|(a, b)| a != b);
        panic!(
            "the reports differ ({} and {} records); first difference at {first:?}:\n{}\n{}",
            s.len(),
            p.len(),
            first.map_or(String::new(), |i| s[i].to_string()),
            first.map_or(String::new(), |i| p[i].to_string()),
        );
    }
}

/// A run limited to the advisory cases names the advisories in the JSON report, JUnit and the
/// matrix, and ends with the ones the target reproduced: a witness that checks no Origin, said
/// to be the Java SDK (`--package`), reproduces the Java SDK's Origin advisory; the same
/// weakness is only "as in" the Python SDK's, and the Content-Type one it still refuses is not
/// reproduced.
#[test]
fn advisories_are_named_everywhere_and_the_run_ends_with_the_ones_reproduced() {
    let w = HttpWitness::start(&["no-origin"], None);
    let dir = tempfile::tempdir().unwrap();
    let (report, junit) = (dir.path().join("r.json"), dir.path().join("j.xml"));
    let out = Command::new(bin())
        .args([
            "run",
            "--http",
            &w.url,
            "--spec",
            "2025-11-25",
            "--advisories",
            "--package",
            "Maven:io.modelcontextprotocol.sdk:mcp-core",
        ])
        .arg("--report")
        .arg(&report)
        .arg("--junit")
        .arg(&junit)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(i32::from(exit::CASES_FAILED)),
        "{stdout}"
    );
    let line = |prefix: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line `{prefix}` in:\n{stdout}"))
            .to_string()
    };
    assert!(line("  REPRODUCED CVE-2026-35568 (GHSA-8jxr-pr72-r468)").contains("Origin"));
    assert!(line("  WEAKNESS as in CVE-2025-66416 (PyPI mcp)").contains("Origin"));
    assert!(
        !stdout.contains("REPRODUCED CVE-2025-66416"),
        "another package's advisory is never REPRODUCED here: {stdout}"
    );
    assert!(
        stdout.contains("    by headers/origin-foreign-host [http 2025-11-25]"),
        "{stdout}"
    );
    assert!(
        line("  not reproduced: ").contains("CVE-2026-33252"),
        "text/plain is still refused"
    );
    // Every trial of the run cites an advisory, and its record says which.
    let parsed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let results = parsed["results"].as_array().unwrap();
    assert!(!results.is_empty());
    assert!(results
        .iter()
        .all(|r| r["advisories"].as_array().is_some_and(|a| !a.is_empty())));
    let origin = results
        .iter()
        .find(|r| r["id"] == "headers/origin-foreign-host")
        .unwrap();
    assert!(origin["advisories"]
        .as_array()
        .unwrap()
        .contains(&"CVE-2026-35568".into()));
    assert!(origin["explanation"]
        .as_str()
        .unwrap()
        .contains("advisories: CVE-2026-35568"));
    advisories_in_junit_and_the_matrix(&junit, &report);
}

/// The advisory run's JUnit carries `advisory` properties, its matrix the advisories table.
fn advisories_in_junit_and_the_matrix(junit: &std::path::Path, report: &std::path::Path) {
    let text = std::fs::read_to_string(junit).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("JUnit parses as XML");
    let case = doc
        .descendants()
        .find(|n| {
            n.has_tag_name("testcase") && n.attribute("name") == Some("headers/origin-foreign-host")
        })
        .unwrap();
    assert!(case.descendants().any(|p| p.has_tag_name("property")
        && p.attribute("name") == Some("advisory")
        && p.attribute("value") == Some("CVE-2026-35568")));
    assert!(case.children().any(|c| c.has_tag_name("failure")));
    let out = Command::new(bin())
        .args(["matrix", &format!("lax={}", report.display())])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    let row = |id: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("| {id} ")))
            .unwrap_or_else(|| panic!("no advisory row {id}:\n{table}"))
            .to_string()
    };
    assert!(
        row("CVE-2026-35568").ends_with("| **REPRODUCED** |"),
        "{table}"
    );
    assert!(
        row("CVE-2026-33252").ends_with("| not reproduced |"),
        "{table}"
    );
    assert!(row("CVE-2025-66416").ends_with("| **as in** |"), "{table}");
    assert!(
        table.contains("MCP-SEC-LOCAL-01; advisories: CVE-2026-35568, CVE-2025-66416"),
        "{table}"
    );
}

/// An advisory the catalogue does not know is a usage error, and a refusal that is only
/// shaped wrong does not count as the advisory reproduced.
#[test]
fn advisory_selection_and_what_counts_as_reproduced() {
    assert_eq!(
        run(&["--advisory", "CVE-2099-0001"]),
        i32::from(exit::USAGE)
    );
    use mcp_gauntlet::case::Level;
    use mcp_gauntlet::report::{shows, Check, TrialVerdict};
    let find = |id| mcp_gauntlet::advisory::find(id).unwrap();
    // A foreign Origin served: the Origin advisory is about what was served (outcome, canary).
    let origin = find("CVE-2026-35568");
    let fail = TrialVerdict::Fail;
    assert!(shows(
        origin,
        fail,
        Level::Must,
        [Check::HttpStatus, Check::Canary].into_iter()
    ));
    assert!(!shows(
        origin,
        fail,
        Level::Must,
        [Check::Shape, Check::Id, Check::HttpStatus].into_iter()
    ));
    assert!(shows(
        origin,
        TrialVerdict::Known,
        Level::Must,
        [Check::Outcome].into_iter()
    ));
    assert!(
        !shows(
            origin,
            TrialVerdict::Warn,
            Level::Must,
            [Check::Outcome].into_iter()
        ),
        "a prefer miss"
    );
    assert!(!shows(
        origin,
        TrialVerdict::Stale,
        Level::Must,
        [Check::Outcome].into_iter()
    ));
    let sessions = find("GHSA-84m7-p3x7-pcfv");
    assert!(shows(
        sessions,
        TrialVerdict::Warn,
        Level::Should,
        [Check::Memory].into_iter()
    ));
    // The crossed-answers advisory is about answers reaching another client: a framework that
    // refused the eight clients with 404 (outcome failed, crossed passed) does not show it.
    let crossed = find("CVE-2026-25536");
    assert!(!shows(
        crossed,
        fail,
        Level::Must,
        [Check::Outcome, Check::HttpStatus].into_iter()
    ));
    assert!(shows(
        crossed,
        fail,
        Level::Must,
        [Check::Crossed].into_iter()
    ));
}

/// Run `mcp-gauntlet run ARGS --sarif FILE -- LIBTEST` and return the SARIF log read back.
fn sarif_of(args: &[&str], libtest: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.sarif");
    let out = Command::new(bin())
        .arg("run")
        .args(args)
        .arg("--sarif")
        .arg(&path)
        .arg("--")
        .args(libtest)
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("no SARIF: {}", String::from_utf8_lossy(&out.stderr)));
    serde_json::from_str(&text).expect("SARIF is JSON")
}

/// Every schema violation of `log` against SARIF 2.1.0 (the OASIS schema, errata 01, as
/// published: tests/fixtures/sarif-schema-2.1.0.json).
fn sarif_schema_errors(log: &serde_json::Value) -> Vec<String> {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/sarif-schema-2.1.0.json")).unwrap();
    let validator = jsonschema::draft4::new(&schema).expect("the SARIF schema compiles");
    validator
        .iter_errors(log)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// `ruleId|fingerprint` of every result, sorted.
fn fingerprints(log: &serde_json::Value) -> Vec<String> {
    let mut out: Vec<String> = log["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}|{}",
                r["ruleId"].as_str().unwrap(),
                r["partialFingerprints"]["mcpGauntletTrial/v1"]
                    .as_str()
                    .unwrap()
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn sarif_is_valid_links_each_finding_to_its_case_and_keeps_fingerprints_across_runs() {
    // The embedded default (a slice of it): valid, and no result, since nothing fails.
    let clean = sarif_of(&[], &["batch/"]);
    assert_eq!(sarif_schema_errors(&clean), Vec::<String>::new());
    assert_eq!(clean["version"], "2.1.0");
    assert_eq!(
        clean["runs"][0]["results"].as_array().map(Vec::len),
        Some(0)
    );
    assert!(
        !clean["runs"][0]["tool"]["driver"]["rules"]
            .as_array()
            .unwrap()
            .is_empty(),
        "every case run is a rule, failing or not"
    );

    // A witness that executes batches: every finding a result, valid, linked, stable.
    let w = HttpWitness::start(&["batch"], None);
    let args = ["--http", w.url.as_str(), "--spec", "2025-11-25"];
    let first = sarif_of(&args, &["batch/"]);
    assert_eq!(sarif_schema_errors(&first), Vec::<String>::new());
    let run = &first["runs"][0];
    let results = run["results"].as_array().unwrap();
    assert!(!results.is_empty(), "the batch witness fails batch cases");
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    for r in results {
        let id = r["ruleId"].as_str().unwrap();
        let rule = &rules[usize::try_from(r["ruleIndex"].as_u64().unwrap()).unwrap()];
        assert_eq!(rule["id"], id, "ruleIndex points at the result's rule");
        assert!(matches!(r["level"].as_str(), Some("error" | "warning")));
        let uri = r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            .as_str()
            .unwrap();
        assert_eq!(uri, format!("cases/{id}.json"), "the case file, relative");
        assert!(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(uri)
                .is_file(),
            "{uri} is a file a reader can open"
        );
        assert!(r["message"]["text"]
            .as_str()
            .unwrap()
            .contains("2025-11-25"));
    }
    let tags = rules[0]["properties"]["tags"].as_array().unwrap();
    assert!(
        tags.iter()
            .any(|t| t.as_str().is_some_and(|t| t.starts_with("MCP-")
                || t.starts_with("JSONRPC-")
                || t.starts_with("GATE-"))),
        "requirement ids are tags: {tags:?}"
    );
    assert!(
        rules[0]["help"]["text"]
            .as_str()
            .unwrap()
            .contains("acceptable"),
        "the help text holds the acceptable set"
    );
    let mut bad = first.clone();
    bad["runs"][0]["results"][0]["level"] = "fatal".into();
    assert!(
        !sarif_schema_errors(&bad).is_empty(),
        "the validator refuses what the schema forbids"
    );
    let second = sarif_of(&args, &["batch/"]);
    assert_eq!(
        fingerprints(&first),
        fingerprints(&second),
        "reruns do not duplicate alerts"
    );
    let unique: BTreeSet<String> = fingerprints(&first).into_iter().collect();
    assert_eq!(
        unique.len(),
        results.len(),
        "one fingerprint per case and lane"
    );
}

/// Every advisory names the oracles its bug shows on, each one the suite has.
#[test]
fn every_advisory_names_checks_the_oracles_have() {
    use mcp_gauntlet::report::Check;
    for a in mcp_gauntlet::advisory::catalogue() {
        assert!(!a.checks.is_empty(), "{} names no checks", a.id);
        for name in &a.checks {
            let check: Check = serde_json::from_value(serde_json::json!(name))
                .unwrap_or_else(|_| panic!("{}: `{name}` is not an oracle", a.id));
            assert_eq!(check.as_str(), name, "{}", a.id);
        }
    }
}
