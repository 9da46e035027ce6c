//! Fixtures shared by the integration tests: the built binary, witness processes that are killed
//! when dropped, and JSON reports.

pub use mcp_gauntlet::case::TransportKind;
pub use mcp_gauntlet::report::{Check, Finding, Status, TrialVerdict};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Whether `python3` runs here (the Python fixtures under `tests/fixtures/` need it); when it
/// does not, the calling test skips, and says so with [`skip`].
pub fn python3(fixture: &str) -> bool {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip(&format!("python3 is not installed; {fixture} needs it"));
    }
    ok
}

/// How many tests skipped their checks so far in this run.
static SKIPPED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A test that cannot check what it is for here (a tool it needs is missing) says so where it
/// is seen: on the terminal, past libtest's capture (which would hide it in a test that
/// passes), numbered, so a run that skipped is never read as a run that checked.
pub fn skip(why: &str) {
    use std::io::Write as _;
    let n = SKIPPED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    let _ = writeln!(std::io::stderr(), "SKIP #{n}: {why}");
}

/// A version written in a test (`"2025-11-25"`).
pub fn version(text: &str) -> mcp_gauntlet::versions::Version {
    mcp_gauntlet::versions::Version::parse(text).unwrap_or_else(|| panic!("`{text}` is a version"))
}

/// The `mcp-gauntlet` binary cargo built for these tests.
pub fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("mcp-gauntlet")
}

/// The reference gate as `run --gate` starts it: the witness policy, in front of the runner's
/// witness (`{downstream_url}`), on `{port}`.
pub fn reference_gate_command() -> String {
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/gate/witness-policy.json"
    );
    format!(
        "{} reference-gate --config {config} --listen 127.0.0.1:{{port}} --downstream {{downstream_url}}",
        shell_words::quote(&bin().to_string_lossy())
    )
}

/// A witness served over HTTP by a child process, killed on drop.
pub struct HttpWitness {
    child: Child,
    pub url: String,
}

impl HttpWitness {
    /// The witness process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn start(broken: &[&str], log: Option<&Path>) -> HttpWitness {
        let mut args: Vec<String> = Vec::new();
        if !broken.is_empty() {
            args.extend(["--broken".into(), broken.join(",")]);
        }
        if let Some(log) = log {
            args.extend(["--log".into(), log.display().to_string()]);
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        HttpWitness::start_with(&refs)
    }

    /// A witness with extra command-line arguments.
    pub fn start_with(extra: &[&str]) -> HttpWitness {
        HttpWitness::start_at("127.0.0.1:0", extra)
    }

    /// A witness listening on `addr`.
    pub fn start_at(addr: &str, extra: &[&str]) -> HttpWitness {
        HttpWitness::serve("--http", addr, extra)
    }

    /// A witness serving the HTTP+SSE transport (2024-11-05): its `url` is the stream's.
    pub fn start_sse(extra: &[&str]) -> HttpWitness {
        HttpWitness::serve("--sse", "127.0.0.1:0", extra)
    }

    fn serve(front: &str, addr: &str, extra: &[&str]) -> HttpWitness {
        let mut cmd = Command::new(bin());
        cmd.args(["witness", front, addr]).args(extra);
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the witness");
        let stdout = child.stdout.take().expect("witness stdout");
        let mut first = String::new();
        BufReader::new(stdout)
            .read_line(&mut first)
            .expect("read the witness's first line");
        let url = first
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("unexpected first line: {first:?}"))
            .to_string();
        HttpWitness { child, url }
    }
}

