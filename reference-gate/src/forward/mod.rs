//! Forwarders: the only way bytes leave the gate. A [`Forwarder`] receives a server id and
//! canonical bytes, nothing else — no client credentials, headers, session or destination — and
//! maps the id through the trusted configuration itself. Each keeps its own downstream session
//! and enforces connect, request and response bounds.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

/// A downstream server, named by the id clients' calls are routed to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
pub enum Server {
    /// A Streamable HTTP endpoint.
    Url(String),
    /// A stdio server: program and arguments.
    Command(Vec<String>),
}

/// Deadlines and bounds for the downstream exchange and the client front.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Deadlines {
    pub connect_ms: u64,
    /// The whole downstream request, response included.
    pub request_ms: u64,
    /// Largest downstream response.
    pub max_response: usize,
    /// How long a client may take to send a request.
    pub client_read_ms: u64,
    /// How long an HTTP client session no request uses is kept (its downstream session, over
    /// stdio its child process, is closed with it).
    pub session_idle_ms: u64,
    /// Most HTTP client sessions kept at once; past it the least recently used one goes.
    pub max_sessions: usize,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            connect_ms: 2000,
            request_ms: 3000,
            max_response: 1024 * 1024,
            client_read_ms: 10_000,
            session_idle_ms: 600_000,
            max_sessions: 10_000,
        }
    }
}

/// Why forwarding failed. Never shown to a client: every kind becomes the downstream-failure code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForwardError {
    #[error("no downstream is configured for this server id")]
    UnknownServer,
    #[error("the downstream did not answer in time")]
    Timeout,
    #[error("the downstream could not be reached")]
    Unreachable,
    #[error("the downstream answered with more than the response bound")]
    Oversize,
    #[error("the downstream answered with something that is not a response")]
    BadAnswer,
    /// A GET for the server's stream answered 409: the session has one open already.
    #[error("the downstream already holds a stream open for this session")]
    StreamOpen,
}

/// A boxed future, so forwarders can be trait objects.
pub(crate) type ForwardFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<u8>, ForwardError>> + Send + 'a>>;

/// Sends canonical bytes to the server `server_id` names and returns the raw answer: the JSON
/// text of one JSON-RPC message, or nothing for a notification.
pub trait Forwarder: Send + Sync + 'static {
    fn forward<'a>(
        &'a self,
        server_id: &'a str,
        canonical: &'a [u8],
        expects_answer: bool,
    ) -> ForwardFuture<'a>;

    /// Open a downstream session of its own for one client session with this (canonical)
    /// `initialize` request: the session and the downstream's raw answer. `Ok(None)`: this
    /// forwarder has no per-client sessions (the gate then answers `initialize` itself and
    /// forwards through [`Forwarder::forward`]).
    fn open<'a>(&'a self, _server_id: &'a str, _initialize: &'a [u8]) -> OpenFuture<'a> {
        Box::pin(async { Ok(None) })
    }

    /// Send a modern (2026-07-28, session-less) request and give the downstream's messages as
    /// they come, its answer last: the progress and logging a server sends before a modern
    /// answer. `Ok(None)`: this forwarder does not stream, and nothing was sent (the gate then
    /// uses [`Forwarder::forward`]).
    fn stream<'a>(&'a self, _server_id: &'a str, _canonical: &'a [u8]) -> StreamFuture<'a> {
        Box::pin(async { Ok(None) })
    }
}

/// What [`Forwarder::stream`] gives.
pub(crate) type StreamFuture<'a> = BoxFuture<'a, Result<Option<Events>, ForwardError>>;

/// One message the downstream sent, as it came (the proxy canonicalizes it before anything
/// else), with the SSE event id and retry hint it came with.
#[derive(Debug, Clone, Default)]
pub struct Event {
    pub data: Vec<u8>,
    pub id: Option<String>,
    pub retry: Option<u64>,
}

/// The downstream's messages for one request or stream, in order. The channel closes when the
/// downstream ended the stream; an error ends it too. Dropping the receiver drops the stream.
pub type Events = tokio::sync::mpsc::Receiver<Result<Event, ForwardError>>;

/// A boxed future.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
/// What [`Forwarder::open`] gives.
pub(crate) type OpenFuture<'a> =
    BoxFuture<'a, Result<Option<(std::sync::Arc<dyn Downstream>, Vec<u8>)>, ForwardError>>;

/// The downstream session of one client session: every message of that client goes through it,
/// so nothing of one client's exchange can reach another.
pub trait Downstream: Send + Sync + 'static {
    /// Send one canonical message (a request, notification or the client's response to a
    /// server request); for a request, the downstream's messages until its answer.
    fn send<'a>(
        &'a self,
        canonical: &'a [u8],
        expects_answer: bool,
    ) -> BoxFuture<'a, Result<Events, ForwardError>>;

    /// Send a message that gets no answer (a notification, a response to a server request),
    /// waiting until the downstream took it.
    fn deliver<'a>(&'a self, canonical: &'a [u8]) -> BoxFuture<'a, Result<(), ForwardError>> {
        Box::pin(async move {
            let mut taken = self.send(canonical, false).await?;
            while taken.recv().await.is_some() {}
            Ok(())
        })
    }

    /// The server's own stream (HTTP GET), resuming after `last_event_id` (a downstream event
    /// id). `Ok(None)`: the downstream offers none.
    fn listen<'a>(
        &'a self,
        last_event_id: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Option<Events>, ForwardError>>;

    /// End the session.
    fn close(&self) -> BoxFuture<'_, ()>;

    /// The protocol version the downstream agreed.
    fn version(&self) -> &str;
}

