//! The Streamable HTTP front. It enforces the transport rules itself (GATE-HTTP-01) before the
//! proxy sees a body: Origin and Host (403), bearer token (401), Content-Type (415), Accept (406),
//! body size on the declared length and while streaming (413), sessions (400 without, 404
//! unknown), protocol version (400), GET/DELETE, other methods 405 with `Allow`.

use crate::canonical::{Canonical, Message};
use crate::era;
use crate::front::sessions::{self, ClientSession, SessionLimits, Sessions};
use crate::proxy::{Answer as Outcome, Credentials, Handled, Proxy, Refusal};
use crate::relay::{Relayed, Session};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// The endpoint path.
pub const PATH: &str = "/mcp";
const SESSION: &str = "mcp-session-id";
const VERSION: &str = "mcp-protocol-version";

type Answer = Response<GateBody>;

/// A response body: all at once, or an SSE stream of relayed messages.
pub(crate) enum GateBody {
    Full(Option<Bytes>),
    Stream(tokio::sync::mpsc::Receiver<Relayed>),
}

impl GateBody {
    fn empty() -> GateBody {
        GateBody::Full(None)
    }
}

/// One SSE event for a relayed message.
fn sse_event(r: &Relayed) -> Bytes {
    let mut out = Vec::with_capacity(r.bytes.len() + 48);
    if let Some(id) = &r.event_id {
        out.extend_from_slice(format!("id: {id}\n").as_bytes());
    }
    if let Some(retry) = r.retry {
        out.extend_from_slice(format!("retry: {retry}\n").as_bytes());
    }
    if !r.bytes.is_empty() {
        out.extend_from_slice(b"event: message\n");
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(&r.bytes);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

impl hyper::body::Body for GateBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            GateBody::Full(b) => std::task::Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            GateBody::Stream(rx) => rx
                .poll_recv(cx)
                .map(|m| m.map(|r| Ok(Frame::data(sse_event(&r))))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, GateBody::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            GateBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            GateBody::Full(None) => SizeHint::with_exact(0),
            GateBody::Stream(_) => SizeHint::default(),
        }
    }
}

/// Front settings.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    pub server_id: String,
    /// SHA-256 hex digests of accepted bearer tokens; empty means no authentication.
    pub bearer_sha256: Vec<String>,
    pub read_deadline: Duration,
    /// The error code of transport-level refusals' JSON-RPC envelopes.
    pub refusal_code: i64,
    /// OAuth access tokens (JWT) checked on every request, instead of token digests.
    pub auth: Option<Arc<crate::auth::Verifier>>,
    /// How long an unused client session is kept, and how many are.
    pub sessions: SessionLimits,
    /// The forward-token fault: the client's `Authorization` goes downstream with what it
    /// asked for (feature `faults` only).
    #[cfg(feature = "faults")]
    pub forward_token: bool,
}

/// The HTTP front's shared state.
pub struct HttpFront {
    proxy: Arc<Proxy>,
    settings: HttpSettings,
    /// Client-facing sessions: their negotiated version, state and the principal that opened
    /// them. Never forwarded.
    sessions: Arc<Sessions>,
}

impl HttpFront {
    pub fn new(proxy: Arc<Proxy>, settings: HttpSettings) -> Arc<HttpFront> {
        Arc::new(HttpFront {
            proxy,
            sessions: Arc::new(Sessions::new(settings.sessions)),
            settings,
        })
    }
}

/// Where the front is served: its port and scheme, as `Origin` and `Host` must name them.
#[derive(Debug, Clone, Copy)]
struct Local {
    port: u16,
    /// `http://` or `https://`.
    origin_scheme: &'static str,
}

/// Serve until the task is dropped.
pub async fn serve(listener: TcpListener, front: Arc<HttpFront>) {
    serve_with(listener, front, None).await;
}

/// Serve over TLS until the task is dropped. A client that does not finish its handshake within
/// the client read deadline is dropped.
pub async fn serve_tls(
    listener: TcpListener,
    front: Arc<HttpFront>,
    tls: Arc<rustls::ServerConfig>,
) {
    serve_with(listener, front, Some(tokio_rustls::TlsAcceptor::from(tls))).await;
}

