//! The witness's Streamable HTTP front: transport rules (Origin, media types, size, sessions,
//! protocol version, methods) enforced before the protocol core sees a body.

use super::rules::{
    accepts, content_type_ok, header_list, host_ok, origin_ok, read_body, BodyRead, Local,
    READ_DEADLINE,
};
use super::{Broken, Conversation, Fault, Reply, Witness, MAX_MESSAGE};
use crate::versions;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// The endpoint path.
pub const PATH: &str = "/mcp";
const SESSION: &str = "mcp-session-id";
const VERSION: &str = "mcp-protocol-version";
/// How long a hanging tool holds its connection.
const HANG: Duration = Duration::from_secs(120);

type Answer = Response<Full<Bytes>>;

/// Serve `witness` on `listener` until the task is dropped or aborted.
pub async fn serve(listener: TcpListener, witness: Arc<Witness>) {
    serve_with(listener, witness, None).await;
}

/// Serve `witness` over TLS on `listener` until the task is dropped or aborted. A client that
/// does not finish its TLS handshake within the header deadline is dropped.
pub(crate) async fn serve_tls(
    listener: TcpListener,
    witness: Arc<Witness>,
    tls: Arc<rustls::ServerConfig>,
) {
    serve_with(
        listener,
        witness,
        Some(tokio_rustls::TlsAcceptor::from(tls)),
    )
    .await;
}

async fn serve_with(
    listener: TcpListener,
    witness: Arc<Witness>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    let local = Local {
        port: listener.local_addr().map(|a| a.port()).unwrap_or(0),
        scheme: if tls.is_some() { "https" } else { "http" },
    };
    let sse = witness
        .config
        .also_sse
        .then(|| super::sse::Front::new(witness.clone(), local));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let witness = witness.clone();
        if witness.config.is(Broken::KeepClosedConnections) {
            witness.keep_connection(&stream);
        }
        let Some(acceptor) = tls.clone() else {
            if witness.config.is(Broken::OneAtATime) {
                serve_connection(stream, witness, local, sse.clone()).await;
            } else {
                tokio::spawn(serve_connection(stream, witness, local, sse.clone()));
            }
            continue;
        };
        let sse = sse.clone();
        tokio::spawn(async move {
            if let Ok(Ok(stream)) =
                tokio::time::timeout(READ_DEADLINE, acceptor.accept(stream)).await
            {
                serve_connection(stream, witness, local, sse).await;
            }
        });
    }
}

