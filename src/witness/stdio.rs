//! The witness's stdio front: newline framing with a line cap, one message per line, answers on
//! stdout, nothing else on stdout.

use super::{Broken, Conversation, Reply, Witness, MAX_MESSAGE};
use serde_json::json;
use std::collections::VecDeque;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::time::Instant;

/// How late the `late` mode answers a tool call.
const LATE_BY: Duration = Duration::from_millis(40);

/// Answers held back by the `late` mode, each with when it is due.
type Deferred = VecDeque<(Instant, String)>;

/// Serve `witness` on `input`/`output` until EOF on `input`.
pub async fn serve<R, W>(witness: &Witness, input: R, mut output: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let cfg = &witness.config;
    if cfg.is(Broken::Banner) {
        output.write_all(b"mcp-gauntlet witness ready\n").await?;
        output.flush().await?;
    }
    let limit = if cfg.is(Broken::Unbounded) {
        usize::MAX
    } else {
        MAX_MESSAGE
    };
    let split_on_cr = cfg.is(Broken::LaxFraming);
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut conv = Conversation::default();
    let mut line: Vec<u8> = Vec::new();
    let mut overflow = false;
    let mut deferred = cfg.is(Broken::Late).then(Deferred::new);
    loop {
        // The `late` mode writes a held-back answer when it is due, reading meanwhile.
        let due = deferred.as_ref().and_then(|d| d.front()).map(|(at, _)| *at);
        let buf = match due {
            Some(at) => tokio::select! {
                buf = reader.fill_buf() => buf?,
                () = tokio::time::sleep_until(at) => {
                    if let Some((_, text)) = deferred.as_mut().and_then(VecDeque::pop_front) {
                        write_line(&mut output, &text).await?;
                    }
                    continue;
                }
            },
            None => reader.fill_buf().await?,
        };
        if buf.is_empty() {
            // EOF. A partial line is never a message (the lax-framing mode runs it anyway).
            if split_on_cr && !line.is_empty() && !overflow {
                let l = std::mem::take(&mut line);
                handle_line(witness, &l, &mut conv, &mut output, deferred.as_mut()).await?;
            }
            for (at, text) in deferred.unwrap_or_default() {
                tokio::time::sleep_until(at).await;
                write_line(&mut output, &text).await?;
            }
            return Ok(());
        }
        let end = buf
            .iter()
            .position(|&b| b == b'\n' || (split_on_cr && b == b'\r'));
        let take = end.unwrap_or(buf.len());
        if !overflow {
            if line.len() + take > limit {
                overflow = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(&buf[..take]);
            }
        }
        let consumed = end.map_or(take, |e| e + 1);
        reader.consume(consumed);
        if end.is_none() {
            continue;
        }
        if overflow {
            overflow = false;
            refuse_too_large(cfg, &mut output).await?;
            continue;
        }
        let mut l = std::mem::take(&mut line);
        // CRLF framing is tolerated: a CR right before the LF is whitespace.
        if l.last() == Some(&b'\r') {
            l.pop();
        }
        if l.is_empty() {
            if witness.config.is(Broken::Fragile) {
                // An unhandled exception on an empty line, as `json.loads("")` would raise.
                return Err(std::io::Error::other("fragile: crashed on an empty line"));
            }
            continue;
        }
        handle_line(witness, &l, &mut conv, &mut output, deferred.as_mut()).await?;
    }
}

/// The refusal of a line too long (`-32600`, id null); mute means mute: not even that.
async fn refuse_too_large<W: AsyncWrite + Unpin>(
    cfg: &super::WitnessConfig,
    output: &mut W,
) -> std::io::Result<()> {
    if cfg.is(Broken::Mute) {
        return Ok(());
    }
    let err = json!({"jsonrpc": "2.0", "id": null,
                     "error": {"code": -32600, "message": "Invalid Request: message too large"}});
    write_line(output, &err.to_string()).await
}

async fn handle_line<W: AsyncWrite + Unpin>(
    witness: &Witness,
    line: &[u8],
    conv: &mut Conversation,
    output: &mut W,
    deferred: Option<&mut Deferred>,
) -> std::io::Result<()> {
    witness.recorder.message("stdio", line, Vec::new());
    match witness.handle_body(line, conv) {
        Reply::Accepted | Reply::Hang => Ok(()),
        // A tool's result (it has `content`), held back by the `late` mode.
        Reply::Message(m) if deferred.is_some() && m["result"].get("content").is_some() => {
            if let Some(d) = deferred {
                d.push_back((Instant::now() + LATE_BY, m.to_string()));
            }
            Ok(())
        }
        Reply::Message(m) | Reply::Unknown(m) => write_line(output, &m.to_string()).await,
        Reply::Sequence(ms) => {
            for m in ms {
                write_line(output, &m.to_string()).await?;
            }
            Ok(())
        }
        Reply::Refused(m) if witness.config.is(Broken::Crash500) => {
            let _ = m;
            output
                .write_all(b"Traceback (most recent call last):\n  File \"/srv/witness/server.py\", line 42, in handle\nValueError: bad request\n")
                .await?;
            output.flush().await
        }
        Reply::Refused(m) => write_line(output, &m.to_string()).await,
        Reply::Fault(super::Fault::Empty) => write_line(output, "").await,
        Reply::Fault(super::Fault::Garbage) => write_line(output, "\u{1}this is not json{").await,
        Reply::Fault(super::Fault::Close) => Err(std::io::Error::other("fault_close")),
        // `fragile` mode: the process dies on this input (the binary exits non-zero).
        Reply::Crash => Err(std::io::Error::other("fragile: crashed on deep nesting")),
    }
}

async fn write_line<W: AsyncWrite + Unpin>(output: &mut W, text: &str) -> std::io::Result<()> {
    output.write_all(text.as_bytes()).await?;
    output.write_all(b"\n").await?;
    output.flush().await
}