async fn serve_with(
    listener: TcpListener,
    front: Arc<HttpFront>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    let local = Local {
        port: listener.local_addr().map(|a| a.port()).unwrap_or(0),
        origin_scheme: if tls.is_some() { "https://" } else { "http://" },
    };
    // Idle sessions are forgotten (and their downstreams closed) while the front is served.
    sessions::sweep(Arc::downgrade(&front.sessions));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors (or another transient error): back off instead of spinning,
            // so connections already open keep being served.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            continue;
        };
        let front = front.clone();
        let Some(acceptor) = tls.clone() else {
            tokio::spawn(serve_connection(stream, front, local));
            continue;
        };
        tokio::spawn(async move {
            let by = front.settings.read_deadline;
            if let Ok(Ok(stream)) = tokio::time::timeout(by, acceptor.accept(stream)).await {
                serve_connection(stream, front, local).await;
            }
        });
    }
}

/// One client connection, plain or TLS.
async fn serve_connection<S>(stream: S, front: Arc<HttpFront>, local: Local)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let read_deadline = front.settings.read_deadline;
    let service = hyper::service::service_fn(move |req| {
        let front = front.clone();
        async move { Ok::<_, Infallible>(handle(&front, local, req).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(read_deadline)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

fn one<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ()> {
    let mut values = headers.get_all(name).iter();
    match (values.next(), values.next()) {
        (None, _) => Ok(None),
        (Some(v), None) => v.to_str().map(Some).map_err(|_| ()),
        _ => Err(()),
    }
}

fn loopback_authority(value: &str, port: u16, scheme: &str) -> bool {
    ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .any(|h| value.eq_ignore_ascii_case(&format!("{scheme}{h}:{port}")))
}

fn json_answer(status: StatusCode, body: Vec<u8>) -> Answer {
    let mut r = Response::new(GateBody::Full(Some(Bytes::from(body))));
    *r.status_mut() = status;
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    r
}

impl HttpFront {
    /// A transport-level refusal: the status with a JSON-RPC error envelope whose id is null.
    fn refuse(&self, status: StatusCode, message: &'static str) -> Answer {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":{},"message":"{message}"}}}}"#,
            self.settings.refusal_code
        );
        let mut r = json_answer(status, body.into_bytes());
        if status == StatusCode::PAYLOAD_TOO_LARGE || status == StatusCode::BAD_REQUEST {
            r.headers_mut()
                .insert("connection", HeaderValue::from_static("close"));
        }
        if status == StatusCode::UNAUTHORIZED {
            r.headers_mut()
                .insert("www-authenticate", HeaderValue::from_static("Bearer"));
        }
        r
    }

    /// The request's session id, its negotiated version and state, or the refusal (400 missing
    /// or ambiguous, 404 unknown) as status and message. A session opened by one principal is
    /// unknown to any other (a session id is not a credential: MCP-SEC-SH-02).
    #[allow(clippy::type_complexity)]
    fn session(
        &self,
        headers: &HeaderMap,
        principal: Option<&str>,
    ) -> Result<(String, crate::Version, Arc<Session>), (StatusCode, &'static str)> {
        let id = match one(headers, SESSION) {
            Ok(Some(id)) => id,
            Ok(None) => return Err((StatusCode::BAD_REQUEST, "Bad Request: missing session")),
            Err(()) => return Err((StatusCode::BAD_REQUEST, "Bad Request: ambiguous session")),
        };
        let found = self.sessions.get(id, Instant::now());
        #[cfg(feature = "faults")]
        let unbound = self
            .settings
            .auth
            .as_ref()
            .is_some_and(|a| a.sessions_unbound());
        #[cfg(not(feature = "faults"))]
        let unbound = false;
        match found {
            Some(s) if unbound || s.principal.as_deref() == principal => {
                Ok((id.to_string(), s.version, s.state))
            }
            _ => Err((StatusCode::NOT_FOUND, "Not Found: unknown session")),
        }
    }

    /// Who is asking: a verified access token's subject and scopes, a token digest's principal,
    /// or nobody (no authentication configured); or the 400/401 refusal with its challenge.
    async fn credentials(
        &self,
        parts: &hyper::http::request::Parts,
    ) -> Result<Credentials, Answer> {
        let Some(auth) = &self.settings.auth else {
            return match self.principal(&parts.headers) {
                Ok(principal) => Ok(Credentials {
                    principal,
                    ..Credentials::default()
                }),
                Err(()) => Err(self.refuse(StatusCode::UNAUTHORIZED, "Unauthorized")),
            };
        };
        let values: Vec<&[u8]> = parts
            .headers
            .get_all("authorization")
            .iter()
            .map(HeaderValue::as_bytes)
            .collect();
        let in_query = parts.uri.query().is_some_and(|q| {
            q.split('&').any(|kv| {
                kv.split('=')
                    .next()
                    .is_some_and(|k| k.eq_ignore_ascii_case("access_token"))
            })
        });
        match auth.verify(&values, in_query).await {
            Ok(v) => Ok(Credentials {
                principal: Some(format!("sub:{}", v.subject)),
                scopes: Some(v.scopes),
                #[cfg(feature = "faults")]
                scopes_unchecked: auth.skips_scopes_for(
                    parts
                        .headers
                        .get("mcp-protocol-version")
                        .map(HeaderValue::as_bytes),
                ),
            }),
            Err(refusal) => {
                let (status, message) = match refusal {
                    crate::auth::Refusal::Ambiguous => (StatusCode::BAD_REQUEST, "Bad Request"),
                    _ => (StatusCode::UNAUTHORIZED, "Unauthorized"),
                };
                let mut r = self.refuse(status, message);
                if let Ok(v) = HeaderValue::from_str(&auth.challenge(refusal)) {
                    r.headers_mut().insert("www-authenticate", v);
                }
                Err(r)
            }
        }
    }

    /// The Protected Resource Metadata answer, for a GET of its well-known path.
    fn metadata(&self, parts: &hyper::http::request::Parts) -> Option<Answer> {
        let auth = self.settings.auth.as_ref()?;
        let path = parts.uri.path();
        let ours = path == auth.config().metadata_path() || path == crate::auth::WELL_KNOWN;
        if !ours || parts.method != Method::GET {
            return None;
        }
        let mut r = json_answer(StatusCode::OK, auth.metadata());
        r.headers_mut()
            .insert("cache-control", HeaderValue::from_static("max-age=300"));
        Some(r)
    }

    fn principal(&self, headers: &HeaderMap) -> Result<Option<String>, ()> {
        if self.settings.bearer_sha256.is_empty() {
            return Ok(None);
        }
        let value = one(headers, "authorization")?.ok_or(())?;
        let (scheme, token) = value.split_once(' ').ok_or(())?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(());
        }
        use sha2::Digest;
        let digest: String = sha2::Sha256::digest(token.trim().as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        if self
            .settings
            .bearer_sha256
            .iter()
            .any(|d| d.eq_ignore_ascii_case(&digest))
        {
            Ok(Some(format!("token:{}", &digest[..12])))
        } else {
            Err(())
        }
    }
}

fn content_type_ok(headers: &HeaderMap) -> bool {
    let Ok(Some(ct)) = one(headers, "content-type") else {
        return false;
    };
    let mut parts = ct.split(';');
    if !parts
        .next()
        .unwrap_or("")
        .trim()
        .eq_ignore_ascii_case("application/json")
    {
        return false;
    }
    parts.all(|p| {
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        k.trim().eq_ignore_ascii_case("charset")
            && v.trim().trim_matches('"').eq_ignore_ascii_case("utf-8")
    })
}

/// Whether the request's `Accept` headers admit `wanted` (see [`admits`]).
fn accepts(headers: &HeaderMap, wanted: &str) -> bool {
    let values: Vec<&str> = headers
        .get_all(hyper::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    admits(&values.join(","), wanted)
}

/// An RFC 9110 qvalue (section 12.4.2: `0` to `1`, at most three decimals), or `None`.
fn qvalue(text: &str) -> Option<f32> {
    let text = text.trim();
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    let digits = frac.len() <= 3 && frac.bytes().all(|b| b.is_ascii_digit());
    let valid = digits && (whole == "0" || (whole == "1" && frac.bytes().all(|b| b == b'0')));
    if valid {
        text.parse().ok()
    } else {
        None
    }
}

/// Whether an `Accept` value admits the media type `wanted` (lower case). RFC 9110 section
/// 12.5.1: names compare without case; among the ranges matching `wanted` the most specific
/// decides (the type itself, then `type/*`, then `*/*`), the highest weight among equals; its
/// `q` (1 when absent) must be above 0, and a `q` that is not a qvalue, or one given twice,
/// refuses. Checked against `fixtures/accept-headers.json`, the table
/// the suite's witness and oracle are checked against too.
pub(crate) fn admits(accept: &str, wanted: &str) -> bool {
    let (wanted_type, _) = wanted.split_once('/').unwrap_or((wanted, ""));
    let mut best: Option<(u8, f32)> = None;
    for member in accept.split(',') {
        let mut params = member.split(';');
        let range = params.next().map(str::trim).unwrap_or_default();
        let Some((ty, sub)) = range.split_once('/') else {
            continue;
        };
        let specificity = if ty == "*" && sub == "*" {
            1
        } else if !ty.eq_ignore_ascii_case(wanted_type) {
            continue;
        } else if sub == "*" {
            2
        } else if range.eq_ignore_ascii_case(wanted) {
            3
        } else {
            continue;
        };
        // One `q` that is a qvalue, or none (1); a `q` given twice or not a qvalue refuses.
        let mut weights = params
            .filter_map(|p| p.split_once('='))
            .filter(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .map(|(_, v)| qvalue(v));
        let q = match (weights.next(), weights.next()) {
            (None, _) => 1.0,
            (Some(Some(q)), None) => q,
            _ => 0.0,
        };
        best = match best {
            Some((s, bq)) if s > specificity || (s == specificity && bq >= q) => best,
            _ => Some((specificity, q)),
        };
    }
    best.is_some_and(|(_, q)| q > 0.0)
}

/// The gate's HTTP router: metadata, the path, Origin and Host, credentials, then one handler
/// per HTTP method.
async fn handle(front: &HttpFront, local: Local, req: Request<Incoming>) -> Answer {
    let (parts, body) = req.into_parts();
    let headers = &parts.headers;
    if let Some(answer) = front.metadata(&parts) {
        return answer;
    }
    #[cfg(feature = "faults")]
    if parts.method == Method::POST
        && front.proxy.faults().unpoliced_routes
        && route_variant(&parts.uri)
    {
        return unpoliced_route(front, headers, body).await;
    }
    if parts.uri.path() != PATH {
        return front.refuse(StatusCode::NOT_FOUND, "Not Found");
    }
    if !from_loopback(headers, &local) {
        return front.refuse(StatusCode::FORBIDDEN, "Forbidden");
    }
    let credentials = match front.credentials(&parts).await {
        Ok(c) => c,
        Err(refusal) => return refusal,
    };
    match parts.method {
        #[cfg(feature = "faults")]
        Method::POST if front.settings.forward_token => {
            crate::forward::FAULT_HEADERS
                .scope(
                    passed_on(headers, "authorization"),
                    post(front, headers, body, &credentials),
                )
                .await
        }
        Method::POST => post(front, headers, body, &credentials).await,
        Method::GET => get(front, headers, &credentials).await,
        Method::DELETE => match front.session(headers, credentials.principal.as_deref()) {
            Ok((id, _, _)) => {
                front.sessions.remove(&id);
                let mut r = Response::new(GateBody::empty());
                *r.status_mut() = StatusCode::OK;
                r
            }
            Err((status, msg)) => front.refuse(status, msg),
        },
        _ => not_allowed(front, "GET, POST, DELETE"),
    }
}

/// Whether Origin (when sent, once) and Host (exactly once) name this loopback front: the
/// DNS-rebinding guard (MCP-HTTP-SEC-01..03).
fn from_loopback(headers: &HeaderMap, local: &Local) -> bool {
    let origin_ok = match one(headers, "origin") {
        Ok(None) => true,
        Ok(Some(o)) => loopback_authority(o, local.port, local.origin_scheme),
        Err(()) => false,
    };
    let host = one(headers, "host");
    origin_ok && matches!(host, Ok(Some(h)) if loopback_authority(h, local.port, ""))
}

/// 405, naming the methods this path takes.
fn not_allowed(front: &HttpFront, allow: &'static str) -> Answer {
    let mut r = front.refuse(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
    r.headers_mut()
        .insert("allow", HeaderValue::from_static(allow));
    r
}

/// A GET: the session's server stream, relayed message by message when the downstream has
/// one, resuming after the event id the client names.
async fn get(front: &HttpFront, headers: &HeaderMap, credentials: &Credentials) -> Answer {
    if !accepts(headers, "text/event-stream") {
        return front.refuse(StatusCode::NOT_ACCEPTABLE, "Not Acceptable");
    }
    let principal = credentials.principal.as_deref();
    let state = match front.session(headers, principal) {
        Ok((_, _, state)) => state,
        Err((status, msg)) => return front.refuse(status, msg),
    };
    let Ok(last) = one(headers, "last-event-id") else {
        return front.refuse(StatusCode::BAD_REQUEST, "Bad Request");
    };
    let server_id = &front.settings.server_id;
    match front.proxy.listen(server_id, &state, last, principal).await {
        Ok(Some(rx)) => sse_answer(rx),
        Ok(None) => not_allowed(front, "POST, DELETE"),
        Err(Refusal::Downstream) => front.refuse(StatusCode::BAD_GATEWAY, "Bad Gateway"),
        Err(Refusal::StreamOpen) => front.refuse(
            StatusCode::CONFLICT,
            "Conflict: this session's stream is open already",
        ),
        Err(_) => front.refuse(StatusCode::BAD_REQUEST, "Bad Request: unknown event id"),
    }
}

/// A POST, in typed steps: each returns what it checked, or the answer that ends the request
/// (boxed: a refusal is the rare path). The headers (media type, Accept, content coding) and the
/// body within its bound ([`checked_body`]), the canonical message or a client's reply
/// ([`canonical_or_reply`]), the era and the session ([`admit`]), then the proxy's answer as
/// HTTP ([`respond`]).
async fn post(
    front: &HttpFront,
    headers: &HeaderMap,
    body: Incoming,
    credentials: &Credentials,
) -> Answer {
    let steps = async {
        let raw = checked_body(front, headers, body).await?;
        let canonical = canonical_or_reply(front, headers, credentials, &raw).await?;
        let admitted = admit(front, headers, &canonical, credentials)?;
        Ok::<Answer, Box<Answer>>(respond(front, credentials, &raw, &canonical, admitted).await)
    };
    steps.await.unwrap_or_else(|refused| *refused)
}

/// The answer that ends a request early.
type Early = Box<Answer>;

/// The body of a POST whose headers the gate takes (a JSON media type, an Accept naming JSON
/// and SSE, no content coding), read within the byte bound.
async fn checked_body(
    front: &HttpFront,
    headers: &HeaderMap,
    body: Incoming,
) -> Result<Vec<u8>, Early> {
    let faults = front.proxy.faults();
    let refuse = |status, message| Box::new(front.refuse(status, message));
    if !content_type_ok(headers) && !faults.any_media_type() {
        return Err(refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Unsupported Media Type",
        ));
    }
    if !(accepts(headers, "application/json") && accepts(headers, "text/event-stream")) {
        return Err(refuse(StatusCode::NOT_ACCEPTABLE, "Not Acceptable"));
    }
    if !identity_coded(headers) {
        #[cfg(feature = "faults")]
        if faults.unpoliced_codings {
            return Err(Box::new(
                crate::forward::FAULT_HEADERS
                    .scope(
                        passed_on(headers, "content-encoding"),
                        unpoliced_route(front, headers, body),
                    )
                    .await,
            ));
        }
        // The gate polices the bytes it reads and forwards only its own canonical bytes: a body
        // it would have to decode first is refused before it is read (RFC 9110 §15.5.16).
        let mut r = refuse(StatusCode::UNSUPPORTED_MEDIA_TYPE, "Unsupported Media Type");
        r.headers_mut()
            .insert("accept-encoding", HeaderValue::from_static("identity"));
        return Err(r);
    }
    let limit = if faults.no_size_limit() {
        64 * 1024 * 1024
    } else {
        front.proxy.limits().max_bytes
    };
    let declared = match one(headers, "content-length") {
        Ok(v) => v.and_then(|v| v.trim().parse::<u64>().ok()),
        Err(()) => return Err(refuse(StatusCode::BAD_REQUEST, "Bad Request")),
    };
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(refuse(StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large"));
    }
    match read_body(body, limit, front.settings.read_deadline).await {
        Ok(b) => Ok(b),
        Err(BodyError::TooLarge) => Err(refuse(StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large")),
        Err(BodyError::Failed) => Err(refuse(StatusCode::BAD_REQUEST, "Bad Request")),
    }
}

/// The body as one canonical message. A client's reply to a request the gate relayed to it is
/// handled here (only in its session, only for an id that session was given and has not
/// answered) and ends the request, as anything malformed does.
async fn canonical_or_reply(
    front: &HttpFront,
    headers: &HeaderMap,
    credentials: &Credentials,
    raw: &[u8],
) -> Result<Canonical, Early> {
    #[cfg(feature = "faults")]
    if let Some(r) = front
        .proxy
        .batch_fault(&front.settings.server_id, raw)
        .await
    {
        return Err(Box::new(json_answer(
            StatusCode::OK,
            r.response_bytes().unwrap_or_default(),
        )));
    }
    match front.proxy.parse(raw) {
        Ok(c) => Ok(c),
        Err(_) if front.proxy.is_reply(raw) => {
            let state = match front.session(headers, credentials.principal.as_deref()) {
                Ok((_, _, state)) => state,
                Err((status, msg)) => return Err(Box::new(front.refuse(status, msg))),
            };
            Err(Box::new(
                match front.proxy.client_reply(&state, raw).await {
                    Ok(()) => accepted(),
                    Err(Refusal::Downstream) => {
                        front.refuse(StatusCode::BAD_GATEWAY, "Bad Gateway")
                    }
                    Err(_) => {
                        front.refuse(StatusCode::BAD_REQUEST, "Bad Request: unknown response")
                    }
                },
            ))
        }
        Err(_) => {
            let r = front.proxy.malformed();
            Err(Box::new(json_answer(
                StatusCode::BAD_REQUEST,
                r.response_bytes().unwrap_or_default(),
            )))
        }
    }
}

/// 202 with no body.
fn accepted() -> Answer {
    let mut r = Response::new(GateBody::empty());
    *r.status_mut() = StatusCode::ACCEPTED;
    r
}

/// A canonical request admitted in its era: a modern one held to its headers (and without a
/// session), a legacy `initialize` carrying no session, any other legacy message in its
/// session at the version that session agreed.
struct Admitted {
    is_initialize: bool,
    session: Option<Arc<Session>>,
}

fn admit(
    front: &HttpFront,
    headers: &HeaderMap,
    canonical: &Canonical,
    credentials: &Credentials,
) -> Result<Admitted, Early> {
    let refuse = |status, message| Box::new(front.refuse(status, message));
    // The era: a `_meta` version in the body, or a modern version header, makes the request
    // modern.
    let header_version = match one(headers, VERSION) {
        Ok(v) => v,
        Err(()) => {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "Bad Request: protocol version",
            ))
        }
    };
    let pairs: Vec<(&str, &[u8])> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_bytes()))
        .collect();
    let admission = era::admit(canonical, pairs.as_slice());
    let is_initialize = admission.is_none()
        && canonical.message().method() == "initialize"
        && matches!(canonical.message(), Message::Request { .. });
    if let Some(binding) = admission {
        if binding.is_err() && !front.proxy.faults().skip_binding() {
            let r = front.proxy.header_mismatch(canonical);
            return Err(Box::new(json_answer(
                StatusCode::BAD_REQUEST,
                r.response_bytes().unwrap_or_default(),
            )));
        }
        return Ok(Admitted {
            is_initialize,
            session: None,
        });
    }
    if is_initialize {
        if headers.contains_key(SESSION) {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "Bad Request: initialize carries a session",
            ));
        }
        return Ok(Admitted {
            is_initialize,
            session: None,
        });
    }
    let (negotiated, state) = match front.session(headers, credentials.principal.as_deref()) {
        Ok((_, v, state)) => (v, state),
        Err((status, msg)) => return Err(refuse(status, msg)),
    };
    match header_version {
        None => {}
        Some(v) if era::session_accepts_header(negotiated, v) => {}
        _ => {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "Bad Request: protocol version",
            ))
        }
    }
    Ok(Admitted {
        is_initialize,
        session: Some(state),
    })
}

