//! One case over one transport: the MCP handshake (when the case wants a session), the case's
//! bytes, the answer, the witness's record, and the alive probe, all before their deadlines.

use super::http::{self, Caps, HttpResponse, HttpUrl, Wire};
use super::pacing::{Order, Pacing, Probed};
use super::stdio::{Line, StdioCommand, StdioProcess};
use super::{Ending, HttpSeen, Observation, TransportError};
use crate::case::{Body, BodySpec, Case, Placeholders, SessionMode};
use crate::record::{Event, LogReader, WitnessView};
use crate::settings::Settings;
use crate::versions;
use base64::Engine as _;
use reference_gate::error_chain as chain;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::time::Instant;

/// The id of the runner's own initialize, barrier and probe requests.
pub const INIT_ID: &str = "gauntlet-init";
pub const BARRIER_ID: &str = "gauntlet-barrier";
pub const PROBE_ID: &str = "gauntlet-alive";
/// How much answer text the oracles scan.
const SCAN_KEEP: usize = 1024 * 1024;
const PREFIX_KEEP: usize = 512;

/// Where the cases go.
#[derive(Debug, Clone)]
pub enum Endpoint {
    Http(HttpUrl),
    /// A stdio server started afresh for every case. If the command holds `{witness_log}`, each
    /// case gets its own log file there and the runner reads it as the witness's record.
    Stdio {
        command: String,
        log_dir: Option<std::path::PathBuf>,
        /// What the run learned about how the target orders its answers (the settle window).
        pacing: std::sync::Arc<Pacing>,
    },
}

impl Endpoint {
    /// A stdio target started with `command` for every case (see [`Endpoint::Stdio`]).
    pub fn stdio(command: impl Into<String>, log_dir: Option<std::path::PathBuf>) -> Endpoint {
        Endpoint::Stdio {
            command: command.into(),
            log_dir,
            pacing: std::sync::Arc::default(),
        }
    }
}

/// What a handshake established.
#[derive(Debug, Clone, Default)]
struct Handshake {
    session: Option<String>,
    version: String,
}

/// Placeholders known before any exchange: tool names, the requested version, the code table.
pub fn base_placeholders(settings: &Settings) -> Placeholders {
    let mut p = Placeholders::default();
    let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t.as_bytes());
    p.set("denied_tool", settings.denied_tool.clone())
        .set("allowed_tool", settings.allowed_tool.clone())
        .set("denied_tool_b64", b64(&settings.denied_tool))
        .set("allowed_tool_b64", b64(&settings.allowed_tool))
        .set("protocol_version", settings.spec_version.clone())
        .set("session_id", "")
        .set(
            "meta",
            if versions::is_modern(&settings.spec_version) {
                versions::request_meta(&settings.spec_version).to_string()
            } else {
                "{}".to_string()
            },
        )
        .set(
            "code_malformed",
            settings.code_table().malformed.to_string(),
        )
        .set("code_denied", settings.code_table().denied.to_string())
        .set(
            "code_downstream",
            settings.code_table().downstream.to_string(),
        );
    // A raw request's header line carrying the good token (empty without one), so raw framing
    // cases reach an endpoint that wants a token.
    let mut auth_header = String::new();
    for (name, token) in &settings.auth_tokens {
        p.set(name, token.clone());
        if *name == "token_good" {
            auth_header = format!("Authorization: Bearer {token}\r\n");
        }
    }
    p.set("auth_header", auth_header);
    if let Some(tool) = &settings.scoped_tool {
        p.set("scoped_tool", tool.clone());
    }
    p
}

/// Run `case` against `endpoint`. `witness` is where the runner reads what reached the witness
/// (for a stdio endpoint with `{witness_log}` the per-case log is used instead).
pub async fn run_case(
    case: &Case,
    endpoint: &Endpoint,
    settings: &Settings,
    witness: Option<&WitnessView>,
    check_alive: bool,
) -> Observation {
    let started = Instant::now();
    // The side channel's length before the case: whatever is appended after is this case's.
    let log_start = settings
        .canary_log
        .as_ref()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()));
    let mut obs = match endpoint {
        Endpoint::Http(url) => run_http(case, url, settings, witness, check_alive).await,
        Endpoint::Stdio {
            command,
            log_dir,
            pacing,
        } => {
            let target = StdioTarget {
                command,
                log_dir: log_dir.as_deref(),
                pacing,
            };
            run_stdio(case, &target, settings, witness, check_alive).await
        }
    };
    obs.elapsed = started.elapsed();
    if let (Some(path), Some(start)) = (&settings.canary_log, log_start) {
        obs.canary_log = Some(appended_since(path, start));
    }
    obs
}

/// What was appended to `path` after its first `start` bytes (at most 4 KiB of it, lossy).
fn appended_since(path: &std::path::Path, start: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let mut buf = Vec::new();
    // A log that shrank was rotated or truncated: read it from the start.
    let len = f.metadata().map_or(0, |m| m.len());
    let from = if len < start { 0 } else { start };
    if f.seek(SeekFrom::Start(from)).is_err() {
        return String::new();
    }
    let _ = f.take(4096).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Further HTTP responses in the bytes read after the first one on a connection, with the
/// JSON-RPC messages in each one's body (JSON or SSE).
pub fn trailing_answers(bytes: &[u8]) -> Vec<super::TrailingAnswer> {
    http::responses_in(bytes)
        .into_iter()
        .map(|(status, body)| {
            let messages = match parse_answer_json(&body) {
                Some(v) => vec![v],
                None => http::sse_messages(&body).into_iter().flatten().collect(),
            };
            super::TrailingAnswer { status, messages }
        })
        .collect()
}

/// One JSON value from an answer's bytes. JSON allows an escaped lone surrogate (`"\ud800"`),
/// which serde_json refuses: such a text is read with the escape replaced by U+FFFD, so an
/// answer that echoes one is still a JSON-RPC answer. Raw invalid UTF-8 is still not JSON.
pub fn parse_answer_json(bytes: &[u8]) -> Option<Value> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) => Some(v),
        Err(_) => serde_json::from_slice(&replace_lone_surrogate_escapes(bytes)?).ok(),
    }
}

