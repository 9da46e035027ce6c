//! Targets as data and the campaign: the repository's target files are valid, a bad one is
//! pointed at, a new PyPI package is one file (installed offline from a local stand-in for the
//! registry), an unreachable registry skips rather than fails, a campaign killed half-way runs
//! only what is missing when started again, and two shards merged give the one run's matrix.

use crate::util::bin;
use mcp_gauntlet::campaign::{self, Problem, TargetError};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The witness as a target of its own, started by the campaign over HTTP and stdio: a
/// `command` recipe (already on the machine), a few cases each (`-- batch/`).
const WITNESS_TARGET: &str = r#"{
  "about": "The suite's witness, as a server of its own.",
  "package": "mcp-gauntlet",
  "ecosystem": "none",
  "install": {"kind": "command"},
  "lanes": [
    {"kind": "http", "command": "{gauntlet} witness --http 127.0.0.1:{port}"},
    {"kind": "stdio", "command": "{gauntlet} witness --stdio"},
    {"name": "http-2", "kind": "http", "command": "{gauntlet} witness --http 127.0.0.1:{port}"}
  ]
}"#;

fn campaign(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(bin());
    cmd.arg("campaign").args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the campaign runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn folder_with(name: &str, body: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary folder");
    std::fs::write(dir.path().join(name), body).expect("the target file is written");
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

#[test]
fn the_repository_target_files_are_valid_and_name_every_peer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("targets");
    let targets = campaign::load_dir(&root).expect("every target file is valid");
    let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
    for peer in [
        "everything",
        "fastmcp",
        "policy-gateway",
        "python",
        "reference",
        "rust",
        "typescript",
    ] {
        assert!(
            names.contains(&peer),
            "no target file for {peer}: {names:?}"
        );
    }
    // The advisory rows: every advisory the table had, each on the package it is about (the
    // checks of `load_dir`), over the Python, TypeScript and Rust SDKs.
    let rows = campaign::load_dir(&root.join("advisories")).expect("every advisory file is valid");
    let mut ids: Vec<&str> = rows
        .iter()
        .flat_map(|t| t.spec.advisories.iter().map(|a| a.id.as_str()))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids,
        [
            "CVE-2025-66416",
            "CVE-2026-0621",
            "CVE-2026-25536",
            "CVE-2026-42559",
            "CVE-2026-52869",
            "GHSA-84m7-p3x7-pcfv"
        ]
    );
    // The ecosystem survey: fifty packages or more from npm and PyPI, none of those kept for
    // the suite's own checks, each pinned (the checks of `load_dir`), and the left-out list.
    let survey = campaign::load_dir(&root.join("ecosystem")).expect("every survey file is valid");
    assert!(survey.len() >= 50, "{} packages", survey.len());
    for t in &survey {
        assert!(
            matches!(t.spec.ecosystem.as_str(), "npm" | "PyPI"),
            "{}: not from npm or PyPI",
            t.name
        );
        for kept in [
            "supergateway",
            "mcp-framework",
            "agent-mcp-gateway",
            "mcp-gateway",
            "mcp-firewall",
            "mcp-fw",
        ] {
            assert_ne!(
                t.spec.package, kept,
                "{} is kept for our own checks",
                t.name
            );
        }
        let npm_kept = ["mcp-proxy", "fastmcp"];
        assert!(
            !(t.spec.ecosystem.as_str() == "npm" && npm_kept.contains(&t.spec.package.as_str())),
            "{} is kept for our own checks",
            t.name
        );
    }
    assert!(root.join("ecosystem/left-out.md").is_file());
    // The committed schema is the model's.
    let committed = std::fs::read_to_string(root.join("schema.json")).expect("targets/schema.json");
    assert_eq!(
        committed,
        campaign::schema_json(),
        "targets/schema.json is stale: mcp-gauntlet schema --targets > targets/schema.json"
    );
}

