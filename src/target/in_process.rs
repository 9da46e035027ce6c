//! In-process serving: the witness and the reference gate served on the run's runtime, the
//! embedded default's lanes, and copies of an in-process target so its trials run concurrently.

use super::*;

/// The witness policy the embedded gate runs with (also `fixtures/gate/witness-policy.json`).
pub const WITNESS_POLICY: &str = include_str!("../../fixtures/gate/witness-policy.json");

/// A witness served in-process over HTTP on the current runtime: its URL, its record and its
/// server task.
pub(super) async fn serve_witness(
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
pub(super) async fn serve_sse_witness() -> Result<Instance, RunError> {
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
pub(super) fn start_witness(
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
pub(super) enum InProcess {
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
pub(super) async fn serve(what: InProcess) -> Result<Instance, RunError> {
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
pub(super) async fn serve_gate(
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
    pub(super) fn new(what: InProcess) -> Arc<Copies> {
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
pub(super) fn stdio_witness_command(exe: &Path, personality: Personality) -> String {
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
pub(super) fn in_process_gate(
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
