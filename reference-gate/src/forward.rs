//! Forwarders: the only way bytes leave the gate. A [`Forwarder`] receives a server id and
//! canonical bytes, nothing else — no client credentials, headers, session or destination — and
//! maps the id through the trusted configuration itself. Each keeps its own downstream session
//! and enforces connect, request and response bounds.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt as _, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;
use tokio::time::Instant;

/// A downstream server, named by the id clients' calls are routed to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
pub enum Server {
    /// A Streamable HTTP endpoint.
    Url(String),
    /// A stdio server: program and arguments.
    Command(Vec<String>),
}

/// Deadlines and bounds for the downstream exchange and the client front.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Deadlines {
    pub connect_ms: u64,
    /// The whole downstream request, response included.
    pub request_ms: u64,
    /// Largest downstream response.
    pub max_response: usize,
    /// How long a client may take to send a request.
    pub client_read_ms: u64,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            connect_ms: 2000,
            request_ms: 3000,
            max_response: 1024 * 1024,
            client_read_ms: 10_000,
        }
    }
}

/// Why forwarding failed. Never shown to a client: every kind becomes the downstream-failure code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForwardError {
    #[error("no downstream is configured for this server id")]
    UnknownServer,
    #[error("the downstream did not answer in time")]
    Timeout,
    #[error("the downstream could not be reached")]
    Unreachable,
    #[error("the downstream answered with more than the response bound")]
    Oversize,
    #[error("the downstream answered with something that is not a response")]
    BadAnswer,
}

/// A boxed future, so forwarders can be trait objects.
pub type ForwardFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<u8>, ForwardError>> + Send + 'a>>;

/// Sends canonical bytes to the server `server_id` names and returns the raw answer: the JSON
/// text of one JSON-RPC message, or nothing for a notification.
pub trait Forwarder: Send + Sync + 'static {
    fn forward<'a>(
        &'a self,
        server_id: &'a str,
        canonical: &'a [u8],
        expects_answer: bool,
    ) -> ForwardFuture<'a>;

    /// Open a downstream session of its own for one client session with this (canonical)
    /// `initialize` request: the session and the downstream's raw answer. `Ok(None)`: this
    /// forwarder has no per-client sessions (the gate then answers `initialize` itself and
    /// forwards through [`Forwarder::forward`]).
    fn open<'a>(&'a self, _server_id: &'a str, _initialize: &'a [u8]) -> OpenFuture<'a> {
        Box::pin(async { Ok(None) })
    }
}

/// One message the downstream sent, as it came (the proxy canonicalizes it before anything
/// else), with the SSE event id and retry hint it came with.
#[derive(Debug, Clone, Default)]
pub struct Event {
    pub data: Vec<u8>,
    pub id: Option<String>,
    pub retry: Option<u64>,
}

/// The downstream's messages for one request or stream, in order. The channel closes when the
/// downstream ended the stream; an error ends it too. Dropping the receiver drops the stream.
pub type Events = tokio::sync::mpsc::Receiver<Result<Event, ForwardError>>;

/// A boxed future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
/// What [`Forwarder::open`] gives.
pub type OpenFuture<'a> =
    BoxFuture<'a, Result<Option<(std::sync::Arc<dyn Downstream>, Vec<u8>)>, ForwardError>>;

/// The downstream session of one client session: every message of that client goes through it,
/// so nothing of one client's exchange can reach another.
pub trait Downstream: Send + Sync + 'static {
    /// Send one canonical message (a request, notification or the client's response to a
    /// server request); for a request, the downstream's messages until its answer.
    fn send<'a>(
        &'a self,
        canonical: &'a [u8],
        expects_answer: bool,
    ) -> BoxFuture<'a, Result<Events, ForwardError>>;

    /// Send a message that gets no answer (a notification, a response to a server request),
    /// waiting until the downstream took it.
    fn deliver<'a>(&'a self, canonical: &'a [u8]) -> BoxFuture<'a, Result<(), ForwardError>> {
        Box::pin(async move {
            let mut taken = self.send(canonical, false).await?;
            while taken.recv().await.is_some() {}
            Ok(())
        })
    }

    /// The server's own stream (HTTP GET), resuming after `last_event_id` (a downstream event
    /// id). `Ok(None)`: the downstream offers none.
    fn listen<'a>(
        &'a self,
        last_event_id: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Option<Events>, ForwardError>>;

    /// End the session.
    fn close(&self) -> BoxFuture<'_, ()>;

    /// The protocol version the downstream agreed.
    fn version(&self) -> &str;
}

/// Protocol version the gate speaks downstream.
const DOWNSTREAM_VERSION: &str = "2025-11-25";

fn init_message() -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":"gate-init","method":"initialize","params":{{"protocolVersion":"{DOWNSTREAM_VERSION}","capabilities":{{}},"clientInfo":{{"name":"reference-gate","version":"{}"}}}}}}"#,
        env!("CARGO_PKG_VERSION")
    )
    .into_bytes()
}

const INITIALIZED: &[u8] = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// Forwards to the configured servers, over HTTP or stdio as each is configured.
pub struct ConfiguredForwarder {
    servers: BTreeMap<String, Box<dyn Forwarder>>,
}