/// `bytes` with every `\uD800`–`\uDFFF` escape that is not half of a pair replaced by
/// `\uFFFD`; `None` when there is none.
fn replace_lone_surrogate_escapes(bytes: &[u8]) -> Option<Vec<u8>> {
    let hex = |b: &[u8]| -> Option<u16> {
        let s = std::str::from_utf8(b).ok()?;
        u16::from_str_radix(s, 16).ok()
    };
    let escape_at = |i: usize| -> Option<u16> {
        (bytes.get(i) == Some(&b'\\') && bytes.get(i + 1) == Some(&b'u'))
            .then(|| hex(bytes.get(i + 2..i + 6)?))
            .flatten()
    };
    let mut out = Vec::with_capacity(bytes.len());
    let mut changed = false;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            if let Some(u) = escape_at(i) {
                let pair = (0xD800..0xDC00).contains(&u)
                    && escape_at(i + 6).is_some_and(|l| (0xDC00..0xE000).contains(&l));
                if pair {
                    out.extend_from_slice(&bytes[i..i + 12]);
                    i += 12;
                } else if (0xD800..0xE000).contains(&u) {
                    out.extend_from_slice(b"\\uFFFD");
                    changed = true;
                    i += 6;
                } else {
                    out.extend_from_slice(&bytes[i..i + 6]);
                    i += 6;
                }
                continue;
            }
            // Any other escape: copy it whole, so `\\u…` is not taken for a `\u` escape.
            out.extend_from_slice(&bytes[i..(i + 2).min(bytes.len())]);
            i += 2;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    changed.then_some(out)
}

/// Fill in what the case's body says about itself: its id, method, and whether it is a request.
/// Returns the body as the runner reads it (a plain JSON reading), when it can.
fn note_request(obs: &mut Observation, body: &Body, denied_tool: &str) -> Option<Value> {
    obs.expects_response = true;
    let bytes = body.to_vec_within(8 * 1024 * 1024)?;
    obs.denied_ids = denied_call_ids(&bytes, denied_tool);
    // A BOM is skipped here so the runner can know the id of a request a server may accept.
    let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&bytes);
    let value = serde_json::from_slice::<Value>(bytes).ok()?;
    if let Value::Object(o) = &value {
        obs.request_readable = true;
        obs.request_id = o.get("id").cloned();
        obs.expects_response = o.contains_key("id");
        obs.request_method = o.get("method").and_then(Value::as_str).map(str::to_string);
    }
    Some(value)
}

/// Ids that every reading of `bytes` (each personality's, over the whole body and over each
/// line) gives to a `tools/call` of `denied_tool`, and no reading gives to anything else. An id
/// that some reading takes as another method or tool (a duplicate `name`, say) is left out: its
/// successful answer could be the harmless reading's.
pub fn denied_call_ids(bytes: &[u8], denied_tool: &str) -> Vec<Value> {
    use crate::reading::{self as json, Personality};
    let mut denied: Vec<Value> = Vec::new();
    let mut other: Vec<Value> = Vec::new();
    let mut visit = |m: &Value| {
        let Some(id) = m.get("id").filter(|i| !i.is_null()) else {
            return;
        };
        let is_denied = m.get("method").and_then(Value::as_str) == Some("tools/call")
            && m.get("params")
                .and_then(|p| p.get("name"))
                .and_then(Value::as_str)
                == Some(denied_tool);
        let list = if is_denied { &mut denied } else { &mut other };
        if !list.contains(id) {
            list.push(id.clone());
        }
    };
    let stripped = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let pieces = std::iter::once(stripped).chain(
        stripped
            .split(|b| *b == b'\n')
            .filter(|_| stripped.contains(&b'\n')),
    );
    for piece in pieces {
        for p in Personality::ALL {
            for v in json::read(p, piece).unwrap_or_default() {
                match &v {
                    Value::Array(items) => items.iter().for_each(&mut visit),
                    one => visit(one),
                }
            }
        }
    }
    denied.retain(|id| !other.contains(id));
    denied
}

/// The body as a lenient JSON reader takes it (comments, NaN, BOM, repaired UTF-8, last
/// duplicate wins), when that reading is one message.
fn lenient_reading(body: &Body) -> Option<Value> {
    let bytes = body.to_vec_within(8 * 1024 * 1024)?;
    let mut values = crate::reading::read(crate::reading::Personality::Lenient, &bytes).ok()?;
    (values.len() == 1).then(|| values.remove(0))
}

/// The modern version this case speaks, if the lane is modern and the case wants the runner's
/// usual setup (`session: initialized`): then the runner gives every request the per-request
/// `_meta` and, over HTTP, the mirrored headers. `session: none` sends the case's bytes bare.
fn modern_setup<'a>(case: &Case, settings: &'a Settings) -> Option<&'a str> {
    (versions::is_modern(&settings.spec_version) && case.spec.session == SessionMode::Initialized)
        .then_some(settings.spec_version.as_str())
}

/// The case's body with placeholders replaced; a JSON body gets the modern `_meta` when `modern`.
fn case_body(ph: &Placeholders, spec: Option<&BodySpec>, modern: Option<&str>) -> Body {
    match (spec, modern) {
        (Some(BodySpec::Json(v)), Some(version)) => {
            let mut value = ph.apply_json_value(v);
            versions::add_meta(&mut value, version);
            Body::from_bytes(serde_json::to_vec(&value).unwrap_or_default())
        }
        _ => ph.body(spec),
    }
}

