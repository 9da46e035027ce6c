//! The HTTP downstream: a connection pool per forwarder, one downstream session per client
//! session (`HttpSession`), SSE answers read event by event within the response bound, and the
//! bounded GET the gate's JWKS fetch uses.

use super::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use std::time::Duration;
use tokio::sync::Mutex;
use tokio::time::Instant;

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
pub(crate) async fn get(
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
pub(crate) struct HttpForwarder {
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
    /// A forwarder to `url`; for `https`, the downstream's certificate is checked with `tls`.
    pub(crate) fn with_tls(
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

    fn stream<'a>(&'a self, _server_id: &'a str, canonical: &'a [u8]) -> StreamFuture<'a> {
        let inner = &self.inner;
        Box::pin(async move {
            let modern = serde_json::from_slice::<serde_json::Value>(canonical)
                .ok()
                .and_then(|m| crate::era::downstream_headers(&m));
            let Some(headers) = modern else {
                return Ok(None);
            };
            let deadline = Instant::now() + Duration::from_millis(inner.deadlines.request_ms);
            let (_, _, events) = inner
                .stream(Method::POST, Some(canonical), headers, Some(deadline))
                .await?;
            // Whatever the status, the body is read as the answer (a refusal is one too); the
            // relay judges what it says.
            Ok(Some(events))
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
            let (answer, version) = initialize_answer(&mut events).await?;
            let downstream = HttpSession {
                inner,
                session: std::sync::Mutex::new(session),
                version,
                init: initialize.to_vec(),
            };
            downstream.deliver(INITIALIZED).await?;
            let downstream: std::sync::Arc<dyn Downstream> = std::sync::Arc::new(downstream);
            Ok(Some((downstream, answer)))
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
                409 => Err(ForwardError::StreamOpen),
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
    /// A reader whose events are each at most `max` bytes.
    fn new(max: usize) -> SseReader {
        SseReader {
            buf: Vec::new(),
            max,
        }
    }

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
        let req = request(&target, method, body, headers)?;
        let resp = tokio::time::timeout_at(head_by, sender.send_request(req))
            .await
            .map_err(|_| ForwardError::Timeout)?
            .map_err(|_| ForwardError::Unreachable)?;
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let session = header("mcp-session-id");
        let sse = header("content-type")
            .is_some_and(|c| c.to_ascii_lowercase().starts_with("text/event-stream"));
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let mut body = resp.into_body();
        let max = self.deadlines.max_response;
        if sse {
            // The connection goes with the stream.
            let idle = deadline.map(|_| Duration::from_millis(self.deadlines.request_ms));
            tokio::spawn(read_events(sender, body, SseReader::new(max), idle, tx));
            return Ok((status, session, rx));
        }
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
        Ok((status, session, rx))
    }
}

/// The request to the downstream: a POST of `body` (JSON, or an SSE answer accepted) or a GET
/// for the server's stream, with the session's headers (and, under the forward-token fault,
/// the client's credentials).
fn request(
    target: &HttpTarget,
    method: Method,
    body: Option<&[u8]>,
    headers: Vec<(&'static str, String)>,
) -> Result<Request<Full<Bytes>>, ForwardError> {
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
    req.body(Full::new(Bytes::copy_from_slice(body.unwrap_or_default())))
        .map_err(|_| ForwardError::Unreachable)
}

/// Read an SSE body event by event into `tx` until it ends, the receiver goes, a frame fails,
/// or (with an `idle` bound) nothing arrives for that long. `_sender` is the connection, kept
/// open as long as the stream is read.
async fn read_events(
    _sender: SendRequest<Full<Bytes>>,
    mut body: hyper::body::Incoming,
    mut reader: SseReader,
    idle: Option<Duration>,
    tx: tokio::sync::mpsc::Sender<Result<Event, ForwardError>>,
) {
    loop {
        let wait = async {
            match idle {
                Some(idle) => tokio::time::timeout(idle, body.frame()).await,
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
        let events = match events {
            Ok(events) => events,
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        for e in events {
            if tx.send(Ok(e)).await.is_err() {
                return;
            }
        }
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
