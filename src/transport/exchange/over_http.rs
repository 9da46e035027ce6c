//! A case over HTTP: the handshake (legacy lanes), the request, the answer, the alive probe.

use super::clients;
use super::*;

/// The headers every runner request starts with. `own` is a runner-made message (ping,
/// initialize), whose version and mirrored headers a modern lane adds.
pub(super) fn standard_headers(
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
    if let Some(identity) = &settings.identity {
        h.extend(identity.headers(None));
    }
    h
}

/// The request target of a request as `caller` (the run's principal when `None`): the
/// endpoint's path with the identity query parameters (`--identity query:NAME`).
pub(super) fn request_path(
    url: &HttpUrl,
    settings: &Settings,
    caller: Option<crate::case::Caller>,
) -> String {
    with_identity_query(&url.path, settings, caller)
}

/// `path` (which may hold a query: a case's own `?access_token=…`) with `caller`'s identity
/// query parameters added.
fn with_identity_query(
    path: &str,
    settings: &Settings,
    caller: Option<crate::case::Caller>,
) -> String {
    match &settings.identity {
        Some(identity) => identity.path(path, caller),
        None => path.to_string(),
    }
}

/// A runner-made POST of `body` (as the run's principal).
pub(super) fn post_json(
    url: &HttpUrl,
    settings: &Settings,
    headers: Vec<(String, String)>,
    body: &Value,
) -> Wire {
    let bytes = body.to_string().into_bytes();
    let mut headers = headers;
    headers.push(("content-length".into(), bytes.len().to_string()));
    Wire::Request {
        method: "POST".into(),
        path: request_path(url, settings, None),
        headers,
        body: Body::from_bytes(bytes),
        chunked: false,
    }
}