/// The settings the case's handshake uses: its own `handshake_version`, when it names one.
fn handshake_settings(case: &Case, settings: &Settings) -> Settings {
    let mut s = settings.clone();
    if let Some(v) = &case.spec.handshake_version {
        s.spec_version = v.clone();
    }
    s
}

/// The request the runner's alive probe and stdio barrier send: `ping`, which 2026-07-28
/// removed; there `server/discover`, which every modern server must implement.
fn liveness_method(settings: &Settings) -> &'static str {
    if versions::is_modern(&settings.spec_version) {
        "server/discover"
    } else {
        "ping"
    }
}

/// A runner-made request (ping, initialize) in the lane's era.
fn own_request(settings: &Settings, id: &str, method: &str) -> Value {
    let mut m = json!({"jsonrpc": "2.0", "id": id, "method": method});
    if versions::is_modern(&settings.spec_version) {
        versions::add_meta(&mut m, &settings.spec_version);
    }
    m
}

// ---------------------------------------------------------------------------------------------
// HTTP

/// The headers every runner request starts with. `own` is a runner-made message (ping,
/// initialize), whose version and mirrored headers a modern lane adds.
fn standard_headers(
    url: &HttpUrl,
    settings: &Settings,
    hs: Option<&Handshake>,
    own: Option<&Value>,
) -> Vec<(String, String)> {
    let mut h = vec![
        ("host".to_string(), url.authority()),
        ("content-type".to_string(), "application/json".to_string()),
        (
            "accept".to_string(),
            "application/json, text/event-stream".to_string(),
        ),
        ("connection".to_string(), "close".to_string()),
    ];
    if let Some(hs) = hs {
        if let Some(s) = &hs.session {
            h.push(("mcp-session-id".into(), s.clone()));
        }
        h.push(("mcp-protocol-version".into(), hs.version.clone()));
    }
    // Runner-made requests in a modern lane carry their version and mirrored headers.
    if hs.is_none() && versions::is_modern(&settings.spec_version) {
        if let Some(m) = own {
            h.push(("mcp-protocol-version".into(), settings.spec_version.clone()));
            h.extend(versions::mirrored_headers(m));
        }
    }
    for (k, v) in &settings.extra_headers {
        h.push((k.to_ascii_lowercase(), v.clone()));
    }
    h
}

fn post_json(url: &HttpUrl, headers: Vec<(String, String)>, body: &Value) -> Wire {
    let bytes = body.to_string().into_bytes();
    let mut headers = headers;
    headers.push(("content-length".into(), bytes.len().to_string()));
    Wire::Request {
        method: "POST".into(),
        path: url.path.clone(),
        headers,
        body: Body::from_bytes(bytes),
        chunked: false,
    }
}

/// JSON-RPC messages in an HTTP answer (a JSON body or SSE events), and what did not parse.
fn http_messages(resp: &HttpResponse) -> (Vec<Value>, Vec<Vec<u8>>) {
    let mut msgs = Vec::new();
    let mut garbage = Vec::new();
    if resp.body.is_empty() {
        return (msgs, garbage);
    }
    if resp.is_sse() {
        for m in http::sse_messages(&resp.body) {
            match m {
                Ok(v) => msgs.push(v),
                Err(text) => {
                    garbage.push(text.into_bytes().into_iter().take(PREFIX_KEEP).collect())
                }
            }
        }
        return (msgs, garbage);
    }
    match parse_answer_json(&resp.body) {
        Some(v) => msgs.push(v),
        // A non-JSON error body (plain text, HTML) is allowed on a refusal; the verdict decides.
        None => garbage.push(resp.body.iter().copied().take(PREFIX_KEEP).collect()),
    }
    (msgs, garbage)
}

async fn http_handshake(
    url: &HttpUrl,
    settings: &Settings,
    deadline: Instant,
) -> Result<Handshake, TransportError> {
    let init = json!({"jsonrpc": "2.0", "id": INIT_ID, "method": "initialize",
        "params": {"protocolVersion": settings.spec_version, "capabilities": {},
                   "clientInfo": {"name": "mcp-gauntlet", "version": env!("CARGO_PKG_VERSION")}}});
    let resp = http::exchange(
        url,
        post_json(url, standard_headers(url, settings, None, None), &init),
        Caps::default(),
        deadline,
        false,
    )
    .await?;
    let (msgs, _) = http_messages(&resp);
    let result = msgs
        .iter()
        .find(|m| m.get("id") == Some(&json!(INIT_ID)))
        .and_then(|m| m.get("result"));
    let Some(result) = result.filter(|_| resp.status == 200) else {
        return Err(TransportError::Handshake(format!(
            "initialize answered HTTP {} with {}",
            resp.status,
            String::from_utf8_lossy(&resp.body[..resp.body.len().min(200)])
        )));
    };
    let hs = Handshake {
        session: resp.header("mcp-session-id").map(str::to_string),
        version: result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or(&settings.spec_version)
            .to_string(),
    };
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    // Its answer does not matter to the handshake; a failure shows in the case itself.
    let _ = http::exchange(
        url,
        post_json(url, standard_headers(url, settings, Some(&hs), None), &note),
        Caps::default(),
        deadline,
        false,
    )
    .await;
    Ok(hs)
}