#[test]
fn a_bad_target_file_is_pointed_at_by_line_and_column() {
    // The release the file says is not the one its requirements pin.
    let dir = tempfile::tempdir().expect("a temporary folder");
    std::fs::write(dir.path().join("requirements.txt"), "mcp==2.3.0\n").expect("written");
    let body = "{\n  \"about\": \"x\",\n  \"package\": \"mcp\",\n  \"ecosystem\": \"PyPI\",\n  \"release\": \"2.3.1\",\n  \"install\": {\"kind\": \"pypi\", \"requirements\": \"requirements.txt\"},\n  \"lanes\": [{\"kind\": \"stdio\", \"command\": \"{python} server.py\"}]\n}\n";
    std::fs::write(dir.path().join("mcp.json"), body).expect("written");
    match campaign::load_dir(dir.path()) {
        Err(TargetError::Invalid {
            line,
            column,
            problem: Problem::Pin { .. },
            ..
        }) => assert_eq!((line, column), (6, 47)),
        other => panic!("want a pin problem, got {other:?}"),
    }
    // A lane whose command lacks its port, and one with a placeholder no one fills.
    let no_port = WITNESS_TARGET.replace("127.0.0.1:{port}\"}", "127.0.0.1:1\"}");
    let dir = folder_with("w.json", &no_port);
    assert!(matches!(
        campaign::load_dir(dir.path()),
        Err(TargetError::Invalid {
            problem: Problem::MissingPlaceholder {
                placeholder: "port",
                ..
            },
            ..
        })
    ));
    let unknown = WITNESS_TARGET.replace("witness --stdio", "witness --stdio {nope}");
    let dir = folder_with("w.json", &unknown);
    assert!(matches!(
        campaign::load_dir(dir.path()),
        Err(TargetError::Invalid {
            problem: Problem::UnknownPlaceholder { .. },
            ..
        })
    ));
    // A member the format does not have: the parser's own line and column.
    let dir = folder_with("w.json", &WITNESS_TARGET.replace("\"about\"", "\"abut\""));
    assert!(matches!(
        campaign::load_dir(dir.path()),
        Err(TargetError::Syntax { line: 2, .. })
    ));
    // Two files that make one column (here: one name twice) are refused.
    let dir = folder_with("w.json", WITNESS_TARGET);
    std::fs::create_dir(dir.path().join("w")).expect("made");
    std::fs::write(dir.path().join("w/target.json"), WITNESS_TARGET).expect("written");
    assert!(matches!(
        campaign::load_dir(dir.path()),
        Err(TargetError::SameColumn { .. })
    ));
    // check-targets says so, with its exit code.
    let out = Command::new(bin())
        .args(["check-targets", s(dir.path())])
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(i32::from(mcp_gauntlet::exit::SETUP_FAILED))
    );
}

/// A target of advisory rows, `mcp` on PyPI as CVE-2025-66416 is: each release a script beside
/// it that starts the witness (the affected one without its Origin check).
const ADVISORY_TARGET: &str = r#"{
  "about": "Stand-ins for two releases of the package an advisory names.",
  "package": "mcp",
  "ecosystem": "PyPI",
  "install": {"kind": "command"},
  "lanes": [{"kind": "http", "command": "sh {dir}/peer-{release}.sh {gauntlet} {port}"}],
  "advisories": [{"id": "CVE-2025-66416", "affected": "1.22.0", "fixed": "1.23.0", "lane": "http"}]
}"#;

fn advisory_folder(fixed_is_broken: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let at = dir.path().join("mcp");
    std::fs::create_dir(&at).expect("made");
    std::fs::write(at.join("target.json"), ADVISORY_TARGET).expect("written");
    let script = |broken: bool| {
        format!(
            "exec \"$1\" witness --http \"127.0.0.1:$2\"{}\n",
            if broken { " --broken no-origin" } else { "" }
        )
    };
    std::fs::write(at.join("peer-1.22.0.sh"), script(true)).expect("written");
    std::fs::write(at.join("peer-1.23.0.sh"), script(fixed_is_broken)).expect("written");
    dir
}