/// One client connection, plain or TLS. With `also_sse`, the HTTP+SSE paths go to `sse`, the
/// front of that transport shared by every connection.
async fn serve_connection<S>(
    stream: S,
    witness: Arc<Witness>,
    local: Local,
    sse: Option<Arc<super::sse::Front>>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    if witness.config.is(Broken::LaxHttp) || witness.config.is(Broken::KeepAfter400) {
        let keep_after_400 = witness.config.is(Broken::KeepAfter400);
        let mut conn = super::lax_http::Conn::new(stream, keep_after_400);
        while let Some(req) = conn.next_request().await {
            let body = BodySource::Read(req.body);
            let answer = respond(&witness, local, &req.method, &req.path, &req.headers, body);
            let Ok(answer) = answer.await else {
                return;
            };
            if !conn.answer(answer).await {
                return;
            }
        }
        return;
    }
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let witness = witness.clone();
        let sse = sse.clone();
        async move {
            let path = req.uri().path();
            let theirs =
                |f: &Arc<super::sse::Front>| path != PATH && f.serves(path, req.uri().query());
            if let Some(front) = sse.filter(theirs) {
                return Ok(front.handle(req).await);
            }
            let answer = handle(&witness, local, req).await?;
            let (mut parts, body) = answer.into_parts();
            let listening = parts.extensions.remove::<Listening>();
            let bytes = body
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            let body = match listening.and_then(Listening::take) {
                Some(rx) => super::sse::EventBody::stream(bytes, rx),
                None => super::sse::EventBody::whole(bytes),
            };
            Ok::<_, Dropped>(Response::from_parts(parts, body))
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(READ_DEADLINE)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// Bind `addr`, start serving in the background, and return the bound address.
pub async fn spawn(
    addr: SocketAddr,
    witness: Arc<Witness>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    Ok((local, tokio::spawn(serve(listener, witness))))
}

/// The error a service returns to make hyper drop the connection without an answer.
#[derive(Debug, thiserror::Error)]
#[error("connection dropped on purpose")]
pub(crate) struct Dropped;

/// Where a request body comes from: hyper's stream (read with limits here), or bytes the
/// `lax-http` front already read.
enum BodySource {
    Stream(Incoming),
    Read(Vec<u8>),
}

async fn handle(w: &Witness, local: Local, req: Request<Incoming>) -> Result<Answer, Dropped> {
    let (parts, body) = req.into_parts();
    respond(
        w,
        local,
        &parts.method,
        parts.uri.path_and_query().map_or("/", |p| p.as_str()),
        &parts.headers,
        BodySource::Stream(body),
    )
    .await
}

/// The witness's HTTP router: the authorization metadata, the path, Origin and Host,
/// credentials, then one handler per HTTP method.
async fn respond(
    w: &Witness,
    local: Local,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    body: BodySource,
) -> Result<Answer, Dropped> {
    let lax = w.config.is(Broken::LaxHeaders);
    let (path, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    if let Some(answer) = auth_metadata(w, method, path) {
        return Ok(answer);
    }
    if path != PATH {
        return Ok(plain(StatusCode::NOT_FOUND, "not found"));
    }
    let origin_checked = !w.config.is(Broken::NoOrigin);
    if origin_checked && !(origin_ok(headers, local) && host_ok(headers, local.port)) {
        return Ok(refusal(
            w,
            StatusCode::FORBIDDEN,
            "Forbidden: origin not allowed",
        ));
    }
    let caller = match authenticate(w, headers, query).await {
        Ok(caller) => caller,
        Err(answer) => return Ok(answer),
    };
    if method == Method::POST || (lax && method == Method::PUT) {
        return post(w, headers, body, caller.as_ref()).await;
    }
    if method == Method::GET
        && w.config.is(Broken::GetStream)
        && accepts(headers, "text/event-stream")
    {
        return Ok(Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "text/event-stream")
            .body(Full::new(Bytes::from_static(b"id: 0\ndata:\n\n")))
            .unwrap_or_default());
    }
    if (w.config.newest_legacy().is_none() || w.config.stateless)
        && (method == Method::GET || method == Method::DELETE)
    {
        // A modern-only or stateless server has no listening stream and no sessions to end.
        return Ok(method_not_allowed());
    }
    Ok(match *method {
        Method::GET => get(w, headers, caller.as_ref()),
        Method::DELETE => delete(w, headers, caller.as_ref()),
        _ => method_not_allowed(),
    })
}

/// With `--auth-config`, a GET of the protected resource's metadata.
fn auth_metadata(w: &Witness, method: &Method, path: &str) -> Option<Answer> {
    let auth = w.config.auth.as_ref().filter(|_| method == Method::GET)?;
    if path != auth.config().metadata_path() && path != reference_gate::auth::WELL_KNOWN {
        return None;
    }
    Some(
        Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(auth.metadata())))
            .unwrap_or_default(),
    )
}

