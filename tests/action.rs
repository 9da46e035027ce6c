//! The GitHub Action (`action.yml`): its steps run here as a runner runs a composite action's
//! steps, from the file itself. Each `run:` step goes to `bash --noprofile --norc -eo pipefail`
//! with the variables GitHub sets (`GITHUB_ACTION_PATH`, `GITHUB_OUTPUT`, `GITHUB_PATH`,
//! `GITHUB_STEP_SUMMARY`, `RUNNER_*`), its `env:` and `${{ }}` expressions filled in from the
//! inputs and the earlier steps' outputs (an expression this runner does not know fails the
//! test, so the action cannot quietly depend on one), and the folders earlier steps added to
//! `GITHUB_PATH` on its PATH. The two `uses:` steps are played: the cache restores a built
//! suite or nothing, the upload takes the SARIF file the run step named. `cargo` is a stand-in
//! that records its arguments, so the test checks the install command without a second build.

use crate::util::{bin, HttpWitness};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn action() -> serde_json::Value {
    let text = std::fs::read_to_string(root().join("action.yml")).expect("action.yml");
    yaml_serde::from_str(&text).expect("action.yml is YAML")
}

/// One job's run of the action: the runner's folders, and what its steps left.
struct Job {
    dir: tempfile::TempDir,
    inputs: BTreeMap<String, String>,
    /// Step id -> its outputs.
    outputs: BTreeMap<String, BTreeMap<String, String>>,
    /// What the steps appended to `GITHUB_PATH`, in order.
    path: Vec<String>,
    /// Whether the cache step finds a suite built from these sources (a second job).
    cache: Option<PathBuf>,
    /// The SARIF file the upload step was given, if it ran.
    uploaded: Option<String>,
    /// The built binary the cache-save step keeps, if it ran.
    saved: Option<PathBuf>,
    /// The exit status of the first step that failed, if any.
    failed: Option<i32>,
}

impl Job {
    fn new(inputs: &[(&str, &str)]) -> Job {
        let dir = tempfile::tempdir().expect("a temporary folder");
        for d in ["work", "temp", "tool-cache", "fake-bin"] {
            std::fs::create_dir_all(dir.path().join(d)).expect("a runner folder");
        }
        // The stand-in `cargo`: records its arguments, then installs the suite built for these
        // tests where `--root` says.
        let fake = dir.path().join("fake-bin/cargo");
        std::fs::write(
            &fake,
            format!(
                "#!/bin/sh\necho \"$@\" >> \"{log}\"\nwhile [ $# -gt 0 ]; do [ \"$1\" = --root ] && root=$2; shift; done\nmkdir -p \"$root/bin\" && cp \"{bin}\" \"$root/bin/mcp-gauntlet\"\n",
                log = dir.path().join("cargo.log").display(),
                bin = bin().display()
            ),
        )
        .expect("the stand-in cargo");
        std::process::Command::new("chmod")
            .args(["+x"])
            .arg(&fake)
            .status()
            .expect("chmod");
        let mut job = Job {
            dir,
            inputs: BTreeMap::new(),
            outputs: BTreeMap::new(),
            path: Vec::new(),
            cache: None,
            uploaded: None,
            saved: None,
            failed: None,
        };
        // Every input's default, then the job's values.
        if let Some(all) = action()["inputs"].as_object() {
            for (name, spec) in all {
                let default = spec["default"].as_str().unwrap_or("").to_string();
                job.inputs.insert(name.clone(), default);
            }
        }
        for (k, v) in inputs {
            assert!(job.inputs.contains_key(*k), "action.yml has no input {k}");
            job.inputs.insert((*k).to_string(), (*v).to_string());
        }
        job
    }

