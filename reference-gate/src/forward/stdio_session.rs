//! Stdio downstream sessions: one child process per client session, its messages routed to the
//! request waiting for them by id, idle waiters swept.

use super::stdio::spawn_child;
use super::*;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt as _, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;
use tokio::time::Instant;

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
pub(super) struct StdioSession {
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
    pub(super) async fn start(
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