impl ConfiguredForwarder {
    /// Forwarders for `servers`; `https` ones check certificates against the platform's roots
    /// (with none, every exchange with them fails).
    pub fn new(servers: &BTreeMap<String, Server>, deadlines: Deadlines) -> ConfiguredForwarder {
        let any_https = servers
            .values()
            .any(|s| matches!(s, Server::Url(u) if u.starts_with("https://")));
        let tls = any_https
            .then(|| {
                crate::tls::roots(None)
                    .and_then(crate::tls::client_config)
                    .ok()
            })
            .flatten();
        ConfiguredForwarder::with_tls(servers, deadlines, tls)
    }

    /// Forwarders for `servers`; `https` ones check certificates with `tls` (with none, every
    /// exchange with them fails).
    pub fn with_tls(
        servers: &BTreeMap<String, Server>,
        deadlines: Deadlines,
        tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    ) -> ConfiguredForwarder {
        let servers = servers
            .iter()
            .map(|(id, s)| {
                let f: Box<dyn Forwarder> = match s {
                    Server::Url(url) => {
                        Box::new(HttpForwarder::with_tls(url.clone(), deadlines, tls.clone()))
                    }
                    Server::Command(cmd) => Box::new(StdioForwarder::new(cmd.clone(), deadlines)),
                };
                (id.clone(), f)
            })
            .collect();
        ConfiguredForwarder { servers }
    }
}

impl Forwarder for ConfiguredForwarder {
    fn forward<'a>(
        &'a self,
        server_id: &'a str,
        canonical: &'a [u8],
        expects_answer: bool,
    ) -> ForwardFuture<'a> {
        match self.servers.get(server_id) {
            Some(f) => f.forward(server_id, canonical, expects_answer),
            None => Box::pin(async { Err(ForwardError::UnknownServer) }),
        }
    }

    fn open<'a>(&'a self, server_id: &'a str, initialize: &'a [u8]) -> OpenFuture<'a> {
        match self.servers.get(server_id) {
            Some(f) => f.open(server_id, initialize),
            None => Box::pin(async { Err(ForwardError::UnknownServer) }),
        }
    }
}

// ---------------------------------------------------------------------------------------------

/// An HTTP/1.1 client connection on `stream` (TCP, or TLS over TCP), driven by a task of its own
/// that lives as long as a sender for it does (in use or idle).
async fn handshake<S>(
    stream: S,
    deadline: Instant,
) -> Result<SendRequest<Full<Bytes>>, ForwardError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = tokio::time::timeout_at(
        deadline,
        hyper::client::conn::http1::handshake(TokioIo::new(stream)),
    )
    .await
    .map_err(|_| ForwardError::Timeout)?
    .map_err(|_| ForwardError::Unreachable)?;
    tokio::spawn(conn);
    Ok(sender)
}

/// One GET of `url` (its certificate checked with `tls` for https), before `deadline`, whose
/// `200` body is at most `max` bytes: how the gate fetches documents it needs (a JWKS).
pub async fn get(
    url: &str,
    max: usize,
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    deadline: Instant,
) -> Result<Vec<u8>, ForwardError> {
    let target = parse_url(url).ok_or(ForwardError::UnknownServer)?;
    let stream = tokio::time::timeout_at(deadline, tokio::net::TcpStream::connect(&target.connect))
        .await
        .map_err(|_| ForwardError::Timeout)?
        .map_err(|_| ForwardError::Unreachable)?;
    let mut sender = match (target.tls_name.clone(), tls) {
        (None, _) => handshake(stream, deadline).await?,
        (Some(name), Some(tls)) => {
            let stream = tokio::time::timeout_at(
                deadline,
                tokio_rustls::TlsConnector::from(tls).connect(name, stream),
            )
            .await
            .map_err(|_| ForwardError::Timeout)?
            .map_err(|_| ForwardError::Unreachable)?;
            handshake(stream, deadline).await?
        }
        (Some(_), None) => return Err(ForwardError::Unreachable),
    };
    let req = Request::builder()
        .method(Method::GET)
        .uri(&target.path)
        .header("host", &target.authority)
        .header("accept", "application/json")
        .body(Full::new(Bytes::new()))
        .map_err(|_| ForwardError::Unreachable)?;
    let read = async {
        let resp = sender
            .send_request(req)
            .await
            .map_err(|_| ForwardError::Unreachable)?;
        if resp.status() != hyper::StatusCode::OK {
            return Err(ForwardError::BadAnswer);
        }
        read_bounded(&mut resp.into_body(), max).await
    };
    tokio::time::timeout_at(deadline, read)
        .await
        .map_err(|_| ForwardError::Timeout)?
}

/// A whole response body, refused once it passes `max` bytes.
async fn read_bounded(
    body: &mut hyper::body::Incoming,
    max: usize,
) -> Result<Vec<u8>, ForwardError> {
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| ForwardError::Unreachable)?;
        if let Ok(data) = frame.into_data() {
            out.extend_from_slice(&data);
            if out.len() > max {
                return Err(ForwardError::Oversize);
            }
        }
    }
    Ok(out)
}

struct HttpTarget {
    authority: String,
    connect: String,
    path: String,
    /// `https`: the name the certificate must carry.
    tls_name: Option<rustls::pki_types::ServerName<'static>>,
}

