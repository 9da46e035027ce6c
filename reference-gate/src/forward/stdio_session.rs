//! Stdio downstream sessions: one child process per client session (a new one, handshaken at the
//! same version, when it died), its messages routed to the request waiting for them by id
//! (progress by its token), idle waiters swept.

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
    /// The request's `_meta.progressToken` as JSON text: progress naming it is this request's.
    progress: Option<String>,
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
/// reader task routes what the child writes: an answer to the request with its id; progress to
/// the request whose token it names (else the listener); any other request or notification of
/// the server's own to the latest request still waiting (stdio says nothing about which request
/// it belongs to), else to the listener. A child that died is replaced by a new one, handshaken
/// at the same version, when the next message needs it: one crash does not end the client's
/// session, as an HTTP downstream session is reopened when the server forgets it.
pub(super) struct StdioSession {
    command: Vec<String>,
    /// The canonical `initialize` a new child is opened with.
    initialize: Vec<u8>,
    /// The child now; held while a new one is started, so only one is.
    link: Mutex<std::sync::Arc<Link>>,
    /// Closed by the gate: no new child is started.
    closed: std::sync::atomic::AtomicBool,
    version: String,
    deadlines: Deadlines,
}

/// One child process of a stdio session: its stdin, and the routes its reader task fills.
struct Link {
    child: std::sync::Mutex<Option<tokio::process::Child>>,
    stdin: Mutex<tokio::process::ChildStdin>,
    routes: std::sync::Arc<std::sync::Mutex<Routes>>,
}

/// A request's id and progress token, as JSON text.
fn keys(message: &[u8]) -> (Option<String>, Option<String>) {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(message) else {
        return (None, None);
    };
    let token = v
        .pointer("/params/_meta/progressToken")
        .map(|t| t.to_string());
    (v.get("id").map(|id| id.to_string()), token)
}

impl StdioSession {
    pub(super) async fn start(
        command: &[String],
        deadlines: Deadlines,
        initialize: &[u8],
    ) -> Result<(StdioSession, Vec<u8>), ForwardError> {
        let (link, answer, version) = Link::start(command, deadlines, initialize).await?;
        let session = StdioSession {
            command: command.to_vec(),
            initialize: initialize.to_vec(),
            link: Mutex::new(std::sync::Arc::new(link)),
            closed: std::sync::atomic::AtomicBool::new(false),
            version,
            deadlines,
        };
        Ok((session, answer))
    }

    /// The child to send to: the one there is while it lives, else a new one, handshaken at
    /// the version the session agreed (a child that will not agree to it fails the message).
    async fn live(&self) -> Result<std::sync::Arc<Link>, ForwardError> {
        let mut link = self.link.lock().await;
        if !link.dead() {
            return Ok(link.clone());
        }
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(ForwardError::Unreachable);
        }
        link.kill().await;
        let (fresh, _, version) =
            Link::start(&self.command, self.deadlines, &self.initialize).await?;
        if version != self.version {
            fresh.kill().await;
            return Err(ForwardError::BadAnswer);
        }
        *link = std::sync::Arc::new(fresh);
        Ok(link.clone())
    }
}

impl Link {
    /// A new child, its reader and deadline sweeper running, and its handshake done: the link,
    /// the child's raw answer to `initialize` and the version it agreed.
    async fn start(
        command: &[String],
        deadlines: Deadlines,
        initialize: &[u8],
    ) -> Result<(Link, Vec<u8>, String), ForwardError> {
        let (child, stdin, stdout) = spawn_child(command)?;
        let routes = std::sync::Arc::new(std::sync::Mutex::new(Routes::default()));
        tokio::spawn(read_routes(stdout, routes.clone(), deadlines.max_response));
        tokio::spawn(sweep(
            std::sync::Arc::downgrade(&routes),
            Duration::from_millis(deadlines.request_ms),
        ));
        let link = Link {
            child: std::sync::Mutex::new(Some(child)),
            stdin: Mutex::new(stdin),
            routes,
        };
        let handshake = async {
            let mut events = link.send_line(initialize, true, deadlines).await?;
            let answer = initialize_answer(&mut events).await?;
            link.send_line(INITIALIZED, false, deadlines).await?;
            Ok(answer)
        };
        match handshake.await {
            Ok((answer, version)) => Ok((link, answer, version)),
            Err(e) => {
                link.kill().await;
                Err(e)
            }
        }
    }

    /// Whether the child's output has ended (it exited, closed it, or wrote past the bound).
    fn dead(&self) -> bool {
        self.routes.lock().map_or(true, |r| r.dead)
    }

    async fn kill(&self) {
        let child = self.child.lock().ok().and_then(|mut c| c.take());
        if let Some(mut c) = child {
            let _ = c.start_kill();
            let _ = c.wait().await;
        }
    }