    fn at(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// `text` with every `${{ }}` expression replaced.
    fn fill(&self, text: &str) -> String {
        let re = regex::Regex::new(r"\$\{\{\s*([^}]*?)\s*\}\}").expect("a regex");
        re.replace_all(text, |c: &regex::Captures| {
            let e = &c[1];
            if let Some(name) = e.strip_prefix("inputs.") {
                self.inputs
                    .get(name)
                    .unwrap_or_else(|| panic!("no input {name}"))
                    .clone()
            } else if let Some(rest) = e.strip_prefix("steps.") {
                let (id, out) = rest
                    .split_once(".outputs.")
                    .unwrap_or_else(|| panic!("not a step output: {e}"));
                self.outputs
                    .get(id)
                    .and_then(|o| o.get(out))
                    .cloned()
                    .unwrap_or_default()
            } else if e == "github.action_path" {
                root().display().to_string()
            } else {
                panic!("an expression this runner does not evaluate: {e}")
            }
        })
        .into_owned()
    }

    /// Runs every step of the action, in order, stopping at the first that fails (as GitHub
    /// skips the steps after a failure, but for those whose `if:` says `always()`).
    fn run(&mut self) {
        let steps = action()["runs"]["steps"]
            .as_array()
            .expect("runs.steps")
            .clone();
        assert_eq!(action()["runs"]["using"], "composite");
        for step in steps {
            let always = step["if"]
                .as_str()
                .is_some_and(|c| c.starts_with("always() &&"));
            if self.failed.is_some() && !always {
                continue;
            }
            match step["uses"].as_str() {
                Some(u) if u.starts_with("actions/cache/restore@") => self.restore(&step),
                Some(u) if u.starts_with("actions/cache/save@") => {
                    assert_eq!(
                        step["if"].as_str(),
                        Some("steps.restore.outputs.cache-hit != 'true'")
                    );
                    if self.fill("${{ steps.restore.outputs.cache-hit }}") != "true" {
                        let path = self.fill(step["with"]["path"].as_str().expect("path"));
                        let key = self.fill(step["with"]["key"].as_str().expect("key"));
                        assert_eq!(key, self.outputs["key"]["key"]);
                        self.saved = Some(PathBuf::from(path).join("bin/mcp-gauntlet"));
                    }
                }
                Some(u) if u.starts_with("github/codeql-action/upload-sarif@") => {
                    if self.inputs["upload-sarif"] == "true" {
                        let file = self.fill(step["with"]["sarif_file"].as_str().unwrap_or(""));
                        if !file.is_empty() {
                            self.uploaded = Some(file);
                        }
                    }
                }
                Some(u) => panic!("a step this runner does not play: {u}"),
                None => self.shell(&step),
            }
        }
    }

    fn restore(&mut self, step: &serde_json::Value) {
        let path = self.fill(step["with"]["path"].as_str().expect("cache path"));
        let key = self.fill(step["with"]["key"].as_str().expect("cache key"));
        assert!(key.starts_with("mcp-gauntlet-Linux-X64-ubuntu24-"), "{key}");
        let id = step["id"].as_str().expect("the restore step has an id");
        let hit = if let Some(built) = &self.cache {
            let to = Path::new(&path).join("bin");
            std::fs::create_dir_all(&to).expect("the cache's folder");
            std::fs::copy(built, to.join("mcp-gauntlet")).expect("restore the cache");
            "true"
        } else {
            "false"
        };
        self.outputs.insert(
            id.to_string(),
            BTreeMap::from([("cache-hit".to_string(), hit.to_string())]),
        );
    }

    fn shell(&mut self, step: &serde_json::Value) {
        assert_eq!(step["shell"], "bash", "every run step says its shell");
        let script = self.fill(step["run"].as_str().expect("a run step"));
        let id = step["id"].as_str().unwrap_or("").to_string();
        let output = self.at(&format!("temp/output-{id}"));
        std::fs::write(&output, "").expect("GITHUB_OUTPUT");
        let path_file = self.at("temp/path");
        std::fs::write(&path_file, "").expect("GITHUB_PATH");
        let mut path: Vec<String> = self.path.iter().rev().cloned().collect();
        path.push(self.at("fake-bin").display().to_string());
        path.push(std::env::var("PATH").unwrap_or_default());
        let mut cmd = assert_cmd::Command::new("bash");
        cmd.args(["--noprofile", "--norc", "-eo", "pipefail", "-c", &script])
            .current_dir(self.at("work"))
            .env_clear()
            .env("PATH", path.join(":"))
            .env("HOME", self.at("temp"))
            .env("CI", "true")
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_ACTION_PATH", root())
            .env("GITHUB_WORKSPACE", self.at("work"))
            .env("GITHUB_OUTPUT", &output)
            .env("GITHUB_PATH", &path_file)
            .env("GITHUB_ENV", self.at("temp/env"))
            .env("GITHUB_STEP_SUMMARY", self.at("temp/summary.md"))
            .env("RUNNER_OS", "Linux")
            .env("RUNNER_ARCH", "X64")
            .env("ImageOS", "ubuntu24")
            .env("RUNNER_TEMP", self.at("temp"))
            .env("RUNNER_TOOL_CACHE", self.at("tool-cache"))
            .timeout(Duration::from_secs(300));
        if let Some(env) = step["env"].as_object() {
            for (k, v) in env {
                cmd.env(k, self.fill(v.as_str().unwrap_or("")));
            }
        }
        let out = cmd.output().expect("run a step");
        let text = std::fs::read_to_string(&output).unwrap_or_default();
        let outputs: BTreeMap<String, String> = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.outputs.insert(id, outputs);
        let added = std::fs::read_to_string(&path_file).unwrap_or_default();
        self.path.extend(added.lines().map(str::to_string));
        if !out.status.success() {
            self.failed = Some(out.status.code().unwrap_or(-1));
        }
        self.log(&out);
    }

    fn log(&self, out: &std::process::Output) {
        eprintln!(
            "step exited {:?}\n{}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn output(&self, name: &str) -> String {
        self.outputs["run"].get(name).cloned().unwrap_or_default()
    }

    fn summary(&self) -> String {
        std::fs::read_to_string(self.at("temp/summary.md")).unwrap_or_default()
    }

    fn cargo_calls(&self) -> String {
        std::fs::read_to_string(self.at("cargo.log")).unwrap_or_default()
    }
}

/// A first job builds the suite (`cargo install --locked` from the action's own folder), a
/// second with the same sources restores it from the cache and builds nothing; against a server
/// that executes batches the run fails, the outputs say so, and the reports, the upload and the
/// step summary hold the failures by family.
#[test]
fn the_action_builds_once_runs_and_reports_a_broken_server() {
    let w = HttpWitness::start(&["batch"], None);
    let inputs = [
        ("http", w.url.as_str()),
        ("args", "--spec\n2025-11-25\n--\nbatch/\nnesting/"),
        ("upload-sarif", "true"),
        ("fail", "false"),
    ];
    let mut first = Job::new(&inputs);
    first.run();
    assert_eq!(first.failed, None, "fail: false keeps the step green");
    let dir = first.outputs["key"]["dir"].clone();
    // Saved right after the build, though the run then fails.
    assert_eq!(
        first.saved.as_deref(),
        Some(PathBuf::from(&dir).join("bin/mcp-gauntlet").as_path())
    );
    assert!(dir.starts_with(&first.at("tool-cache").display().to_string()));
    assert_eq!(
        first.cargo_calls().trim(),
        format!(
            "install --locked --path {} --root {dir} --bin mcp-gauntlet",
            root().display()
        )
    );
    assert_eq!(first.output("exit-code"), "1");
    assert_eq!(first.output("outcome"), "failed");
    let work = first.at("work");
    for (name, file) in [
        ("junit", "gauntlet.xml"),
        ("sarif", "gauntlet.sarif"),
        ("report", "gauntlet.json"),
    ] {
        assert_eq!(first.output(name), format!("gauntlet-results/{file}"));
        assert!(work.join("gauntlet-results").join(file).is_file(), "{file}");
    }
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(work.join("gauntlet-results/gauntlet.json")).unwrap(),
    )
    .unwrap();
    let failed = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["verdict"] == "fail")
        .count();
    assert!(failed > 0);
    let sarif: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(work.join("gauntlet-results/gauntlet.sarif")).unwrap(),
    )
    .unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    assert_eq!(
        first.uploaded.as_deref(),
        Some("gauntlet-results/gauntlet.sarif")
    );
    let summary = first.summary();
    assert!(
        summary.contains(&format!("**✗ {failed} failed**")),
        "{summary}"
    );
    assert!(
        summary.contains(&format!("| batch | {failed} |")),
        "{summary}"
    );
    assert!(summary.contains("FAIL `[http] batch/"), "{summary}");
    assert!(summary.contains("canary"), "{summary}");

    // The second job: the cache brings the suite back, so cargo is not called.
    let mut second = Job::new(&inputs);
    second.cache = Some(PathBuf::from(&dir).join("bin/mcp-gauntlet"));
    // Its tool cache is its own folder: the key names the same sources.
    second.run();
    assert_eq!(second.outputs["key"]["key"], first.outputs["key"]["key"]);
    assert_eq!(
        second.cargo_calls(),
        "",
        "a cached suite is not built again"
    );
    assert_eq!(second.output("exit-code"), "1");
}

