//! Targets and their lanes: a [`Target`] resolved to the (transport, profile, endpoint, witness
//! record) combinations a run sends cases over, with whatever processes and servers they need,
//! kept alive until the run ends; and how a lane's dead HTTP target is noticed and restarted.
//! `run`, `fuzz`, `load` and `bench` open targets here; nothing here knows about trials.

use crate::case::{Profile, TransportKind};
use crate::error::RunError;
use crate::report::LaneId;
use crate::settings::Settings;
use crate::transport::exchange::{self, Endpoint};
use crate::transport::http::HttpUrl;
use crate::transport::TransportError;
use crate::versions::{Spec, Version};
use crate::witness::{self, Personality, Recorder, Witness, WitnessConfig, WitnessView};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;

/// Where the cases go.
#[derive(Debug, Clone, Default)]
pub enum Target {
    /// The embedded default: the witness, in-process over HTTP and as a child process over stdio.
    #[default]
    Embedded,
    Http {
        url: String,
        witness_log: Option<PathBuf>,
        /// How an `https` URL's certificate is checked.
        tls: crate::transport::tls::TlsOptions,
        /// The server's process on this machine (`--pid`), read for memory and CPU.
        pid: Option<u32>,
        /// Where its HTTP+SSE stream is, if it serves one.
        sse: SseAt,
    },
    /// An HTTP server the runner starts itself (`--serve`): `{port}` becomes a free loopback
    /// port, where it must serve `path`. The runner knows its process (memory and CPU are
    /// read from it), starts it again when a case leaves it dead or after a series (which
    /// leaves state behind it), and stops it at the end.
    Serve {
        command: String,
        path: String,
        /// Where its HTTP+SSE stream is, if it serves one.
        sse: SseAt,
    },
    Stdio {
        command: String,
    },
    /// An HTTP gate the runner starts in front of its own witness (`{downstream_url}`, `{port}`).
    Gate {
        command: String,
    },
    /// A stdio gate the runner starts per case (`{downstream_cmd}`).
    GateStdio {
        command: String,
    },
}

/// Where an HTTP target's HTTP+SSE stream (the transport of 2024-11-05) may be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseAt {
    /// The URL given is such a stream, and only it is tested (`--sse`).
    Only,
    /// The URL given, if its GET opens such a stream; else beside it, at this path of the same
    /// origin, if the target serves one there (`--sse-path`, `/sse` unless `none`): then the
    /// target is tested over both transports.
    Beside(Option<String>),
}

impl Default for SseAt {
    fn default() -> SseAt {
        SseAt::Beside(Some(DEFAULT_SSE_PATH.to_string()))
    }
}

/// Where servers that serve both transports keep their HTTP+SSE stream, unless told otherwise.
pub const DEFAULT_SSE_PATH: &str = "/sse";

impl Target {
    /// Whether the gate lanes are the reference gate, whose error table is known (the embedded
    /// default); any other gate is judged fail-closed unless `--gate-codes` gives its table.
    pub(crate) fn runs_the_reference_gate(&self) -> bool {
        matches!(self, Target::Embedded)
    }

    /// How many trials run at once when the run does not say (`--jobs`). The embedded
    /// default's trials mostly wait (on their own deadlines, on child processes starting) on
    /// targets the runner serves itself and copies for each trial: several per core. Any other
    /// target gets libtest's default, one per core (`None`), so a server under test is not
    /// pushed harder than asked.
    pub(crate) fn default_jobs(&self) -> Option<usize> {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        matches!(self, Target::Embedded).then_some(cores * EMBEDDED_JOBS_PER_CORE)
    }
}

/// Trials at once per core for the embedded default (see [`Target::default_jobs`]).
const EMBEDDED_JOBS_PER_CORE: usize = 4;

/// The witness policy the embedded gate runs with (also `fixtures/gate/witness-policy.json`).
pub const WITNESS_POLICY: &str = include_str!("../fixtures/gate/witness-policy.json");

/// One way of sending cases.
#[derive(Debug, Clone)]
pub struct Lane {
    /// Who it is: profile, transport, downstream personality, version, and its name.
    pub id: LaneId,
    pub endpoint: Endpoint,
    /// Where the runner reads what reached the witness, when it is shared by the lane's cases.
    pub witness: Option<WitnessView>,
    /// Only cases whose id starts with one of these (all cases when empty).
    pub families: Vec<&'static str>,
    /// Held while a case runs on a lane that reads a shared witness record, so each case sees
    /// only its own; lanes of several versions over one witness share it.
    pub serial: Arc<tokio::sync::Mutex<()>>,
    /// An HTTP target that issues no `Mcp-Session-Id`: cases about sessions do not apply.
    pub stateless: bool,
    /// HTTP: the trial (`[lane] case`) during which the target stopped accepting connections,
    /// while it is down.
    pub died_during: Arc<std::sync::Mutex<Option<String>>>,
    /// The gate process the runner started for this lane (`--gate`), restarted when a case
    /// leaves it broken.
    pub process: Option<Arc<GateProcess>>,
    /// The target's process, when the runner knows it (`--serve`, `--pid`): what series read
    /// memory, CPU and descriptors from.
    pub watch: Option<crate::transport::procfs::Watch>,
    /// Series cases hold it alone (a write lock), every other trial shares it (a read lock):
    /// what a series measures of the process is its own.
    pub exclusive: Arc<tokio::sync::RwLock<()>>,
    /// For a lane whose target the runner serves in-process (the embedded default's HTTP
    /// lanes): copies of it, each with a witness record of its own, so that its trials run
    /// concurrently like any others instead of one at a time under `serial`.
    pub copies: Option<Arc<Copies>>,
    /// A lane of the embedded default (in-process over HTTP, this binary's own children over
    /// stdio): no series runs on it, so its run stays short.
    pub embedded: bool,
}

