//! The `lax-http` front, a broken mode: a careless hand-written HTTP/1.1 reader that trims spaces
//! around header names, takes the first `Content-Length`, ignores `Transfer-Encoding`, and
//! serves pipelined requests on one connection, the way request smuggling happens. Under
//! `keep-after-400` it sees a request with both `Content-Length` and `Transfer-Encoding`, refuses
//! it with 400, reads its chunked body and keeps the connection open for what follows (uvicorn's
//! and puma's way). Its flaws are the point: each step below names the one it has. It frames
//! requests and writes answers; `http.rs` routes them, as for its careful front.

use super::rules::READ_DEADLINE;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Method, Response};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

/// A head larger than this ends the connection.
const MAX_HEAD: usize = 64 * 1024;
/// The most body bytes a declared length makes it read.
const MAX_BODY: usize = 16 * 1024 * 1024;
/// The 400 it answers a request with both framings under `keep-after-400`.
const CONFLICT: &[u8] = br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad Request: conflicting framing"}}"#;

/// A request as the careless reader framed it.
pub(super) struct LaxRequest {
    pub(super) method: Method,
    pub(super) path: String,
    pub(super) headers: HeaderMap,
    pub(super) body: Vec<u8>,
}

/// The connection and what has been read from it but not yet served.
pub(super) struct Conn<S> {
    stream: S,
    buf: Vec<u8>,
    chunk: Vec<u8>,
    keep_after_400: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    /// A connection; `keep_after_400`: a request with both framings is refused and the
    /// connection kept.
    pub(super) fn new(stream: S, keep_after_400: bool) -> Conn<S> {
        Conn {
            stream,
            buf: Vec::new(),
            chunk: vec![0u8; 64 * 1024],
            keep_after_400,
        }
    }

    /// The next request on the connection (`None`: the client is gone or silent, it sent a
    /// head too large, or a `keep-after-400` refusal could not be written).
    pub(super) async fn next_request(&mut self) -> Option<LaxRequest> {
        loop {
            let head_end = self.head().await?;
            let head = Head::parse(&self.buf[..head_end]);
            let conflicting = head.length.is_some()
                && head.headers.contains_key(hyper::header::TRANSFER_ENCODING);
            if self.keep_after_400 && conflicting {
                // Read the chunked body to its last chunk, answer 400, and keep reading.
                let body_end = self.chunked_end(head_end).await?;
                self.buf.drain(..body_end);
                if !self
                    .write(&answer_bytes("400 Bad Request", CONFLICT, None))
                    .await
                {
                    return None;
                }
                continue;
            }
            // The first Content-Length, whatever Transfer-Encoding says.
            let length = head.length.unwrap_or(0).min(MAX_BODY);
            if !self.fill_to(head_end + length).await {
                return None;
            }
            let body = self.buf[head_end..head_end + length].to_vec();
            self.buf.drain(..head_end + length);
            return Some(LaxRequest {
                method: head.method,
                path: head.path,
                headers: head.headers,
                body,
            });
        }
    }

    /// Write `answer` with a `content-length` of its own; false when it cannot be written.
    pub(super) async fn answer(&mut self, answer: Response<Full<Bytes>>) -> bool {
        let (parts, body) = answer.into_parts();
        let body = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        let status = parts.status.to_string();
        self.write(&answer_bytes(&status, &body, Some(&parts.headers)))
            .await
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    /// Read some more; false when the client is gone or silent past the deadline.
    async fn more(&mut self) -> bool {
        match tokio::time::timeout(READ_DEADLINE, self.stream.read(&mut self.chunk)).await {
            Ok(Ok(n)) if n > 0 => {
                self.buf.extend_from_slice(&self.chunk[..n]);
                true
            }
            _ => false,
        }
    }

    /// Where the next head ends (after its blank line), reading until it does.
    async fn head(&mut self) -> Option<usize> {
        loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                return Some(i + 4);
            }
            if self.buf.len() > MAX_HEAD || !self.more().await {
                return None;
            }
        }
    }

    /// Where a chunked body that starts at `from` ends: at the first `0\r\n\r\n`.
    async fn chunked_end(&mut self, from: usize) -> Option<usize> {
        loop {
            if let Some(i) = self.buf[from..].windows(5).position(|x| x == b"0\r\n\r\n") {
                return Some(from + i + 5);
            }
            if !self.more().await {
                return None;
            }
        }
    }

    /// Read until `len` bytes are buffered.
    async fn fill_to(&mut self, len: usize) -> bool {
        while self.buf.len() < len {
            if !self.more().await {
                return false;
            }
        }
        true
    }

    async fn write(&mut self, bytes: &[u8]) -> bool {
        self.stream.write_all(bytes).await.is_ok()
    }
}

/// A request head read carelessly: header names trimmed and lower-cased, the first
/// `Content-Length` taken, lines without a colon skipped.
struct Head {
    method: Method,
    path: String,
    headers: HeaderMap,
    length: Option<usize>,
}

impl Head {
    fn parse(head: &[u8]) -> Head {
        let head = String::from_utf8_lossy(head);
        let mut lines = head.split("\r\n");
        let mut start = lines.next().unwrap_or("").split(' ');
        let method =
            Method::from_bytes(start.next().unwrap_or("").as_bytes()).unwrap_or(Method::GET);
        let path = start.next().unwrap_or("/").to_string();
        let mut headers = HeaderMap::new();
        let mut length: Option<usize> = None;
        for line in lines.filter(|l| !l.is_empty()) {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            if name == "content-length" && length.is_none() {
                length = value.parse().ok();
            }
            if let (Ok(n), Ok(v)) = (
                hyper::header::HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                headers.append(n, v);
            }
        }
        Head {
            method,
            path,
            headers,
            length,
        }
    }
}

/// An answer's bytes: the status line, the headers given (or only a JSON content type), its
/// own `content-length`, the body.
fn answer_bytes(status: &str, body: &[u8], headers: Option<&HeaderMap>) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\n").into_bytes();
    match headers {
        Some(headers) => {
            for (k, v) in headers {
                out.extend_from_slice(format!("{k}: ").as_bytes());
                out.extend_from_slice(v.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
        }
        None => out.extend_from_slice(b"content-type: application/json\r\n"),
    }
    out.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(body);
    out
}
