//! A case over HTTP: the handshake (legacy lanes), the request, the answer, the alive probe.

use super::clients;
use super::http_request::{http_handshake, http_messages, post_json, standard_headers, Sent};
use super::*;

/// A fresh handshake and a ping: does the endpoint still answer?
pub(super) async fn http_probe(url: &HttpUrl, settings: &Speaking) -> (bool, Option<String>) {
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
async fn http_probe_call(url: &HttpUrl, settings: &Speaking) -> (bool, Option<String>) {
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
    settings: &Speaking,
    message: &Value,
    id: &str,
) -> Result<(u16, Vec<Value>), ProbeFailed> {
    let deadline = Instant::now() + settings.probe_timeout;
    let hs = if settings.version.is_modern() {
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
        deadline,
        SseRead::ToFirstResponse,
    )
    .await
    .map_err(|e| ProbeFailed::Exchange(chain(&e)))?;
    let (mut msgs, _) = http_messages(&resp);
    msgs.retain(|m| m.get("id") == Some(&json!(id)));
    Ok((resp.status, msgs))
}

/// The client's placeholders (`client`) with what this exchange learned of the target: where
/// it is, and the session its handshake opened (and the first client's mark, in a `clients`
/// case).
pub(super) fn learned_placeholders(
    url: &HttpUrl,
    client: &Placeholders,
    hs: Option<&Handshake>,
    mark: Option<&String>,
) -> Placeholders {
    let mut ph = client.clone();
    ph.set("host", url.authority())
        .set("path", url.path.clone())
        .set("path_upper", path_upper(&url.path))
        .set(
            "message_path",
            url.path.split('?').next().unwrap_or_default().to_string(),
        );
    if let Some(hs) = hs {
        ph.set("protocol_version", hs.version.clone())
            .set("session_id", hs.session.clone().unwrap_or_default());
    }
    if let Some(mark) = mark {
        ph.set("client", mark.clone());
    }
    ph
}

pub(super) async fn run_http(
    t: &Facts<'_>,
    url: &HttpUrl,
    witness: Option<&WitnessView>,
    check_alive: bool,
) -> Observation {
    let (case, settings) = (t.case, t.settings);
    let mut obs = Observation::new(crate::case::TransportKind::Http);
    let deadline = settings.case_ends(case);
    let spec = &case.spec;
    let hs = match spec.session {
        SessionMode::None => None,
        SessionMode::Initialized if t.modern.is_some() => None,
        SessionMode::Initialized => match http_handshake(url, &t.handshake, deadline).await {
            Ok(hs) => Some(hs),
            Err(e) => {
                obs.sent.setup_error = Some(chain(&e));
                return obs;
            }
        },
    };
    // A `clients` case: the first client's mark here, the others' in their own requests.
    let marks = spec.clients.map(clients::marks);
    let first = marks.as_ref().map(|m| &m[0]);
    let ph = learned_placeholders(url, &t.client, hs.as_ref(), first);
    obs.sent.learned = ph.values_of(LEARNED);
    let req = &spec.request;
    let sent = Sent {
        url,
        settings,
        handshake: hs.as_ref(),
        modern: t.modern,
        placeholders: &ph,
        method: &t.method,
        caller: spec.caller,
    };
    let wire = match &req.raw_http {
        Some(raw) => {
            obs.sent.expects_response = true;
            Wire::Raw(ph.apply(raw).into_bytes())
        }
        None => sent.request(req, &mut obs),
    };
    let others = match &marks {
        Some(m) => clients::prepare(t, &sent, &m[1..], deadline).await,
        None => Vec::new(),
    };
    let mark = witness.map(WitnessView::mark);
    let in_flight = clients::send(url, others, deadline);
    let sse = if t.method == hyper::Method::GET {
        SseRead::HeadOnly
    } else {
        SseRead::ToFirstResponse
    };
    match http::exchange(url, wire, deadline, sse).await {
        Ok(resp) => read_response(&mut obs, &resp),
        Err(e) if e.is_timeout() => obs.answer.ending = Ending::TimedOut,
        Err(TransportError::Connect(e)) => obs.answer.ending = Ending::Unreachable(e.to_string()),
        Err(_) => obs.answer.ending = Ending::Closed,
    }
    if let Some(m) = marks {
        obs.answer.clients = Some(clients::collect(m, in_flight).await);
    }
    if let (Some(w), Some(mark)) = (witness, mark) {
        obs.after.witness = Some(w.since(mark));
    }
    if check_alive {
        alive_probe(&mut obs, case, url, settings).await;
    }
    obs
}

/// The alive probe after a case (a ping, and for `"alive_probe": "downstream"` a call of the
/// allowed tool), written into `obs`.
pub(super) async fn alive_probe(
    obs: &mut Observation,
    case: &Case,
    url: &HttpUrl,
    settings: &Speaking,
) {
    let (mut alive, mut detail) = http_probe(url, settings).await;
    if alive && case.spec.alive_probe == crate::case::AliveProbe::Downstream {
        (alive, detail) = http_probe_call(url, settings).await;
    }
    obs.after.alive = Some(alive);
    obs.after.alive_detail = detail;
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
pub(super) fn read_response(obs: &mut Observation, resp: &HttpResponse) {
    let (msgs, garbage) = http_messages(resp);
    obs.answer.messages = msgs;
    obs.answer.garbage = garbage;
    obs.answer.prefix = resp.body.iter().copied().take(PREFIX_KEEP).collect();
    let mut scan =
        String::from_utf8_lossy(&resp.body[..resp.body.len().min(SCAN_KEEP)]).into_owned();
    if !resp.trailing.is_empty() {
        scan.push('\n');
        scan.push_str(&String::from_utf8_lossy(&resp.trailing));
        obs.answer.trailing_answers = trailing_answers(&resp.trailing);
    }
    for (k, v) in &resp.headers {
        scan.push('\n');
        scan.push_str(k);
        scan.push_str(": ");
        scan.push_str(v);
    }
    obs.answer.scan_text = scan;
    obs.answer.ending = if resp.timed_out && resp.body.is_empty() && resp.status == 0 {
        Ending::TimedOut
    } else {
        Ending::Answered
    };
    obs.answer.http = Some(HttpSeen {
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