/// The case family a gate runs against every downstream personality: wrapped denied calls.
pub(crate) const PERSONALITY_FAMILIES: &[&str] = &["smuggling/"];

impl Lane {
    /// Whether this lane runs the case `id`.
    pub fn takes(&self, id: &str) -> bool {
        self.families.is_empty() || self.families.iter().any(|f| id.starts_with(f))
    }

    /// The run's settings as this lane's cases speak: in its version.
    pub(crate) fn settings(&self, run: &Settings) -> Settings {
        run.speaking(self.id.version)
    }

    /// A record of a case on this lane (its verdict, when it ran).
    pub fn record(
        &self,
        case: &crate::case::Case,
        verdict: Option<&crate::verdict::Verdict>,
        elapsed_ms: u64,
    ) -> crate::report::Record {
        crate::report::Record::new(case, &self.id, verdict, elapsed_ms)
    }

    /// Why the lane's target cannot be tested at all, if it cannot: nothing accepts connections
    /// at its URL, or its command's program cannot be found. Checked once before any trial, so
    /// a target that never came up is not reported as rules broken.
    pub fn untestable(&self) -> Option<String> {
        match &self.endpoint {
            Endpoint::Http(url) | Endpoint::Sse(url) if !self.reachable() => Some(format!(
                "nothing accepts connections at {}:{} (is it running?)",
                url.host, url.port
            )),
            Endpoint::Http(_) | Endpoint::Sse(_) => None,
            Endpoint::Stdio { command, .. } => {
                match crate::transport::stdio::StdioCommand::parse(command) {
                    Ok(c) if c.program_found() => None,
                    Ok(c) => Some(format!("its program `{}` cannot be found", c.program)),
                    // A command line that cannot be read is the user's input, not the target:
                    // its trials say so.
                    Err(_) => None,
                }
            }
        }
    }

    /// Whether the lane's endpoint takes connections (stdio endpoints are started per case and
    /// always count as reachable).
    pub fn reachable(&self) -> bool {
        match &self.endpoint {
            Endpoint::Http(url) | Endpoint::Sse(url) => {
                use std::net::ToSocketAddrs;
                let addrs = (url.host.as_str(), url.port)
                    .to_socket_addrs()
                    .map(|a| a.collect::<Vec<_>>())
                    .unwrap_or_default();
                addrs.iter().any(|a| {
                    std::net::TcpStream::connect_timeout(a, Duration::from_secs(2)).is_ok()
                })
            }
            Endpoint::Stdio { .. } => true,
        }
    }

    /// This lane in front of a witness of `personality`: its kind says so, and it runs only the
    /// wrapped-denied family.
    fn behind(mut self, personality: Personality) -> Lane {
        if personality != Personality::Strict {
            self.id.downstream = Some(personality.as_str());
            self.families = PERSONALITY_FAMILIES.to_vec();
        }
        self
    }
}

