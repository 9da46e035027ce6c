//! The parts of an HTTP request and answer that a case, its concurrent clients and the
//! runner's own probes all build from: the runner's standard headers, its JSON POSTs, the
//! request a case sends (`Sent`), the JSON-RPC messages in an answer, and the `initialize`
//! handshake they all open sessions with. A leaf of `exchange/`: it uses nothing of its
//! siblings.

use super::*;

/// The headers every runner request starts with. `own` is a runner-made message (ping,
/// initialize), whose version and mirrored headers a modern lane adds.
pub(super) fn standard_headers(
    url: &HttpUrl,
    settings: &Speaking,
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
    if hs.is_none() && settings.version.is_modern() {
        if let Some(m) = own {
            h.push(("mcp-protocol-version".into(), settings.version.to_string()));
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
    settings: &Speaking,
    caller: Option<crate::case::Caller>,
) -> String {
    with_identity_query(&url.path, settings, caller)
}

/// `path` (which may hold a query: a case's own `?access_token=…`) with `caller`'s identity
/// query parameters added.
fn with_identity_query(
    path: &str,
    settings: &Speaking,
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
    settings: &Speaking,
    headers: Vec<(String, String)>,
    body: &Value,
) -> Wire {
    let bytes = body.to_string().into_bytes();
    let mut headers = headers;
    headers.push(("content-length".into(), bytes.len().to_string()));
    Wire::Request {
        method: hyper::Method::POST,
        path: request_path(url, settings, None),
        headers,
        body: Body::from_bytes(bytes),
        chunked: false,
    }
}

/// A runner-made message (`own`: a ping, a list, a probe) POSTed with the standard headers, in
/// the session `hs` when given; the answer by `deadline`.
pub(super) async fn post_own(
    url: &HttpUrl,
    settings: &Speaking,
    hs: Option<&Handshake>,
    own: &Value,
    deadline: Instant,
) -> Result<HttpResponse, TransportError> {
    let headers = standard_headers(url, settings, hs, Some(own));
    let wire = post_json(url, settings, headers, own);
    http::exchange(url, wire, deadline, SseRead::ToFirstResponse).await
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
    match crate::reading::answer_json(&resp.body) {
        Some(v) => msgs.push(v),
        // A non-JSON error body (plain text, HTML) is allowed on a refusal; the verdict decides.
        None => garbage.push(resp.body.iter().copied().take(PREFIX_KEEP).collect()),
    }
    (msgs, garbage)
}

/// What a case's HTTP request is made from besides the case itself.
#[derive(Clone, Copy)]
pub(super) struct Sent<'a> {
    pub(super) url: &'a HttpUrl,
    pub(super) settings: &'a Speaking,
    pub(super) handshake: Option<&'a Handshake>,
    /// The modern version spoken, when the lane is modern.
    pub(super) modern: Option<Version>,
    pub(super) placeholders: &'a Placeholders,
    pub(super) method: &'a hyper::Method,
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
        let read = note_request(&mut obs.sent, &body, self.settings);
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
        let has_body = !body.is_empty()
            || [
                hyper::Method::POST,
                hyper::Method::PUT,
                hyper::Method::PATCH,
            ]
            .contains(method);
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
        obs.sent.mcp_method_header = headers.iter().any(|(k, _)| k == "mcp-method");
        obs.sent.accept = headers
            .iter()
            .find(|(k, _)| k == "accept")
            .map(|(_, v)| v.clone());
        Wire::Request {
            method: method.clone(),
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

/// `initialize` and `notifications/initialized` over HTTP, for lanes that open a session: what
/// the server agreed to (its session id, version and name).
pub(super) async fn http_handshake(
    url: &HttpUrl,
    settings: &Speaking,
    deadline: Instant,
) -> Result<Handshake, TransportError> {
    let init = json!({"jsonrpc": "2.0", "id": INIT_ID, "method": "initialize",
        "params": {"protocolVersion": settings.version, "capabilities": {},
                   "clientInfo": {"name": "mcp-gauntlet", "version": env!("CARGO_PKG_VERSION")}}});
    let resp = http::exchange(
        url,
        post_json(
            url,
            settings,
            standard_headers(url, settings, None, None),
            &init,
        ),
        deadline,
        SseRead::ToFirstResponse,
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
            .map_or_else(|| settings.version.to_string(), str::to_string),
        server: server_name(result),
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
        deadline,
        SseRead::ToFirstResponse,
    )
    .await;
    Ok(hs)
}