/// With `--auth-config`: a valid access token on every request (MCP authorization). The
/// caller it names, or the 400/401 with its challenge.
async fn authenticate(
    w: &Witness,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Result<Option<reference_gate::auth::Verified>, Answer> {
    let Some(auth) = &w.config.auth else {
        return Ok(None);
    };
    let values: Vec<&[u8]> = headers
        .get_all(hyper::header::AUTHORIZATION)
        .iter()
        .map(HeaderValue::as_bytes)
        .collect();
    let in_query = query.is_some_and(|q| {
        q.split('&').any(|kv| {
            kv.split('=')
                .next()
                .is_some_and(|k| k.eq_ignore_ascii_case("access_token"))
        })
    });
    match auth.verify(&values, in_query).await {
        Ok(v) => Ok(Some(v)),
        Err(refusal_kind) => {
            let status = match refusal_kind {
                reference_gate::auth::Refusal::Ambiguous => StatusCode::BAD_REQUEST,
                _ => StatusCode::UNAUTHORIZED,
            };
            let mut answer = refusal(w, status, "Unauthorized");
            if let Ok(v) = HeaderValue::from_str(&auth.challenge(refusal_kind)) {
                answer.headers_mut().insert("www-authenticate", v);
            }
            Err(answer)
        }
    }
}

/// A GET: the session's listening stream, one at a time (`lax-headers`: a plain "witness is
/// up" instead).
fn get(
    w: &Witness,
    headers: &HeaderMap,
    caller: Option<&reference_gate::auth::Verified>,
) -> Answer {
    if w.config.is(Broken::LaxHeaders) {
        return plain(StatusCode::OK, "witness is up");
    }
    if !accepts(headers, "text/event-stream") {
        return refusal(
            w,
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: GET needs text/event-stream",
        );
    }
    let id = match session_of(w, headers, caller) {
        Ok((id, _)) => id,
        Err((status, msg)) => return refusal(w, status, msg),
    };
    match w.listen(&id) {
        Ok(rx) => listening_stream(rx),
        Err(super::NoStream::Open) => refusal(
            w,
            StatusCode::CONFLICT,
            "Conflict: the session has a stream open already",
        ),
        Err(super::NoStream::Gone) => {
            refusal(w, StatusCode::NOT_FOUND, "Not Found: unknown session")
        }
    }
}

/// A DELETE: the session ends.
fn delete(
    w: &Witness,
    headers: &HeaderMap,
    caller: Option<&reference_gate::auth::Verified>,
) -> Answer {
    let id = match session_of(w, headers, caller) {
        Ok((id, _)) => id,
        Err((status, msg)) if !w.config.is(Broken::LaxHeaders) => return refusal(w, status, msg),
        Err(_) => return plain(StatusCode::OK, ""),
    };
    w.close_session(&id);
    Response::builder()
        .status(StatusCode::OK)
        .body(Full::new(Bytes::new()))
        .unwrap_or_default()
}

/// A POST, in the steps of the Streamable HTTP rules (each step's refusal a broken mode may
/// skip): the transport's checks on the body, the era and a modern request's binding, the
/// session, the version, then the core's reply and a new session's header.
async fn post(
    w: &Witness,
    headers: &HeaderMap,
    body: BodySource,
    caller: Option<&reference_gate::auth::Verified>,
) -> Result<Answer, Dropped> {
    let body = match read_post(w, headers, body).await? {
        Ok(body) => body,
        Err(refusal) => return Ok(refusal),
    };
    w.recorder.message("http", &body, header_list(headers));
    let posted = match Posted::classify(w, headers, body, caller) {
        Ok(posted) => posted,
        Err(refusal) => return Ok(*refusal),
    };
    let session = match posted.session(w, headers, caller) {
        Ok(session) => session,
        Err(refusal) => return Ok(*refusal),
    };
    let lax = w.config.is(Broken::LaxHeaders);
    if !lax && !posted.modern && !posted.is_initialize {
        let negotiated = session.as_ref().and_then(|(_, c)| c.negotiated.clone());
        // A stateless server takes the version the request names, or its newest.
        if let Err((status, msg)) = version_ok(w, headers, negotiated.as_deref()) {
            return Ok(refusal(w, status, msg));
        }
    }
    let mut conv = posted.conversation(w, headers, session.as_ref());
    let mut reply = w.handle_body(&posted.body, &mut conv);
    if w.config.is(Broken::SharedTransport)
        && posted.read.as_ref().and_then(|m| m.get("method")) == Some(&json!("tools/call"))
    {
        if let Reply::Message(m) = reply {
            reply = Reply::Message(w.cross(m).await);
        }
    }
    let mut answer = render(w, headers, reply, lax).await?;
    if posted.is_initialize && session.is_none() && !posted.stateless {
        if let Some(version) = conv.negotiated.clone() {
            let id = w.open_session(version);
            if let Some(c) = caller {
                w.bind_owner(&id, &c.subject);
            }
            if let Ok(v) = HeaderValue::from_str(&id) {
                answer.headers_mut().insert(SESSION, v);
            }
        }
    }
    Ok(answer)
}

/// A POST's body once the transport took it: its one message (when it is one), its era, and
/// whether it starts a session.
struct Posted {
    body: Vec<u8>,
    read: Option<Value>,
    /// A modern request (a `_meta` version in the body, or a modern version header), served
    /// statelessly after its headers are checked against its body.
    modern: bool,
    /// A legacy request to a stateless server: no session read or minted.
    stateless: bool,
    is_initialize: bool,
}

/// A step of a POST: what it found, or the refusal that ends the request.
type Step<T> = Result<T, Box<Answer>>;

impl Posted {
    /// The body read, its token's scopes checked, and its era decided; a modern request's
    /// rules applied (no responses, headers bound to the body).
    fn classify(
        w: &Witness,
        headers: &HeaderMap,
        body: Vec<u8>,
        caller: Option<&reference_gate::auth::Verified>,
    ) -> Step<Posted> {
        let read = one_message(w, &body);
        let scopes = caller.map(|c| c.scopes.as_slice());
        if let Some(answer) = scope_refusal(w, read.as_ref(), scopes) {
            return Err(Box::new(answer));
        }
        let header_version = headers
            .get(VERSION)
            .and_then(|v| v.to_str().ok())
            .filter(|v| versions::is_modern(v));
        let looks_modern =
            read.as_ref().and_then(versions::meta_version).is_some() || header_version.is_some();
        let modern = looks_modern && (w.config.speaks_modern() || w.config.is(Broken::LaxBinding));
        if modern {
            modern_rules(w, headers, read.as_ref())?;
        }
        let is_initialize = !modern && body_is_initialize(&body);
        Ok(Posted {
            body,
            read,
            modern,
            stateless: w.config.stateless && !modern,
            is_initialize,
        })
    }

    /// The session the request names (`None`: it needs none, or `lax-headers` runs it without
    /// one), or the refusal (400, 404; `session-code`: the SDKs' -32000).
    fn session(
        &self,
        w: &Witness,
        headers: &HeaderMap,
        caller: Option<&reference_gate::auth::Verified>,
    ) -> Step<Option<(String, Conversation)>> {
        let lax = w.config.is(Broken::LaxHeaders);
        if self.modern || self.stateless {
            // No sessions in a modern request, nor on a stateless server: a session header is
            // ignored and none is minted.
            return Ok(None);
        }
        if self.is_initialize {
            if !lax && headers.contains_key(SESSION) {
                // A client may not choose (or re-use) a session for a new initialize.
                return Err(Box::new(refusal(
                    w,
                    StatusCode::BAD_REQUEST,
                    "Bad Request: initialize must not carry a session",
                )));
            }
            return Ok(None);
        }
        match session_of(w, headers, caller) {
            Ok(s) => Ok(Some(s)),
            Err((status, _)) if !lax && w.config.has(super::Quirk::SessionCode) => {
                let err = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"}});
                Err(Box::new(json_answer(status, &err)))
            }
            Err((status, msg)) if !lax => Err(Box::new(refusal(w, status, msg))),
            Err(_) => Ok(None),
        }
    }

    /// The conversation the core runs the body in: the session's, or a new one (`lax-headers`
    /// runs requests without a session as if initialized; a stateless server runs them at the
    /// version their header names, or its newest legacy one).
    fn conversation(
        &self,
        w: &Witness,
        headers: &HeaderMap,
        session: Option<&(String, Conversation)>,
    ) -> Conversation {
        let mut conv = session
            .map(|(_, c)| c.clone())
            .unwrap_or_else(|| Conversation {
                negotiated: if w.config.is(Broken::LaxHeaders) {
                    Some(super::LATEST_VERSION.to_string())
                } else if self.stateless && !self.is_initialize {
                    Some(
                        headers
                            .get(VERSION)
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_string)
                            .or_else(|| w.config.newest_legacy().map(|v| v.to_string()))
                            .unwrap_or_else(|| super::LATEST_VERSION.to_string()),
                    )
                } else {
                    None
                },
                batches: false,
                just_initialized: false,
            });
        // `legacy-batch`: no version header, or 2025-03-26, is read as the version with batches.
        conv.batches = matches!(
            headers.get(VERSION).map(|v| v.to_str().unwrap_or("")),
            None | Some("2025-03-26")
        );
        conv
    }
}