/// A stdio server named by its command runs; the suite the action installed is on PATH for the
/// command (`mcp-gauntlet witness --stdio` is the positive control), and a passing run passes.
#[test]
fn the_action_passes_a_conformant_stdio_server() {
    let mut job = Job::new(&[
        ("stdio", "mcp-gauntlet witness --stdio"),
        ("args", "--spec\n2025-11-25\n--\nbatch/"),
    ]);
    job.run();
    assert_eq!(job.failed, None);
    assert_eq!(job.output("exit-code"), "0");
    assert_eq!(job.output("outcome"), "passed");
    let summary = job.summary();
    assert!(summary.contains("**✓ nothing failed**"), "{summary}");
    assert!(!summary.contains("### By family"), "{summary}");
}

/// A folder of target files runs a campaign: each lane against its target, the matrix in the
/// output folder (its JSON form the step's report), what each lane came to in the summary.
#[test]
fn the_action_runs_a_campaign_over_a_folder_of_targets() {
    let folder = root().join("fixtures/campaign");
    let mut job = Job::new(&[
        ("targets", folder.to_str().expect("UTF-8")),
        ("args", "--\nbatch/"),
    ]);
    job.run();
    assert_eq!(job.failed, None);
    assert_eq!(job.output("exit-code"), "0");
    assert_eq!(job.output("outcome"), "passed");
    let report = job.output("report");
    assert!(report.ends_with("campaign/matrix.json"), "{report}");
    let path = job.at("work").join(&report);
    let matrix: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the matrix")).expect("JSON");
    let columns: Vec<&str> = matrix["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .filter_map(|t| t["column"].as_str())
        .collect();
    assert_eq!(columns, ["witness-http", "witness-stdio"]);
    let summary = job.summary();
    assert!(
        summary.contains("campaign: 2 lanes, 2 matched their baselines"),
        "{summary}"
    );
}

/// A target that cannot be tested fails the step with its own code, and the summary says why;
/// two targets at once are a usage error.
#[test]
fn the_action_says_when_a_target_cannot_be_tested() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut job = Job::new(&[("http", url.as_str())]);
    job.run();
    assert_eq!(job.failed, Some(i32::from(mcp_gauntlet::exit::UNTESTABLE)));
    assert_eq!(job.output("outcome"), "untestable");
    assert_eq!(job.output("report"), "");
    let summary = job.summary();
    assert!(
        summary.contains("**✗ not run:** the target could not be tested (exit 4)"),
        "{summary}"
    );
    assert!(summary.contains(&format!("127.0.0.1:{port}")), "{summary}");

    let mut job = Job::new(&[("http", url.as_str()), ("stdio", "server")]);
    job.run();
    assert_eq!(job.failed, Some(i32::from(mcp_gauntlet::exit::USAGE)));
    assert_eq!(job.output("outcome"), "usage");
    let mut job = Job::new(&[
        ("http", url.as_str()),
        ("stdio", "server"),
        ("fail", "false"),
    ]);
    job.run();
    assert_eq!(
        (job.failed, job.output("exit-code")),
        (None, "2".to_string())
    );
}