fn parse_url(url: &str) -> Option<HttpTarget> {
    let (rest, https) = match url.strip_prefix("https://") {
        Some(rest) => (rest, true),
        None => (url.strip_prefix("http://")?, false),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    // A port is what follows the last colon outside an IPv6 literal's brackets.
    let host = match authority.rsplit_once(':') {
        Some((h, _)) if !h.starts_with('[') || h.ends_with(']') => h,
        _ => authority,
    };
    let connect = if host.len() < authority.len() {
        authority.to_string()
    } else {
        format!("{authority}:{}", if https { 443 } else { 80 })
    };
    let tls_name = if https {
        Some(crate::tls::server_name(host)?)
    } else {
        None
    };
    Some(HttpTarget {
        authority: authority.to_string(),
        connect: connect.trim_start_matches('[').replace("]:", ":"),
        path: path.to_string(),
        tls_name,
    })
}

#[cfg(feature = "faults")]
tokio::task_local! {
    /// The forward-token fault: headers the HTTP forwarder adds to every downstream request
    /// made while a client's request is handled (set by the HTTP front).
    pub static FAULT_HEADERS: Vec<(String, String)>;
}

/// Most idle keep-alive connections kept per downstream.
const MAX_IDLE: usize = 64;

/// A Streamable HTTP downstream: the gate's own shared session (for the stdio front and modern
/// requests), a session per client session through [`Forwarder::open`], and a small keep-alive
/// pool.
pub struct HttpForwarder {
    inner: std::sync::Arc<HttpInner>,
}

struct HttpInner {
    url: String,
    deadlines: Deadlines,
    /// For an `https` URL: how the downstream's certificate is checked.
    tls: Option<tokio_rustls::TlsConnector>,
    session: Mutex<Option<Option<String>>>,
    idle: std::sync::Mutex<Vec<SendRequest<Full<Bytes>>>>,
}

struct HttpAnswer {
    status: u16,
    session: Option<String>,
    body: Vec<u8>,
}

impl HttpForwarder {
    /// A forwarder to a plain `http` URL (an `https` one has no trusted roots: every exchange
    /// with it fails).
    pub fn new(url: String, deadlines: Deadlines) -> HttpForwarder {
        HttpForwarder::with_tls(url, deadlines, None)
    }

    /// A forwarder to `url`; for `https`, the downstream's certificate is checked with `tls`.
    pub fn with_tls(
        url: String,
        deadlines: Deadlines,
        tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    ) -> HttpForwarder {
        HttpForwarder {
            inner: std::sync::Arc::new(HttpInner {
                url,
                deadlines,
                tls: tls.map(tokio_rustls::TlsConnector::from),
                session: Mutex::new(None),
                idle: std::sync::Mutex::new(Vec::new()),
            }),
        }
    }
}

impl HttpInner {
    /// POST `body`: in the gate's legacy session, or, with `modern` headers (derived from the
    /// canonical message), statelessly. The body is the answer: the first message that is one
    /// (a JSON body is one message), else the first message, else nothing.
    async fn post(
        self: &std::sync::Arc<Self>,
        body: &[u8],
        session: Option<&str>,
        modern: Option<&[(&'static str, String)]>,
        deadline: Instant,
    ) -> Result<HttpAnswer, ForwardError> {
        let headers = match modern {
            Some(headers) => headers.to_vec(),
            None => {
                let mut h = vec![("mcp-protocol-version", DOWNSTREAM_VERSION.to_string())];
                if let Some(s) = session {
                    h.push(("mcp-session-id", s.to_string()));
                }
                h
            }
        };
        let (status, session, mut events) = self
            .stream(Method::POST, Some(body), headers, Some(deadline))
            .await?;
        let mut first = None;
        let body = loop {
            let event = tokio::time::timeout_at(deadline, events.recv())
                .await
                .map_err(|_| ForwardError::Timeout)?;
            match event {
                Some(Ok(e)) if is_answer(&e.data) => break e.data,
                Some(Ok(e)) => {
                    if first.is_none() && !e.data.is_empty() {
                        first = Some(e.data);
                    }
                }
                Some(Err(e)) => return Err(e),
                None => break first.unwrap_or_default(),
            }
        };
        Ok(HttpAnswer {
            status,
            session,
            body,
        })
    }

    /// An idle keep-alive connection to the downstream, or a new one.
    async fn connection(
        &self,
        target: &HttpTarget,
        deadline: Instant,
    ) -> Result<SendRequest<Full<Bytes>>, ForwardError> {
        loop {
            let idle = self.idle.lock().ok().and_then(|mut v| v.pop());
            let Some(mut sender) = idle else { break };
            if !sender.is_closed() && sender.ready().await.is_ok() {
                return Ok(sender);
            }
        }
        let connect_by =
            (Instant::now() + Duration::from_millis(self.deadlines.connect_ms)).min(deadline);
        let stream =
            tokio::time::timeout_at(connect_by, tokio::net::TcpStream::connect(&target.connect))
                .await
                .map_err(|_| ForwardError::Timeout)?
                .map_err(|_| ForwardError::Unreachable)?;
        let _ = stream.set_nodelay(true);
        let Some(name) = target.tls_name.clone() else {
            return handshake(stream, deadline).await;
        };
        // https with no usable trust (no roots loaded): fail closed, forward nothing.
        let connector = self.tls.as_ref().ok_or(ForwardError::Unreachable)?;
        let stream = tokio::time::timeout_at(connect_by, connector.connect(name, stream))
            .await
            .map_err(|_| ForwardError::Timeout)?
            .map_err(|_| ForwardError::Unreachable)?;
        handshake(stream, deadline).await
    }

    async fn ensure_session(
        self: &std::sync::Arc<Self>,
        deadline: Instant,
    ) -> Result<Option<String>, ForwardError> {
        let mut guard = self.session.lock().await;
        if let Some(s) = guard.as_ref() {
            return Ok(s.clone());
        }
        let init = self.post(&init_message(), None, None, deadline).await?;
        if init.status != 200 {
            return Err(ForwardError::BadAnswer);
        }
        let session = init.session;
        let _ = self
            .post(INITIALIZED, session.as_deref(), None, deadline)
            .await;
        *guard = Some(session.clone());
        Ok(session)
    }
}

/// Whether `data` is a JSON-RPC response (a result or an error).
fn is_answer(data: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(data)
        .is_ok_and(|v| v.get("result").is_some() || v.get("error").is_some())
}

impl Forwarder for HttpForwarder {
    fn forward<'a>(
        &'a self,
        _server_id: &'a str,
        canonical: &'a [u8],
        expects_answer: bool,
    ) -> ForwardFuture<'a> {
        let inner = &self.inner;
        Box::pin(async move {
            let deadline = Instant::now() + Duration::from_millis(inner.deadlines.request_ms);
            // A modern message goes statelessly, its headers derived from the canonical bytes.
            let modern = serde_json::from_slice::<serde_json::Value>(canonical)
                .ok()
                .and_then(|m| crate::era::downstream_headers(&m));
            let answer = match &modern {
                Some(headers) => inner.post(canonical, None, Some(headers), deadline).await?,
                None => {
                    let session = inner.ensure_session(deadline).await?;
                    let mut answer = inner
                        .post(canonical, session.as_deref(), None, deadline)
                        .await?;
                    if answer.status == 404 && session.is_some() {
                        // The downstream ended our session: start a new one, once.
                        *inner.session.lock().await = None;
                        let session = inner.ensure_session(deadline).await?;
                        answer = inner
                            .post(canonical, session.as_deref(), None, deadline)
                            .await?;
                    }
                    answer
                }
            };
            if !expects_answer {
                return Ok(Vec::new());
            }
            Ok(answer.body)
        })
    }

    fn open<'a>(&'a self, _server_id: &'a str, initialize: &'a [u8]) -> OpenFuture<'a> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let deadline = Instant::now() + Duration::from_millis(inner.deadlines.request_ms);
            let headers = vec![];
            let (status, session, mut events) = inner
                .stream(Method::POST, Some(initialize), headers, Some(deadline))
                .await?;
            if status != 200 {
                return Err(ForwardError::BadAnswer);
            }
            // The answer to initialize is the first message that is one.
            let answer = loop {
                let Some(event) = events.recv().await else {
                    return Err(ForwardError::BadAnswer);
                };
                let event = event?;
                if event.data.is_empty() {
                    // A priming event (an id and a retry hint): nothing to read.
                    continue;
                }
                let v: serde_json::Value =
                    serde_json::from_slice(&event.data).map_err(|_| ForwardError::BadAnswer)?;
                if v.get("result").is_some() || v.get("error").is_some() {
                    break (event.data, v);
                }
            };
            let version = answer
                .1
                .pointer("/result/protocolVersion")
                .and_then(|v| v.as_str())
                .ok_or(ForwardError::BadAnswer)?
                .to_string();
            let downstream = HttpSession {
                inner,
                session: std::sync::Mutex::new(session),
                version,
                init: initialize.to_vec(),
            };
            downstream.deliver(INITIALIZED).await?;
            let downstream: std::sync::Arc<dyn Downstream> = std::sync::Arc::new(downstream);
            Ok(Some((downstream, answer.0)))
        })
    }
}