/// A modern request's own rules: a client does not POST responses in 2026-07-28, and a
/// well-formed request's `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` equal its body.
/// (`cache-names`: each `Mcp-Name` and `Mcp-Param-*` value is a name asked too.)
fn modern_rules(w: &Witness, headers: &HeaderMap, read: Option<&Value>) -> Step<()> {
    let lax = w.config.is(Broken::LaxHeaders);
    let lax_binding = w.config.is(Broken::LaxBinding);
    let is_response = matches!(read, Some(Value::Object(o))
        if !o.contains_key("method") && (o.contains_key("result") || o.contains_key("error")));
    let answers_anything = w.config.is(Broken::LaxEnvelope) || w.config.is(Broken::ReplyToAll);
    if is_response && !lax && !answers_anything {
        let err = w.error(
            Value::Null,
            -32600,
            "Invalid Request: clients do not send responses in 2026-07-28",
            "response",
        );
        return Err(Box::new(refused(w, &err)));
    }
    for (header, value) in headers {
        let named = header.as_str() == "mcp-name" || header.as_str().starts_with("mcp-param-");
        if let (true, Ok(value)) = (named, value.to_str()) {
            w.cache_name(value);
        }
    }
    if lax || lax_binding {
        return Ok(());
    }
    // Only a well-formed request is held to its headers; anything else is refused by the
    // core for what it is (an invalid envelope, a response, a batch).
    if let Some(Value::Object(o)) = read.filter(|v| well_formed_request(v)) {
        if !binding_ok(headers, o) {
            let id = o.get("id").filter(|v| super::valid_id(v)).cloned();
            let err = w.error(
                id.unwrap_or(Value::Null),
                versions::HEADER_MISMATCH,
                "Header mismatch: MCP-Protocol-Version, Mcp-Method and Mcp-Name must equal the body",
                "binding",
            );
            return Err(Box::new(refused(w, &err)));
        }
    }
    Ok(())
}