/// A fresh handshake and a ping: does the endpoint still answer?
async fn http_probe(url: &HttpUrl, settings: &Settings) -> (bool, Option<String>) {
    let deadline = Instant::now() + settings.probe_timeout;
    let hs = if versions::is_modern(&settings.spec_version) {
        None
    } else {
        match http_handshake(url, settings, deadline).await {
            Ok(hs) => Some(hs),
            Err(e) => {
                return (
                    false,
                    Some(format!("handshake after the case failed: {}", chain(&e))),
                )
            }
        }
    };
    let ping = own_request(settings, PROBE_ID, liveness_method(settings));
    match http::exchange(
        url,
        post_json(
            url,
            standard_headers(url, settings, hs.as_ref(), Some(&ping)),
            &ping,
        ),
        Caps::default(),
        deadline,
        false,
    )
    .await
    {
        Ok(resp) => {
            let (msgs, _) = http_messages(&resp);
            let ok = msgs
                .iter()
                .any(|m| m.get("id") == Some(&json!(PROBE_ID)) && m.get("result").is_some());
            (
                ok,
                (!ok).then(|| format!("ping after the case answered HTTP {}", resp.status)),
            )
        }
        Err(e) => (false, Some(format!("ping after the case: {}", chain(&e)))),
    }
}

async fn run_http(
    case: &Case,
    url: &HttpUrl,
    settings: &Settings,
    witness: Option<&WitnessView>,
    check_alive: bool,
) -> Observation {
    let mut obs = Observation::new(crate::case::TransportKind::Http);
    let deadline = Instant::now() + settings.case_deadline(case);
    let spec = &case.spec;
    let modern = modern_setup(case, settings);
    let hs = match spec.session {
        SessionMode::None => None,
        SessionMode::Initialized if modern.is_some() => None,
        SessionMode::Initialized => {
            match http_handshake(url, &handshake_settings(case, settings), deadline).await {
                Ok(hs) => Some(hs),
                Err(e) => {
                    obs.setup_error = Some(chain(&e));
                    return obs;
                }
            }
        }
    };
    let mut ph = base_placeholders(settings);
    ph.set("host", url.authority())
        .set("path", url.path.clone());
    if let Some(hs) = &hs {
        ph.set("protocol_version", hs.version.clone())
            .set("session_id", hs.session.clone().unwrap_or_default());
    }
    let req = &spec.request;
    let method = req.method.clone().unwrap_or_else(|| "POST".into());
    let wire = if let Some(raw) = &req.raw_http {
        Wire::Raw(ph.apply(raw).into_bytes())
    } else {
        let body = case_body(&ph, req.body.as_ref(), modern);
        let read = note_request(&mut obs, &body, &settings.denied_tool);
        let mut headers = standard_headers(url, settings, hs.as_ref(), None);
        if let Some(version) = modern {
            // What a conforming modern client sends with this body; the case may override or
            // remove any of it.
            headers.push(("mcp-protocol-version".into(), version.to_string()));
            // A body that is not strict JSON gets the headers of what a lenient server reads
            // in it, so such a server is judged by what it then does, not refused for headers.
            let read = read.or_else(|| lenient_reading(&body));
            if let Some(read) = &read {
                headers.extend(versions::mirrored_headers(read));
            }
        }
        let mentions = |name: &str| req.headers.keys().any(|k| k.eq_ignore_ascii_case(name));
        let has_body = !body.is_empty() || matches!(method.as_str(), "POST" | "PUT" | "PATCH");
        if !has_body {
            headers.retain(|(k, _)| k != "content-type");
        }
        if req.chunked && !mentions("transfer-encoding") {
            headers.push(("transfer-encoding".into(), "chunked".into()));
        } else if !req.chunked
            && has_body
            && !mentions("content-length")
            && !mentions("transfer-encoding")
        {
            headers.push(("content-length".into(), body.len().to_string()));
        }
        for (name, value) in &req.headers {
            let lname = name.to_ascii_lowercase();
            match value {
                None => headers.retain(|(k, _)| *k != lname),
                Some(v) => {
                    let v = ph.apply(v);
                    match headers.iter_mut().find(|(k, _)| *k == lname) {
                        Some(slot) => slot.1 = v,
                        None => headers.push((lname, v)),
                    }
                }
            }
        }
        obs.sent_mcp_method = headers.iter().any(|(k, _)| k == "mcp-method");
        obs.request_accept = headers
            .iter()
            .find(|(k, _)| k == "accept")
            .map(|(_, v)| v.clone());
        Wire::Request {
            method: method.clone(),
            path: req
                .path
                .as_ref()
                .map_or_else(|| url.path.clone(), |p| ph.apply(p)),
            headers,
            body,
            chunked: req.chunked,
        }
    };
    if req.raw_http.is_some() {
        obs.expects_response = true;
    }
    let mark = witness.map(WitnessView::mark);
    match http::exchange(url, wire, Caps::default(), deadline, method == "GET").await {
        Ok(resp) => {
            let (msgs, garbage) = http_messages(&resp);
            obs.messages = msgs;
            obs.garbage = garbage;
            obs.body_prefix = resp.body.iter().copied().take(PREFIX_KEEP).collect();
            let mut scan =
                String::from_utf8_lossy(&resp.body[..resp.body.len().min(SCAN_KEEP)]).into_owned();
            if !resp.trailing.is_empty() {
                scan.push('\n');
                scan.push_str(&String::from_utf8_lossy(&resp.trailing));
                obs.trailing_answers = trailing_answers(&resp.trailing);
            }
            for (k, v) in &resp.headers {
                scan.push('\n');
                scan.push_str(k);
                scan.push_str(": ");
                scan.push_str(v);
            }
            obs.scan_text = scan;
            obs.ending = if resp.timed_out && resp.body.is_empty() && resp.status == 0 {
                Ending::TimedOut
            } else {
                Ending::Answered
            };
            obs.http = Some(HttpSeen {
                status: resp.status,
                content_type: resp.content_type(),
                headers: resp.headers.clone(),
                body_len: resp.body.len(),
                truncated: resp.truncated,
                timed_out: resp.timed_out,
                cut_short: resp.cut_short,
                body_sent: resp.body_sent,
                answered_after: resp.answered_after,
            });
        }
        Err(e) if e.is_timeout() => obs.ending = Ending::TimedOut,
        Err(TransportError::Connect(e)) => obs.ending = Ending::Unreachable(e.to_string()),
        Err(_) => obs.ending = Ending::Closed,
    }
    if let (Some(w), Some(mark)) = (witness, mark) {
        obs.witness = Some(w.since(mark));
    }
    if check_alive {
        let (alive, detail) = http_probe(url, settings).await;
        obs.alive = Some(alive);
        obs.alive_detail = detail;
    }
    obs
}