/// The downstream session of one client session.
struct HttpSession {
    inner: std::sync::Arc<HttpInner>,
    session: std::sync::Mutex<Option<String>>,
    version: String,
    /// The canonical `initialize` that opened it, to open it again after a downstream restart.
    init: Vec<u8>,
}

impl HttpSession {
    fn current(&self) -> Option<String> {
        self.session.lock().ok().and_then(|s| s.clone())
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut h = vec![("mcp-protocol-version", self.version.clone())];
        if let Some(s) = self.current() {
            h.push(("mcp-session-id", s));
        }
        h
    }

    /// The downstream forgot the session (it restarted): open a new one the same way, at the
    /// same version, so the client's session goes on. Anything else fails.
    async fn reopen(&self, deadline: Instant) -> Result<(), ForwardError> {
        let (status, session, mut events) = self
            .inner
            .stream(Method::POST, Some(&self.init), vec![], Some(deadline))
            .await?;
        if status != 200 {
            return Err(ForwardError::BadAnswer);
        }
        let mut agreed = None;
        while let Some(event) = events.recv().await {
            let event = event?;
            let Ok(v) = serde_json::from_slice::<serde_json::Value>(&event.data) else {
                continue;
            };
            agreed = v
                .pointer("/result/protocolVersion")
                .and_then(|v| v.as_str())
                .map(str::to_string);
            if agreed.is_some() {
                break;
            }
        }
        if agreed.as_deref() != Some(self.version.as_str()) {
            return Err(ForwardError::BadAnswer);
        }
        if let Ok(mut s) = self.session.lock() {
            *s = session;
        }
        // Straight to the stream, not through `send`: a 404 here must not reopen again.
        let (_, _, mut taken) = self
            .inner
            .stream(
                Method::POST,
                Some(INITIALIZED),
                self.headers(),
                Some(deadline),
            )
            .await?;
        while taken.recv().await.is_some() {}
        Ok(())
    }
}

