//! A deliberately small HTTP/1.1 client on a plain TCP socket, or on TLS over one (`https`).
//!
//! A conformance tool must send exactly the headers a case names and nothing else (a general
//! client such as reqwest always adds `Accept`), stream gibibyte bodies while reading an early
//! `413`, and send framing that no well-behaved client would. Every read is capped and every wait
//! ends at the caller's deadline. One request per connection (`Connection: close`). Over TLS the
//! same bytes go inside the TLS session, and HTTP/1.1 is the only protocol offered (ALPN).

use super::tls::TlsOptions;
use super::TransportError;
use crate::case::Body;
use serde_json::Value;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Largest response head read.
pub(crate) const MAX_HEAD: usize = 64 * 1024;

/// The TLS client configuration of an `https` target.
#[derive(Debug, Clone)]
pub struct Tls(pub Arc<rustls::ClientConfig>);

impl PartialEq for Tls {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Tls {}

/// A parsed `http://host:port/path` or `https://host:port/path` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    pub host: String,
    pub port: u16,
    pub path: String,
    /// `https`: how the server's certificate is checked.
    pub tls: Option<Tls>,
}

impl HttpUrl {
    /// Parse `http://HOST[:PORT][/PATH]` or `https://…` (checked against the platform's roots).
    pub fn parse(url: &str) -> Result<HttpUrl, TransportError> {
        HttpUrl::parse_with(url, &TlsOptions::default())
    }

    /// Parse `http://HOST[:PORT][/PATH]`, or `https://…` with certificates checked as `tls` says.
    pub(crate) fn parse_with(url: &str, tls: &TlsOptions) -> Result<HttpUrl, TransportError> {
        let bad = || TransportError::BadTarget(url.to_string());
        let (rest, tls, default_port) = if let Some(rest) = url.strip_prefix("http://") {
            (rest, None, 80)
        } else if let Some(rest) = url.strip_prefix("https://") {
            let config = tls.client().map_err(TransportError::TlsSetup)?;
            (rest, Some(Tls(config)), 443)
        } else {
            return Err(bad());
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                (h.to_string(), p.parse::<u16>().map_err(|_| bad())?)
            }
            _ => (authority.to_string(), default_port),
        };
        if host.is_empty() {
            return Err(bad());
        }
        if tls.is_some() && reference_gate::tls::server_name(&host).is_none() {
            return Err(bad());
        }
        Ok(HttpUrl {
            host,
            port,
            path: path.to_string(),
            tls,
        })
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// `host:port`, as sent in `Host`.
    pub(crate) fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    pub(crate) fn connect_addr(&self) -> String {
        format!(
            "{}:{}",
            self.host.trim_start_matches('[').trim_end_matches(']'),
            self.port
        )
    }

    pub(crate) fn to_url(&self) -> String {
        format!("{}://{}{}", self.scheme(), self.authority(), self.path)
    }
}

/// What to put on the wire.
#[derive(Debug, Clone)]
pub enum Wire {
    /// A request the client frames: head from these parts, then the body (with its length, or
    /// chunked).
    Request {
        method: hyper::Method,
        path: String,
        /// Sent in this order, exactly as given. The caller adds `Host`, lengths and so on.
        headers: Vec<(String, String)>,
        body: Body,
        chunked: bool,
    },
    /// Bytes written as they are.
    Raw(Vec<u8>),
}

/// The most of an answer's body the runner keeps (what is past it is read and dropped).
pub(crate) const BODY_CAP: usize = 16 * 1024 * 1024;

/// How much of an answer that is an event stream is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseRead {
    /// Up to the first JSON-RPC response in it: a POST's answer (the stream may stay open).
    ToFirstResponse,
    /// Its head only: a GET's stream, which answers nothing and may never end.
    HeadOnly,
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SseEvent {
    pub event: Option<String>,
    pub id: Option<String>,
    pub data: String,
}