// ---------------------------------------------------------------------------------------------
// stdio

fn line_body(value: &Value) -> Body {
    let mut bytes = value.to_string().into_bytes();
    bytes.push(b'\n');
    Body::from_bytes(bytes)
}

/// Read lines until one answers `id`; other lines are returned as they came.
async fn read_until_answer(
    proc: &mut StdioProcess,
    id: &str,
    deadline: Instant,
) -> (Option<Value>, Vec<Line>, Option<TransportError>) {
    let mut others = Vec::new();
    loop {
        match proc.read_line(deadline).await {
            Ok(Line::Eof) => return (None, others, None),
            Ok(Line::Text(t)) => {
                if let Ok(v) = serde_json::from_slice::<Value>(&t) {
                    if v.get("id") == Some(&json!(id))
                        && (v.get("result").is_some() || v.get("error").is_some())
                    {
                        return (Some(v), others, None);
                    }
                }
                others.push(Line::Text(t));
            }
            Ok(other) => others.push(other),
            Err(e) => return (None, others, Some(e)),
        }
    }
}

/// A stdio endpoint, borrowed for one case.
struct StdioTarget<'a> {
    command: &'a str,
    log_dir: Option<&'a std::path::Path>,
    pacing: &'a Pacing,
}

async fn run_stdio(
    case: &Case,
    target: &StdioTarget<'_>,
    settings: &Settings,
    witness: Option<&WitnessView>,
    check_alive: bool,
) -> Observation {
    let (command, log_dir) = (target.command, target.log_dir);
    let mut obs = Observation::new(crate::case::TransportKind::Stdio);
    let spec = &case.spec;
    let deadline = Instant::now() + settings.case_deadline(case);
    // A per-case witness log, when the command asks for one.
    let mut own_log = None;
    let command = match log_dir {
        Some(dir) if command.contains("{witness_log}") => {
            let path = dir.join(format!("{}.jsonl", case.id.replace('/', "__")));
            let _ = std::fs::remove_file(&path);
            let quoted = shell_words::quote(&path.to_string_lossy()).into_owned();
            own_log = Some(WitnessView::Log(LogReader::new(path)));
            command.replace("{witness_log}", &quoted)
        }
        _ => command.to_string(),
    };
    let witness = own_log.as_ref().or(witness);
    let cmd = match StdioCommand::parse(&command) {
        Ok(c) => c,
        Err(e) => {
            obs.ending = Ending::Unreachable(chain(&e));
            return obs;
        }
    };
    let mut proc = match StdioProcess::spawn(&cmd) {
        Ok(p) => p,
        Err(e) => {
            obs.ending = Ending::Unreachable(chain(&e));
            return obs;
        }
    };
    let mut ph = base_placeholders(settings);
    let mut lines: Vec<Line> = Vec::new();
    let modern = modern_setup(case, settings);
    if spec.session == SessionMode::Initialized && modern.is_none() {
        let init = json!({"jsonrpc": "2.0", "id": INIT_ID, "method": "initialize",
            "params": {"protocolVersion": handshake_settings(case, settings).spec_version,
                       "capabilities": {},
                       "clientInfo": {"name": "mcp-gauntlet", "version": env!("CARGO_PKG_VERSION")}}});
        proc.send(line_body(&init)).await;
        let (answer, before, err) = read_until_answer(&mut proc, INIT_ID, deadline).await;
        // Lines before the answer (logs on stdout, banners) are judged with the case's output.
        lines.extend(before);
        match answer.as_ref().and_then(|a| a.get("result")) {
            Some(result) => {
                if let Some(v) = result.get("protocolVersion").and_then(Value::as_str) {
                    ph.set("protocol_version", v);
                }
            }
            None => {
                obs.setup_error = Some(match err {
                    Some(e) => format!("initialize: {}", chain(&e)),
                    None => format!(
                        "initialize was not answered with a result: {}",
                        answer.map_or("no answer".into(), |a| a.to_string())
                    ),
                });
                obs.stderr_tail = proc.stderr_tail();
                proc.kill().await;
                return obs;
            }
        }
        proc.send(line_body(
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ))
        .await;
    }
    let mark = witness.map(WitnessView::mark);
    // Memory is watched only for cases that bound it.
    let memory = proc
        .pid()
        .filter(|_| case.bounds_memory())
        .map(super::stdio::MemoryWatch::start);
    let req = &spec.request;
    let mut body = case_body(&ph, req.body.as_ref(), modern);
    note_request(&mut obs, &body, &settings.denied_tool);
    if !req.raw_line {
        body.push(bytes::Bytes::from_static(b"\n"));
    }
    let body_len = body.len();
    proc.send(body).await;
    if req.close_input {
        proc.close_input().await;
        loop {
            match proc.read_line(deadline).await {
                Ok(Line::Eof) => break,
                Ok(l) => lines.push(l),
                Err(e) => {
                    if lines.is_empty() && e.is_timeout() {
                        obs.ending = Ending::TimedOut;
                    }
                    break;
                }
            }
        }
        match proc.wait_exit(deadline).await {
            Some(status) => obs.exited = Some(status.to_string()),
            None => {
                obs.alive_detail = Some("the process did not exit after its input closed".into())
            }
        }
    } else {
        proc.send(line_body(&own_request(
            settings,
            BARRIER_ID,
            liveness_method(settings),
        )))
        .await;
        let (answer, before, err) = read_until_answer(&mut proc, BARRIER_ID, deadline).await;
        lines.extend(before);
        match (&answer, err) {
            (Some(a), _) => {
                // A legacy `ping` must succeed; a modern barrier (`server/discover`) may be
                // refused by a dual-era server whose process the case opened in the legacy era,
                // and an answer with the barrier's id still shows the transport alive.
                let ok = a.get("result").is_some() || versions::is_modern(&settings.spec_version);
                obs.alive = check_alive.then_some(ok);
                if !ok {
                    obs.alive_detail =
                        Some(format!("the ping after the case was answered with {a}"));
                }
            }
            (None, Some(e)) if e.is_timeout() => {
                if lines.is_empty() {
                    obs.ending = Ending::TimedOut;
                }
                obs.alive = check_alive.then_some(false);
                obs.alive_detail =
                    Some("the ping after the case was not answered before the deadline".into());
            }
            (None, _) => {
                if lines.is_empty() {
                    obs.ending = Ending::Closed;
                }
                obs.alive = check_alive.then_some(false);
                obs.alive_detail = Some(
                    "the process closed its output before answering the ping after the case".into(),
                );
            }
        }
        let answered = lines.iter().any(|l| {
            matches!(l, Line::Text(t) if parse_answer_json(t)
                .is_some_and(|v| v.get("result").is_some() || v.get("error").is_some()))
        });
        // A body the runner cannot read itself (invalid UTF-8, extensions) still expects an
        // answer: a lenient server may repair it and run it asynchronously, answering after the
        // barrier, and that late answer is exactly the failure to catch.
        if answer.is_some() && obs.expects_response && !answered {
            // The barrier was answered first: give the case's own answer a bounded moment, as
            // long as this target's order of answers calls for (`pacing`).
            let probed = target
                .pacing
                .probed(order_probe(target.command, settings))
                .await;
            let window = target.pacing.window(probed, body_len, settings.settle);
            let settle_from = Instant::now();
            let settle = (Instant::now() + window).min(deadline);
            let mut late = None;
            while let Ok(line) = proc.read_line(settle).await {
                if line == Line::Eof {
                    break;
                }
                let is_answer = matches!(&line, Line::Text(t) if parse_answer_json(t)
                    .is_some_and(|v| v.get("result").is_some() || v.get("error").is_some()));
                lines.push(line);
                if is_answer {
                    late = Some(settle_from.elapsed());
                    break;
                }
            }
            // Only small cases teach the run how late answers come: a large one's lag is its
            // size's (its own window has the per-MiB allowance), not the server's.
            if let (Some(lag), true) = (late, body_len < 1 << 20) {
                target.pacing.saw_late(lag);
            }
        }
        if let Some(status) = proc.exit_status() {
            obs.exited = Some(status.to_string());
        }
    }
    let mut scan = String::new();
    for line in &lines {
        let (bytes, whole) = match line {
            Line::Text(t) => (t, true),
            Line::TooLong(t) => (t, false),
            Line::Eof => continue,
        };
        if scan.len() < SCAN_KEEP {
            scan.push_str(&String::from_utf8_lossy(
                &bytes[..bytes.len().min(SCAN_KEEP)],
            ));
            scan.push('\n');
        }
        if obs.body_prefix.is_empty() {
            obs.body_prefix = bytes.iter().copied().take(PREFIX_KEEP).collect();
        }
        match parse_answer_json(bytes) {
            Some(v) if whole => obs.messages.push(v),
            _ => obs
                .garbage
                .push(bytes.iter().copied().take(PREFIX_KEEP).collect()),
        }
    }
    obs.scan_text = scan;
    if let (Some(w), Some(mark)) = (witness, mark) {
        obs.witness = Some(
            w.since(mark)
                .into_iter()
                .filter(|e| !matches!(e, Event::Message { raw, .. } if raw.contains(BARRIER_ID)))
                .collect(),
        );
    }
    obs.memory_growth_kib = memory.as_ref().and_then(|m| m.growth_kib(proc.pid()));
    obs.stderr_tail = proc.stderr_tail();
    proc.kill().await;
    obs
}