    async fn send_line(
        &self,
        line: &[u8],
        expects_answer: bool,
        deadlines: Deadlines,
    ) -> Result<Events, ForwardError> {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let (key, progress) = if expects_answer {
            keys(line)
        } else {
            (None, None)
        };
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
                    progress,
                },
            );
        }
        let write = async {
            let mut stdin = self.stdin.lock().await;
            stdin.write_all(line).await?;
            stdin.write_all(b"\n").await?;
            stdin.flush().await
        };
        let written = tokio::time::timeout(Duration::from_millis(deadlines.request_ms), write)
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
        let target = {
            let Ok(mut r) = routes.lock() else { return };
            r.route(value.as_ref())
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

impl Routes {
    /// Where one line of the child's goes (`None`: nowhere). An answer goes to the request with
    /// its id, which stops waiting. Progress goes to the request whose token it names, else to
    /// the listener (the relay drops a token no request of its client sent). Anything else, and
    /// a line that is not JSON, goes to the latest request still waiting (whose exchange then
    /// fails, for a line that is not JSON: fail closed), else to the listener.
    fn route(
        &mut self,
        value: Option<&serde_json::Value>,
    ) -> Option<tokio::sync::mpsc::Sender<Result<Event, ForwardError>>> {
        let is_answer = value.is_some_and(|v| {
            v.get("method").is_none() && (v.get("result").is_some() || v.get("error").is_some())
        });
        if is_answer {
            let key = value.and_then(|v| v.get("id")).map(|id| id.to_string());
            return key.and_then(|k| self.waiting.remove(&k)).map(|w| w.tx);
        }
        let progress = value
            .filter(|v| v.get("method").and_then(|m| m.as_str()) == Some("notifications/progress"))
            .map(|v| v.pointer("/params/progressToken").map(|t| t.to_string()));
        let waiter = match progress {
            Some(token) => self
                .waiting
                .values_mut()
                .find(|w| token.is_some() && w.progress == token),
            None => self.waiting.values_mut().max_by_key(|w| w.order),
        };
        match waiter {
            Some(w) => {
                w.last = Instant::now();
                Some(w.tx.clone())
            }
            None => self.listener.clone(),
        }
    }
}

impl Downstream for StdioSession {
    fn send<'a>(
        &'a self,
        canonical: &'a [u8],
        expects_answer: bool,
    ) -> BoxFuture<'a, Result<Events, ForwardError>> {
        Box::pin(async move {
            let link = self.live().await?;
            link.send_line(canonical, expects_answer, self.deadlines)
                .await
        })
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
            let link = self.live().await?;
            let (tx, rx) = tokio::sync::mpsc::channel(16);
            let mut routes = link.routes.lock().map_err(|_| ForwardError::Unreachable)?;
            if routes.dead {
                return Err(ForwardError::Unreachable);
            }
            routes.listener = Some(tx);
            Ok(Some(rx))
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.closed
                .store(true, std::sync::atomic::Ordering::Release);
            let link = self.link.lock().await.clone();
            link.kill().await;
        })
    }

    fn version(&self) -> &str {
        &self.version
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    type Rx = tokio::sync::mpsc::Receiver<Result<Event, ForwardError>>;

    fn wait(r: &mut Routes, request: &serde_json::Value) -> Rx {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let (key, progress) = keys(request.to_string().as_bytes());
        r.next += 1;
        let waiter = Waiter {
            tx,
            last: Instant::now(),
            order: r.next,
            progress,
        };
        r.waiting.insert(key.unwrap_or_default(), waiter);
        rx
    }

    fn deliver(r: &mut Routes, line: &serde_json::Value) {
        if let Some(tx) = r.route(Some(line)) {
            let _ = tx.try_send(Ok(Event {
                data: line.to_string().into_bytes(),
                ..Event::default()
            }));
        }
    }

    fn got(rx: &mut Rx) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        while let Ok(Ok(e)) = rx.try_recv() {
            out.push(serde_json::from_slice(&e.data).unwrap_or_default());
        }
        out
    }

    /// Progress reaches the request that asked for it, even when a later request is waiting;
    /// progress for a token no waiting request sent goes to the listener, not to a request.
    #[test]
    fn progress_reaches_the_request_whose_token_it_names() {
        let mut r = Routes::default();
        let (listener, mut heard) = tokio::sync::mpsc::channel(4);
        r.listener = Some(listener);
        let call = |id: i64, token: serde_json::Value| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "slow", "_meta": {"progressToken": token}}})
        };
        let mut first = wait(&mut r, &call(1, json!("p-1")));
        let mut second = wait(&mut r, &call(2, json!(7)));
        let progress = |token: serde_json::Value| {
            json!({"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": token, "progress": 1}})
        };
        deliver(&mut r, &progress(json!("p-1")));
        deliver(&mut r, &progress(json!(7)));
        deliver(&mut r, &progress(json!("someone-else")));
        // Untied messages still go to the latest request.
        let log = json!({"jsonrpc": "2.0", "method": "notifications/message",
                         "params": {"level": "info", "data": "x"}});
        deliver(&mut r, &log);
        let first_got = got(&mut first);
        assert_eq!(first_got.len(), 1, "{first_got:?}");
        assert_eq!(first_got[0]["params"]["progressToken"], "p-1");
        let second_got = got(&mut second);
        assert_eq!(second_got.len(), 2, "{second_got:?}");
        assert_eq!(second_got[0]["params"]["progressToken"], 7);
        assert_eq!(second_got[1]["method"], "notifications/message");
        let heard = got(&mut heard);
        assert_eq!(heard.len(), 1, "{heard:?}");
        assert_eq!(heard[0]["params"]["progressToken"], "someone-else");
        // An answer ends its request's wait.
        deliver(&mut r, &json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
        assert_eq!(got(&mut first).len(), 1);
        assert_eq!(r.waiting.len(), 1);
    }
}