/// Protocol version the gate speaks downstream.
const DOWNSTREAM_VERSION: &str = "2025-11-25";

fn init_message() -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":"gate-init","method":"initialize","params":{{"protocolVersion":"{DOWNSTREAM_VERSION}","capabilities":{{}},"clientInfo":{{"name":"reference-gate","version":"{}"}}}}}}"#,
        env!("CARGO_PKG_VERSION")
    )
    .into_bytes()
}

const INITIALIZED: &[u8] = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// A downstream's answer to `initialize`, the first message that is an answer (priming events
/// and the server's own messages before it skipped), and the version it agreed; a stream that
/// ends first, or an answer that agrees to no version, fails.
async fn initialize_answer(events: &mut Events) -> Result<(Vec<u8>, String), ForwardError> {
    loop {
        let event = events.recv().await.ok_or(ForwardError::BadAnswer)??;
        if event.data.is_empty() {
            // A priming event (an id and a retry hint): nothing to read.
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_slice(&event.data).map_err(|_| ForwardError::BadAnswer)?;
        if v.get("result").is_some() || v.get("error").is_some() {
            let version = v
                .pointer("/result/protocolVersion")
                .and_then(serde_json::Value::as_str)
                .ok_or(ForwardError::BadAnswer)?
                .to_string();
            return Ok((event.data, version));
        }
    }
}

/// Forwards to the configured servers, over HTTP or stdio as each is configured.
pub struct ConfiguredForwarder {
    servers: BTreeMap<String, Box<dyn Forwarder>>,
}

impl ConfiguredForwarder {
    /// Forwarders for `servers`; `https` ones check certificates against the platform's roots
    /// (with none, every exchange with them fails).
    pub fn new(servers: &BTreeMap<String, Server>, deadlines: Deadlines) -> ConfiguredForwarder {
        let any_https = servers
            .values()
            .any(|s| matches!(s, Server::Url(u) if u.starts_with("https://")));
        let tls = any_https
            .then(|| {
                crate::tls::roots(None)
                    .and_then(crate::tls::client_config)
                    .ok()
            })
            .flatten();
        ConfiguredForwarder::with_tls(servers, deadlines, tls)
    }

    /// Forwarders for `servers`; `https` ones check certificates with `tls` (with none, every
    /// exchange with them fails).
    pub(crate) fn with_tls(
        servers: &BTreeMap<String, Server>,
        deadlines: Deadlines,
        tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    ) -> ConfiguredForwarder {
        let servers = servers
            .iter()
            .map(|(id, s)| {
                let f: Box<dyn Forwarder> = match s {
                    Server::Url(url) => {
                        Box::new(HttpForwarder::with_tls(url.clone(), deadlines, tls.clone()))
                    }
                    Server::Command(cmd) => Box::new(StdioForwarder::new(cmd.clone(), deadlines)),
                };
                (id.clone(), f)
            })
            .collect();
        ConfiguredForwarder { servers }
    }
}

impl Forwarder for ConfiguredForwarder {
    fn forward<'a>(
        &'a self,
        server_id: &'a str,
        canonical: &'a [u8],
        expects_answer: bool,
    ) -> ForwardFuture<'a> {
        match self.servers.get(server_id) {
            Some(f) => f.forward(server_id, canonical, expects_answer),
            None => Box::pin(async { Err(ForwardError::UnknownServer) }),
        }
    }

    fn open<'a>(&'a self, server_id: &'a str, initialize: &'a [u8]) -> OpenFuture<'a> {
        match self.servers.get(server_id) {
            Some(f) => f.open(server_id, initialize),
            None => Box::pin(async { Err(ForwardError::UnknownServer) }),
        }
    }

    fn stream<'a>(&'a self, server_id: &'a str, canonical: &'a [u8]) -> StreamFuture<'a> {
        match self.servers.get(server_id) {
            Some(f) => f.stream(server_id, canonical),
            None => Box::pin(async { Err(ForwardError::UnknownServer) }),
        }
    }
}

/// A stdio server process (killed when dropped), its stdin and its buffered stdout; stderr is
/// discarded.
fn spawn_child(
    command: &[String],
) -> Result<
    (
        tokio::process::Child,
        tokio::process::ChildStdin,
        tokio::io::BufReader<tokio::process::ChildStdout>,
    ),
    ForwardError,
> {
    let (program, args) = command.split_first().ok_or(ForwardError::UnknownServer)?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|_| ForwardError::Unreachable)?;
    let stdin = child.stdin.take().ok_or(ForwardError::Unreachable)?;
    let stdout = tokio::io::BufReader::new(child.stdout.take().ok_or(ForwardError::Unreachable)?);
    Ok((child, stdin, stdout))
}

mod http;
mod stdio;
mod stdio_session;

#[cfg(feature = "faults")]
pub use http::FAULT_HEADERS;
pub(crate) use http::{get, HttpForwarder};
pub(crate) use stdio::StdioForwarder;