/// JSON-RPC messages in an HTTP answer (a JSON body or SSE events), and what did not parse.
pub(super) fn http_messages(resp: &HttpResponse) -> (Vec<Value>, Vec<Vec<u8>>) {
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

pub(super) async fn http_handshake(
    url: &HttpUrl,
    settings: &Settings,
    deadline: Instant,
) -> Result<Handshake, TransportError> {
    let init = json!({"jsonrpc": "2.0", "id": INIT_ID, "method": "initialize",
        "params": {"protocolVersion": settings.spec_version, "capabilities": {},
                   "clientInfo": {"name": "mcp-gauntlet", "version": env!("CARGO_PKG_VERSION")}}});
    let resp = http::exchange(
        url,
        post_json(
            url,
            settings,
            standard_headers(url, settings, None, None),
            &init,
        ),
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
        server: super::probe::server_name(result),
    };
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    // Its answer does not matter to the handshake; a failure shows in the case itself.
    let _ = http::exchange(
        url,
        post_json(
            url,
            settings,
            standard_headers(url, settings, Some(&hs), None),
            &note,
        ),
        Caps::default(),
        deadline,
        false,
    )
    .await;
    Ok(hs)
}

/// A fresh handshake and a ping: does the endpoint still answer?
pub(super) async fn http_probe(url: &HttpUrl, settings: &Settings) -> (bool, Option<String>) {
    let ping = own_request(settings, PROBE_ID, liveness_method(settings));
    match probe_exchange(url, settings, &ping, PROBE_ID).await {
        Ok((_, answers)) if answers.iter().any(|m| m.get("result").is_some()) => (true, None),
        Ok((status, _)) => (
            false,
            Some(format!("ping after the case answered HTTP {status}")),
        ),
        Err(ProbeFailed::Handshake(why)) => (false, Some(why)),
        Err(ProbeFailed::Exchange(why)) => (false, Some(format!("ping after the case: {why}"))),
    }
}

/// The downstream part of the alive probe (`"alive_probe": "downstream"`), after the ping: a
/// call of the allowed tool in a session of its own, which must come back with a result.
async fn http_probe_call(url: &HttpUrl, settings: &Settings) -> (bool, Option<String>) {
    let call = probe_call(settings);
    let why = match probe_exchange(url, settings, &call, PROBE_CALL_ID).await {
        Ok((_, answers)) if answers.iter().any(|m| probe_call_answered(m).is_ok()) => {
            return (true, None)
        }
        Ok((_, answers)) if !answers.is_empty() => match probe_call_answered(&answers[0]) {
            Err(why) => why,
            Ok(()) => return (true, None),
        },
        Ok((status, _)) => {
            format!("a call of the allowed tool after the case got no answer (HTTP {status})")
        }
        Err(ProbeFailed::Handshake(why)) => why,
        Err(ProbeFailed::Exchange(why)) => {
            format!("a call of the allowed tool after the case: {why}")
        }
    };
    (false, Some(why))
}

/// Why a request of the alive probe got no answer.
enum ProbeFailed {
    /// Its session could not be opened (the text says so).
    Handshake(String),
    /// The exchange failed (the error's chain).
    Exchange(String),
}

/// One runner request after the case, in a session of its own (legacy lanes), within the probe
/// deadline: the HTTP status and the answers with `id`.
async fn probe_exchange(
    url: &HttpUrl,
    settings: &Settings,
    message: &Value,
    id: &str,
) -> Result<(u16, Vec<Value>), ProbeFailed> {
    let deadline = Instant::now() + settings.probe_timeout;
    let hs = if versions::is_modern(&settings.spec_version) {
        None
    } else {
        let hs = http_handshake(url, settings, deadline).await.map_err(|e| {
            ProbeFailed::Handshake(format!("handshake after the case failed: {}", chain(&e)))
        })?;
        Some(hs)
    };
    let headers = standard_headers(url, settings, hs.as_ref(), Some(message));
    let resp = http::exchange(
        url,
        post_json(url, settings, headers, message),
        Caps::default(),
        deadline,
        false,
    )
    .await
    .map_err(|e| ProbeFailed::Exchange(chain(&e)))?;
    let (mut msgs, _) = http_messages(&resp);
    msgs.retain(|m| m.get("id") == Some(&json!(id)));
    Ok((resp.status, msgs))
}

pub(super) async fn run_http(
    case: &Case,
    url: &HttpUrl,
    settings: &Settings,
    witness: Option<&WitnessView>,
    check_alive: bool,
) -> Observation {
    let mut obs = Observation::new(crate::case::TransportKind::Http);
    let deadline = settings.case_ends(case);
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
    let mut ph = client_placeholders(settings);
    ph.set("host", url.authority())
        .set("path", url.path.clone())
        .set("path_upper", path_upper(&url.path));
    if let Some(hs) = &hs {
        ph.set("protocol_version", hs.version.clone())
            .set("session_id", hs.session.clone().unwrap_or_default());
    }
    // A `clients` case: the first client's mark here, the others' in their own requests.
    let marks = spec.clients.map(clients::marks);
    if let Some(m) = &marks {
        ph.set("client", m[0].clone());
    }
    let req = &spec.request;
    let method = req.method.clone().unwrap_or_else(|| "POST".into());
    let sent = Sent {
        url,
        settings,
        handshake: hs.as_ref(),
        modern,
        placeholders: &ph,
        method: &method,
        caller: spec.caller,
    };
    let wire = match &req.raw_http {
        Some(raw) => {
            obs.expects_response = true;
            Wire::Raw(ph.apply(raw).into_bytes())
        }
        None => sent.request(req, &mut obs),
    };
    let others = match &marks {
        Some(m) => clients::prepare(case, &sent, &m[1..], deadline).await,
        None => Vec::new(),
    };
    let mark = witness.map(WitnessView::mark);
    let in_flight = clients::send(url, others, deadline);
    match http::exchange(url, wire, Caps::default(), deadline, method == "GET").await {
        Ok(resp) => read_response(&mut obs, &resp),
        Err(e) if e.is_timeout() => obs.ending = Ending::TimedOut,
        Err(TransportError::Connect(e)) => obs.ending = Ending::Unreachable(e.to_string()),
        Err(_) => obs.ending = Ending::Closed,
    }
    if let Some(m) = marks {
        obs.clients = Some(clients::collect(m, in_flight).await);
    }
    if let (Some(w), Some(mark)) = (witness, mark) {
        obs.witness = Some(w.since(mark));
    }
    if check_alive {
        let (mut alive, mut detail) = http_probe(url, settings).await;
        if alive && spec.alive_probe == crate::case::AliveProbe::Downstream {
            (alive, detail) = http_probe_call(url, settings).await;
        }
        obs.alive = Some(alive);
        obs.alive_detail = detail;
    }
    obs
}

/// What a case's HTTP request is made from besides the case itself.
#[derive(Clone, Copy)]
pub(super) struct Sent<'a> {
    pub(super) url: &'a HttpUrl,
    pub(super) settings: &'a Settings,
    pub(super) handshake: Option<&'a Handshake>,
    /// The modern version spoken, when the lane is modern.
    pub(super) modern: Option<&'a str>,
    pub(super) placeholders: &'a Placeholders,
    pub(super) method: &'a str,
    /// Who the case says is calling (`identity/` cases).
    pub(super) caller: Option<crate::case::Caller>,
}

