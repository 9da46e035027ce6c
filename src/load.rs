//! `mcp-gauntlet load`: concurrent clients, each with its own MCP session (over stdio: its own
//! server process), calling `echo` with a token only that request carries; every answer is checked (status, right id, right token), so a
//! lost answer or one crossed between clients is counted, not averaged away. Reports throughput
//! and latency percentiles per lane; for the embedded default, the gate against the witness it
//! fronts, as a ratio.

use crate::case::{Body, Profile, TransportKind};
use crate::error::RunError;
use crate::target::Target;
use crate::target::{self, Lane};
use crate::transport::exchange::Endpoint;
use crate::transport::http::{exchange, sse_messages, HttpUrl, SseRead, Wire};
use crate::transport::stdio::{Line, StdioCommand, StdioProcess};
use crate::versions::Version;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Options of `mcp-gauntlet load`.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub target: Target,
    /// Concurrent clients, each with its own session.
    pub concurrency: usize,
    /// Total requests (spread over the clients)…
    pub requests: Option<u64>,
    /// …or as many as fit in this long.
    pub time: Option<Duration>,
    /// Per-request deadline.
    pub request_timeout: Duration,
    /// The protocol version asked for in initialize.
    pub spec_version: Version,
    /// Every client numbers its requests from 1, as SDK clients do (by default each client's
    /// ids are its own): a server that matches answers to requests by id alone, across
    /// clients, then hands one client another's answer (CVE-2026-25536).
    pub same_ids: bool,
    pub self_exe: Option<PathBuf>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            target: Target::Embedded,
            concurrency: 8,
            requests: None,
            time: None,
            request_timeout: Duration::from_secs(10),
            spec_version: crate::versions::NEWEST_LEGACY,
            same_ids: false,
            self_exe: None,
        }
    }
}