// ---------------------------------------------------------------------------------------------
// Version probe

/// The id of the runner's version probe.
pub const DISCOVER_ID: &str = "gauntlet-discover";

/// What the version probe learned about a target.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Probe {
    /// Known versions the target accepts, oldest first: modern ones listed by `server/discover`
    /// (or by its unsupported-version error), legacy ones whose `initialize` it answered with
    /// that very version.
    pub accepted: Vec<String>,
    /// Legacy versions it served over HTTP without issuing an `Mcp-Session-Id` (stateless).
    pub stateless: Vec<String>,
    /// Legacy versions it answered `initialize` for with another version (negotiated away).
    pub countered: Vec<(String, String)>,
}

impl Probe {
    /// Whether the target keeps no sessions (every accepted legacy version was stateless).
    pub fn is_stateless(&self) -> bool {
        !self.stateless.is_empty()
    }

    /// One line for the console: what was found.
    pub fn summary(&self) -> String {
        let shown: Vec<String> = self
            .accepted
            .iter()
            .map(|v| {
                if self.stateless.contains(v) {
                    format!("{v} (stateless: no Mcp-Session-Id)")
                } else {
                    v.clone()
                }
            })
            .collect();
        let missing: Vec<&str> = versions::KNOWN
            .iter()
            .copied()
            .filter(|v| !self.accepted.iter().any(|a| a == v))
            .collect();
        let mut line = if shown.is_empty() {
            "the target accepted no known protocol version".to_string()
        } else {
            format!("the target accepts {}", shown.join(", "))
        };
        if !missing.is_empty() {
            line.push_str(&format!(
                "; not offered, not tested: {}",
                missing.join(", ")
            ));
        }
        for (asked, got) in &self.countered {
            line.push_str(&format!("; initialize {asked} was answered with {got}"));
        }
        line
    }
}