/// The proxy's answer to an admitted request, as HTTP: the status its handling calls for, 403
/// with a scope challenge for a denial a scope would have lifted, and a new session's id.
async fn respond(
    front: &HttpFront,
    credentials: &Credentials,
    raw: &[u8],
    canonical: &Canonical,
    admitted: Admitted,
) -> Answer {
    let server_id = &front.settings.server_id;
    let (outcome, opened) = if admitted.is_initialize {
        let (r, state) = front
            .proxy
            .open_session(server_id, raw, canonical, credentials)
            .await;
        (Outcome::Done(r), state)
    } else {
        let outcome = front
            .proxy
            .handle_in(
                server_id,
                admitted.session.as_ref(),
                raw,
                canonical,
                credentials,
            )
            .await;
        (outcome, None)
    };
    let result = match outcome {
        Outcome::Done(r) => r,
        Outcome::Stream(_, rx) => return sse_answer(rx),
    };
    let mut answer = match (result.handled, result.response_bytes()) {
        (Handled::Refused, None) => front.refuse(StatusCode::BAD_REQUEST, "Bad Request"),
        (Handled::Accepted, _) | (_, None) => accepted(),
        (Handled::Malformed | Handled::Refused, Some(b)) => json_answer(StatusCode::BAD_REQUEST, b),
        (Handled::UnknownMethod, Some(b)) if result.modern => json_answer(StatusCode::NOT_FOUND, b),
        (_, Some(b)) => json_answer(StatusCode::OK, b),
    };
    if let (Handled::Denied, Some(scope), Some(auth)) =
        (result.handled, &result.scope_needed, &front.settings.auth)
    {
        // MCP authorization: a token without the scope a call needs gets 403 and a challenge
        // naming the scope, so the client can ask for it.
        *answer.status_mut() = StatusCode::FORBIDDEN;
        if let Ok(v) = HeaderValue::from_str(&auth.scope_challenge(scope)) {
            answer.headers_mut().insert("www-authenticate", v);
        }
    }
    let negotiated = result.negotiated.filter(|_| admitted.is_initialize);
    if let (Some(version), Some(state)) = (negotiated, opened) {
        front.keep_session(&mut answer, version, state, credentials);
    }
    answer
}

