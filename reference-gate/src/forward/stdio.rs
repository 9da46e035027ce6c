//! The stdio downstream: one child process per forwarder for sessionless forwarding, its
//! stdout read line by line within the response bound.

use super::stdio_session::StdioSession;
use super::*;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt as _, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;
use tokio::time::Instant;

struct StdioChild {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: BufReader<tokio::process::ChildStdout>,
}

/// A stdio downstream: one child process, initialized once, one request at a time; restarted
/// after any failure.
pub(crate) struct StdioForwarder {
    command: Vec<String>,
    deadlines: Deadlines,
    child: Mutex<Option<StdioChild>>,
}

impl StdioForwarder {
    pub(crate) fn new(command: Vec<String>, deadlines: Deadlines) -> StdioForwarder {
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