impl Downstream for HttpSession {
    fn send<'a>(
        &'a self,
        canonical: &'a [u8],
        expects_answer: bool,
    ) -> BoxFuture<'a, Result<Events, ForwardError>> {
        Box::pin(async move {
            let deadline = Instant::now() + Duration::from_millis(self.inner.deadlines.request_ms);
            let post = || {
                self.inner.stream(
                    Method::POST,
                    Some(canonical),
                    self.headers(),
                    Some(deadline),
                )
            };
            let (mut status, _, mut events) = post().await?;
            if status == 404 && self.current().is_some() {
                self.reopen(deadline).await?;
                (status, _, events) = post().await?;
            }
            match status {
                200..=299 => Ok(events),
                // The downstream forgot the session: this client's session is over.
                404 => Err(ForwardError::Unreachable),
                _ if expects_answer => Ok(events),
                _ => Err(ForwardError::BadAnswer),
            }
        })
    }

    fn listen<'a>(
        &'a self,
        last_event_id: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Option<Events>, ForwardError>> {
        Box::pin(async move {
            let mut headers = self.headers();
            if let Some(id) = last_event_id {
                headers.push(("last-event-id", id.to_string()));
            }
            let (status, _, events) = self.inner.stream(Method::GET, None, headers, None).await?;
            match status {
                200 => Ok(Some(events)),
                405 => Ok(None),
                _ => Err(ForwardError::BadAnswer),
            }
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.current().is_none() {
                return;
            }
            let deadline = Instant::now() + Duration::from_millis(self.inner.deadlines.request_ms);
            let _ = self
                .inner
                .stream(Method::DELETE, None, self.headers(), Some(deadline))
                .await;
        })
    }

    fn version(&self) -> &str {
        &self.version
    }
}

/// An incremental SSE reader: events as they complete, each bounded.
struct SseReader {
    buf: Vec<u8>,
    max: usize,
}

impl SseReader {
    fn push(&mut self, chunk: &[u8]) -> Result<Vec<Event>, ForwardError> {
        self.buf.extend(chunk.iter().filter(|b| **b != b'\r'));
        let mut out = Vec::new();
        while let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = self.buf.drain(..end + 2).collect();
            let mut event = Event::default();
            let mut data: Vec<&[u8]> = Vec::new();
            for line in block.split(|b| *b == b'\n') {
                let (field, value) = match line.iter().position(|b| *b == b':') {
                    Some(0) => continue,
                    Some(i) => {
                        let v = &line[i + 1..];
                        (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
                    }
                    None => (line, &b""[..]),
                };
                match field {
                    b"data" => data.push(value),
                    b"id" => event.id = std::str::from_utf8(value).ok().map(str::to_string),
                    b"retry" => {
                        event.retry = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok())
                    }
                    _ => {}
                }
            }
            event.data = data.join(&b'\n');
            // An event with nothing in it still carries its id and retry hint (priming events).
            if !event.data.is_empty() || event.id.is_some() || event.retry.is_some() {
                out.push(event);
            }
        }
        if self.buf.len() > self.max {
            return Err(ForwardError::Oversize);
        }
        Ok(out)
    }
}

impl HttpInner {
    /// One request whose answer is read as a stream of messages: a JSON body is one message, an
    /// SSE body one message per event, read by a task until the stream ends, the receiver is
    /// dropped, or (with a deadline) nothing arrives for `request_ms`. Returns the status and the
    /// session id header.
    #[allow(
        clippy::too_many_lines,
        reason = "one streamed exchange: request, head, then the reader task; the task and the caller share the deadline, channel and connection set up here"
    )]
    async fn stream(
        self: &std::sync::Arc<Self>,
        method: Method,
        body: Option<&[u8]>,
        headers: Vec<(&'static str, String)>,
        deadline: Option<Instant>,
    ) -> Result<(u16, Option<String>, Events), ForwardError> {
        let target = parse_url(&self.url).ok_or(ForwardError::UnknownServer)?;
        let head_by = deadline
            .unwrap_or_else(|| Instant::now() + Duration::from_millis(self.deadlines.request_ms));
        let mut sender = self.connection(&target, head_by).await?;
        let mut req = Request::builder()
            .method(method)
            .uri(&target.path)
            .header("host", &target.authority);
        if body.is_some() {
            req = req
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream");
        } else {
            req = req.header("accept", "text/event-stream");
        }
        for (k, v) in headers {
            req = req.header(k, v);
        }
        #[cfg(feature = "faults")]
        if let Ok(extra) = FAULT_HEADERS.try_with(Clone::clone) {
            // The forward-token fault: the client's credentials go downstream.
            for (k, v) in extra {
                req = req.header(k, v);
            }
        }
        let req = req
            .body(Full::new(Bytes::copy_from_slice(body.unwrap_or_default())))
            .map_err(|_| ForwardError::Unreachable)?;
        let resp = tokio::time::timeout_at(head_by, sender.send_request(req))
            .await
            .map_err(|_| ForwardError::Timeout)?
            .map_err(|_| ForwardError::Unreachable)?;
        let status = resp.status().as_u16();
        let session = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.to_ascii_lowercase().starts_with("text/event-stream"));
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let mut body = resp.into_body();
        let max = self.deadlines.max_response;
        let idle = Duration::from_millis(self.deadlines.request_ms);
        if !sse {
            let read = async { read_bounded(&mut body, max).await };
            let out = tokio::time::timeout_at(head_by, read)
                .await
                .map_err(|_| ForwardError::Timeout)??;
            if let Ok(mut idle) = self.idle.lock() {
                if idle.len() < MAX_IDLE {
                    idle.push(sender);
                }
            }
            if !out.is_empty() {
                let _ = tx.try_send(Ok(Event {
                    data: out,
                    ..Event::default()
                }));
            }
            return Ok((status, session, rx));
        }
        tokio::spawn(async move {
            // The connection goes with the stream.
            let _sender = sender;
            let mut reader = SseReader {
                buf: Vec::new(),
                max,
            };
            loop {
                let wait = async {
                    match deadline {
                        Some(_) => tokio::time::timeout(idle, body.frame()).await,
                        None => Ok(body.frame().await),
                    }
                };
                let frame = tokio::select! {
                    _ = tx.closed() => return,
                    f = wait => f,
                };
                let events = match frame {
                    Err(_) => Err(ForwardError::Timeout),
                    Ok(None) => return,
                    Ok(Some(Err(_))) => Err(ForwardError::Unreachable),
                    Ok(Some(Ok(frame))) => match frame.into_data() {
                        Ok(data) => reader.push(&data),
                        Err(_) => Ok(Vec::new()),
                    },
                };
                match events {
                    Ok(events) => {
                        for e in events {
                            if tx.send(Ok(e)).await.is_err() {
                                return;
                            }
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                }
            }
        });
        Ok((status, session, rx))
    }
}

// ---------------------------------------------------------------------------------------------

struct StdioChild {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: BufReader<tokio::process::ChildStdout>,
}

/// A stdio server process (killed when dropped), its stdin and its buffered stdout; stderr is
/// discarded.
fn spawn_child(
    command: &[String],
) -> Result<
    (
        tokio::process::Child,
        tokio::process::ChildStdin,
        BufReader<tokio::process::ChildStdout>,
    ),
    ForwardError,
> {
    let (program, args) = command.split_first().ok_or(ForwardError::UnknownServer)?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|_| ForwardError::Unreachable)?;
    let stdin = child.stdin.take().ok_or(ForwardError::Unreachable)?;
    let stdout = BufReader::new(child.stdout.take().ok_or(ForwardError::Unreachable)?);
    Ok((child, stdin, stdout))
}