/// Things a run keeps alive: child processes (killed on drop) and server tasks.
#[derive(Default)]
pub struct Keep {
    children: Vec<std::process::Child>,
    gates: Vec<Arc<GateProcess>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Keep {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for g in &self.gates {
            g.stop();
        }
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A witness served in-process over HTTP on the current runtime: its URL, its record and its
/// server task.
async fn serve_witness(
    personality: Personality,
) -> Result<(HttpUrl, Recorder, tokio::task::JoinHandle<()>), RunError> {
    let recorder = Recorder::default();
    let config = WitnessConfig {
        personality,
        ..WitnessConfig::default()
    };
    let w = Arc::new(Witness::new(config, recorder.clone()));
    let addr = "127.0.0.1:0"
        .parse()
        .map_err(|_| RunError::Setup(std::io::Error::other("address")))?;
    let (addr, task) = witness::http::spawn(addr, w)
        .await
        .map_err(RunError::Witness)?;
    let url = HttpUrl::parse(&format!("http://{addr}{}", witness::http::PATH))?;
    Ok((url, recorder, task))
}

/// The strict witness served in-process over HTTP+SSE (speaking 2024-11-05 and the legacy
/// versions after it): a target instance with its record.
async fn serve_sse_witness() -> Result<Instance, RunError> {
    let recorder = Recorder::default();
    let config = WitnessConfig {
        versions: witness::sse::versions(),
        ..WitnessConfig::default()
    };
    let w = Arc::new(Witness::new(config, recorder.clone()));
    let addr = "127.0.0.1:0"
        .parse()
        .map_err(|_| RunError::Setup(std::io::Error::other("address")))?;
    let (addr, task) = witness::sse::spawn(addr, w)
        .await
        .map_err(RunError::Witness)?;
    let url = HttpUrl::parse(&format!("http://{addr}{}", witness::sse::STREAM_PATH))?;
    Ok(Instance {
        endpoint: Endpoint::Sse(url),
        witness: WitnessView::Memory(recorder),
        tasks: vec![task],
    })
}

/// A witness served in-process over HTTP, and its record.
fn start_witness(
    rt: &Runtime,
    keep: &mut Keep,
    personality: Personality,
) -> Result<(HttpUrl, Recorder), RunError> {
    let (url, recorder, task) = rt.block_on(serve_witness(personality))?;
    keep.tasks.push(task);
    Ok((url, recorder))
}

/// What an in-process target is: the witness alone, or the reference gate in front of one.
#[derive(Debug, Clone, Copy)]
enum InProcess {
    Witness,
    Gate(Personality),
    /// The witness over HTTP+SSE (2024-11-05).
    SseWitness,
}

/// One in-process target the runner serves: where its cases go, its witness's record, and its
/// server tasks, ended when it is dropped.
pub struct Instance {
    pub endpoint: Endpoint,
    pub witness: WitnessView,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Instance {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

/// Serve an in-process target on the current runtime.
async fn serve(what: InProcess) -> Result<Instance, RunError> {
    let (personality, gated) = match what {
        InProcess::Witness => (Personality::Strict, false),
        InProcess::Gate(p) => (p, true),
        InProcess::SseWitness => return serve_sse_witness().await,
    };
    let (url, record, witness_task) = serve_witness(personality).await?;
    let mut tasks = vec![witness_task];
    let url = if gated {
        let (url, gate_task) = serve_gate(&url).await?;
        tasks.push(gate_task);
        url
    } else {
        url
    };
    Ok(Instance {
        endpoint: Endpoint::Http(url),
        witness: WitnessView::Memory(record),
        tasks,
    })
}

/// The reference gate in-process over HTTP, with the witness policy, in front of `downstream`:
/// its URL and its server task.
async fn serve_gate(
    downstream: &HttpUrl,
) -> Result<(HttpUrl, tokio::task::JoinHandle<()>), RunError> {
    let mut cfg: reference_gate::config::GateConfig = serde_json::from_str(WITNESS_POLICY)
        .map_err(|e| RunError::Setup(std::io::Error::other(e)))?;
    cfg.servers.insert(
        cfg.server.clone(),
        reference_gate::config::Server::Url(downstream.to_url()),
    );
    let proxy = reference_gate::cli::build_proxy(&cfg)?;
    let settings = reference_gate::cli::http_settings(&cfg)?;
    let front = reference_gate::front::http::HttpFront::new(proxy, settings);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(RunError::Witness)?;
    let addr = listener.local_addr().map_err(RunError::Witness)?;
    let task = tokio::spawn(reference_gate::front::http::serve(listener, front));
    let url = HttpUrl::parse(&format!(
        "http://{addr}{}",
        reference_gate::front::http::PATH
    ))?;
    Ok((url, task))
}

/// Copies of an in-process lane's target, each with a witness record of its own: a trial takes
/// one to itself and gives it back when it ends, so each sees only its own record while the
/// lane's trials run as concurrently as `--jobs` lets them. A copy is started when every one is
/// taken, so there are never more than trials at once.
#[derive(Debug)]
pub struct Copies {
    what: InProcess,
    free: std::sync::Mutex<Vec<Instance>>,
}

impl Copies {
    fn new(what: InProcess) -> Arc<Copies> {
        Arc::new(Copies {
            what,
            free: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// A copy for one trial (a new one when none is free), served on the current runtime.
    pub async fn take(&self) -> Result<Instance, RunError> {
        let free = crate::sync::lock(&self.free).pop();
        match free {
            Some(copy) => Ok(copy),
            None => serve(self.what).await,
        }
    }

    /// A copy whose trial has ended.
    pub(crate) fn give_back(&self, copy: Instance) {
        crate::sync::lock(&self.free).push(copy);
    }
}

/// The stdio witness command with a per-case `{witness_log}`.
fn stdio_witness_command(exe: &Path, personality: Personality) -> String {
    format!(
        "{} witness --stdio --personality {} --log {{witness_log}}",
        shell_words::quote(&exe.to_string_lossy()),
        personality.as_str()
    )
}

/// The lanes of the embedded default: the witness alone (server profile) and the reference gate
/// in front of a witness (gate profile), each over HTTP and stdio; then the gate again in front
/// of each lenient personality of the witness, for the wrapped-denied family.
pub fn embedded(
    rt: &Runtime,
    exe: &Path,
    tmp: &Path,
    keep: &mut Keep,
) -> Result<Vec<Lane>, RunError> {
    let (witness_url, witness_record) = start_witness(rt, keep, Personality::Strict)?;
    let mut direct = plain_lane(
        TransportKind::Http,
        Profile::Server,
        Endpoint::Http(witness_url),
        Some(WitnessView::Memory(witness_record)),
    );
    direct.copies = Some(Copies::new(InProcess::Witness));
    let mut lanes = vec![
        direct,
        plain_lane(
            TransportKind::Stdio,
            Profile::Server,
            Endpoint::stdio(
                stdio_witness_command(exe, Personality::Strict),
                Some(tmp.to_path_buf()),
            ),
            None,
        ),
    ];
    // The gate over stdio, as this binary's `reference-gate` command, started per case in front
    // of a stdio witness that logs where the runner reads it.
    let config_path = tmp.join("gate-config.json");
    std::fs::write(&config_path, WITNESS_POLICY).map_err(RunError::Setup)?;
    let template = format!(
        "{} reference-gate --config {} --stdio --downstream-cmd {{downstream_cmd}}",
        shell_words::quote(&exe.to_string_lossy()),
        shell_words::quote(&config_path.to_string_lossy()),
    );
    for p in Personality::ALL {
        lanes.push(in_process_gate(rt, keep, p)?);
        lanes.push(gate_stdio_lane(&template, exe, tmp, p));
    }
    // The witness over HTTP+SSE: its trials take copies of it, as the HTTP witness's do.
    let mut sse = rt.block_on(serve(InProcess::SseWitness))?;
    keep.tasks.append(&mut sse.tasks);
    let Endpoint::Sse(sse_url) = sse.endpoint.clone() else {
        return Err(RunError::Setup(std::io::Error::other("the SSE witness")));
    };
    let mut over_sse_lane = over_sse(
        plain_lane(
            TransportKind::Sse,
            Profile::Server,
            sse.endpoint.clone(),
            Some(sse.witness.clone()),
        ),
        sse_url,
    );
    over_sse_lane.copies = Some(Copies::new(InProcess::SseWitness));
    lanes.push(over_sse_lane);
    for lane in &mut lanes {
        lane.embedded = true;
    }
    Ok(lanes)
}

/// The reference gate in-process over HTTP, in front of its own in-process witness; its trials
/// take copies of both.
fn in_process_gate(
    rt: &Runtime,
    keep: &mut Keep,
    personality: Personality,
) -> Result<Lane, RunError> {
    let mut first = rt.block_on(serve(InProcess::Gate(personality)))?;
    keep.tasks.append(&mut first.tasks);
    let mut lane = plain_lane(
        TransportKind::Http,
        Profile::Gate,
        first.endpoint.clone(),
        Some(first.witness.clone()),
    )
    .behind(personality);
    lane.copies = Some(Copies::new(InProcess::Gate(personality)));
    Ok(lane)
}

/// A stdio gate: `{downstream_cmd}` in `template` becomes a stdio witness of `personality`
/// logging per case, as one shell-quoted string; `{downstream_argv}` the same command as words.
pub(crate) fn gate_stdio_lane(
    template: &str,
    exe: &Path,
    tmp: &Path,
    personality: Personality,
) -> Lane {
    let witness = stdio_witness_command(exe, personality);
    // `{downstream_argv}`: the same command as separate words, for gates that take their
    // downstream as an argument list (`my-gate -- {downstream_argv}`), not through a shell.
    let argv = shell_words::split(&witness)
        .map(shell_words::join)
        .unwrap_or_else(|_| witness.clone());
    let command = template
        .replace("{downstream_cmd}", &shell_words::quote(&witness))
        .replace("{downstream_argv}", &argv);
    plain_lane(
        TransportKind::Stdio,
        Profile::Gate,
        Endpoint::stdio(command, Some(tmp.to_path_buf())),
        None,
    )
    .behind(personality)
}

/// An HTTP gate the runner starts: `{downstream_url}` is an in-process witness of
/// `personality`, `{port}` a free loopback port where the gate must serve `/mcp`. Waits
/// (bounded) until the port accepts.
pub(crate) fn gate_http_lane(
    template: &str,
    rt: &Runtime,
    keep: &mut Keep,
    personality: Personality,
) -> Result<Lane, RunError> {
    let (downstream, record) = start_witness(rt, keep, personality)?;
    let process = Arc::new(start_process(
        template,
        &[("{downstream_url}", downstream.to_url())],
    )?);
    let port = process.port;
    keep.gates.push(process.clone());
    let mut lane = plain_lane(
        TransportKind::Http,
        Profile::Gate,
        Endpoint::Http(HttpUrl::parse(&format!("http://127.0.0.1:{port}/mcp"))?),
        Some(WitnessView::Memory(record)),
    )
    .behind(personality);
    // The gate's own process is what a series measures (the witness behind it is the
    // runner's).
    lane.watch = Some(process.watch());
    lane.process = Some(process);
    Ok(lane)
}

/// An HTTP server the runner starts (`--serve`) on a free loopback port, serving `path`.
fn served_lane(
    template: &str,
    path: &str,
    profile: Profile,
    keep: &mut Keep,
) -> Result<Lane, RunError> {
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    let process = Arc::new(start_process(template, &[])?);
    keep.gates.push(process.clone());
    let port = process.port;
    let mut lane = plain_lane(
        TransportKind::Http,
        profile,
        Endpoint::Http(HttpUrl::parse(&format!("http://127.0.0.1:{port}{path}"))?),
        None,
    );
    lane.watch = Some(process.watch());
    lane.process = Some(process);
    Ok(lane)
}

/// Start `template` with `{port}` a free loopback port (and each `(name, value)` of `more`
/// replaced), waiting (bounded) until the port accepts.
fn start_process(template: &str, more: &[(&str, String)]) -> Result<GateProcess, RunError> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(RunError::Setup)?
        .port();
    let mut command = template.replace("{port}", &port.to_string());
    for (name, value) in more {
        command = command.replace(name, value);
    }
    let words = shell_words::split(&command).map_err(|_| RunError::BadTarget(command.clone()))?;
    let (program, args) = words
        .split_first()
        .ok_or_else(|| RunError::BadTarget(command.clone()))?;
    let process = GateProcess {
        program: program.clone(),
        args: args.to_vec(),
        port,
        child: std::sync::Mutex::new(None),
    };
    // A program that cannot be found is a target that cannot be tested, as for --stdio.
    let started = process.start().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => {
            RunError::Untestable {
                target: command.clone(),
                reason: format!("its program `{program}` cannot be started: {e}"),
            }
        }
        _ => RunError::Setup(e),
    })?;
    if !started {
        return Err(RunError::GateDidNotStart(port));
    }
    Ok(process)
}

/// An HTTP gate the runner started (`--gate`), which it can start again on the same port when a
/// case leaves it broken or dead.
#[derive(Debug)]
pub struct GateProcess {
    program: String,
    args: Vec<String>,
    port: u16,
    child: std::sync::Mutex<Option<std::process::Child>>,
}

impl GateProcess {
    /// How long a started gate has to accept connections.
    const START_WITHIN: Duration = Duration::from_secs(10);

    /// End the running process (if any), start the command again, and wait (bounded) until its
    /// port accepts. Whether it did; an error when the command cannot be started at all.
    fn start(&self) -> std::io::Result<bool> {
        self.stop();
        let child = std::process::Command::new(&self.program)
            .args(&self.args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        *crate::sync::lock(&self.child) = Some(child);
        let deadline = std::time::Instant::now() + Self::START_WITHIN;
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if std::time::Instant::now() > deadline {
                return Ok(false);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(true)
    }

    /// Where a lane reads this process: whichever one runs at the time (it is started again
    /// after a series or a death).
    fn watch(self: &Arc<Self>) -> crate::transport::procfs::Watch {
        let followed = self.clone();
        crate::transport::procfs::Watch::following(move || followed.pid())
    }

    /// The process running now, if one is.
    fn pid(&self) -> Option<u32> {
        crate::sync::lock(&self.child)
            .as_ref()
            .map(std::process::Child::id)
    }

    /// Kill the process and reap it.
    fn stop(&self) {
        if let Some(mut c) = crate::sync::lock(&self.child).take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A plain HTTP or stdio target.
pub(crate) fn plain_lane(
    transport: TransportKind,
    profile: Profile,
    endpoint: Endpoint,
    witness: Option<WitnessView>,
) -> Lane {
    Lane {
        id: LaneId::new(transport, profile),
        endpoint,
        witness,
        families: Vec::new(),
        serial: Arc::new(tokio::sync::Mutex::new(())),
        stateless: false,
        died_during: Arc::new(std::sync::Mutex::new(None)),
        process: None,
        watch: None,
        exclusive: Arc::default(),
        copies: None,
        embedded: false,
    }
}

/// The versions `spec` means for the opened target, and whether it keeps no sessions: every
/// known version it accepts (the default), the newest of them, or the ones given. The target is
/// probed on its first lane (`exchange::probe`), and what was found is said on stderr; a target
/// that answers no probe gets the newest legacy version, with a note.
pub(crate) fn pick_versions(opened: &Opened, spec: &Spec, settings: &Settings) -> Picked {
    if opened
        .lanes
        .iter()
        .all(|l| l.id.transport == TransportKind::Sse)
    {
        return sse_only(opened, settings);
    }
    let first = opened
        .lanes
        .iter()
        .find(|l| l.id.transport != TransportKind::Sse);
    // Given versions over stdio need no probe: statelessness is an HTTP matter.
    let needs_probe = !matches!(spec, Spec::These(_))
        || first.is_some_and(|l| l.id.transport == TransportKind::Http);
    let probe = first.filter(|_| needs_probe).map(|lane| {
        opened
            .rt
            .block_on(exchange::probe(&lane.endpoint, settings))
    });
    if let Some(p) = &probe {
        eprintln!("versions: {}", p.summary());
    }
    // The HTTP+SSE lanes beside: what their stream speaks, on the same line's terms.
    if let Some(lane) = opened
        .lanes
        .iter()
        .find(|l| l.id.transport == TransportKind::Sse && !l.embedded)
    {
        let sse = settings.speaking(crate::versions::SSE);
        let p = opened
            .rt
            .block_on(exchange::probe_sse(&lane.endpoint, &sse));
        eprintln!("versions: [sse] {}", p.sse_summary());
    }
    let accepted = probe
        .as_ref()
        .map(|p| p.accepted.clone())
        .unwrap_or_default();
    // A target that speaks no MCP is refused by the runner; the fallback is not worth a note.
    let speaks_nothing = !matches!(spec, Spec::These(_))
        && probe.as_ref().is_some_and(exchange::Probe::speaks_nothing);
    let fallback = || {
        if speaks_nothing {
            return vec![crate::versions::NEWEST_LEGACY];
        }
        eprintln!(
            "note: the target answered neither server/discover nor initialize; using {}",
            crate::versions::NEWEST_LEGACY
        );
        vec![crate::versions::NEWEST_LEGACY]
    };
    let versions = match spec {
        Spec::These(v) => v.clone(),
        Spec::Accepted if accepted.is_empty() => fallback(),
        Spec::Accepted => accepted,
        Spec::Newest => match accepted.into_iter().max() {
            Some(v) => vec![v],
            None => fallback(),
        },
    };
    let stateless = probe.as_ref().is_some_and(exchange::Probe::is_stateless);
    if stateless {
        eprintln!(
            "note: the target issues no Mcp-Session-Id (stateless); cases about sessions do not apply to it and are shown as ignored"
        );
    }
    let nothing_spoken =
        probe
            .as_ref()
            .filter(|_| speaks_nothing)
            .map(|p| match p.first_refusal() {
                Some(why) => format!("{why}; {}", p.summary()),
                None => p.summary(),
            });
    Picked {
        versions,
        stateless,
        nothing_spoken,
    }
}

/// A target of HTTP+SSE lanes only: its lanes speak 2024-11-05 whatever `--spec` says; the
/// probe (a stream, `initialize`) only tells whether it speaks MCP there at all.
fn sse_only(opened: &Opened, settings: &Settings) -> Picked {
    let Some(first) = opened.lanes.first() else {
        return Picked {
            versions: Vec::new(),
            stateless: false,
            nothing_spoken: None,
        };
    };
    let sse = settings.speaking(crate::versions::SSE);
    let probe = opened
        .rt
        .block_on(exchange::probe_sse(&first.endpoint, &sse));
    eprintln!("versions: [sse] {}", probe.sse_summary());
    Picked {
        versions: vec![crate::versions::SSE],
        stateless: false,
        nothing_spoken: probe.speaks_nothing().then(|| match probe.first_refusal() {
            Some(why) => format!("{why}; {}", probe.summary()),
            None => probe.summary(),
        }),
    }
}

/// What [`pick_versions`] decided.
#[derive(Debug, Clone)]
pub(crate) struct Picked {
    pub versions: Vec<Version>,
    /// The HTTP target keeps no sessions.
    pub stateless: bool,
    /// The probe's summary when the target answered it in no way MCP does (no version accepted
    /// or countered, no `serverInfo`, no `server/discover`) and the versions were not named, so
    /// the ones tried are a guess: the run cannot test this target.
    pub nothing_spoken: Option<String>,
}

/// Repeat the opened lanes once per version (lanes in front of lenient downstream
/// personalities only for the newest, as their family does not depend on the version).
pub(crate) fn with_versions(lanes: Vec<Lane>, picked: &Picked) -> Vec<Lane> {
    let versions = &picked.versions;
    let several = versions.len() > 1;
    let newest = versions.iter().max();
    let (sse, lanes): (Vec<Lane>, Vec<Lane>) = lanes
        .into_iter()
        .partition(|l| l.id.transport == TransportKind::Sse);
    let mut out = Vec::new();
    for v in versions.iter().filter(|_| !lanes.is_empty()) {
        for lane in &lanes {
            if lane.id.downstream.is_some() && Some(v) != newest {
                continue;
            }
            let mut lane = lane.clone();
            lane.id.version = *v;
            lane.stateless = picked.stateless && lane.id.transport == TransportKind::Http;
            lane.id.version_in_name = several;
            out.push(lane);
        }
    }
    // HTTP+SSE lanes speak their transport's version, once.
    out.extend(sse);
    out
}

/// This program, for child processes (the stdio witness, the embedded stdio gate).
pub fn self_exe(given: Option<&PathBuf>) -> Result<PathBuf, RunError> {
    match given {
        Some(p) => Ok(p.clone()),
        None => std::env::current_exe().map_err(RunError::Setup),
    }
}

/// The lanes a target resolves to, and the target's name for reports.
pub fn resolve(
    target: &Target,
    profile: Profile,
    rt: &Runtime,
    tmp: &Path,
    keep: &mut Keep,
    exe: Option<&PathBuf>,
) -> Result<(Vec<Lane>, String), RunError> {
    Ok(match target {
        Target::Http {
            url,
            witness_log,
            tls,
            pid,
            sse: _,
        } => {
            let url = HttpUrl::parse_with(url, tls)?;
            // An https target whose certificate is not trusted would fail every case the same
            // way: say so once. An unreachable one is judged case by case, as over http.
            let by = tokio::time::Instant::now() + Duration::from_secs(5);
            if let Err(TransportError::Tls(source)) =
                rt.block_on(crate::transport::http::tls_handshake(&url, by))
            {
                return Err(RunError::Certificate {
                    url: url.to_url(),
                    source,
                });
            }
            let witness = witness_log
                .as_ref()
                .map(|p| WitnessView::Log(witness::LogReader::new(p.clone())));
            let name = url.to_url();
            let mut lane = plain_lane(TransportKind::Http, profile, Endpoint::Http(url), witness);
            lane.watch = pid.map(crate::transport::procfs::Watch::pid);
            (vec![lane], name)
        }
        Target::Serve { command, path, .. } => (
            vec![served_lane(command, path, profile, keep)?],
            format!("serve: {command}"),
        ),
        Target::Stdio { command } => {
            let endpoint = Endpoint::stdio(command.clone(), None);
            (
                vec![plain_lane(TransportKind::Stdio, profile, endpoint, None)],
                format!("stdio: {command}"),
            )
        }
        Target::Gate { command } => (
            Personality::ALL
                .into_iter()
                .map(|p| gate_http_lane(command, rt, keep, p))
                .collect::<Result<Vec<_>, _>>()?,
            format!("gate: {command}"),
        ),
        Target::GateStdio { command } => {
            let exe = self_exe(exe)?;
            (
                Personality::ALL
                    .into_iter()
                    .map(|p| gate_stdio_lane(command, &exe, tmp, p))
                    .collect(),
                format!("gate (stdio): {command}"),
            )
        }
        Target::Embedded => {
            let exe = self_exe(exe)?;
            (
                embedded(rt, &exe, tmp, keep)?,
                "embedded: witness (server profile) and reference gate (gate profile)".to_string(),
            )
        }
    })
}

/// A target opened for a run: its lanes, and what they need kept alive (the runtime their
/// servers run on, per-case witness logs, child processes, server tasks), released on drop.
pub struct Opened {
    pub lanes: Vec<Lane>,
    /// The target's name, for reports.
    pub name: String,
    // Dropped in this order: processes and tasks, then the folder, then the runtime.
    _keep: Keep,
    tmp: TempDir,
    pub rt: Arc<Runtime>,
}

impl Opened {
    /// The run's temporary folder (removed when this is dropped).
    pub fn tmp(&self) -> &Path {
        &self.tmp.0
    }
}

/// Open `target` for a run or a fuzz session: start it, check that it came up, probe the
/// versions `spec` means, refuse it when it speaks no MCP (every trial would fail its handshake,
/// which says nothing of the rules), and repeat its lanes once per version. With `check` false
/// (a listing, a target `--restart-cmd` can start) it is not refused. Returned with what the
/// versions probe found.
pub(crate) fn open_lanes(
    target: &Target,
    profile: Profile,
    exe: Option<&PathBuf>,
    spec: &Spec,
    settings: &Settings,
    check: bool,
) -> Result<(Opened, Picked), RunError> {
    let mut opened = open(target, profile, exe)?;
    let refuse = |reason: String| RunError::Untestable {
        target: opened.name.clone(),
        reason,
    };
    if let Some(reason) = opened
        .lanes
        .first()
        .and_then(Lane::untestable)
        .filter(|_| check)
    {
        return Err(refuse(reason));
    }
    // A gate the runner starts may serve HTTP+SSE to its clients beside Streamable HTTP.
    let beside = SseAt::default();
    let sse = match target {
        Target::Http { sse, .. } | Target::Serve { sse, .. } => Some(sse),
        Target::Gate { .. } => Some(&beside),
        _ => None,
    };
    if let Some(sse) = sse {
        let lanes = std::mem::take(&mut opened.lanes);
        opened.lanes = find_sse(&opened.rt, lanes, sse, settings);
    }
    let picked = pick_versions(&opened, spec, settings);
    if let Some(found) = picked.nothing_spoken.as_ref().filter(|_| check) {
        return Err(refuse(format!(
            "the version probe found no protocol version it speaks ({found}); name versions with --spec to run the cases anyway"
        )));
    }
    opened.lanes = with_versions(std::mem::take(&mut opened.lanes), &picked);
    Ok((opened, picked))
}

/// The lanes of an HTTP target with its HTTP+SSE stream found (`at`): a lane whose URL opens
/// such a stream becomes a lane of that transport; else one is added beside it when the target
/// serves a stream at the path `at` names. Each finding is said on stderr.
fn find_sse(rt: &Runtime, lanes: Vec<Lane>, at: &SseAt, settings: &Settings) -> Vec<Lane> {
    // A stream whose endpoint names another origin is one too: its endpoint is then judged.
    let speaks = |url: &HttpUrl| {
        let deadline = tokio::time::Instant::now() + SSE_DETECT;
        let opened = rt.block_on(exchange::SseSession::open(url, settings, deadline));
        matches!(opened, Ok(_) | Err(exchange::SseOpenError::OtherOrigin(_)))
    };
    let mut out = Vec::new();
    for lane in lanes {
        let Endpoint::Http(url) = lane.endpoint.clone() else {
            out.push(lane);
            continue;
        };
        match at {
            SseAt::Only => out.push(over_sse(lane, url)),
            SseAt::Beside(_) if speaks(&url) => {
                eprintln!(
                    "transport: {} opens an HTTP+SSE stream (2024-11-05): tested over that transport",
                    url.to_url()
                );
                out.push(over_sse(lane, url));
            }
            SseAt::Beside(path) => {
                let beside = path.as_deref().filter(|p| *p != "none").map(|p| {
                    let mut u = url.clone();
                    u.path = if p.starts_with('/') {
                        p.to_string()
                    } else {
                        format!("/{p}")
                    };
                    u
                });
                let sse = beside.filter(|u| speaks(u)).map(|u| {
                    eprintln!(
                        "transport: {} also serves HTTP+SSE (2024-11-05) at {}: tested over both transports",
                        url.to_url(),
                        u.to_url()
                    );
                    over_sse(lane.clone(), u)
                });
                out.push(lane);
                out.extend(sse);
            }
        }
    }
    out
}

/// How long the runner waits for a URL's GET to open an HTTP+SSE stream with its `endpoint`.
const SSE_DETECT: Duration = Duration::from_secs(2);

/// `lane` made a lane of the HTTP+SSE transport at `url`: it speaks 2024-11-05, and says so in
/// its name.
pub(crate) fn over_sse(mut lane: Lane, url: HttpUrl) -> Lane {
    lane.endpoint = Endpoint::Sse(url);
    lane.id.transport = TransportKind::Sse;
    lane.id.version = crate::versions::SSE;
    lane.id.version_in_name = true;
    lane.copies = None;
    lane
}

/// Start what `target` needs and resolve it to lanes.
pub fn open(target: &Target, profile: Profile, exe: Option<&PathBuf>) -> Result<Opened, RunError> {
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(RunError::Setup)?,
    );
    let tmp = tempfile_dir()?;
    let mut keep = Keep::default();
    let (lanes, name) = resolve(target, profile, &rt, &tmp.0, &mut keep, exe)?;
    Ok(Opened {
        lanes,
        name,
        _keep: keep,
        tmp,
        rt,
    })
}

/// A temporary folder removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempfile_dir() -> Result<TempDir, RunError> {
    use rand::Rng;
    let n: u64 = rand::rng().random();
    let dir = std::env::temp_dir().join(format!("mcp-gauntlet-{}-{n:016x}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(RunError::Setup)?;
    Ok(TempDir(dir))
}

/// How a run brings a dead HTTP target back (`--restart-cmd`), and the processes it started.
pub(crate) struct Restarts {
    command: Option<String>,
    children: std::sync::Mutex<Vec<std::process::Child>>,
}

impl Restarts {
    /// Restarts with `command` (`sh -c`), or none.
    pub fn new(command: Option<String>) -> Restarts {
        Restarts {
            command,
            children: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Start the restart command and wait (30 s at most) until the lane's endpoint accepts
    /// connections again. Whether it did.
    fn restart(&self, lane: &Lane) -> bool {
        if let Some(process) = &lane.process {
            return process.start().unwrap_or_else(|e| {
                eprintln!("the target the runner started could not be started again: {e}");
                false
            });
        }
        let Some(command) = &self.command else {
            return false;
        };
        let child = std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        match child {
            Ok(c) => {
                crate::sync::lock(&self.children).push(c);
            }
            Err(e) => {
                eprintln!("the restart command could not be started: {e}");
                return false;
            }
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::time::Instant::now() < deadline {
            if lane.reachable() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// Kill every process the restart command left running.
    pub(crate) fn stop(&self) {
        for c in crate::sync::lock(&self.children).iter_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Record that the lane's target died during `case_id` (said once on stderr), and restart
    /// it when the run can. `gone.already` says the case found it gone before its own bytes
    /// were sent, `gone.listening` that it still takes connections but failed its alive check
    /// (a gate the runner started is then started again); `others` are the trials in flight
    /// beside it (`[lane] case`), any of which may have ended it. The text for the trial.
    pub(crate) fn mark_dead(
        &self,
        lane: &Lane,
        case_id: &str,
        gone: Gone,
        others: &[String],
    ) -> String {
        let running = if others.is_empty() {
            String::new()
        } else {
            format!("; running beside it: {}", others.join(", "))
        };
        let stopped = if gone.listening {
            "stopped answering (it takes connections but failed its alive check)"
        } else {
            "stopped accepting connections"
        };
        let when = if gone.already && gone.listening {
            format!("could not be set up for this case (a trial before it, or beside it, may have broken it{running})")
        } else if gone.already {
            format!("was not accepting connections when this case began (a trial before it, or beside it, ended it{running})")
        } else if others.is_empty() {
            format!("{stopped} after this case")
        } else {
            format!("{stopped} after this case (it or a trial beside it ended it{running})")
        };
        let name = format!("[{}] {case_id}", lane.id);
        let mut died = crate::sync::lock(&lane.died_during);
        if died.is_none() {
            eprintln!("the target {when}: {name}; this trial fails with the evidence");
            *died = Some(name);
        }
        if self.restart(lane) {
            if lane.process.is_some() {
                eprintln!("the target the runner started (--gate, --serve) was started again; the run goes on");
            } else {
                eprintln!("the target was restarted with --restart-cmd; the run goes on");
            }
            *died = None;
            format!("the target {when} (it was restarted)")
        } else {
            let why = if lane.process.is_some() {
                " (started again, it did not accept connections within 10 s)"
            } else if self.command.is_some() {
                " (the restart command did not bring it back within 30 s)"
            } else {
                " (give --restart-cmd to restart it)"
            };
            format!("the target {when}; the lane's later trials are not run{why}")
        }
    }
}

/// How a trial found its HTTP target gone.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Gone {
    /// Before the case's own bytes were sent.
    pub already: bool,
    /// It still takes connections (but failed its alive check).
    pub listening: bool,
}

impl Lane {
    /// Start the process the runner started for this lane again (after a series, which leaves
    /// state behind it): whether it came up, or `None` for a lane without one.
    pub(crate) fn start_afresh(&self) -> Option<bool> {
        let process = self.process.as_ref()?;
        Some(process.start().unwrap_or(false))
    }

    /// Why a trial on this lane is not run: its target died earlier and was not brought back.
    pub fn down(&self) -> Option<String> {
        let killer = crate::sync::lock(&self.died_during).clone()?;
        Some(format!(
            "not run: the target stopped accepting connections after {killer}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_target_names_the_trials_that_ran_beside_the_one_that_found_it() {
        let lane = |port: u16| {
            plain_lane(
                TransportKind::Http,
                Profile::Server,
                Endpoint::Http(
                    HttpUrl::parse(&format!("http://127.0.0.1:{port}/mcp")).expect("url"),
                ),
                None,
            )
        };
        let restarts = Restarts::new(None);
        let others = [
            "[http] nesting/a".to_string(),
            "[http] oversize/b".to_string(),
        ];
        let (already, after) = (
            Gone {
                already: true,
                listening: false,
            },
            Gone {
                already: false,
                listening: false,
            },
        );
        let found = restarts.mark_dead(&lane(9), "batch/c", already, &others);
        assert!(others.iter().all(|o| found.contains(o.as_str())), "{found}");
        let l = lane(11);
        restarts.mark_dead(&l, "batch/c", after, &others);
        assert!(l.down().is_some_and(|d| d.contains("[http] batch/c")));
        let alone = Restarts::new(None).mark_dead(&lane(10), "batch/c", after, &[]);
        assert!(!alone.contains("beside"), "{alone}");
    }
}
