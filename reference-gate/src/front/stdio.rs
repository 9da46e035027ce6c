//! The stdio front: LF-delimited lines (a CR before the LF is tolerated), bounded line length,
//! one message per line through the proxy, answers on stdout and nothing else there.
//!
//! After `initialize` the client has a session: with a downstream of its own (a child process,
//! or an HTTP session), what the server says while it answers (progress, logging, its requests
//! to the client, each decided by the relay) is written as it comes, the client's answers to the
//! server's requests go back through the proxy, and what the server says outside any request is
//! written too.

use crate::canonical::Message;
use crate::proxy::{Answer, Credentials, Proxy};
use crate::relay::{Relayed, Session};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

type Out<W> = Arc<Mutex<W>>;

/// Write relayed messages as they come (empty ones carry only SSE metadata: skipped).
fn relay_lines<W>(out: Out<W>, mut rx: tokio::sync::mpsc::Receiver<Relayed>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            if m.bytes.is_empty() {
                continue;
            }
            if write_line(&out, &m.bytes).await.is_err() {
                return;
            }
        }
    });
}

/// One line read from the client.
enum Line {
    /// A complete line, without its LF (and a CR before it).
    Message(Vec<u8>),
    /// A line longer than the bound: refused, its bytes never kept.
    TooLong,
    /// End of input (a partial line at EOF is never a message).
    End,
}

/// The client's input as LF-delimited lines of at most `limit` bytes.
struct Lines<R> {
    reader: BufReader<R>,
    limit: usize,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    async fn next(&mut self) -> std::io::Result<Line> {
        let mut line = Vec::new();
        let mut overflow = false;
        loop {
            let buf = self.reader.fill_buf().await?;
            if buf.is_empty() {
                return Ok(Line::End);
            }
            let end = buf.iter().position(|&b| b == b'\n');
            let take = end.unwrap_or(buf.len());
            if !overflow {
                if line.len() + take > self.limit {
                    overflow = true;
                    line.clear();
                } else {
                    line.extend_from_slice(&buf[..take]);
                }
            }
            self.reader.consume(end.map_or(take, |e| e + 1));
            if end.is_none() {
                continue;
            }
            if overflow {
                return Ok(Line::TooLong);
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(Line::Message(line));
        }
    }
}

/// One client connection: its session once `initialize` opened one, and the writer every
/// answer and relayed message shares.
struct Connection<'a, W> {
    proxy: Arc<Proxy>,
    server_id: &'a str,
    refusal_code: i64,
    output: Out<W>,
    session: Option<Arc<Session>>,
    credentials: Credentials,
}

/// Serve `input` until EOF. A partial line at EOF is never a message.
pub async fn serve<R, W>(
    proxy: Arc<Proxy>,
    server_id: &str,
    refusal_code: i64,
    input: R,
    output: W,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut lines = Lines {
        reader: BufReader::with_capacity(64 * 1024, input),
        limit: proxy.limits().max_bytes,
    };
    let mut conn = Connection {
        proxy,
        server_id,
        refusal_code,
        output: Arc::new(Mutex::new(output)),
        session: None,
        credentials: Credentials::default(),
    };
    loop {
        let answer = match lines.next().await? {
            Line::End => return Ok(()),
            Line::TooLong => conn.proxy.malformed().response_bytes(),
            Line::Message(l) if l.is_empty() => None,
            Line::Message(l) => conn.line(&l).await,
        };
        if let Some(bytes) = answer {
            write_line(&conn.output, &bytes).await?;
        }
    }
}

impl<W: AsyncWrite + Unpin + Send + 'static> Connection<'_, W> {
    /// The answer to one line, if it has one.
    async fn line(&mut self, l: &[u8]) -> Option<Vec<u8>> {
        let proxy = self.proxy.clone();
        let c = match proxy.parse(l) {
            Ok(c) => c,
            // A client's response: taken only for a request of the server's that this session
            // relayed to it; otherwise never answered (JSON-RPC 2.0 section 5) and dropped.
            Err(_) if is_response(l) => {
                if let Some(s) = &self.session {
                    let _ = proxy.client_reply(s, l).await;
                }
                return None;
            }
            Err(_) => return proxy.malformed().response_bytes(),
        };
        let method = c.message().method();
        let id = c.message().id();
        // A modern message (per-request `_meta`) needs no initialize; the proxy checks its
        // version and capabilities.
        let legacy = crate::era::claim(&c) == crate::era::Claim::Legacy;
        let request = matches!(c.message(), Message::Request { .. });
        let initialize = legacy && request && method == "initialize";
        if self.session.is_none() && legacy && request && !matches!(method, "initialize" | "ping") {
            // Nothing but initialize and ping before initialize (MCP-LIFE-01).
            return Some(refusal(id, self.refusal_code, "Server not initialized"));
        }
        if initialize && self.session.is_some() {
            // One handshake per connection: a second initialize may not renegotiate or take
            // over the session (MCP-LIFE-09), as over HTTP, where it carries a session and is
            // refused.
            let message = "Invalid Request: already initialized";
            return Some(refusal(id, self.refusal_code, message));
        }
        if initialize {
            return self.initialize(l, &c).await;
        }
        let in_session = if legacy { self.session.as_ref() } else { None };
        let answer = proxy
            .handle_in(self.server_id, in_session, l, &c, &self.credentials)
            .await;
        match answer {
            Answer::Done(r) => r.response_bytes(),
            Answer::Stream(_, rx) => {
                // Written as it comes, while the next lines (the client's answers to the
                // server's requests among them) are read.
                relay_lines(self.output.clone(), rx);
                None
            }
        }
    }

    /// The connection's `initialize`: its session opens, and what the server says outside any
    /// request is written as it comes.
    async fn initialize(&mut self, l: &[u8], c: &crate::canonical::Canonical) -> Option<Vec<u8>> {
        let proxy = &self.proxy;
        let (r, opened) = proxy
            .open_session(self.server_id, l, c, &self.credentials)
            .await;
        if let Some(s) = opened {
            if let Ok(Some(rx)) = proxy.listen(self.server_id, &s, None, None).await {
                relay_lines(self.output.clone(), rx);
            }
            self.session = Some(s);
        }
        r.response_bytes()
    }
}

/// The gate's refusal of a request, with its id (or null).
fn refusal(id: Option<&crate::canonical::Id>, code: i64, message: &str) -> Vec<u8> {
    let id = id.map_or_else(|| b"null".to_vec(), crate::canonical::Id::to_canonical);
    let mut out = br#"{"jsonrpc":"2.0","id":"#.to_vec();
    out.extend_from_slice(&id);
    out.extend_from_slice(
        format!(r#","error":{{"code":{code},"message":"{message}"}}}}"#).as_bytes(),
    );
    out
}

/// A JSON object with `result` or `error` and no `method`.
fn is_response(line: &[u8]) -> bool {
    matches!(serde_json::from_slice::<serde_json::Value>(line), Ok(serde_json::Value::Object(o))
        if !o.contains_key("method") && (o.contains_key("result") || o.contains_key("error")))
}

async fn write_line<W: AsyncWrite + Unpin>(out: &Mutex<W>, bytes: &[u8]) -> std::io::Result<()> {
    let mut out = out.lock().await;
    out.write_all(bytes).await?;
    out.write_all(b"\n").await?;
    out.flush().await
}