impl HttpFront {
    /// A new client session, kept under a fresh id the answer carries (at the cap, the least
    /// recently used one is forgotten and its downstream closed).
    fn keep_session(
        &self,
        answer: &mut Answer,
        version: crate::Version,
        state: Arc<Session>,
        credentials: &Credentials,
    ) {
        let id = session_id();
        let session = ClientSession {
            version,
            state,
            principal: credentials.principal.clone(),
        };
        self.sessions.insert(id.clone(), session, Instant::now());
        if let Ok(v) = HeaderValue::from_str(&id) {
            answer.headers_mut().insert(SESSION, v);
        }
    }
}

/// A 200 SSE answer relaying `rx`.
fn sse_answer(rx: tokio::sync::mpsc::Receiver<Relayed>) -> Answer {
    let mut r = Response::new(GateBody::Stream(rx));
    r.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    r.headers_mut()
        .insert("cache-control", HeaderValue::from_static("no-cache"));
    r
}

/// Another spelling of the endpoint than `PATH` as written: the same path once letters are
/// folded, `;` parameters dropped, repeated and trailing slashes removed (a query makes the
/// request target differ too). What the `unpoliced_routes` fault serves unchecked.
#[cfg(feature = "faults")]
fn route_variant(uri: &hyper::Uri) -> bool {
    let written = uri.path_and_query().map_or("", |p| p.as_str());
    let folded: Vec<String> = uri
        .path()
        .split('/')
        .map(|seg| seg.split(';').next().unwrap_or("").to_ascii_lowercase())
        .filter(|seg| !seg.is_empty())
        .collect();
    written != PATH && format!("/{}", folded.join("/")) == PATH
}