/// What one lane did under load.
#[derive(Debug, Clone, PartialEq)]
pub struct LaneLoad {
    pub lane: String,
    pub sent: u64,
    /// Answered with the request's own id and token.
    pub ok: u64,
    /// Answered with the request's id, but with an error (a refusal, a downstream failure).
    pub errors: u64,
    /// Answered, but with another id or another request's result: crossed or corrupted.
    pub wrong: u64,
    /// No usable answer: a transport error, a timeout, a non-200 status, or no JSON-RPC response.
    pub lost: u64,
    pub seconds: f64,
    pub per_second: f64,
    /// Latency percentiles in microseconds: p50, p90, p99, max.
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl LaneLoad {
    pub fn clean(&self) -> bool {
        self.ok == self.sent
    }
}

async fn post(
    url: &HttpUrl,
    session: Option<&str>,
    version: Option<&str>,
    body: Vec<u8>,
    deadline: tokio::time::Instant,
) -> Option<(u16, Option<String>, Option<Value>)> {
    // None: nothing usable came back (a transport error, a timeout, a cut or oversize body).
    let mut headers = vec![
        ("host".to_string(), url.authority()),
        ("content-type".into(), "application/json".into()),
        (
            "accept".into(),
            "application/json, text/event-stream".into(),
        ),
        ("connection".into(), "close".into()),
        ("content-length".into(), body.len().to_string()),
    ];
    if let Some(s) = session {
        headers.push(("mcp-session-id".into(), s.into()));
    }
    if let Some(v) = version {
        headers.push(("mcp-protocol-version".into(), v.into()));
    }
    let wire = Wire::Request {
        method: hyper::Method::POST,
        path: url.path.clone(),
        headers,
        body: Body::from_bytes(body),
        chunked: false,
    };
    let resp = exchange(url, wire, deadline, SseRead::ToFirstResponse)
        .await
        .ok()?;
    if resp.timed_out || resp.cut_short || resp.truncated {
        return None;
    }
    let session = resp.header("mcp-session-id").map(str::to_string);
    let message = if resp.is_sse() {
        sse_messages(&resp.body)
            .into_iter()
            .filter_map(Result::ok)
            .find(|m| m.get("result").is_some() || m.get("error").is_some())
    } else {
        serde_json::from_slice(&resp.body).ok()
    };
    Some((resp.status, session, message))
}

/// One client's connection: an HTTP session, or a stdio server process of its own.
enum Conn {
    Http {
        url: HttpUrl,
        session: Option<String>,
        version: Version,
    },
    Stdio(Box<StdioProcess>),
}

impl Conn {
    /// Send one message; for a request, return the response with its id (`None`: nothing usable
    /// came back before the deadline).
    async fn call(&mut self, msg: &Value, deadline: tokio::time::Instant) -> Option<Value> {
        let body = msg.to_string().into_bytes();
        let expects = msg.get("id").is_some();
        match self {
            Conn::Http {
                url,
                session,
                version,
            } => {
                let is_init = msg["method"] == "initialize";
                let v = (!is_init).then(|| version.to_string());
                let (status, sid, m) =
                    post(url, session.as_deref(), v.as_deref(), body, deadline).await?;
                if is_init {
                    *session = sid;
                }
                (status == 200 || !expects).then_some(m).flatten()
            }
            Conn::Stdio(p) => {
                let mut line = body;
                line.push(b'\n');
                p.send(Body::from_bytes(line)).await;
                if !expects {
                    return None;
                }
                loop {
                    match p.read_line(deadline).await.ok()? {
                        Line::Text(t) => {
                            let v: Value = serde_json::from_slice(&t).ok()?;
                            if v.get("result").is_some() || v.get("error").is_some() {
                                return Some(v);
                            }
                            // A server notification or request: not an answer.
                        }
                        Line::TooLong(_) | Line::Eof => return None,
                    }
                }
            }
        }
    }
}

/// What one client saw.
#[derive(Default)]
struct Tally {
    /// Latencies of the right answers.
    latencies: Vec<Duration>,
    errors: u64,
    wrong: u64,
    lost: u64,
    sent: u64,
}

/// One client: a session of its own, then calls until told to stop.
async fn client(
    mut conn: Conn,
    c: usize,
    id_base: u64,
    quota: Option<u64>,
    stop: Option<Instant>,
    timeout: Duration,
    version: Version,
) -> Tally {
    let mut t = Tally::default();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "mcp-gauntlet-load", "version": env!("CARGO_PKG_VERSION")}}});
    let deadline = || tokio::time::Instant::now() + timeout;
    match conn.call(&init, deadline()).await {
        Some(m) if m.get("result").is_some() => {}
        _ => {
            let n = quota.unwrap_or(1);
            return Tally {
                lost: n,
                sent: n,
                ..Tally::default()
            };
        }
    }
    let notify = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    conn.call(&notify, deadline()).await;
    let salt: u32 = rand::random();
    loop {
        if quota.is_some_and(|q| t.sent >= q) || stop.is_some_and(|s| Instant::now() >= s) {
            break;
        }
        let id = id_base + t.sent + 1;
        let token = format!("load-{salt:08x}-c{c}-r{}", t.sent);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": token}}});
        t.sent += 1;
        let started = Instant::now();
        match conn.call(&body, deadline()).await {
            Some(m) if m.get("id") != Some(&json!(id)) => t.wrong += 1,
            Some(m) if m.get("error").is_some() => t.errors += 1,
            Some(m) if m.pointer("/result/content/0/text") == Some(&json!(token)) => {
                t.latencies.push(started.elapsed())
            }
            Some(_) => t.wrong += 1,
            None => t.lost += 1,
        }
    }
    if let Conn::Stdio(p) = conn {
        p.kill().await;
    }
    t
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let k = ((sorted.len() as f64 * p) as usize).min(sorted.len() - 1);
    sorted[k].as_secs_f64() * 1e6
}

/// Where a lane's clients connect.
#[derive(Debug, Clone)]
pub(crate) enum LoadEndpoint {
    Http(HttpUrl),
    /// A stdio server command, started once per client.
    Stdio(String),
}

