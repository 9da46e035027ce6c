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

/// Serve `input` until EOF. A partial line at EOF is never a message.
#[allow(
    clippy::too_many_lines,
    reason = "the stdio front's loop: one line at a time, classified (reply, request, notification) and answered while streams are written as they come; the session and the writer are its state"
)]
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
    let output: Out<W> = Arc::new(Mutex::new(output));
    let mut session: Option<Arc<Session>> = None;
    let limit = proxy.limits().max_bytes;
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::new();
    let mut overflow = false;
    let credentials = Credentials::default();
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(());
        }
        let end = buf.iter().position(|&b| b == b'\n');
        let take = end.unwrap_or(buf.len());
        if !overflow {
            if line.len() + take > limit {
                overflow = true;
                line.clear();
            } else {
                line.extend_from_slice(&buf[..take]);
            }
        }
        reader.consume(end.map_or(take, |e| e + 1));
        if end.is_none() {
            continue;
        }
        let mut l = std::mem::take(&mut line);
        if std::mem::take(&mut overflow) {
            write_line(
                &output,
                &proxy.malformed().response_bytes().unwrap_or_default(),
            )
            .await?;
            continue;
        }
        if l.last() == Some(&b'\r') {
            l.pop();
        }
        if l.is_empty() {
            continue;
        }
        let answer = match proxy.parse(&l) {
            // A client's response: taken only for a request of the server's that this session
            // relayed to it; otherwise never answered (JSON-RPC 2.0 section 5) and dropped.
            Err(_) if is_response(&l) => {
                if let Some(s) = &session {
                    let _ = proxy.client_reply(s, &l).await;
                }
                None
            }
            Err(_) => proxy.malformed().response_bytes(),
            Ok(c) => {
                let method = c.message().method().to_string();
                let id = c.message().id().cloned();
                // A modern message (per-request `_meta`) needs no initialize; the proxy checks
                // its version and capabilities.
                let legacy = crate::era::claim(&c) == crate::era::Claim::Legacy;
                let request = matches!(c.message(), Message::Request { .. });
                if session.is_none()
                    && legacy
                    && method != "initialize"
                    && method != "ping"
                    && request
                {
                    // Nothing but initialize and ping before initialize (MCP-LIFE-01).
                    Some(refusal(id.as_ref(), refusal_code, "Server not initialized"))
                } else if legacy && request && method == "initialize" && session.is_some() {
                    // One handshake per connection: a second initialize may not renegotiate or
                    // take over the session (MCP-LIFE-09), as over HTTP, where it carries a
                    // session and is refused.
                    Some(refusal(
                        id.as_ref(),
                        refusal_code,
                        "Invalid Request: already initialized",
                    ))
                } else if legacy && request && method == "initialize" {
                    let (r, opened) = proxy.open_session(server_id, &l, &c, &credentials).await;
                    if let Some(s) = opened {
                        // What the server says outside any request, as it comes.
                        if let Ok(Some(rx)) = proxy.listen(server_id, &s, None, None).await {
                            relay_lines(output.clone(), rx);
                        }
                        session = Some(s);
                    }
                    r.response_bytes()
                } else {
                    let in_session = if legacy { session.as_ref() } else { None };
                    match proxy
                        .handle_in(server_id, in_session, &l, &c, &credentials)
                        .await
                    {
                        Answer::Done(r) => r.response_bytes(),
                        Answer::Stream(_, rx) => {
                            // Written as it comes, while the next lines (the client's answers
                            // to the server's requests among them) are read.
                            relay_lines(output.clone(), rx);
                            None
                        }
                    }
                }
            }
        };
        if let Some(bytes) = answer {
            write_line(&output, &bytes).await?;
        }
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