#[test]
fn an_advisory_row_reproduces_on_the_affected_release_and_not_on_the_fixed_one() {
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let out = scratch.path().join("out");
    let targets = advisory_folder(false);
    let o = campaign(&[s(targets.path()), "--out", s(&out)], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let record = |release: &str| -> campaign::AdvisoryRecord {
        let path = out.join(format!("mcp-{release}-CVE-2025-66416.advisory.json"));
        serde_json::from_str(&std::fs::read_to_string(path).expect("a record")).expect("JSON")
    };
    assert_eq!(record("1.22.0").got, campaign::Shown::Reproduced);
    assert_eq!(record("1.23.0").got, campaign::Shown::Clean);
    let table = std::fs::read_to_string(out.join("advisories.md")).expect("the table");
    assert_eq!(table.matches("| ok |").count(), 2, "{table}");
    // The rows are not a matrix: no columns of them.
    assert!(!out.join("matrix.json").exists());
    // A fixed release that still serves a foreign Origin is a wrong row, and the campaign fails.
    let targets = advisory_folder(true);
    let o = campaign(&[s(targets.path()), "--out", s(&out)], &[]);
    assert_eq!(
        o.status.code(),
        Some(i32::from(mcp_gauntlet::exit::CASES_FAILED)),
        "{}",
        text(&o)
    );
    assert_eq!(record("1.23.0").got, campaign::Shown::Reproduced);
    let table = std::fs::read_to_string(out.join("advisories.md")).expect("the table");
    assert!(table.contains("| clean | reproduced | WRONG |"), "{table}");
}

#[test]
fn an_advisory_row_is_checked_against_the_catalogue() {
    let check = |edit: &dyn Fn(&str) -> String| {
        let dir = advisory_folder(false);
        let file = dir.path().join("mcp/target.json");
        std::fs::write(&file, edit(ADVISORY_TARGET)).expect("written");
        campaign::load_dir(dir.path())
    };
    let problem = |r: Result<Vec<campaign::TargetFile>, TargetError>| match r {
        Err(TargetError::Invalid { problem, .. }) => problem,
        other => panic!("want a problem, got {other:?}"),
    };
    assert!(check(&|t| t.to_string()).is_ok());
    assert_eq!(
        problem(check(&|t| t.replace("CVE-2025-66416", "CVE-2025-1"))),
        Problem::UnknownAdvisory("CVE-2025-1".into())
    );
    // The fixed release inside the affected range, the affected one outside it.
    assert!(matches!(
        problem(check(&|t| t.replace("\"1.23.0\"", "\"1.22.5\""))),
        Problem::OutsideRange {
            role: campaign::Role::Fixed,
            ..
        }
    ));
    assert!(matches!(
        problem(check(&|t| t.replace("\"1.22.0\"", "\"1.23.1\""))),
        Problem::OutsideRange {
            role: campaign::Role::Affected,
            ..
        }
    ));
    // Another package's advisory; a release of its own; a lane not there.
    assert!(matches!(
        problem(check(&|t| t.replace("\"mcp\"", "\"fastmcp\""))),
        Problem::AdvisoryPackage { .. }
    ));
    assert_eq!(
        problem(check(
            &|t| t.replace("\"install\"", "\"release\": \"1.22.0\", \"install\"")
        )),
        Problem::AdvisoryRelease
    );
    assert_eq!(
        problem(check(
            &|t| t.replace("\"lane\": \"http\"", "\"lane\": \"sse\"")
        )),
        Problem::UnknownLane("sse".into())
    );
}

/// A wheel of a package `gauntlet-standin` 0.1.0 (a module that runs its first argument, here
/// the suite's witness): a stand-in for a server package on PyPI, built without the network.
fn standin_wheel(dir: &Path) {
    let script = r#"
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1] + '/gauntlet_standin-0.1.0-py3-none-any.whl', 'w')
z.writestr('gauntlet_standin.py', 'import os, sys\nos.execv(sys.argv[1], sys.argv[1:])\n')
info = 'gauntlet_standin-0.1.0.dist-info/'
z.writestr(info + 'METADATA', 'Metadata-Version: 2.1\nName: gauntlet-standin\nVersion: 0.1.0\n')
z.writestr(info + 'WHEEL', 'Wheel-Version: 1.0\nGenerator: mcp-gauntlet-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n')
z.writestr(info + 'RECORD', '')
z.close()
"#;
    let ok = Command::new("python3")
        .args(["-c", script, s(dir)])
        .status()
        .is_ok_and(|st| st.success());
    assert!(ok, "the stand-in wheel is built");
}

/// The new package's whole description: one file.
const STANDIN_TARGET: &str = r#"{
  "about": "A PyPI server package not in CI (a stand-in that runs the witness).",
  "package": "gauntlet-standin",
  "ecosystem": "PyPI",
  "release": "0.1.0",
  "install": {"kind": "pypi", "packages": ["gauntlet-standin==0.1.0"]},
  "lanes": [
    {"kind": "http", "command": "{python} -m gauntlet_standin {gauntlet} witness --http 127.0.0.1:{port}"},
    {"kind": "stdio", "command": "{python} -m gauntlet_standin {gauntlet} witness --stdio"}
  ]
}"#;

/// Whether `python3 -m venv` works here (the pypi recipe needs it).
fn venv_works(scratch: &Path) -> bool {
    let ok = Command::new("python3")
        .args(["-m", "venv", s(&scratch.join("probe-venv"))])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        crate::util::skip("python3 -m venv does not work here; the pypi recipe needs it");
    }
    ok
}