/// Every known version `endpoint` accepts: a modern `server/discover` (its `supportedVersions`,
/// or the `supported` list of an unsupported-version error), then one `initialize` per legacy
/// version (accepted when the answer agrees to that version; over HTTP, stateless when no
/// `Mcp-Session-Id` came with it). Each probe uses a fresh connection or process.
pub async fn probe(endpoint: &Endpoint, settings: &Settings) -> Probe {
    let mut out = Probe::default();
    let mut modern = settings.clone();
    modern.spec_version = versions::NEWEST.to_string();
    let discover = own_request(&modern, DISCOVER_ID, "server/discover");
    let listed = match endpoint {
        Endpoint::Http(url) => {
            let deadline = Instant::now() + settings.probe_timeout;
            let headers = standard_headers(url, &modern, None, Some(&discover));
            match http::exchange(
                url,
                post_json(url, headers, &discover),
                Caps::default(),
                deadline,
                false,
            )
            .await
            {
                Ok(resp) => {
                    let (msgs, _) = http_messages(&resp);
                    msgs.iter()
                        .find_map(|m| discovered(m, DISCOVER_ID))
                        .unwrap_or_default()
                }
                Err(_) => Vec::new(),
            }
        }
        Endpoint::Stdio { command, .. } => {
            let short = settings.probe_timeout.min(Duration::from_secs(3));
            match stdio_probe(command, &discover, DISCOVER_ID, short).await {
                Some(answer) => discovered(&answer, DISCOVER_ID).unwrap_or_default(),
                None => Vec::new(),
            }
        }
    };
    out.accepted
        .extend(listed.into_iter().filter(|v| versions::is_modern(v)));
    for v in versions::KNOWN.iter().filter(|v| !versions::is_modern(v)) {
        let mut legacy = settings.clone();
        legacy.spec_version = v.to_string();
        let (agreed, session) = match endpoint {
            Endpoint::Http(url) => {
                let deadline = Instant::now() + settings.probe_timeout;
                match http_handshake(url, &legacy, deadline).await {
                    Ok(hs) => (Some(hs.version), Some(hs.session.is_some())),
                    Err(_) => (None, None),
                }
            }
            Endpoint::Stdio { command, .. } => {
                let init = initialize_request(v);
                let answer = stdio_probe(command, &init, INIT_ID, settings.probe_timeout).await;
                let agreed = answer
                    .as_ref()
                    .and_then(|a| a.get("result")?.get("protocolVersion")?.as_str())
                    .map(str::to_string);
                (agreed, None)
            }
        };
        match agreed {
            Some(a) if a == *v => {
                out.accepted.push(a);
                if session == Some(false) {
                    out.stateless.push(v.to_string());
                }
            }
            Some(other) => out.countered.push((v.to_string(), other)),
            None => {}
        }
    }
    out.accepted.sort();
    out.accepted.dedup();
    out
}

/// The runner's `initialize` asking for `version`.
fn initialize_request(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": INIT_ID, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "mcp-gauntlet", "version": env!("CARGO_PKG_VERSION")}}})
}

/// A fresh process of the stdio `command` for a probe; a `{witness_log}` command logs to a
/// throwaway file, removed by [`end_probe`].
fn start_probe(command: &str) -> Option<(StdioProcess, std::path::PathBuf)> {
    let log = std::env::temp_dir().join(format!(
        "mcp-gauntlet-probe-{}-{:016x}.jsonl",
        std::process::id(),
        rand::random::<u64>()
    ));
    let command = command.replace("{witness_log}", &shell_words::quote(&log.to_string_lossy()));
    let proc = StdioCommand::parse(&command)
        .and_then(|c| StdioProcess::spawn(&c))
        .ok()?;
    Some((proc, log))
}

async fn end_probe(proc: StdioProcess, log: &std::path::Path) {
    proc.kill().await;
    let _ = std::fs::remove_file(log);
}

/// Start the stdio server afresh, send one request and read until its answer (bounded by
/// `wait`); the process is killed after.
async fn stdio_probe(command: &str, request: &Value, id: &str, wait: Duration) -> Option<Value> {
    let (mut proc, log) = start_probe(command)?;
    proc.send(line_body(request)).await;
    let (answer, _, _) = read_until_answer(&mut proc, id, Instant::now() + wait).await;
    end_probe(proc, &log).await;
    answer
}