/// Load one lane.
pub(crate) async fn load_lane(endpoint: &LoadEndpoint, name: &str, opts: &LoadOptions) -> LaneLoad {
    let clients = opts.concurrency.max(1);
    let (per, extra) = match opts.requests {
        Some(n) => (Some(n / clients as u64), n % clients as u64),
        None => (None, 0),
    };
    let started = Instant::now();
    let stop = opts.time.map(|t| started + t);
    let mut tasks = Vec::new();
    let mut lost_at_start = 0;
    for c in 0..clients {
        let quota = per.map(|q| q + u64::from((c as u64) < extra));
        let conn = match endpoint {
            LoadEndpoint::Http(url) => Conn::Http {
                url: url.clone(),
                session: None,
                version: opts.spec_version,
            },
            LoadEndpoint::Stdio(command) => {
                match StdioCommand::parse(command).and_then(|cmd| StdioProcess::spawn(&cmd)) {
                    Ok(p) => Conn::Stdio(Box::new(p)),
                    Err(_) => {
                        lost_at_start += quota.unwrap_or(1);
                        continue;
                    }
                }
            }
        };
        let id_base = if opts.same_ids {
            0
        } else {
            (c as u64) * 1_000_000_000
        };
        tasks.push(tokio::spawn(client(
            conn,
            c,
            id_base,
            quota,
            stop,
            opts.request_timeout,
            opts.spec_version,
        )));
    }
    let mut all = Tally {
        lost: lost_at_start,
        sent: lost_at_start,
        ..Tally::default()
    };
    for t in tasks {
        match t.await {
            Ok(t) => {
                all.latencies.extend(t.latencies);
                all.errors += t.errors;
                all.wrong += t.wrong;
                all.lost += t.lost;
                all.sent += t.sent;
            }
            // A client task that died lost whatever it had not finished.
            Err(_) => all.lost += 1,
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut lat = all.latencies;
    lat.sort();
    LaneLoad {
        lane: name.to_string(),
        sent: all.sent,
        ok: lat.len() as u64,
        errors: all.errors,
        wrong: all.wrong,
        lost: all.lost,
        seconds,
        per_second: lat.len() as f64 / seconds.max(1e-9),
        p50_us: percentile(&lat, 0.5),
        p90_us: percentile(&lat, 0.9),
        p99_us: percentile(&lat, 0.99),
        max_us: lat.last().map_or(0.0, |d| d.as_secs_f64() * 1e6),
    }
}

/// The lanes load can drive: the strict-downstream ones (personality lanes repeat a gate). A stdio
/// command's per-case `{witness_log}` goes to a file in `tmp`.
fn loadable(lane: &Lane, tmp: &std::path::Path) -> Option<LoadEndpoint> {
    if lane.id.downstream.is_some() {
        return None;
    }
    match (&lane.endpoint, lane.id.transport) {
        (Endpoint::Http(url), TransportKind::Http) => Some(LoadEndpoint::Http(url.clone())),
        (Endpoint::Stdio { command, .. }, TransportKind::Stdio) => {
            let log = tmp.join("load-witness.jsonl");
            let quoted = shell_words::quote(&log.to_string_lossy()).into_owned();
            Some(LoadEndpoint::Stdio(
                command.replace("{witness_log}", &quoted),
            ))
        }
        _ => None,
    }
}

/// Run the load. Blocks. One result per lane of the target, one lane after another.
pub fn load(opts: LoadOptions) -> Result<Vec<LaneLoad>, RunError> {
    let opened = target::open(&opts.target, Profile::Server, opts.self_exe.as_ref())?;
    let mut out = Vec::new();
    for lane in &opened.lanes {
        if let Some(endpoint) = loadable(lane, opened.tmp()) {
            out.push(
                opened
                    .rt
                    .block_on(load_lane(&endpoint, &lane.id.to_string(), &opts)),
            );
        }
    }
    Ok(out)
}

/// The results as text: one line per lane, then, when both are there, the gate against the
/// witness it fronts (throughput ratio and added p50 latency).
pub fn summary(results: &[LaneLoad]) -> String {
    let mut out = String::new();
    for r in results {
        out.push_str(&format!(
            "[{}] {} sent, {} ok, {} errors, {} wrong, {} lost in {:.2} s: {:.0}/s, p50 {:.0} us, p90 {:.0} us, p99 {:.0} us, max {:.0} us\n",
            r.lane, r.sent, r.ok, r.errors, r.wrong, r.lost, r.seconds, r.per_second, r.p50_us, r.p90_us, r.p99_us, r.max_us
        ));
    }
    let find = |name: &str| results.iter().find(|r| r.lane == name);
    for transport in ["http", "stdio"] {
        if let (Some(direct), Some(gate)) = (find(transport), find(&format!("gate/{transport}"))) {
            out.push_str(&format!(
                "gate vs direct ({transport}): throughput ratio {:.2}, p50 added {:.0} us\n",
                gate.per_second / direct.per_second.max(1e-9),
                gate.p50_us - direct.p50_us
            ));
        }
    }
    out
}
