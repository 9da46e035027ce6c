//! https targets: the runner checks certificates (platform roots, `--ca`, `--insecure`), the
//! witness and the reference gate serve TLS, and the gate forwards to an https downstream only
//! when it trusts its certificate. Every certificate is made here, at test time, by a CA that
//! exists for one test (rcgen); no key is committed.

use crate::util::{bin, run_with_report, HttpWitness};
use crate::util::{Count, TrialVerdict};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A CA and a server certificate it signed, as PEM files in a temporary folder.
pub struct TestPki {
    pub dir: tempfile::TempDir,
}

impl TestPki {
    /// A CA, and a leaf for `names` (IP addresses and DNS names) signed by it.
    pub fn new(names: &[&str]) -> TestPki {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
        let dir = tempfile::tempdir().expect("tempdir");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("CA key"))
            .expect("CA certificate");
        let leaf_key = KeyPair::generate().expect("leaf key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let leaf = CertificateParams::new(names)
            .expect("leaf params")
            .signed_by(&leaf_key, &ca)
            .expect("leaf certificate");
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).expect("write");
        std::fs::write(dir.path().join("leaf.pem"), leaf.pem()).expect("write");
        std::fs::write(dir.path().join("leaf.key"), leaf_key.serialize_pem()).expect("write");
        TestPki { dir }
    }

    pub fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// `--tls-cert`/`--tls-key` for the witness.
    pub fn witness_args(&self) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            self.path("leaf.pem"),
            "--tls-key".into(),
            self.path("leaf.key"),
        ]
    }
}

fn https_witness(pki: &TestPki, extra: &[&str]) -> HttpWitness {
    let mut args = pki.witness_args();
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let w = HttpWitness::start_with(&refs);
    assert!(w.url.starts_with("https://"), "{}", w.url);
    w
}

/// Trials that did not pass among those `libtest` selects, as `id verdict`.
fn failing_of(args: &[&str], libtest: &[&str]) -> (i32, Vec<String>) {
    let (code, report) = run_with_report(args, libtest);
    let mut out: Vec<String> = report
        .results
        .iter()
        .filter(|t| t.verdict == TrialVerdict::Fail || t.verdict == TrialVerdict::Warn)
        .map(|t| format!("{} {}", t.id, t.verdict))
        .collect();
    out.sort();
    (code, out)
}

fn exit_code(args: &[&str]) -> i32 {
    Command::new(bin())
        .arg("run")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run mcp-gauntlet")
        .code()
        .unwrap_or(-1)
}

const SPEC: [&str; 2] = ["--spec", "2025-11-25"];

#[test]
fn the_catalogue_runs_over_https_against_a_certificate_it_trusts() {
    let pki = TestPki::new(&["127.0.0.1", "localhost"]);
    let w = https_witness(&pki, &[]);
    let ca = pki.path("ca.pem");
    let mut args = vec!["--http", w.url.as_str(), "--ca", ca.as_str()];
    args.extend(SPEC);
    let (code, report) = run_with_report(&args, &[]);
    assert_eq!(
        code,
        0,
        "{:?}",
        report
            .results
            .iter()
            .filter(|t| t.verdict == TrialVerdict::Fail)
            .collect::<Vec<_>>()
    );
    // The raw framing cases (`raw_http`: three at this version) went over TLS too.
    let framing = report
        .results
        .iter()
        .filter(|t| t.id.starts_with("framing/") && t.verdict == TrialVerdict::Pass)
        .count();
    assert!(framing >= 3, "framing cases ran over TLS: {framing}");
    assert!(
        report.count(TrialVerdict::Pass) >= 100,
        "{}",
        report.count(TrialVerdict::Pass)
    );

    // The same server by a name its certificate carries.
    let by_name = w.url.replace("127.0.0.1", "localhost");
    let mut args = vec!["--http", by_name.as_str(), "--ca", ca.as_str()];
    args.extend(SPEC);
    assert_eq!(exit_code(&[&args[..], &["--", "ping"]].concat()), 0);
}

#[test]
fn a_certificate_the_runner_cannot_check_stops_the_run_before_any_case() {
    let pki = TestPki::new(&["localhost"]);
    let other = TestPki::new(&["127.0.0.1"]);
    let w = https_witness(&pki, &[]);
    let setup = i32::from(mcp_gauntlet::exit::SETUP_FAILED);
    // Signed by a CA nobody trusts.
    assert_eq!(
        exit_code(&[&["--http", w.url.as_str()][..], &SPEC].concat()),
        setup
    );
    // Signed by another CA than the one given.
    let wrong_ca = other.path("ca.pem");
    assert_eq!(
        exit_code(
            &[
                &["--http", w.url.as_str(), "--ca", wrong_ca.as_str()][..],
                &SPEC
            ]
            .concat()
        ),
        setup
    );
    // The right CA, but the certificate names localhost and the URL 127.0.0.1.
    let ca = pki.path("ca.pem");
    assert_eq!(
        exit_code(&[&["--http", w.url.as_str(), "--ca", ca.as_str()][..], &SPEC].concat()),
        setup
    );
    // --insecure talks to it anyway (and warns).
    assert_eq!(
        exit_code(
            &[
                &["--http", w.url.as_str(), "--insecure"][..],
                &SPEC,
                &["--", "ping"]
            ]
            .concat()
        ),
        0
    );
    // A CA file that holds no certificate is a setup error, not an empty trust store.
    let key = pki.path("leaf.key");
    assert_eq!(
        exit_code(&[&["--http", w.url.as_str(), "--ca", key.as_str()][..], &SPEC].concat()),
        setup
    );
}