/// The `unpoliced_routes` fault: the body goes to the downstream as it came (through the
/// session the client names, if the front knows it), and its answer comes back as it is.
#[cfg(feature = "faults")]
async fn unpoliced_route(front: &HttpFront, headers: &HeaderMap, body: Incoming) -> Answer {
    let Ok(raw) = read_body(
        body,
        front.proxy.limits().max_bytes,
        front.settings.read_deadline,
    )
    .await
    else {
        return front.refuse(StatusCode::BAD_REQUEST, "Bad Request");
    };
    let state = match one(headers, SESSION) {
        Ok(Some(id)) => front.sessions.get(id, Instant::now()).map(|s| s.state),
        _ => None,
    };
    match front
        .proxy
        .route_fault(&front.settings.server_id, state.as_ref(), &raw)
        .await
    {
        Some(answer) => json_answer(StatusCode::OK, answer),
        None => front.refuse(StatusCode::BAD_GATEWAY, "Bad Gateway"),
    }
}

/// The faults that pass a client's header on to the downstream: every value of `name`.
#[cfg(feature = "faults")]
fn passed_on(headers: &HeaderMap, name: &str) -> Vec<(String, String)> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(|v| (name.to_string(), v.to_string()))
        .collect()
}

/// Whether the body comes without a content coding: no `Content-Encoding`, or only `identity`.
fn identity_coded(headers: &HeaderMap) -> bool {
    headers.get_all("content-encoding").iter().all(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',')
                .map(str::trim)
                .all(|c| c.is_empty() || c.eq_ignore_ascii_case("identity"))
        })
    })
}