/// A stdio downstream: one child process, initialized once, one request at a time; restarted
/// after any failure.
pub struct StdioForwarder {
    command: Vec<String>,
    deadlines: Deadlines,
    child: Mutex<Option<StdioChild>>,
}

impl StdioForwarder {
    pub fn new(command: Vec<String>, deadlines: Deadlines) -> StdioForwarder {
        StdioForwarder {
            command,
            deadlines,
            child: Mutex::new(None),
        }
    }

    fn spawn(&self) -> Result<StdioChild, ForwardError> {
        let (child, stdin, stdout) = spawn_child(&self.command)?;
        Ok(StdioChild {
            child,
            stdin,
            stdout,
        })
    }

    /// Write one line; when `id` is given, read lines until the response with that id.
    async fn exchange(
        &self,
        c: &mut StdioChild,
        line: &[u8],
        id: Option<&serde_json::Value>,
    ) -> Result<Vec<u8>, ForwardError> {
        c.stdin
            .write_all(line)
            .await
            .map_err(|_| ForwardError::Unreachable)?;
        c.stdin
            .write_all(b"\n")
            .await
            .map_err(|_| ForwardError::Unreachable)?;
        c.stdin
            .flush()
            .await
            .map_err(|_| ForwardError::Unreachable)?;
        let Some(id) = id else { return Ok(Vec::new()) };
        loop {
            let mut out = Vec::new();
            // Bounded line read: take at most max_response + 1 bytes.
            let limit = self.deadlines.max_response as u64 + 1;
            let n = (&mut c.stdout)
                .take(limit)
                .read_until(b'\n', &mut out)
                .await
                .map_err(|_| ForwardError::Unreachable)?;
            if n == 0 {
                return Err(ForwardError::Unreachable);
            }
            if out.len() as u64 >= limit && out.last() != Some(&b'\n') {
                return Err(ForwardError::Oversize);
            }
            let Ok(v) = serde_json::from_slice::<serde_json::Value>(&out) else {
                return Err(ForwardError::BadAnswer);
            };
            let is_answer = v.get("result").is_some() || v.get("error").is_some();
            if is_answer && v.get("id") == Some(id) {
                while out.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                    out.pop();
                }
                return Ok(out);
            }
            if is_answer {
                return Err(ForwardError::BadAnswer);
            }
            // A downstream notification or request: not relayed (GATE-DOWN-05).
        }
    }
}

impl Forwarder for StdioForwarder {
    /// A child process of its own for each client session.
    fn open<'a>(&'a self, _server_id: &'a str, initialize: &'a [u8]) -> OpenFuture<'a> {
        Box::pin(async move {
            let deadline = Duration::from_millis(self.deadlines.request_ms);
            let started = StdioSession::start(&self.command, self.deadlines, initialize);
            let (session, answer) = tokio::time::timeout(deadline, started)
                .await
                .map_err(|_| ForwardError::Timeout)??;
            let session: std::sync::Arc<dyn Downstream> = std::sync::Arc::new(session);
            Ok(Some((session, answer)))
        })
    }

    fn forward<'a>(
        &'a self,
        _server_id: &'a str,
        canonical: &'a [u8],
        expects_answer: bool,
    ) -> ForwardFuture<'a> {
        Box::pin(async move {
            let deadline = Instant::now() + Duration::from_millis(self.deadlines.request_ms);
            let mut guard = self.child.lock().await;
            let work = async {
                if guard.is_none() {
                    let mut c = self.spawn()?;
                    let init_id = serde_json::Value::String("gate-init".into());
                    self.exchange(&mut c, &init_message(), Some(&init_id))
                        .await?;
                    self.exchange(&mut c, INITIALIZED, None).await?;
                    *guard = Some(c);
                }
                let c = guard.as_mut().ok_or(ForwardError::Unreachable)?;
                let id = if expects_answer {
                    serde_json::from_slice::<serde_json::Value>(canonical)
                        .ok()
                        .and_then(|v| v.get("id").cloned())
                } else {
                    None
                };
                self.exchange(c, canonical, id.as_ref()).await
            };
            let result = match tokio::time::timeout_at(deadline, work).await {
                Ok(r) => r,
                Err(_) => Err(ForwardError::Timeout),
            };
            if result.is_err() {
                // A child in an unknown state is replaced on the next call.
                if let Some(mut c) = guard.take() {
                    let _ = c.child.start_kill();
                }
            }
            result
        })
    }
}