/// The transport's checks on a POST and its body: media type (415), `Accept` (406), the
/// declared and the read size (413). The body, or the refusal to answer with.
async fn read_post(
    w: &Witness,
    headers: &HeaderMap,
    body: BodySource,
) -> Result<Result<Vec<u8>, Answer>, Dropped> {
    let lax = w.config.is(Broken::LaxHeaders);
    let unbounded = w.config.is(Broken::Unbounded);
    if !lax && !content_type_ok(headers) {
        return Ok(Err(refusal(
            w,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Unsupported Media Type: use application/json",
        )));
    }
    let accepts_both =
        accepts(headers, "application/json") && accepts(headers, "text/event-stream");
    if !lax && !accepts_both {
        return Ok(Err(refusal(
            w,
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: Accept must list application/json and text/event-stream",
        )));
    }
    let declared = headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if !unbounded && declared.is_some_and(|n| n > MAX_MESSAGE as u64) {
        return Ok(Err(too_large(w)));
    }
    // Even the `unbounded` mode stops at 1.5 GiB, so a test cannot take the machine down.
    let limit = if unbounded { 3 << 29 } else { MAX_MESSAGE };
    let body = match body {
        BodySource::Stream(b) => match read_body(b, limit).await {
            BodyRead::Done(b) => b,
            BodyRead::TooLarge => return Ok(Err(too_large(w))),
            BodyRead::Failed => return Err(Dropped),
        },
        BodySource::Read(b) if b.len() > limit => return Ok(Err(too_large(w))),
        BodySource::Read(b) => b,
    };
    decode(w, headers, body, limit)
}

