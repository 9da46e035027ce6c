//! Lanes: a target resolved to the (transport, profile, endpoint, witness record) combinations a
//! run sends cases over, with whatever processes and servers they need, kept alive until the run
//! ends.

use crate::case::{Profile, TransportKind};
use crate::run::RunError;
use crate::transport::exchange::Endpoint;
use crate::transport::http::HttpUrl;
use crate::witness::{self, Recorder, Witness, WitnessConfig, WitnessView};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;

/// The witness policy the embedded gate runs with (also `fixtures/gate/witness-policy.json`).
pub const WITNESS_POLICY: &str = include_str!("../fixtures/gate/witness-policy.json");

/// One way of sending cases.
#[derive(Debug)]
pub struct Lane {
    pub transport: TransportKind,
    pub profile: Profile,
    /// Shown before the case id: `[http]`, `[gate/stdio]`…
    pub kind: String,
    pub endpoint: Endpoint,
    /// Where the runner reads what reached the witness, when it is shared by the lane's cases.
    pub witness: Option<WitnessView>,
}

/// Things a run keeps alive: child processes (killed on drop) and server tasks.
#[derive(Default)]
pub struct Keep {
    children: Vec<std::process::Child>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Keep {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn kind(transport: TransportKind, profile: Profile) -> String {
    match profile {
        Profile::Server => transport.as_str().to_string(),
        Profile::Gate => format!("gate/{}", transport.as_str()),
    }
}

/// A witness served in-process over HTTP, and its record.
fn start_witness(rt: &Runtime, keep: &mut Keep) -> Result<(HttpUrl, Recorder), RunError> {
    let recorder = Recorder::default();
    let w = Arc::new(Witness::new(WitnessConfig::default(), recorder.clone()));
    let addr = "127.0.0.1:0"
        .parse()
        .map_err(|_| RunError::Setup(std::io::Error::other("address")))?;
    let (addr, task) = rt
        .block_on(witness::http::spawn(addr, w))
        .map_err(RunError::Witness)?;
    keep.tasks.push(task);
    Ok((
        HttpUrl::parse(&format!("http://{addr}{}", witness::http::PATH))?,
        recorder,
    ))
}

/// The stdio witness command with a per-case `{witness_log}`.
fn stdio_witness_command(exe: &Path) -> String {
    format!(
        "{} witness --stdio --log {{witness_log}}",
        shell_words::quote(&exe.to_string_lossy())
    )
}

/// The lanes of the embedded default: the witness alone (server profile) and the reference gate
/// in front of a witness (gate profile), each over HTTP and stdio.
pub fn embedded(
    rt: &Runtime,
    exe: &Path,
    tmp: &Path,
    keep: &mut Keep,
) -> Result<Vec<Lane>, RunError> {
    let (witness_url, witness_record) = start_witness(rt, keep)?;
    let mut lanes = vec![
        Lane {
            transport: TransportKind::Http,
            profile: Profile::Server,
            kind: kind(TransportKind::Http, Profile::Server),
            endpoint: Endpoint::Http(witness_url),
            witness: Some(WitnessView::Memory(witness_record)),
        },
        Lane {
            transport: TransportKind::Stdio,
            profile: Profile::Server,
            kind: kind(TransportKind::Stdio, Profile::Server),
            endpoint: Endpoint::Stdio {
                command: stdio_witness_command(exe),
                log_dir: Some(tmp.to_path_buf()),
            },
            witness: None,
        },
    ];

    // The gate in-process over HTTP, in front of its own witness.
    let (downstream, record) = start_witness(rt, keep)?;
    let mut cfg: reference_gate::config::GateConfig = serde_json::from_str(WITNESS_POLICY)
        .map_err(|e| RunError::Setup(std::io::Error::other(e)))?;
    cfg.servers.insert(
        cfg.server.clone(),
        reference_gate::config::Server::Url(downstream.to_url()),
    );
    let proxy = reference_gate::cli::build_proxy(&cfg)
        .map_err(|e| RunError::Setup(std::io::Error::other(e.to_string())))?;
    let front = reference_gate::front::http::HttpFront::new(
        proxy,
        reference_gate::cli::http_settings(&cfg),
    );
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .map_err(RunError::Witness)?;
    let addr = listener.local_addr().map_err(RunError::Witness)?;
    keep.tasks
        .push(rt.spawn(reference_gate::front::http::serve(listener, front)));
    lanes.push(Lane {
        transport: TransportKind::Http,
        profile: Profile::Gate,
        kind: kind(TransportKind::Http, Profile::Gate),
        endpoint: Endpoint::Http(HttpUrl::parse(&format!(
            "http://{addr}{}",
            reference_gate::front::http::PATH
        ))?),
        witness: Some(WitnessView::Memory(record)),
    });

    // The gate over stdio, as this binary's `reference-gate` command, started per case in front
    // of a stdio witness that logs where the runner reads it.
    let config_path = tmp.join("gate-config.json");
    std::fs::write(&config_path, WITNESS_POLICY).map_err(RunError::Setup)?;
    let template = format!(
        "{} reference-gate --config {} --stdio --downstream-cmd {{downstream_cmd}}",
        shell_words::quote(&exe.to_string_lossy()),
        shell_words::quote(&config_path.to_string_lossy()),
    );
    lanes.push(gate_stdio_lane(&template, exe, tmp));
    Ok(lanes)
}

/// A stdio gate: `{downstream_cmd}` in `template` becomes a stdio witness logging per case.
pub fn gate_stdio_lane(template: &str, exe: &Path, tmp: &Path) -> Lane {
    let command = template.replace(
        "{downstream_cmd}",
        &shell_words::quote(&stdio_witness_command(exe)),
    );
    Lane {
        transport: TransportKind::Stdio,
        profile: Profile::Gate,
        kind: kind(TransportKind::Stdio, Profile::Gate),
        endpoint: Endpoint::Stdio {
            command,
            log_dir: Some(tmp.to_path_buf()),
        },
        witness: None,
    }
}

/// An HTTP gate the runner starts: `{downstream_url}` is an in-process witness, `{port}` a free
/// loopback port where the gate must serve `/mcp`. Waits (bounded) until the port accepts.
pub fn gate_http_lane(template: &str, rt: &Runtime, keep: &mut Keep) -> Result<Lane, RunError> {
    let (downstream, record) = start_witness(rt, keep)?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(RunError::Setup)?
        .port();
    let command = template
        .replace("{downstream_url}", &downstream.to_url())
        .replace("{port}", &port.to_string());
    let words = shell_words::split(&command).map_err(|_| RunError::BadTarget(command.clone()))?;
    let (program, args) = words
        .split_first()
        .ok_or_else(|| RunError::BadTarget(command.clone()))?;
    let child = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(RunError::Setup)?;
    keep.children.push(child);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if std::time::Instant::now() > deadline {
            return Err(RunError::GateDidNotStart(port));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Lane {
        transport: TransportKind::Http,
        profile: Profile::Gate,
        kind: kind(TransportKind::Http, Profile::Gate),
        endpoint: Endpoint::Http(HttpUrl::parse(&format!("http://127.0.0.1:{port}/mcp"))?),
        witness: Some(WitnessView::Memory(record)),
    })
}

/// A plain HTTP or stdio target.
pub fn plain_lane(
    transport: TransportKind,
    profile: Profile,
    endpoint: Endpoint,
    witness: Option<WitnessView>,
) -> Lane {
    Lane {
        transport,
        profile,
        kind: kind(transport, profile),
        endpoint,
        witness,
    }
}

/// This program, for child processes (the stdio witness, the embedded stdio gate).
pub fn self_exe(given: Option<&PathBuf>) -> Result<PathBuf, RunError> {
    match given {
        Some(p) => Ok(p.clone()),
        None => std::env::current_exe().map_err(RunError::Setup),
    }
}