impl Sent<'_> {
    /// The request a (non-raw) case sends: its body, the runner's standard headers (with the
    /// mirrored 2026-07-28 headers on a modern lane), framing headers unless the case writes
    /// them, then the case's own headers over all of them. Notes on `obs` what was sent.
    pub(super) fn request(&self, req: &crate::case::RequestSpec, obs: &mut Observation) -> Wire {
        let (ph, method) = (self.placeholders, self.method);
        let body = case_body(
            ph,
            req.body.as_ref(),
            self.modern,
            self.settings,
            self.caller,
        );
        let read = note_request(obs, &body, self.settings);
        let mut headers = standard_headers(self.url, self.settings, self.handshake, None);
        // The case's caller, where the gate reads identity, instead of the run's principal.
        if let (Some(identity), Some(_)) = (&self.settings.identity, self.caller) {
            let names: Vec<&str> = identity.header_names().collect();
            headers.retain(|(k, _)| !names.contains(&k.as_str()));
            headers.extend(identity.headers(self.caller));
        }
        if let Some(version) = self.modern {
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
        // The coded body is what goes on the wire; what the endpoint should read in it (noted
        // above, mirrored in the modern headers) is the body before coding.
        let body = match req.content_encoding {
            Some(coding) => {
                headers.push(("content-encoding".into(), coding.token().into()));
                body.encoded(coding)
            }
            None => body,
        };
        let mentions = |name: &str| req.headers.keys().any(|k| k.eq_ignore_ascii_case(name));
        let has_body = !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH");
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
            method: method.to_string(),
            path: req.path.as_ref().map_or_else(
                || request_path(self.url, self.settings, self.caller),
                |p| with_identity_query(&ph.apply(p), self.settings, self.caller),
            ),
            headers,
            body,
            chunked: req.chunked,
        }
    }
}

/// The target's path with its letters in capitals, its query (if the URL has one) as it is:
/// `/mcp?k=v` becomes `/MCP?k=v`.
fn path_upper(path: &str) -> String {
    match path.split_once('?') {
        Some((p, q)) => format!("{}?{q}", p.to_ascii_uppercase()),
        None => path.to_ascii_uppercase(),
    }
}

/// What the answer says: messages and garbage, the first bytes, trailing answers on the same
/// connection, the text the oracles scan (body, trailing bytes, headers), and the HTTP facts.
fn read_response(obs: &mut Observation, resp: &HttpResponse) {
    let (msgs, garbage) = http_messages(resp);
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