/// The body after its `Content-Encoding`: identity as it is; gzip inflated, refused with 413
/// once it inflates past `limit` (a gzip bomb costs the witness no more than a plain body
/// would); any other coding refused with 415 and `Accept-Encoding` naming what it reads (RFC
/// 9110 §15.5.16). A body that does not inflate is answered like one that does not parse.
fn decode(
    w: &Witness,
    headers: &HeaderMap,
    body: Vec<u8>,
    limit: usize,
) -> Result<Result<Vec<u8>, Answer>, Dropped> {
    use std::io::Read as _;
    let codings: Vec<String> = headers
        .get_all(hyper::header::CONTENT_ENCODING)
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("?").split(','))
        .map(|c| c.trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty() && c != "identity")
        .collect();
    match codings.as_slice() {
        [] => Ok(Ok(body)),
        [one] if one == "gzip" || one == "x-gzip" => {
            let mut out = Vec::new();
            let mut reader = flate2::read::GzDecoder::new(body.as_slice()).take(limit as u64 + 1);
            match reader.read_to_end(&mut out) {
                Ok(n) if n > limit => Ok(Err(too_large(w))),
                Ok(_) => Ok(Ok(out)),
                // Not gzip after all: the bytes that came are what the core refuses.
                Err(_) => Ok(Ok(body)),
            }
        }
        _ => {
            let mut answer = refusal(
                w,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Unsupported Media Type: the content coding is not one this server reads",
            );
            answer.headers_mut().insert(
                hyper::header::ACCEPT_ENCODING,
                hyper::header::HeaderValue::from_static("gzip, identity"),
            );
            Ok(Err(answer))
        }
    }
}

/// The HTTP answer for what the core replied (202 for a notification, JSON or SSE for
/// messages, 400 or 404 for refusals, the fault tools' broken answers), or the connection
/// dropped.
async fn render(
    w: &Witness,
    headers: &HeaderMap,
    reply: Reply,
    lax: bool,
) -> Result<Answer, Dropped> {
    Ok(match reply {
        Reply::Accepted => Response::builder()
            .status(StatusCode::ACCEPTED)
            .body(Full::new(Bytes::new()))
            .unwrap_or_default(),
        Reply::Message(m) if lax || (w.config.sse && accepts(headers, "text/event-stream")) => {
            sse_answer(&m)
        }
        Reply::Message(m) => json_answer(StatusCode::OK, &m),
        Reply::Sequence(ms) => sse_sequence(&ms),
        Reply::Refused(m) if w.config.is(Broken::Crash500) => crash_page(&m),
        Reply::Refused(_) if w.config.is(Broken::PlainRefusals) => Response::builder()
            .status(StatusCode::BAD_REQUEST)
            .header("content-type", "text/plain; charset=utf-8")
            .body(Full::new(Bytes::from_static(b"Bad Request")))
            .unwrap_or_default(),
        Reply::Refused(m) => json_answer(StatusCode::BAD_REQUEST, &m),
        Reply::Unknown(m) => json_answer(StatusCode::NOT_FOUND, &m),
        Reply::Fault(Fault::Empty) => Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::new()))
            .unwrap_or_default(),
        Reply::Fault(Fault::Garbage) => Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from_static(b"\x00\xffthis is not json{")))
            .unwrap_or_default(),
        Reply::Fault(Fault::Close) => return Err(Dropped),
        Reply::Hang => {
            tokio::time::sleep(HANG).await;
            return Err(Dropped);
        }
        Reply::Crash if w.config.is(Broken::Exits) => std::process::exit(70),
        Reply::Crash => return Err(Dropped),
    })
}

fn body_is_initialize(body: &[u8]) -> bool {
    crate::reading::parse_strict(body)
        .ok()
        .is_some_and(|v| v.get("method") == Some(&Value::String("initialize".into())))
}