#[test]
fn a_new_pypi_package_is_one_target_file() {
    let scratch = tempfile::tempdir().expect("a temporary folder");
    if !crate::util::python3("the stand-in package") || !venv_works(scratch.path()) {
        return;
    }
    let index = scratch.path().join("index");
    std::fs::create_dir_all(&index).expect("made");
    standin_wheel(&index);
    let targets = folder_with("standin.json", STANDIN_TARGET);
    let (out, cache) = (scratch.path().join("out"), scratch.path().join("cache"));
    // The registry is a folder: pip reads these variables itself, and no network is used.
    let env = [("PIP_NO_INDEX", "1"), ("PIP_FIND_LINKS", s(&index))];
    let o = campaign(
        &[
            s(targets.path()),
            "--out",
            s(&out),
            "--cache",
            s(&cache),
            "--",
            "batch/",
        ],
        &env,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let matrix: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("matrix.json")).expect("matrix"))
            .expect("JSON");
    let columns: Vec<&str> = matrix["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .map(|t| {
            assert_eq!(t["package"], "gauntlet-standin");
            assert_eq!(t["release"], "0.1.0");
            t["column"].as_str().expect("a column")
        })
        .collect();
    assert_eq!(columns, ["standin-http", "standin-stdio"]);
    // Each lane ran its cases on the installed package, and they passed.
    for c in &matrix["columns"].as_array().expect("columns")[..] {
        assert!(c["pass"].as_u64().expect("a count") > 0, "{c}");
        assert_eq!(c["fail"], 0, "{c}");
    }
    let md = std::fs::read_to_string(out.join("matrix.md")).expect("matrix.md");
    assert!(
        md.contains("| standin-http | PyPI `gauntlet-standin` | 0.1.0 | http |"),
        "{md}"
    );
}

#[test]
fn an_unreachable_registry_skips_the_target_and_fails_nothing() {
    let scratch = tempfile::tempdir().expect("a temporary folder");
    if !crate::util::python3("the pypi recipe") || !venv_works(scratch.path()) {
        return;
    }
    // A registry on a loopback port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a port")
        .port();
    let url = format!("http://127.0.0.1:{port}/simple");
    let targets = folder_with("standin.json", STANDIN_TARGET);
    let (out, cache) = (scratch.path().join("out"), scratch.path().join("cache"));
    let env = [
        ("PIP_INDEX_URL", url.as_str()),
        ("PIP_RETRIES", "0"),
        ("PIP_TIMEOUT", "2"),
    ];
    let args = [
        s(targets.path()),
        "--out",
        s(&out),
        "--cache",
        s(&cache),
        "--",
        "batch/",
    ];
    // Beside a target that is tested, the skip fails nothing.
    std::fs::write(targets.path().join("witness.json"), WITNESS_TARGET).expect("written");
    let o = campaign(&args, &env);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("SKIP standin: the PyPI registry"),
        "{}",
        text(&o)
    );
    // The skipped target's lane has a record that says why (the ecosystem pages show it as
    // could-not-test), never a report: it is no column.
    let record = std::fs::read_to_string(out.join("standin-http.lane.json"))
        .expect("a record of the skipped lane");
    let record: serde_json::Value = serde_json::from_str(&record).expect("a lane record");
    assert_eq!(record["outcome"], "untestable", "{record}");
    assert!(!out.join("standin-http.json").exists());
    assert!(out.join("witness-http.lane.json").exists());
    // Alone, nothing was tested: not a pass.
    std::fs::remove_file(targets.path().join("witness.json")).expect("removed");
    let o = campaign(&args, &env);
    assert_eq!(
        o.status.code(),
        Some(i32::from(mcp_gauntlet::exit::UNTESTABLE)),
        "{}",
        text(&o)
    );
}

/// Every `*.lane.json` of `out`, by name, with its text.
fn lane_records(out: &Path) -> std::collections::BTreeMap<String, String> {
    std::fs::read_dir(out)
        .expect("the folder")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| s(p).ends_with(".lane.json"))
        .map(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (name, std::fs::read_to_string(&p).expect("readable"))
        })
        .collect()
}

