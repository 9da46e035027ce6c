//! The stdio front: LF-delimited lines (a CR before the LF is tolerated), bounded line length,
//! one message per line through the proxy, answers on stdout and nothing else there.

use crate::canonical::Message;
use crate::proxy::{Credentials, Proxy};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// Serve `input` until EOF. A partial line at EOF is never a message.
pub async fn serve<R, W>(
    proxy: Arc<Proxy>,
    server_id: &str,
    refusal_code: i64,
    input: R,
    mut output: W,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let limit = proxy.limits().max_bytes;
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::new();
    let mut overflow = false;
    let mut initialized = false;
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
                &mut output,
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
            // A client's response: the gate sent no request, so there is nothing to answer, and
            // a response is never answered (JSON-RPC 2.0 section 5). Dropped, never forwarded.
            Err(_) if is_response(&l) => None,
            Err(_) => proxy.malformed().response_bytes(),
            Ok(c) => {
                let method = c.message().method().to_string();
                let id = c.message().id().cloned();
                // A modern message (per-request `_meta`) needs no initialize; the proxy checks
                // its version and capabilities.
                let legacy = crate::era::claim(&c) == crate::era::Claim::Legacy;
                if !initialized
                    && legacy
                    && method != "initialize"
                    && method != "ping"
                    && matches!(c.message(), Message::Request { .. })
                {
                    // Nothing but initialize and ping before initialize (MCP-LIFE-01).
                    let id = id.map_or_else(|| b"null".to_vec(), |i| i.to_canonical());
                    let mut out = br#"{"jsonrpc":"2.0","id":"#.to_vec();
                    out.extend_from_slice(&id);
                    out.extend_from_slice(format!(r#","error":{{"code":{refusal_code},"message":"Server not initialized"}}}}"#).as_bytes());
                    Some(out)
                } else {
                    let r = proxy.handle_parsed(server_id, &l, &c, &credentials).await;
                    if r.negotiated.is_some() {
                        initialized = true;
                    }
                    r.response_bytes()
                }
            }
        };
        if let Some(bytes) = answer {
            write_line(&mut output, &bytes).await?;
        }
    }
}

/// A JSON object with `result` or `error` and no `method`.
fn is_response(line: &[u8]) -> bool {
    matches!(serde_json::from_slice::<serde_json::Value>(line), Ok(serde_json::Value::Object(o))
        if !o.contains_key("method") && (o.contains_key("result") || o.contains_key("error")))
}

async fn write_line<W: AsyncWrite + Unpin>(out: &mut W, bytes: &[u8]) -> std::io::Result<()> {
    out.write_all(bytes).await?;
    out.write_all(b"\n").await?;
    out.flush().await
}