/// A transport-level refusal before it is rendered: the status and a fixed message.
type Refusal = (StatusCode, &'static str);

/// The request's session, or why it is refused (400 missing or ambiguous, 404 unknown, or
/// opened by another token subject: a session id is not a credential).
fn session_of(
    w: &Witness,
    headers: &HeaderMap,
    caller: Option<&reference_gate::auth::Verified>,
) -> Result<(String, Conversation), Refusal> {
    let mut values = headers.get_all(SESSION).iter();
    let Some(first) = values.next() else {
        return Err((StatusCode::BAD_REQUEST, "Bad Request: missing session"));
    };
    if values.next().is_some() {
        return Err((
            StatusCode::BAD_REQUEST,
            "Bad Request: more than one session header",
        ));
    }
    let id = first.to_str().unwrap_or("");
    let caller = caller.map(|c| c.subject.as_str());
    match w.session(id) {
        Some(conv) if w.owns(id, caller) => Ok((id.to_string(), conv)),
        _ => Err((StatusCode::NOT_FOUND, "Not Found: unknown session")),
    }
}

/// The body as one message, read the way the witness reads (its personality), if it is one.
fn one_message(w: &Witness, body: &[u8]) -> Option<Value> {
    let mut values = crate::reading::read(w.config.personality, body).ok()?;
    (values.len() == 1).then(|| values.remove(0))
}

/// A refusal the front decides itself, rendered as the core's refusals are (the `crash500` mode's
/// error page included).
fn refused(w: &Witness, err: &Value) -> Answer {
    if w.config.is(Broken::Crash500) {
        crash_page(err)
    } else {
        json_answer(StatusCode::BAD_REQUEST, err)
    }
}

/// A JSON-RPC 2.0 request or notification as the witness's core accepts one.
fn well_formed_request(v: &Value) -> bool {
    v.get("jsonrpc") == Some(&Value::String("2.0".into()))
        && v.get("method").is_some_and(Value::is_string)
        && v.get("params").is_none_or(Value::is_object)
        && v.get("id").is_none_or(super::valid_id)
        && v.get("result").is_none()
        && v.get("error").is_none()
}

/// The one value of header `name`, as text; `Err` when repeated or not visible ASCII.
fn one_text<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ()> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(());
    }
    first.to_str().map(Some).map_err(|_| ())
}

/// 2026-07-28 header/body binding: `MCP-Protocol-Version` equals the `_meta` version,
/// `Mcp-Method` the method, and `Mcp-Name` (sentinel-decoded) the name or uri of the named
/// methods, each present exactly once; no `Mcp-Name` on other methods.
fn binding_ok(headers: &HeaderMap, body: &serde_json::Map<String, Value>) -> bool {
    let check = || -> Result<bool, ()> {
        let as_value = |v: Option<&str>| v.map(|s| Value::String(s.to_string()));
        let meta = body
            .get("params")
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get(versions::META_VERSION));
        if as_value(one_text(headers, VERSION)?).as_ref() != meta || meta.is_none() {
            return Ok(false);
        }
        let method = body.get("method").and_then(Value::as_str);
        if one_text(headers, "mcp-method")? != method || method.is_none() {
            return Ok(false);
        }
        let name = one_text(headers, "mcp-name")?;
        if !method.is_some_and(|m| versions::NAMED_METHODS.contains(&m)) {
            return Ok(name.is_none());
        }
        let decoded = match name {
            Some(n) => Some(versions::decode_header_value(n).ok_or(())?),
            None => None,
        };
        let params = body.get("params");
        let source = params
            .and_then(|p| p.get("name").or_else(|| p.get("uri")))
            .and_then(Value::as_str);
        Ok(decoded.as_deref() == source && source.is_some())
    };
    check().unwrap_or(false)
}

/// `MCP-Protocol-Version`: absent (the negotiated version applies), or exactly one supported
/// value equal to the negotiated one.
fn version_ok(w: &Witness, headers: &HeaderMap, negotiated: Option<&str>) -> Result<(), Refusal> {
    let bad = (
        StatusCode::BAD_REQUEST,
        "Bad Request: unsupported protocol version",
    );
    let mut values = headers.get_all(VERSION).iter();
    let Some(first) = values.next() else {
        return Ok(());
    };
    if values.next().is_some() {
        return Err(bad);
    }
    let v = first.to_str().map_err(|_| bad)?;
    if w.config.is(Broken::LegacyBatch) && v == "2025-03-26" {
        return Ok(());
    }
    if !w.config.speaks(v) || versions::is_modern(v) || negotiated.is_some_and(|n| n != v) {
        return Err(bad);
    }
    Ok(())
}

fn json_answer(status: StatusCode, body: &Value) -> Answer {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap_or_default()
}

/// One response as an SSE stream: a priming event (id, empty data), then the message.
fn sse_answer(body: &Value) -> Answer {
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Full::new(Bytes::from(format!(
            "id: 0\ndata:\n\nevent: message\nid: 1\ndata: {body}\n\n"
        ))))
        .unwrap_or_default()
}