/// Raw framing cases fail over TLS exactly as over plain HTTP: the careless HTTP front of the
/// `lax-http` witness is caught inside the TLS session too.
#[test]
fn framing_cases_catch_a_careless_front_over_tls() {
    let pki = TestPki::new(&["127.0.0.1"]);
    let ca = pki.path("ca.pem");
    let tls = https_witness(&pki, &["--broken", "lax-http"]);
    let plain = HttpWitness::start(&["lax-http"], None);
    // The careless front keeps each connection open after its answers, so every raw case lasts
    // until its deadline, which only ends the wait for more bytes: a fifth of it is plenty.
    let quick = ["--timeout-scale", "0.2", "--jobs", "4"];
    let (_, over_tls) = failing_of(
        &[
            &["--http", tls.url.as_str(), "--ca", ca.as_str()][..],
            &SPEC,
            &quick,
        ]
        .concat(),
        &["framing/"],
    );
    let (_, over_tcp) = failing_of(
        &[&["--http", plain.url.as_str()][..], &SPEC, &quick].concat(),
        &["framing/"],
    );
    assert!(
        over_tls.iter().any(|l| l.starts_with("framing/")),
        "lax-http fails framing cases over TLS: {over_tls:?}"
    );
    assert_eq!(over_tls, over_tcp);
}

/// A reference gate process: `mcp-gauntlet reference-gate --config FILE`, killed on drop.
struct GateProcess {
    child: Child,
    url: String,
}

impl GateProcess {
    /// Start the gate and wait (at most 10 s) for its `listening` line; the process is killed
    /// on drop, also when it never says where it listens.
    fn start(config: &Path) -> GateProcess {
        let mut gate = GateProcess {
            child: Command::new(bin())
                .args(["reference-gate", "--config"])
                .arg(config)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("start the gate"),
            url: String::new(),
        };
        let stdout = gate.child.stdout.take().expect("gate stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut first = String::new();
            let _ = BufReader::new(stdout).read_line(&mut first);
            let _ = tx.send(first);
        });
        let first = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap_or_default();
        gate.url = first
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("unexpected first line: {first:?}"))
            .to_string();
        gate
    }
}

impl Drop for GateProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The witness policy, forwarding to `downstream`, serving TLS with the PKI's leaf.
fn gate_config(pki: &TestPki, downstream: &str, downstream_ca: Option<String>) -> PathBuf {
    let mut cfg: serde_json::Value =
        serde_json::from_str(mcp_gauntlet::target::WITNESS_POLICY).expect("policy");
    let server = cfg["server"].as_str().expect("server id").to_string();
    cfg["servers"] = serde_json::json!({ server: { "url": downstream } });
    cfg["tls"] = serde_json::json!({ "cert": pki.path("leaf.pem"), "key": pki.path("leaf.key") });
    if let Some(ca) = downstream_ca {
        cfg["downstream_ca"] = serde_json::Value::String(ca);
    }
    let path = pki.dir.path().join(format!("gate-{}.json", rand_suffix()));
    std::fs::write(&path, serde_json::to_vec_pretty(&cfg).expect("json")).expect("write");
    path
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[test]
fn the_gate_serves_tls_and_forwards_to_an_https_downstream_it_trusts() {
    let pki = TestPki::new(&["127.0.0.1"]);
    let log = pki.dir.path().join("witness.jsonl");
    let log_arg = log.display().to_string();
    let w = https_witness(&pki, &["--log", log_arg.as_str()]);
    let gate = GateProcess::start(&gate_config(&pki, &w.url, Some(pki.path("ca.pem"))));
    assert!(gate.url.starts_with("https://"), "{}", gate.url);
    let ca = pki.path("ca.pem");
    let args = [
        &[
            "--profile",
            "gate",
            "--gate-codes",
            "reference",
            "--http",
            gate.url.as_str(),
            "--ca",
            ca.as_str(),
            "--witness-log",
            log_arg.as_str(),
        ][..],
        &SPEC,
    ]
    .concat();
    // The series through a gate are tests/series.rs's (each sends thousands of requests).
    let (code, failures) = failing_of(&args, &crate::util::SERIES_SKIPPED);
    assert_eq!((code, failures), (0, Vec::<String>::new()));
}

/// A gate that cannot check its https downstream's certificate forwards nothing: allowed calls
/// fail with the downstream-failure code and the witness receives no tool call. (At a legacy
/// version the gate cannot even open its downstream session, so `initialize` fails and the
/// runner finds no legacy version to test; the modern version is stateless and shows the calls.)
#[test]
fn the_gate_forwards_nothing_to_a_downstream_it_does_not_trust() {
    let pki = TestPki::new(&["127.0.0.1"]);
    let log = pki.dir.path().join("witness.jsonl");
    let log_arg = log.display().to_string();
    let w = https_witness(&pki, &["--log", log_arg.as_str()]);
    let gate = GateProcess::start(&gate_config(&pki, &w.url, None));
    let ca = pki.path("ca.pem");
    let args = [&[
        "--profile",
        "gate",
        "--gate-codes",
        "reference",
        "--http",
        gate.url.as_str(),
        "--ca",
        ca.as_str(),
        "--witness-log",
        log_arg.as_str(),
        "--spec",
        "2026-07-28",
    ][..]]
    .concat();
    let (code, failures) = failing_of(&args, &["downstream/"]);
    assert_eq!(code, 1, "{failures:?}");
    assert!(
        failures.iter().any(|f| f.starts_with("downstream/")),
        "{failures:?}"
    );
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.trim().is_empty(),
        "nothing reaches an untrusted downstream: {text}"
    );
}