/// The workflow that exercises the action uses it from this checkout, and reads only outputs
/// the action declares, with inputs it declares.
#[test]
fn the_workflow_runs_this_action_with_what_it_declares() {
    let text = std::fs::read_to_string(root().join(".github/workflows/action.yml")).unwrap();
    let workflow: serde_json::Value = yaml_serde::from_str(&text).expect("the workflow is YAML");
    let action = action();
    let steps = workflow["jobs"]["witness"]["steps"]
        .as_array()
        .expect("steps");
    let uses: Vec<&serde_json::Value> = steps.iter().filter(|s| s["uses"] == "./").collect();
    assert!(
        uses.len() >= 3,
        "the action runs over stdio, HTTP and on a broken witness"
    );
    let mut ids = std::collections::BTreeSet::new();
    for step in &uses {
        ids.insert(step["id"].as_str().expect("each use has an id").to_string());
        for input in step["with"].as_object().expect("with").keys() {
            assert!(action["inputs"].get(input).is_some(), "no input {input}");
        }
    }
    let re = regex::Regex::new(r"steps\.([a-z-]+)\.outputs\.([a-z-]+)").unwrap();
    let mut read = 0;
    for c in re.captures_iter(&text) {
        assert!(ids.contains(&c[1]), "{} is not a use of the action", &c[1]);
        assert!(
            action["outputs"].get(&c[2]).is_some(),
            "no output {}",
            &c[2]
        );
        read += 1;
    }
    assert!(read >= 3);
}