/// The order probe (see `pacing`): a fresh process of `command` gets, four times, a
/// `tools/call` of the allowed tool and a barrier request in one write, and is watched for which
/// it answers first and how long the pair takes. Spoken in the version of `settings`.
pub async fn order_probe(command: &str, settings: &Settings) -> Probed {
    const ROUNDS: usize = 4;
    let Some((mut proc, log)) = start_probe(command) else {
        return Probed::UNKNOWN;
    };
    let deadline = Instant::now() + settings.probe_timeout;
    let modern = versions::is_modern(&settings.spec_version);
    let mut order = Order::Unknown;
    let mut pace = Duration::ZERO;
    let ready = if modern {
        true
    } else {
        proc.send(line_body(&initialize_request(&settings.spec_version)))
            .await;
        let (answer, _, _) = read_until_answer(&mut proc, INIT_ID, deadline).await;
        proc.send(line_body(
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ))
        .await;
        answer.is_some_and(|a| a.get("result").is_some())
    };
    for round in (0..ROUNDS).filter(|_| ready) {
        let (call_id, barrier_id) = (
            format!("gauntlet-order-call-{round}"),
            format!("gauntlet-order-barrier-{round}"),
        );
        let mut call = json!({"jsonrpc": "2.0", "id": call_id, "method": "tools/call",
            "params": {"name": settings.allowed_tool, "arguments": {"text": "order probe"}}});
        if modern {
            versions::add_meta(&mut call, &settings.spec_version);
        }
        let barrier = own_request(settings, &barrier_id, liveness_method(settings));
        // Both lines in one write, so the server has read the call before the barrier.
        let sent = Instant::now();
        proc.send(Body::from_bytes(format!("{call}\n{barrier}\n")))
            .await;
        // (call answered, barrier answered) instants, in the order they were read.
        let (mut call_at, mut barrier_at) = (None, None);
        while call_at.is_none() || barrier_at.is_none() {
            match proc.read_line(deadline).await {
                Ok(Line::Text(t)) => {
                    let id = serde_json::from_slice::<Value>(&t)
                        .ok()
                        .filter(|v| v.get("result").is_some() || v.get("error").is_some())
                        .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_string));
                    match id {
                        Some(id) if id == call_id => call_at = Some(Instant::now()),
                        Some(id) if id == barrier_id => barrier_at = Some(Instant::now()),
                        _ => {}
                    }
                }
                Ok(Line::TooLong(_)) => {}
                Ok(Line::Eof) | Err(_) => break,
            }
        }
        let (Some(call_at), Some(barrier_at)) = (call_at, barrier_at) else {
            break;
        };
        if round > 0 {
            pace = pace.max(call_at.max(barrier_at) - sent);
        }
        // Once the barrier came first, the target is concurrent; its lag is the longest seen.
        let lag = call_at.saturating_duration_since(barrier_at);
        order = match order {
            Order::Concurrent { lag: seen } => Order::Concurrent { lag: seen.max(lag) },
            _ if call_at > barrier_at => Order::Concurrent { lag },
            _ => Order::InOrder,
        };
    }
    end_probe(proc, &log).await;
    Probed { order, pace }
}

/// The known versions a `server/discover` answer (a result, or an unsupported-version error)
/// lists.
fn discovered(answer: &Value, id: &str) -> Option<Vec<String>> {
    if answer.get("id") != Some(&json!(id)) {
        return None;
    }
    let list = match (answer.get("result"), answer.get("error")) {
        (Some(r), None) => r.get("supportedVersions")?,
        (None, Some(e)) if e.get("code") == Some(&json!(versions::UNSUPPORTED_VERSION)) => {
            e.get("data")?.get("supported")?
        }
        _ => return None,
    };
    Some(
        list.as_array()?
            .iter()
            .filter_map(Value::as_str)
            .filter(|v| versions::KNOWN.contains(v))
            .map(str::to_string)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denied_ids_are_those_every_reading_agrees_on() {
        let plain = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_everything"}}"#;
        assert_eq!(denied_call_ids(plain, "delete_everything"), vec![json!(7)]);
        let batch = br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delete_everything"}}]"#;
        assert_eq!(denied_call_ids(batch, "delete_everything"), vec![json!(2)]);
        // Duplicate names: one reading calls echo with the same id, so a result proves nothing.
        let dup = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","name":"delete_everything"}}"#;
        assert!(denied_call_ids(dup, "delete_everything").is_empty());
        let dup_method = br#"{"jsonrpc":"2.0","id":4,"method":"ping","method":"tools/call","params":{"name":"delete_everything"}}"#;
        assert!(denied_call_ids(dup_method, "delete_everything").is_empty());
        // A BOM and invalid UTF-8 elsewhere do not hide the call from the lenient reading.
        let bom = b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"delete_everything\",\"arguments\":{\"t\":\"\xff\"}}}";
        assert_eq!(denied_call_ids(bom, "delete_everything"), vec![json!(5)]);
    }

    #[test]
    fn escaped_lone_surrogates_are_json() {
        let echoed =
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a\ud800b"}]}}"#;
        assert!(serde_json::from_slice::<Value>(echoed).is_err());
        let v = parse_answer_json(echoed).expect("valid JSON");
        assert_eq!(v["result"]["content"][0]["text"], "a\u{fffd}b");
        // Pairs, escaped backslashes and raw invalid UTF-8 are left as they are.
        let pair = br#"{"t":"\ud83d\ude00 \\ud800"}"#;
        assert_eq!(
            parse_answer_json(pair).expect("pair")["t"],
            "\u{1f600} \\ud800"
        );
        assert!(parse_answer_json(b"{\"t\":\"\xed\xa0\x80\"}").is_none());
    }

    #[test]
    fn trailing_answers_are_read_as_http_responses() {
        let bytes = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 36\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}HTTP/1.1 400 Bad Request\r\ntransfer-encoding: chunked\r\n\r\n5\r\nerror\r\n0\r\n\r\n";
        let got = trailing_answers(bytes);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].status, 200);
        assert_eq!(
            got[0].messages,
            vec![json!({"jsonrpc":"2.0","id":7,"result":{}})]
        );
        assert_eq!(got[1].status, 400);
        assert!(got[1].messages.is_empty());
        let sse = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n";
        assert_eq!(trailing_answers(sse)[0].messages.len(), 1);
        assert!(trailing_answers(b"").is_empty());
    }
}