// ---------------------------------------------------------------------------------------------

/// A request waiting for its answer on a stdio downstream: where its messages go, and when the
/// downstream last said anything for it.
struct Waiter {
    tx: tokio::sync::mpsc::Sender<Result<Event, ForwardError>>,
    last: Instant,
    order: u64,
}

/// Requests waiting on one stdio child, by the id's JSON text, and the listener for whatever the
/// server says outside them.
#[derive(Default)]
struct Routes {
    waiting: std::collections::HashMap<String, Waiter>,
    listener: Option<tokio::sync::mpsc::Sender<Result<Event, ForwardError>>>,
    next: u64,
    dead: bool,
}

/// The downstream session of one client session over stdio: a child process of its own. A
/// reader task routes what the child writes: an answer to the request with its id; a request or
/// notification of the server's own to the latest request still waiting (stdio says nothing
/// about which request it belongs to), else to the listener.
struct StdioSession {
    child: std::sync::Mutex<Option<tokio::process::Child>>,
    stdin: Mutex<tokio::process::ChildStdin>,
    routes: std::sync::Arc<std::sync::Mutex<Routes>>,
    version: String,
    deadlines: Deadlines,
}

fn id_key(message: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(message).ok()?;
    v.get("id").map(|id| id.to_string())
}

impl StdioSession {
    async fn start(
        command: &[String],
        deadlines: Deadlines,
        initialize: &[u8],
    ) -> Result<(StdioSession, Vec<u8>), ForwardError> {
        let (child, stdin, stdout) = spawn_child(command)?;
        let routes = std::sync::Arc::new(std::sync::Mutex::new(Routes::default()));
        tokio::spawn(read_routes(stdout, routes.clone(), deadlines.max_response));
        tokio::spawn(sweep(
            std::sync::Arc::downgrade(&routes),
            Duration::from_millis(deadlines.request_ms),
        ));
        let mut session = StdioSession {
            child: std::sync::Mutex::new(Some(child)),
            stdin: Mutex::new(stdin),
            routes,
            version: String::new(),
            deadlines,
        };
        let mut events = session.send_line(initialize, true).await?;
        let answer = loop {
            let event = events.recv().await.ok_or(ForwardError::Unreachable)??;
            let v: serde_json::Value =
                serde_json::from_slice(&event.data).map_err(|_| ForwardError::BadAnswer)?;
            if v.get("result").is_some() || v.get("error").is_some() {
                break (event.data, v);
            }
        };
        session.version = answer
            .1
            .pointer("/result/protocolVersion")
            .and_then(|v| v.as_str())
            .ok_or(ForwardError::BadAnswer)?
            .to_string();
        session.send_line(INITIALIZED, false).await?;
        Ok((session, answer.0))
    }

    async fn send_line(&self, line: &[u8], expects_answer: bool) -> Result<Events, ForwardError> {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let key = if expects_answer { id_key(line) } else { None };
        if let Some(key) = &key {
            let mut routes = self.routes.lock().map_err(|_| ForwardError::Unreachable)?;
            if routes.dead {
                return Err(ForwardError::Unreachable);
            }
            routes.next += 1;
            let order = routes.next;
            routes.waiting.insert(
                key.clone(),
                Waiter {
                    tx: tx.clone(),
                    last: Instant::now(),
                    order,
                },
            );
        }
        let write = async {
            let mut stdin = self.stdin.lock().await;
            stdin.write_all(line).await?;
            stdin.write_all(b"\n").await?;
            stdin.flush().await
        };
        let written = tokio::time::timeout(Duration::from_millis(self.deadlines.request_ms), write)
            .await
            .map_err(|_| ForwardError::Timeout)
            .and_then(|r| r.map_err(|_| ForwardError::Unreachable));
        if let Err(e) = written {
            if let (Some(key), Ok(mut routes)) = (&key, self.routes.lock()) {
                routes.waiting.remove(key);
            }
            return Err(e);
        }
        drop(tx);
        Ok(rx)
    }
}

/// Each request's deadline on a stdio session: a request the downstream said nothing for in
/// `idle` gets the timeout and is forgotten. One task per session, until the session is gone.
async fn sweep(routes: std::sync::Weak<std::sync::Mutex<Routes>>, idle: Duration) {
    let every = (idle / 4).clamp(Duration::from_millis(10), Duration::from_millis(250));
    loop {
        tokio::time::sleep(every).await;
        let Some(routes) = routes.upgrade() else {
            return;
        };
        let Ok(mut r) = routes.lock() else { return };
        if r.dead {
            return;
        }
        let expired: Vec<String> = r
            .waiting
            .iter()
            .filter(|(_, w)| w.tx.is_closed() || w.last.elapsed() >= idle)
            .map(|(k, _)| k.clone())
            .collect();
        for key in expired {
            if let Some(w) = r.waiting.remove(&key) {
                let _ = w.tx.try_send(Err(ForwardError::Timeout));
            }
        }
    }
}