/// Several messages as one SSE stream, after a priming event.
fn sse_sequence(messages: &[Value]) -> Answer {
    let mut body = String::from("id: 0\ndata:\n\n");
    for (i, m) in messages.iter().enumerate() {
        body.push_str(&format!("event: message\nid: {}\ndata: {m}\n\n", i + 1));
    }
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_default()
}

/// A transport-level refusal: the status with a JSON-RPC error envelope whose id is null.
fn refusal(w: &Witness, status: StatusCode, message: &str) -> Answer {
    w.refused();
    if w.config.is(Broken::Crash500) {
        return crash_page(&Value::Null);
    }
    let mut err = json!({"code": -32600, "message": message});
    if w.config.is(Broken::Leaky) {
        err["data"] = json!({"trace": "  File \"/srv/witness/server.py\", line 42, in handle"});
    }
    let mut answer = json_answer(status, &json!({"jsonrpc": "2.0", "id": null, "error": err}));
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        answer
            .headers_mut()
            .insert("connection", HeaderValue::from_static("close"));
    }
    answer
}

/// With `--auth-tool-scope`: a call of a tool whose scope the token does not grant gets 403
/// `insufficient_scope` naming it, and the tool does not run.
fn scope_refusal(w: &Witness, read: Option<&Value>, scopes: Option<&[String]>) -> Option<Answer> {
    let auth = w.config.auth.as_ref()?;
    let msg = read?;
    if msg.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    let tool = msg.pointer("/params/name").and_then(Value::as_str)?;
    let (_, scope) = w.config.tool_scopes.iter().find(|(t, _)| t == tool)?;
    if scopes.is_some_and(|s| s.contains(scope)) {
        return None;
    }
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    let mut answer = json_answer(
        StatusCode::FORBIDDEN,
        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message": "Forbidden: insufficient scope"}}),
    );
    if let Ok(v) = HeaderValue::from_str(&auth.scope_challenge(scope)) {
        answer.headers_mut().insert("www-authenticate", v);
    }
    Some(answer)
}

fn too_large(w: &Witness) -> Answer {
    refusal(w, StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large")
}

/// The receiver of a listening stream, carried on its answer's head to the connection's
/// service, which streams what it is fed (the answers of this file are whole bodies).
#[derive(Clone)]
struct Listening(Arc<std::sync::Mutex<Option<tokio::sync::mpsc::Receiver<Bytes>>>>);

impl Listening {
    fn take(self) -> Option<tokio::sync::mpsc::Receiver<Bytes>> {
        crate::sync::lock(&self.0).take()
    }
}

/// A `GET`'s listening stream: `200 text/event-stream`, a comment, then whatever the session
/// sends (the witness sends nothing unasked), open until the session ends or the client goes.
fn listening_stream(rx: tokio::sync::mpsc::Receiver<Bytes>) -> Answer {
    let mut answer = Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Full::new(Bytes::from_static(b": listening\n\n")))
        .unwrap_or_default();
    answer
        .extensions_mut()
        .insert(Listening(Arc::new(std::sync::Mutex::new(Some(rx)))));
    answer
}

fn method_not_allowed() -> Answer {
    Response::builder()
        .status(StatusCode::METHOD_NOT_ALLOWED)
        .header("allow", "POST, DELETE")
        .body(Full::new(Bytes::new()))
        .unwrap_or_default()
}

fn plain(status: StatusCode, text: &'static str) -> Answer {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain")
        .body(Full::new(Bytes::from_static(text.as_bytes())))
        .unwrap_or_default()
}

/// What a careless server's framework shows on an unhandled exception.
fn crash_page(_error: &Value) -> Answer {
    Response::builder()
        .status(StatusCode::INTERNAL_SERVER_ERROR)
        .header("content-type", "text/html")
        .body(Full::new(Bytes::from_static(
            b"<html><body><h1>500 Internal Server Error</h1><pre>Traceback (most recent call last):\n  File \"/srv/witness/server.py\", line 42, in handle\nValueError: bad request</pre></body></html>",
        )))
        .unwrap_or_default()
}
