//! Targets and their lanes: a [`Target`] resolved to the (transport, profile, endpoint, witness
//! record) combinations a run sends cases over, with whatever processes and servers they need,
//! kept alive until the run ends; and how a lane's dead HTTP target is noticed and restarted.
//! `run`, `fuzz`, `load` and `bench` open targets here; nothing here knows about trials.

mod in_process;
mod picking;
mod process;

pub use in_process::*;
pub(crate) use picking::*;
pub use process::*;

use crate::case::{Profile, TransportKind};
use crate::error::RunError;
use crate::report::LaneId;
use crate::settings::{Settings, Speaking};
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
    /// An HTTP target that agrees to 2025-03-26 (`Probe::batch_era`): on a server there, a
    /// batch claiming that version is legal, and cases sending one do not apply.
    pub batch_era: bool,
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
    pub(crate) fn settings(&self, run: &Arc<Settings>) -> Speaking {
        Speaking::new(run.clone(), self.id.version)
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
    pub fn untestable(&self) -> Option<(crate::error::Untestable, String)> {
        use crate::error::Untestable;
        match &self.endpoint {
            Endpoint::Http(url) | Endpoint::Sse(url) if !self.reachable() => Some((
                Untestable::Unreachable,
                format!(
                    "nothing accepts connections at {}:{} (is it running?)",
                    url.host, url.port
                ),
            )),
            Endpoint::Http(_) | Endpoint::Sse(_) => None,
            Endpoint::Stdio { command, .. } => {
                match crate::transport::stdio::StdioCommand::parse(command) {
                    Ok(c) if c.program_found() => None,
                    Ok(c) => Some((
                        Untestable::NoProgram,
                        format!("its program `{}` cannot be found", c.program),
                    )),
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
        batch_era: false,
        died_during: Arc::new(std::sync::Mutex::new(None)),
        process: None,
        watch: None,
        exclusive: Arc::default(),
        copies: None,
        embedded: false,
    }
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
    settings: &Arc<Settings>,
    check: bool,
) -> Result<(Opened, Picked), RunError> {
    let mut opened = open(target, profile, exe)?;
    // The probes ask in the versions they try; until then, the run speaks the newest legacy one.
    let settings = &Speaking::new(settings.clone(), crate::versions::NEWEST_LEGACY);
    let refuse = |kind, reason: String| RunError::Untestable {
        target: opened.name.clone(),
        kind,
        reason,
    };
    if let Some((kind, reason)) = opened
        .lanes
        .first()
        .and_then(Lane::untestable)
        .filter(|_| check)
    {
        return Err(refuse(kind, reason));
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
        return Err(refuse(crate::error::Untestable::NoVersion, format!(
            "the version probe found no protocol version it speaks ({found}); name versions with --spec to run the cases anyway"
        )));
    }
    opened.lanes = with_versions(std::mem::take(&mut opened.lanes), &picked);
    Ok((opened, picked))
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
        assert_eq!(
            l.down().map(|d| d.died_during),
            Some(format!("[{}] batch/c", l.id))
        );
        let alone = Restarts::new(None).mark_dead(&lane(10), "batch/c", after, &[]);
        assert!(!alone.contains("beside"), "{alone}");
        // Nothing could bring it back, and the reason is a kind, not a sentence.
        assert!(matches!(
            Restarts::new(None).restart(&lane(10)),
            Err(NotRestarted::NoCommand)
        ));
    }
}