enum BodyError {
    TooLarge,
    Failed,
}

async fn read_body(
    mut body: Incoming,
    limit: usize,
    deadline: Duration,
) -> Result<Vec<u8>, BodyError> {
    let read = async {
        let mut out = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|_| BodyError::Failed)?;
            if let Ok(data) = frame.into_data() {
                if out.len() + data.len() > limit {
                    return Err(BodyError::TooLarge);
                }
                out.extend_from_slice(&data);
            }
        }
        Ok(out)
    };
    tokio::time::timeout(deadline, read)
        .await
        .unwrap_or(Err(BodyError::Failed))
}

fn session_id() -> String {
    use rand::Rng;
    let b: [u8; 16] = rand::rng().random();
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod accept_tests {
    /// The gate reads `Accept` as the shared table says (the suite's witness and oracle are
    /// held to the same table).
    #[test]
    fn accept_headers_follow_the_shared_table() {
        let table: serde_json::Value =
            serde_json::from_str(include_str!("../../fixtures/accept-headers.json"))
                .expect("the table is JSON");
        let rows = table["rows"].as_array().expect("rows");
        assert!(rows.len() >= 20);
        for row in rows {
            let accept = row["accept"].as_str().expect("accept");
            for (ty, key) in [("application/json", "json"), ("text/event-stream", "sse")] {
                assert_eq!(
                    super::admits(accept, ty),
                    row[key].as_bool().expect("bool"),
                    "Accept: {accept:?} and {ty}"
                );
            }
        }
    }
}