impl Drop for HttpWitness {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The stdio command that starts a witness with `broken` modes.
pub fn stdio_witness_command(broken: &[&str]) -> String {
    let mut cmd = format!(
        "{} witness --stdio",
        shell_words::quote(&bin().to_string_lossy())
    );
    if !broken.is_empty() {
        cmd.push_str(&format!(" --broken {}", broken.join(",")));
    }
    cmd
}

/// The series families, left out of the broken-mode runs: tests/series.rs runs them against the
/// witness's own process (their memory oracle needs it), each on the modes made for it; each
/// sends thousands of requests or holds hundreds of connections.
pub const SERIES_SKIPPED: [&str; 8] = [
    "--skip",
    "sessions/",
    "--skip",
    "state/",
    "--skip",
    "cpu/",
    "--skip",
    "connections/",
];

/// One trial of a JSON report, and the report: the runner's own model, read back.
pub use mcp_gauntlet::report::{Record as Trial, ReportFile as Report};

/// How many trials of a report have a verdict.
pub trait Count {
    fn count(&self, verdict: TrialVerdict) -> usize;
}

impl Count for Report {
    fn count(&self, verdict: TrialVerdict) -> usize {
        self.results.iter().filter(|t| t.verdict == verdict).count()
    }
}

/// Run `mcp-gauntlet run ARGS --report FILE` and return (exit code, report).
pub fn run_with_report(args: &[&str], libtest: &[&str]) -> (i32, Report) {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = dir.path().join("report.json");
    let out = Command::new(bin())
        .arg("run")
        .args(args)
        .arg("--report")
        .arg(&report)
        .arg("--")
        .args(libtest)
        .stdin(Stdio::null())
        .output()
        .expect("run mcp-gauntlet");
    let text = std::fs::read_to_string(&report).unwrap_or_else(|_| {
        panic!(
            "no report; stdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let parsed: Report = serde_json::from_str(&text).expect("report parses");
    (out.status.code().unwrap_or(-1), parsed)
}

/// One line of a failing-set snapshot (`transport version id verdict`) and the trial's findings,
/// shown when the line is not expected so that a failure in CI explains itself.
#[derive(Debug)]
pub struct Failing {
    pub line: String,
    pub findings: Vec<Finding>,
}

impl Failing {
    pub fn of(t: &Trial) -> Self {
        Failing {
            line: format!(
                "{} {} {} {}",
                t.transport.as_str(),
                t.version,
                t.id,
                t.verdict
            ),
            findings: t.findings.clone(),
        }
    }
}

/// Compare the sorted lines of `got` with the snapshot at `path` (`UPDATE_EXPECT=1` rewrites it
/// instead), showing the lines gained (with their findings) and lost when they differ.
pub fn check_snapshot(what: &str, path: &Path, mut got: Vec<Failing>) {
    got.sort_by(|a, b| a.line.cmp(&b.line));
    let text = got
        .iter()
        .map(|f| f.line.as_str())
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(path, &text).expect("write the snapshot");
        return;
    }
    let want = std::fs::read_to_string(path).unwrap_or_default();
    if text != want {
        let w: std::collections::BTreeSet<&str> = want.lines().collect();
        let g: std::collections::BTreeSet<&str> = text.lines().collect();
        let gained: Vec<String> = got
            .iter()
            .filter(|f| !w.contains(f.line.as_str()))
            .map(|f| {
                let findings: Vec<String> = f
                    .findings
                    .iter()
                    .map(|x| format!("{} {:?}: {}", x.check.as_str(), x.status, x.message))
                    .collect();
                format!("{}\n      {}", f.line, findings.join("\n      "))
            })
            .collect();
        panic!(
            "{what}: the failing set changed (UPDATE_EXPECT=1 refreshes {}).\n  now failing, not expected:\n    {}\n  expected, not failing now:\n    {}",
            path.display(),
            gained.join("\n    "),
            w.difference(&g).copied().collect::<Vec<_>>().join("\n    "),
        );
    }
}

/// A witness (logging to `witness_log`) and a reference gate in front of it, both served in this
/// process until dropped. `edit` adjusts the witness policy config; `proxy` builds the gate's
/// proxy from it (the configured one, or one with another engine or faults).
pub struct InProcessGate {
    _rt: tokio::runtime::Runtime,
    pub dir: tempfile::TempDir,
    pub addr: std::net::SocketAddr,
    pub witness_log: PathBuf,
}

impl InProcessGate {
    pub fn start(
        edit: impl FnOnce(&mut reference_gate::config::GateConfig, &Path),
        proxy: impl FnOnce(
            &reference_gate::config::GateConfig,
        ) -> std::sync::Arc<reference_gate::proxy::Proxy>,
    ) -> InProcessGate {
        InProcessGate::start_with_front(edit, proxy, |_| {})
    }

    /// [`InProcessGate::start`], with `front` adjusting the HTTP front's settings last.
    pub fn start_with_front(
        edit: impl FnOnce(&mut reference_gate::config::GateConfig, &Path),
        proxy: impl FnOnce(
            &reference_gate::config::GateConfig,
        ) -> std::sync::Arc<reference_gate::proxy::Proxy>,
        front: impl FnOnce(&mut reference_gate::front::http::HttpSettings),
    ) -> InProcessGate {
        let edit_front = front;
        use mcp_gauntlet::witness::{self, Recorder, Witness, WitnessConfig};
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let witness_log = dir.path().join("witness.jsonl");
        let w = std::sync::Arc::new(Witness::new(
            WitnessConfig::default(),
            Recorder::with_log(&witness_log).unwrap(),
        ));
        let (waddr, _) = rt
            .block_on(witness::http::spawn("127.0.0.1:0".parse().unwrap(), w))
            .unwrap();
        let mut cfg: reference_gate::config::GateConfig =
            serde_json::from_str(mcp_gauntlet::target::WITNESS_POLICY)
                .expect("the witness policy parses");
        cfg.servers.insert(
            cfg.server.clone(),
            reference_gate::config::Server::Url(format!("http://{waddr}/mcp")),
        );
        edit(&mut cfg, dir.path());
        let mut settings = reference_gate::cli::http_settings(&cfg).expect("the front's settings");
        edit_front(&mut settings);
        let front = reference_gate::front::http::HttpFront::new(proxy(&cfg), settings);
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        rt.spawn(reference_gate::front::http::serve(listener, front));
        InProcessGate {
            _rt: rt,
            dir,
            addr,
            witness_log,
        }
    }
}