/// The reader task of a stdio session: every line the child writes, routed; at its end (EOF, an
/// error, an oversize line) every waiting request fails.
async fn read_routes(
    mut stdout: BufReader<tokio::process::ChildStdout>,
    routes: std::sync::Arc<std::sync::Mutex<Routes>>,
    max: usize,
) {
    loop {
        let mut line = Vec::new();
        let limit = max as u64 + 1;
        let n = (&mut stdout).take(limit).read_until(b'\n', &mut line).await;
        let ok = matches!(n, Ok(n) if n > 0)
            && !(line.len() as u64 >= limit && line.last() != Some(&b'\n'));
        if !ok {
            if let Ok(mut r) = routes.lock() {
                r.dead = true;
                for (_, w) in r.waiting.drain() {
                    let _ = w.tx.try_send(Err(ForwardError::Unreachable));
                }
                r.listener = None;
            }
            return;
        }
        while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            line.pop();
        }
        if line.is_empty() {
            continue;
        }
        let value = serde_json::from_slice::<serde_json::Value>(&line).ok();
        let is_answer = value.as_ref().is_some_and(|v| {
            v.get("method").is_none() && (v.get("result").is_some() || v.get("error").is_some())
        });
        let target = {
            let Ok(mut r) = routes.lock() else { return };
            if is_answer {
                let key = value
                    .as_ref()
                    .and_then(|v| v.get("id"))
                    .map(|id| id.to_string());
                key.and_then(|k| r.waiting.remove(&k)).map(|w| w.tx)
            } else {
                // The latest request still waiting, else the listener; not JSON goes to the
                // latest request too, whose exchange then fails (fail closed).
                let latest = r.waiting.values_mut().max_by_key(|w| w.order);
                match latest {
                    Some(w) => {
                        w.last = Instant::now();
                        Some(w.tx.clone())
                    }
                    None => r.listener.clone(),
                }
            }
        };
        if let Some(tx) = target {
            let _ = tx
                .send(Ok(Event {
                    data: line,
                    ..Event::default()
                }))
                .await;
        }
    }
}

impl Downstream for StdioSession {
    fn send<'a>(
        &'a self,
        canonical: &'a [u8],
        expects_answer: bool,
    ) -> BoxFuture<'a, Result<Events, ForwardError>> {
        Box::pin(self.send_line(canonical, expects_answer))
    }

    fn listen<'a>(
        &'a self,
        last_event_id: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Option<Events>, ForwardError>> {
        Box::pin(async move {
            if last_event_id.is_some() {
                // Nothing to resume over stdio.
                return Ok(None);
            }
            let (tx, rx) = tokio::sync::mpsc::channel(16);
            let mut routes = self.routes.lock().map_err(|_| ForwardError::Unreachable)?;
            if routes.dead {
                return Err(ForwardError::Unreachable);
            }
            routes.listener = Some(tx);
            Ok(Some(rx))
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let child = self.child.lock().ok().and_then(|mut c| c.take());
            if let Some(mut c) = child {
                let _ = c.start_kill();
                let _ = c.wait().await;
            }
        })
    }

    fn version(&self) -> &str {
        &self.version
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downstream_urls_name_where_to_connect_and_whether_to_speak_tls() {
        let t = parse_url("https://example.test/mcp").expect("https");
        assert_eq!(
            (t.connect.as_str(), t.path.as_str()),
            ("example.test:443", "/mcp")
        );
        assert!(t.tls_name.is_some());
        let t = parse_url("http://127.0.0.1:8080").expect("http");
        assert_eq!(
            (t.connect.as_str(), t.path.as_str()),
            ("127.0.0.1:8080", "/")
        );
        assert!(t.tls_name.is_none());
        let t = parse_url("https://[::1]/mcp").expect("IPv6 without a port");
        assert_eq!(t.connect, "::1:443");
        assert_eq!(t.authority, "[::1]");
        let t = parse_url("https://[::1]:8443/mcp").expect("IPv6 with a port");
        assert_eq!(t.connect, "::1:8443");
        assert!(parse_url("ftp://example.test/").is_none());
        assert!(
            parse_url("https://exa mple/").is_none(),
            "not a name a certificate can carry"
        );
    }

    #[test]
    fn sse_events_come_whole_with_their_ids_and_bounded() {
        let mut r = SseReader {
            buf: Vec::new(),
            max: 64,
        };
        // A priming event (id and retry, empty data), then a message split across chunks and
        // CRLF line ends, a comment, and a two-line data field.
        let mut got = r
            .push(b"id: e1\r\nretry: 500\r\ndata:\r\n\r\nevent: mess")
            .unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].id.as_deref(), got[0].retry),
            (Some("e1"), Some(500))
        );
        assert!(got[0].data.is_empty());
        got = r
            .push(b"age\nid: e2\n: a comment\ndata: {\"a\":\ndata: 1}\n\n")
            .unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].id.as_deref(), Some("e2"));
        assert_eq!(got[0].data, b"{\"a\":\n1}");
        // An event that never ends is cut at the bound.
        assert!(matches!(r.push(&[b'x'; 65]), Err(ForwardError::Oversize)));
    }
}
