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
    let mut framer = Framer {
        line: Vec::new(),
        overflow: false,
        limit,
        split_on_cr: cfg.is(Broken::LaxFraming),
    };
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut conv = Conversation::default();
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
            if let Some(l) = framer.partial() {
                handle_line(witness, &l, &mut conv, &mut output, deferred.as_mut()).await?;
            }
            for (at, text) in deferred.unwrap_or_default() {
                tokio::time::sleep_until(at).await;
                write_line(&mut output, &text).await?;
            }
            return Ok(());
        }
        let (consumed, framed) = framer.feed(buf);
        reader.consume(consumed);
        match framed {
            None => {}
            Some(Framed::TooLarge) => refuse_too_large(cfg, &mut output).await?,
            Some(Framed::Line(l)) if l.is_empty() && cfg.is(Broken::Fragile) => {
                // An unhandled exception on an empty line, as `json.loads("")` would raise.
                return Err(std::io::Error::other("fragile: crashed on an empty line"));
            }
            Some(Framed::Line(l)) if l.is_empty() => {}
            Some(Framed::Line(l)) => {
                handle_line(witness, &l, &mut conv, &mut output, deferred.as_mut()).await?;
            }
        }
    }
}

/// The line framing: bytes in, whole lines (or the news that one was too long) out.
struct Framer {
    /// The line so far (nothing once it is too long).
    line: Vec<u8>,
    /// The line so far passed `limit`: the rest of it is dropped.
    overflow: bool,
    limit: usize,
    /// `lax-framing`: a CR ends a line too.
    split_on_cr: bool,
}

/// What a line end gives.
enum Framed {
    /// A line, without its end (a CR before the LF is dropped: CRLF framing is tolerated).
    Line(Vec<u8>),
    TooLarge,
}

impl Framer {
    /// Take `buf` up to and with the next line end: the bytes taken, and what a line end gave.
    fn feed(&mut self, buf: &[u8]) -> (usize, Option<Framed>) {
        let end = buf
            .iter()
            .position(|&b| b == b'\n' || (self.split_on_cr && b == b'\r'));
        let take = end.unwrap_or(buf.len());
        if !self.overflow {
            if self.line.len() + take > self.limit {
                self.overflow = true;
                self.line = Vec::new();
            } else {
                self.line.extend_from_slice(&buf[..take]);
            }
        }
        let consumed = end.map_or(take, |e| e + 1);
        if end.is_none() {
            return (consumed, None);
        }
        if std::mem::take(&mut self.overflow) {
            return (consumed, Some(Framed::TooLarge));
        }
        let mut l = std::mem::take(&mut self.line);
        if l.last() == Some(&b'\r') {
            l.pop();
        }
        (consumed, Some(Framed::Line(l)))
    }

    /// At EOF, the partial line `lax-framing` runs anyway.
    fn partial(&mut self) -> Option<Vec<u8>> {
        (self.split_on_cr && !self.line.is_empty() && !self.overflow)
            .then(|| std::mem::take(&mut self.line))
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