#[test]
fn a_campaign_killed_half_way_runs_only_what_is_missing() {
    let targets = folder_with("witness.json", WITNESS_TARGET);
    let out = tempfile::tempdir().expect("a temporary folder");
    let args = [s(targets.path()), "--out", s(out.path()), "--", "batch/"];
    // Killed (SIGKILL) in its stdio lane, just after its first lane (HTTP) ended and stopped
    // its server: the stdio witnesses it started end at their input's end.
    let mut child = Command::new(bin())
        .arg("campaign")
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starts");
    // Killed as soon as its first lane is done.
    let end = Instant::now() + Duration::from_secs(120);
    while lane_records(out.path()).is_empty() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let first = lane_records(out.path());
    assert!(!first.is_empty(), "no lane finished in 120 s");
    let o = campaign(&args, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let after = lane_records(out.path());
    assert_eq!(after.len(), 3, "{after:?}");
    // What was done is not run again: its record is the same, byte for byte.
    for (name, record) in &first {
        assert_eq!(after.get(name), Some(record), "{name} ran again");
        let column = name.trim_end_matches(".lane.json");
        assert!(
            text(&o).contains(&format!("== {column}: done already")),
            "{}",
            text(&o)
        );
    }
    // And a third start runs nothing.
    let o = campaign(&args, &[]);
    assert_eq!(text(&o).matches("done already").count(), 3, "{}", text(&o));
    assert_eq!(lane_records(out.path()), after);
}

#[test]
fn two_shards_merged_give_the_matrix_of_one_run() {
    let targets = folder_with("witness.json", WITNESS_TARGET);
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let dir = |n: &str| -> PathBuf { scratch.path().join(n) };
    let t = s(targets.path());
    let one = campaign(&[t, "--out", s(&dir("one")), "--", "batch/"], &[]);
    assert_eq!(one.status.code(), Some(0), "{}", text(&one));
    for k in ["1/2", "2/2"] {
        let out = dir(&format!("shard{}", &k[..1]));
        let o = campaign(&[t, "--out", s(&out), "--shard", k, "--", "batch/"], &[]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
    // The shards split the lanes: neither ran them all.
    assert_eq!(lane_records(&dir("shard1")).len(), 2);
    assert_eq!(lane_records(&dir("shard2")).len(), 1);
    let o = campaign(
        &[
            "merge",
            "--targets",
            t,
            "--out",
            s(&dir("merged")),
            s(&dir("shard1")),
            s(&dir("shard2")),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // One shard alone is not the campaign: said, and not written as the published matrix.
    let published = dir("published.md");
    let o = campaign(
        &[
            "merge",
            "--targets",
            t,
            "--out",
            s(&dir("half")),
            "--matrix",
            s(&published),
            s(&dir("shard1")),
        ],
        &[],
    );
    assert_eq!(
        o.status.code(),
        Some(i32::from(mcp_gauntlet::exit::INCOMPLETE)),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("witness-stdio"), "{}", text(&o));
    assert!(!published.exists());
    for f in ["matrix.md", "matrix.json", "matrix.html"] {
        let a = std::fs::read_to_string(dir("one").join(f)).expect("one run's");
        let b = std::fs::read_to_string(dir("merged").join(f)).expect("the merge's");
        assert_eq!(a, b, "{f} differs");
    }
    let md = std::fs::read_to_string(dir("one").join("matrix.md")).expect("matrix.md");
    assert!(
        md.contains("| witness-http | the suite's own | - | http |"),
        "{md}"
    );
}

/// A target that fronts the witness (`fronts_witness`) is loaded after its cases, and so is the
/// reference gate in front of the same witness: both records kept, every answer counted, and
/// the ecosystem pages make a column and a section of it.
#[test]
fn a_gateway_is_loaded_side_by_side_with_the_reference_gate() {
    let body = r#"{
  "about": "A stand-in gateway: the witness itself, serving HTTP.",
  "package": "mcp-gauntlet",
  "ecosystem": "none",
  "install": {"kind": "command"},
  "lanes": [{"kind": "http", "command": "{gauntlet} witness --http 127.0.0.1:{port}"}],
  "fronts_witness": {"concurrency": 2, "requests": 40}
}"#;
    let dir = folder_with("gw.json", body);
    let out = tempfile::tempdir().expect("a temporary folder");
    let pages = tempfile::tempdir().expect("a temporary folder");
    let o = campaign(
        &[
            s(dir.path()),
            "--out",
            s(out.path()),
            "--ecosystem",
            s(pages.path()),
            "--",
            "batch/",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let side: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("gw-http.side.json")).expect("a side record"),
    )
    .expect("the record parses");
    for who in ["gateway", "reference"] {
        let m = &side[who]["Ok"];
        assert_eq!(m["sent"], 40, "{who}: {side}");
        assert_eq!(m["ok"], 40, "{who}: {side}");
        assert_eq!((&m["wrong"], &m["lost"]), (&0.into(), &0.into()), "{side}");
    }
    let readme = std::fs::read_to_string(pages.path().join("README.md")).expect("the index");
    assert!(
        readme.contains("| vs the reference gate (load) |"),
        "{readme}"
    );
    assert!(readme.contains("× throughput, p50 "), "{readme}");
    let page =
        std::fs::read_to_string(pages.path().join("packages/gw.md")).expect("the package page");
    assert!(
        page.contains("## Side by side with the reference gate"),
        "{page}"
    );
    assert!(page.contains("× the reference gate's throughput"), "{page}");
}