/// What came back.
#[derive(Debug, Clone, Default)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// The body as far as it was read (at most the cap), de-chunked.
    pub body: Vec<u8>,
    /// The body went past the cap; reading stopped there.
    pub truncated: bool,
    /// The deadline passed before the body ended (or, for SSE, before a response arrived).
    pub timed_out: bool,
    /// The connection ended before the declared body length.
    pub cut_short: bool,
    /// Raw requests only: bytes that came after the response (a second response to bytes the
    /// server took as another request), up to 1 MiB.
    pub trailing: Vec<u8>,
    /// Body bytes the runner had handed to the connection when the answer was complete: how
    /// much of a large body a server took before it answered (bounded above by what the socket
    /// buffers hold beyond what the server read).
    pub body_sent: u64,
    /// When the answer was complete, from the start of the exchange.
    pub answered_after: std::time::Duration,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn content_type(&self) -> Option<String> {
        self.header("content-type").map(|c| {
            c.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
    }

    pub(crate) fn is_sse(&self) -> bool {
        self.content_type().as_deref() == Some("text/event-stream")
    }
}

/// Send `wire` to `url` and read the answer, all before `deadline`.
///
/// For `text/event-stream` answers reading stops at the first JSON-RPC response in the stream
/// (streams may stay open), or right after the head with [`SseRead::HeadOnly`] (a GET stream).
pub async fn exchange(
    url: &HttpUrl,
    wire: Wire,
    deadline: Instant,
    sse: SseRead,
) -> Result<HttpResponse, TransportError> {
    let stream = connect(url, deadline).await?;
    exchange_on(stream, wire, deadline, sse).await
}

/// A connection to an HTTP target, plain or TLS.
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// Connect to `url` (and finish the TLS handshake of an `https` one) before `deadline`.
pub(crate) async fn connect(
    url: &HttpUrl,
    deadline: Instant,
) -> Result<Box<dyn Io>, TransportError> {
    let stream = tokio::time::timeout_at(deadline, TcpStream::connect(url.connect_addr()))
        .await
        .map_err(|_| TransportError::Timeout("connect"))?
        .map_err(TransportError::Connect)?;
    let _ = stream.set_nodelay(true);
    let Some(Tls(config)) = &url.tls else {
        return Ok(Box::new(stream));
    };
    let name = reference_gate::tls::server_name(&url.host)
        .ok_or_else(|| TransportError::BadTarget(url.to_url()))?;
    let connector = tokio_rustls::TlsConnector::from(config.clone());
    let stream = tokio::time::timeout_at(deadline, connector.connect(name, stream))
        .await
        .map_err(|_| TransportError::Timeout("TLS handshake"))?
        .map_err(TransportError::Tls)?;
    Ok(Box::new(stream))
}

/// A request's head on the wire: its request line and `headers` in order, then the blank line.
pub(crate) fn head_bytes(method: &str, path: &str, headers: &[(String, String)]) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\n").into_bytes();
    for (k, v) in headers {
        head.extend_from_slice(k.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(v.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head
}

/// Connect and finish a TLS handshake with an `https` target, sending nothing else: whether its
/// certificate is trusted. Plain `http` targets are not contacted.
pub(crate) async fn tls_handshake(url: &HttpUrl, deadline: Instant) -> Result<(), TransportError> {
    let Some(Tls(config)) = &url.tls else {
        return Ok(());
    };
    let stream = tokio::time::timeout_at(deadline, TcpStream::connect(url.connect_addr()))
        .await
        .map_err(|_| TransportError::Timeout("connect"))?
        .map_err(TransportError::Connect)?;
    let name = reference_gate::tls::server_name(&url.host)
        .ok_or_else(|| TransportError::BadTarget(url.to_url()))?;
    let connector = tokio_rustls::TlsConnector::from(config.clone());
    let mut stream = tokio::time::timeout_at(deadline, connector.connect(name, stream))
        .await
        .map_err(|_| TransportError::Timeout("TLS handshake"))?
        .map_err(TransportError::Tls)?;
    let _ = stream.shutdown().await;
    Ok(())
}

/// [`exchange`] on a connected stream (TCP, or TLS over TCP).
async fn exchange_on<S>(
    stream: S,
    wire: Wire,
    deadline: Instant,
    sse: SseRead,
) -> Result<HttpResponse, TransportError>
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let raw = matches!(wire, Wire::Raw(_));
    let started = Instant::now();
    let (mut reader, mut writer) = tokio::io::split(stream);
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = sent.clone();

    // The writer runs beside the reader: a server may answer (413) before the body is sent, and
    // must then be heard. Write errors are expected in that case and ignored.
    let write = tokio::spawn(async move {
        let result: std::io::Result<()> = async {
            match wire {
                Wire::Raw(bytes) => writer.write_all(&bytes).await?,
                Wire::Request {
                    method,
                    path,
                    headers,
                    body,
                    chunked,
                } => {
                    writer
                        .write_all(&head_bytes(method.as_str(), &path, &headers))
                        .await?;
                    for chunk in body.chunks() {
                        let n = chunk.len() as u64;
                        if chunked {
                            writer
                                .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                                .await?;
                            writer.write_all(&chunk).await?;
                            writer.write_all(b"\r\n").await?;
                        } else {
                            writer.write_all(&chunk).await?;
                        }
                        count.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                    }
                    if chunked {
                        writer.write_all(b"0\r\n\r\n").await?;
                    }
                }
            }
            writer.flush().await
        }
        .await;
        // Keep the write half open until the reader is done: shutting it down could make a
        // server treat the request as aborted.
        (result, writer)
    });
    let mut read = read_response(&mut reader, deadline, sse).await;
    if let Ok(resp) = read.as_mut() {
        resp.body_sent = sent.load(std::sync::atomic::Ordering::Relaxed);
        resp.answered_after = started.elapsed();
    }
    if let (true, Ok(resp)) = (raw, read.as_mut()) {
        // Whatever else the server sends on this connection: answers to smuggled requests.
        let mut chunk = vec![0u8; 64 * 1024];
        while resp.trailing.len() < 1024 * 1024 {
            match read_some(&mut reader, &mut chunk, deadline, "trailing bytes").await {
                Ok(n) if n > 0 => resp.trailing.extend_from_slice(&chunk[..n]),
                _ => break,
            }
        }
    } else if let Ok(resp) = read.as_mut() {
        resp.trailing.clear();
    }
    write.abort();
    read
}

/// Read response heads until a final (non-1xx) one: that head, and what was read past it.
pub(crate) async fn read_head<R: AsyncReadExt + Unpin>(
    reader: &mut R,
    deadline: Instant,
) -> Result<(HttpResponse, Vec<u8>), TransportError> {
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let head_end = loop {
            if let Some(i) = find(&buf, b"\r\n\r\n") {
                break i + 4;
            }
            if buf.len() > MAX_HEAD {
                return Err(TransportError::HeadTooLarge);
            }
            let n = read_some(reader, &mut chunk, deadline, "response head").await?;
            if n == 0 {
                return Err(TransportError::ClosedWithoutResponse);
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut parsed = httparse::Response::new(&mut headers);
        match parsed.parse(&buf[..head_end]) {
            Ok(httparse::Status::Complete(_)) => {}
            _ => return Err(TransportError::MalformedResponse),
        }
        let status = parsed.code.unwrap_or(0);
        let resp = HttpResponse {
            status,
            headers: parsed
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_ascii_lowercase(),
                        String::from_utf8_lossy(h.value).into_owned(),
                    )
                })
                .collect(),
            ..HttpResponse::default()
        };
        let rest = buf[head_end..].to_vec();
        if (100..200).contains(&status) {
            buf = rest;
            continue;
        }
        return Ok((resp, rest));
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "an incremental HTTP/1.1 response reader (heads until a final one, then length, chunked or close framing, SSE stopping at the first response, trailing bytes) over one buffer whose state every step shares"
)]
async fn read_response<R: AsyncReadExt + Unpin>(
    reader: &mut R,
    deadline: Instant,
    sse: SseRead,
) -> Result<HttpResponse, TransportError> {
    let mut chunk = vec![0u8; 64 * 1024];
    let (mut resp, mut rest) = read_head(reader, deadline).await?;

    if resp.status == 204 || resp.status == 304 || (sse == SseRead::HeadOnly && resp.is_sse()) {
        return Ok(resp);
    }
    let chunked = resp
        .header("transfer-encoding")
        .is_some_and(|te| te.to_ascii_lowercase().contains("chunked"));
    let length = if chunked {
        None
    } else {
        resp.header("content-length")
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    let sse = resp.is_sse();
    let mut decoder = chunked.then(ChunkDecoder::default);
    loop {
        // Move what is buffered into the body.
        if !rest.is_empty() {
            let data = std::mem::take(&mut rest);
            match decoder.as_mut() {
                Some(d) => {
                    d.feed(&data, &mut resp.body)
                        .map_err(|_| TransportError::MalformedResponse)?;
                }
                None => resp.body.extend_from_slice(&data),
            }
        }
        if resp.body.len() > BODY_CAP {
            resp.body.truncate(BODY_CAP);
            resp.truncated = true;
            return Ok(resp);
        }
        if decoder.as_ref().is_some_and(|d| d.done) {
            return Ok(resp);
        }
        if let Some(n) = length {
            if resp.body.len() as u64 >= n {
                resp.trailing = resp.body.split_off(n as usize);
                return Ok(resp);
            }
        }
        if sse && sse_has_response(&resp.body) {
            return Ok(resp);
        }
        match read_some(reader, &mut chunk, deadline, "response body").await {
            Ok(0) => {
                resp.cut_short = length.is_some() || decoder.is_some();
                return Ok(resp);
            }
            Ok(n) => rest.extend_from_slice(&chunk[..n]),
            Err(TransportError::Timeout(_)) => {
                resp.timed_out = true;
                return Ok(resp);
            }
            Err(TransportError::Io(_)) => {
                resp.cut_short = true;
                return Ok(resp);
            }
            Err(e) => return Err(e),
        }
    }
}

pub(crate) async fn read_some<R: AsyncReadExt + Unpin>(
    reader: &mut R,
    buf: &mut [u8],
    deadline: Instant,
    what: &'static str,
) -> Result<usize, TransportError> {
    match tokio::time::timeout_at(deadline, reader.read(buf)).await {
        Err(_) => Err(TransportError::Timeout(what)),
        Ok(Ok(n)) => Ok(n),
        // TLS: the server closed the connection without close_notify. The HTTP framing says
        // whether the answer was complete (`cut_short`), as for a plain close.
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(0),
        // A reset after a complete answer is common (the server closed while we wrote).
        Ok(Err(e)) => Err(TransportError::Io(e)),
    }
}

/// Where the last `needle` in `hay` starts.
pub(crate) fn find_last(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

pub(crate) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The HTTP/1.1 responses that follow one another in `bytes` (what a server sent on a
/// connection after its first response): each one's status and body, de-chunked or cut at its
/// Content-Length. A response whose head is incomplete is given with status 0 when its status
/// line cannot be read; anything that is not a response ends the reading.
pub(crate) fn responses_in(bytes: &[u8]) -> Vec<(u16, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = bytes;
    // Blank lines between responses (a chunked body's last CRLF) are passed over.
    while let Some(at) = rest.iter().position(|b| !b.is_ascii_whitespace()) {
        rest = &rest[at..];
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut parsed = httparse::Response::new(&mut headers);
        let head_len = match parsed.parse(rest) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if rest.starts_with(b"HTTP/1.") => {
                let status = rest
                    .get(9..12)
                    .and_then(|s| std::str::from_utf8(s).ok())
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                out.push((status, Vec::new()));
                break;
            }
            _ => break,
        };
        let status = parsed.code.unwrap_or(0);
        let header = |name: &str| {
            parsed
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| String::from_utf8_lossy(h.value).to_ascii_lowercase())
        };
        let chunked = header("transfer-encoding").is_some_and(|te| te.contains("chunked"));
        let length = header("content-length").and_then(|v| v.trim().parse::<usize>().ok());
        let after = &rest[head_len..];
        let mut body = Vec::new();
        rest = if chunked {
            let mut decoder = ChunkDecoder::default();
            if decoder.feed(after, &mut body).is_err() || !decoder.done {
                out.push((status, body));
                break;
            }
            // What the decoder did not take belongs to the next response.
            &after[after.len() - decoder.pending.len()..]
        } else if let Some(n) = length {
            let n = n.min(after.len());
            body.extend_from_slice(&after[..n]);
            &after[n..]
        } else {
            body.extend_from_slice(after);
            &[]
        };
        out.push((status, body));
    }
    out
}

/// Incremental decoder for `Transfer-Encoding: chunked`.
#[derive(Debug, Default)]
pub(crate) struct ChunkDecoder {
    pending: Vec<u8>,
    /// Bytes of chunk data still expected (plus its CRLF).
    remaining: Option<usize>,
    pub(crate) done: bool,
}

#[derive(Debug)]
pub(crate) struct BadChunk;

impl ChunkDecoder {
    pub(crate) fn feed(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<(), BadChunk> {
        self.pending.extend_from_slice(data);
        loop {
            if self.done {
                return Ok(());
            }
            match self.remaining {
                None => {
                    let Some(i) = find(&self.pending, b"\r\n") else {
                        if self.pending.len() > 4096 {
                            return Err(BadChunk);
                        }
                        return Ok(());
                    };
                    let line = String::from_utf8_lossy(&self.pending[..i]).into_owned();
                    let size = line.split(';').next().unwrap_or("").trim();
                    let size = usize::from_str_radix(size, 16).map_err(|_| BadChunk)?;
                    self.pending.drain(..i + 2);
                    if size == 0 {
                        self.done = true;
                        return Ok(());
                    }
                    self.remaining = Some(size);
                }
                Some(n) if n > 0 => {
                    // Pass on what we have of the chunk's data.
                    let take = self.pending.len().min(n);
                    out.extend_from_slice(&self.pending[..take]);
                    self.pending.drain(..take);
                    self.remaining = Some(n - take);
                    if n > take {
                        return Ok(());
                    }
                }
                Some(_) => {
                    // The chunk's data is done; its CRLF follows.
                    if self.pending.len() < 2 {
                        return Ok(());
                    }
                    if &self.pending[..2] != b"\r\n" {
                        return Err(BadChunk);
                    }
                    self.pending.drain(..2);
                    self.remaining = None;
                }
            }
        }
    }
}

/// Parse a `text/event-stream` body into events (incomplete trailing event left out).
pub(crate) fn parse_sse(body: &[u8]) -> Vec<SseEvent> {
    let text = String::from_utf8_lossy(body);
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let mut events = Vec::new();
    let complete = match text.rfind("\n\n") {
        Some(i) => &text[..i + 2],
        None => return events,
    };
    for block in complete.split("\n\n") {
        let mut ev = SseEvent {
            event: None,
            id: None,
            data: String::new(),
        };
        let mut has_data = false;
        for line in block.lines() {
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "data" => {
                    if has_data {
                        ev.data.push('\n');
                    }
                    ev.data.push_str(value);
                    has_data = true;
                }
                "event" => ev.event = Some(value.to_string()),
                "id" => ev.id = Some(value.to_string()),
                _ => {}
            }
        }
        if has_data || ev.event.is_some() || ev.id.is_some() {
            events.push(ev);
        }
    }
    events
}

/// JSON-RPC messages carried in an SSE body's `data` fields (events with empty data skipped).
pub(crate) fn sse_messages(body: &[u8]) -> Vec<Result<Value, String>> {
    parse_sse(body)
        .into_iter()
        .filter(|e| !e.data.trim().is_empty())
        .map(|e| crate::reading::answer_json(e.data.as_bytes()).ok_or(e.data))
        .collect()
}

fn sse_has_response(body: &[u8]) -> bool {
    sse_messages(body).iter().any(|m| {
        m.as_ref()
            .is_ok_and(|v| v.get("result").is_some() || v.get("error").is_some())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = HttpUrl::parse("http://127.0.0.1:3000/mcp").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("127.0.0.1", 3000, "/mcp")
        );
        let insecure = TlsOptions {
            insecure: true,
            ..TlsOptions::default()
        };
        let u = HttpUrl::parse_with("https://example.test/mcp", &insecure).unwrap();
        assert_eq!((u.port, u.scheme()), (443, "https"));
        assert_eq!(u.to_url(), "https://example.test:443/mcp");
        assert!(HttpUrl::parse("ftp://x/").is_err());
        assert!(HttpUrl::parse_with("https://exa mple/", &insecure).is_err());
        assert_eq!(
            HttpUrl::parse("http://[::1]:9/").unwrap().connect_addr(),
            "::1:9"
        );
    }

    #[test]
    fn chunks_decode_across_reads() {
        let mut d = ChunkDecoder::default();
        let mut out = Vec::new();
        for piece in [&b"5\r\nhel"[..], b"lo\r\n3;x=1\r\n wo\r\n0\r\n\r\n"] {
            d.feed(piece, &mut out).unwrap();
        }
        assert!(d.done);
        assert_eq!(out, b"hello wo");
        assert!(ChunkDecoder::default()
            .feed(b"zz\r\n", &mut Vec::new())
            .is_err());
    }

    #[test]
    fn sse_events_with_priming_and_comments() {
        let body = b"id: 1\ndata:\n\n: comment\nretry: 10\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
        let msgs = sse_messages(body);
        assert_eq!(msgs.len(), 1);
        assert!(sse_has_response(body));
        assert!(!sse_has_response(
            b"data: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n"
        ));
    }
}
