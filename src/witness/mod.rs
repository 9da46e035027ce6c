//! The witness: a small, strict MCP server that records everything it receives.
//!
//! It is the suite's positive control (it must pass the `server` profile) and the downstream a
//! gate is judged by (did a denied call reach it?). Its tools are harmless (`echo`, `add`), the
//! canary (`delete_everything`, which must never run behind a correct gate), and fault tools for
//! gate tests. [`Broken`] modes make it deliberately wrong, so tests can prove every case can fail.
//!
//! **Architecture invariant:** the protocol logic here ([`Witness::handle_body`]) knows nothing of
//! HTTP or stdio framing; `http.rs` and `stdio.rs` adapt it.

pub mod http;
mod lax_http;
mod methods;
pub mod process;
mod rules;
pub mod sse;
pub mod stdio;

pub use crate::canary::{CANARY_MARKER, CANARY_TOOL};
pub use crate::reading::Personality;
pub use crate::record::Recorder;
pub(crate) use crate::record::{LogReader, WitnessView};
use methods::ask_for_input;

use crate::versions::Version;
use serde_json::{json, Map, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

/// Protocol versions the witness speaks unless told otherwise, oldest first: the legacy ones
/// through `initialize`, the modern one per request.
pub(crate) const SUPPORTED_VERSIONS: &[Version] = crate::versions::KNOWN;
/// The legacy version it offers when a client asks `initialize` for one it does not speak.
pub(crate) const LATEST_VERSION: Version = crate::versions::NEWEST_LEGACY;
/// Largest message the strict witness reads (HTTP body or stdio line).
pub(crate) const MAX_MESSAGE: usize = 4 * 1024 * 1024;

/// Deliberately wrong behaviours, each one a bug class real servers have. Used by the tests to
/// prove that every case can fail; never enabled by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum Broken {
    /// Executes JSON-RPC batch arrays and answers with an array.
    Batch,
    /// Answers every refusal with HTTP 500 and a stack trace (stdio: the trace on stdout).
    Crash500,
    /// Takes any id type; a `null` id makes a request a notification that still runs.
    AnyId,
    /// Does not check `Origin`.
    NoOrigin,
    /// Never answers anything but `initialize`.
    Mute,
    /// Reads JSON carelessly: decodes UTF-16 and UTF-32, repairs UTF-8, skips BOMs, allows comments, trailing commas,
    /// single quotes, NaN, duplicate keys (last wins) and runs every value of a concatenation.
    LaxJson,
    /// Ignores Content-Type, Accept, MCP-Protocol-Version and session headers; PUT acts as POST.
    LaxHeaders,
    /// No size limit: reads any body or line whole before looking at it.
    Unbounded,
    /// Crashes on deep nesting, on messages over 512 KiB and on empty stdio lines (HTTP: the
    /// handler dies and drops the connection; stdio: the process exits).
    Fragile,
    /// stdio: runs a partial line at EOF and splits lines on a bare CR.
    LaxFraming,
    /// stdio: prints a banner line on stdout before anything else.
    Banner,
    /// Puts internal detail (a stack trace, the parser's message with offsets) in error data.
    Leaky,
    /// Reads the envelope carelessly: member names matched ignoring case and trailing NULs
    /// (last wins, as in CVE-2026-27896 and GHSA-q382-vc8q-7jhj), `jsonrpc` unchecked, bad `params` taken as `{}`, `result` beside `method`
    /// ignored, objects without `method` (even `{}` and empty bodies) accepted as responses.
    LaxEnvelope,
    /// `initialize` agrees to whatever version the client asks for, as often as it is asked (a
    /// second initialize renegotiates the conversation).
    AnyVersion,
    /// Answers notifications and client responses as if they were requests.
    ReplyToAll,
    /// HTTP: a careless HTTP/1.1 reader (spaces around header names trimmed, first
    /// Content-Length wins, Transfer-Encoding ignored, pipelined requests served).
    LaxHttp,
    /// Like `fragile`, but the whole server process exits on those inputs (a single-process
    /// server that crashes): the runner must say once which case killed it. Only for a witness
    /// run as its own process.
    Exits,
    /// HTTP: refuses a request with both Content-Length and Transfer-Encoding with 400, as
    /// uvicorn and puma do, but keeps the connection open and serves what follows on it.
    #[value(name = "keep-after-400")]
    KeepAfter400,
    /// Modern requests: routes on the body alone. `MCP-Protocol-Version`, `Mcp-Method` and
    /// `Mcp-Name` are not compared with the body, and anything that looks modern (the header or a
    /// `_meta` version) is served without a session.
    LaxBinding,
    /// Reads a missing `MCP-Protocol-Version`, or `2025-03-26`, as the version that had batches,
    /// and executes batch arrays then. (It also agrees to 2025-03-26 in `initialize`, so a batch
    /// claiming that version is legal on it; a batch without the header in a newer session is
    /// its fault.)
    LegacyBatch,
    /// HTTP: answers a GET that accepts `text/event-stream` with a stream that carries
    /// nothing (a priming event, then the end), even when it keeps no sessions and so has
    /// nothing it could ever send on it.
    GetStream,
    /// HTTP: answers a message it cannot read or accept with `400 text/plain` "Bad Request"
    /// instead of a JSON-RPC error (the refusal is right, its body is not what MCP answers).
    PlainRefusals,
    /// HTTP: one transport shared by every client, answers routed by JSON-RPC id alone (the
    /// TypeScript SDK's stateless transport reused across requests, CVE-2026-25536): a tool
    /// call's answer waits up to 150 ms for another request with the same id, and the two are
    /// swapped, each client getting the other's.
    SharedTransport,
    /// stdio: drops the first request that follows `notifications/initialized` without a
    /// word, as a server still finishing its start-up when the client's first call arrives
    /// (every case's request comes right after the handshake, so nearly every case fails).
    DropFirstCall,
    /// HTTP: keeps every session it opens, forever, each with the state a real server's
    /// session holds (64 KiB here: its task, streams and buffers), as the Python SDK did before
    /// 1.30.0 (GHSA-84m7-p3x7-pcfv): no cap, no eviction, no expiry.
    KeepSessions,
    /// HTTP: a request it refuses for want of a session still leaves 64 KiB behind (a session
    /// made for it and never let go), as the Python SDK before 1.30.0 did for every refused
    /// opening request.
    LeakRefused,
    /// Caches 64 KiB for every distinct name it is asked about (a tool called, a prompt got, a
    /// resource read or subscribed to, an `Mcp-Name` or `Mcp-Param-*` header value), known or
    /// not, refused or not, and never lets any go: a cache keyed by whatever a client sends.
    CacheNames,
    /// HTTP: ends a session on `DELETE` (its id then answers 404) but keeps what it held (64
    /// KiB: a task and buffers never stopped), as a transport removed from its table whose
    /// work is left running.
    KeepDeleted,
    /// Keeps 64 KiB for every request id a `notifications/cancelled` names and every token a
    /// `notifications/progress` names, whether any such request or token was ever seen: a
    /// table of cancellations and progress keyed by whatever a client sends.
    KeepNotified,
    /// Matches `resources/read` URIs against its template (`test://notes{/path*}`) by trying
    /// every way to split the path into comma-separated items, as a regular expression with
    /// nested quantifiers does (`[^/]+(?:,[^/]+)*`, the TypeScript SDK before 1.25.2,
    /// CVE-2026-0621): a short URI of many commas that cannot match costs seconds of CPU.
    BacktrackingMatcher,
    /// Reads each escape, digit and member separator of a body by scanning the body again from
    /// its start (a reader that re-tokenizes from the beginning at each token): a request of
    /// thousands of escapes, digits or members costs time quadratic in its size, where plain
    /// text of the same size costs nothing.
    QuadraticReader,
    /// HTTP: serves one connection at a time, accepting the next only when the one before has
    /// closed (a server with a single worker, as a blocking HTTP server without threads is; or
    /// a server with a pool of workers once as many clients as it has workers are slow): one
    /// client that is slow to send its request, or keeps its connection open, shuts every
    /// other out.
    OneAtATime,
    /// HTTP: keeps a descriptor of every connection it accepts, open after the connection has
    /// ended (a socket never closed when its client went away): descriptors grow with every
    /// connection until the process can open no more.
    KeepClosedConnections,
    /// HTTP: gives every `GET` on a session an event stream of its own and keeps each open while
    /// its client does (where it would refuse a second one with 409): no bound on the
    /// listening streams one client holds.
    GetStreamPerRequest,
    /// HTTP+SSE: looks sessions up the way a JavaScript object is indexed
    /// (`transports[req.query.sessionId]`): `toString`, `constructor`, `__proto__`,
    /// `hasOwnProperty` and the other names every object has are found, are not sessions, and a
    /// POST naming one crashes the handler (500 and the TypeError's stack), as a gateway did.
    SsePrototypeSessions,
    /// HTTP+SSE: routes an answer by its request id alone, to the stream of the session that
    /// last POSTed that id (a request waits up to 150 ms for another with the same id), so two
    /// clients with the same id get each other's answers.
    SseWrongStream,
    /// HTTP+SSE: ignores the session the message URL names: a POST naming none, or one it does
    /// not know, goes to the newest open session (a server that keeps one transport, for
    /// whoever connected last).
    SseAnySession,
    /// HTTP+SSE: queues every answer for a stream its client does not read, without bound (a
    /// transport that writes to a response whose buffer only grows).
    SseUnboundedQueue,
    /// HTTP+SSE: takes a POST to any path as a message for the session its query names (a
    /// catch-all handler), not only at the message URL its `endpoint` event named: a policy or
    /// an authorization that guards that path is gone around by posting elsewhere.
    SseAnyPath,
    /// HTTP+SSE: the `endpoint` event names the message URL on another host (127.0.0.2, the
    /// same port) where it should name its own origin: a client that follows it sends every
    /// message, session id included, elsewhere.
    SseForeignEndpoint,
    /// HTTP+SSE: a session outlives its stream: a POST to a session whose client has gone is
    /// still accepted (202) and run, its answer sent nowhere.
    SseKeepEndedSessions,
    /// Where batches are legal (a session agreed to 2025-03-26 or before, over HTTP+SSE): runs
    /// only a batch's first member and answers it alone, as a server that takes `body[0]` does;
    /// a batch of notifications is answered with an empty array.
    BatchFirstOnly,
    /// stdio: answers tool calls 40 ms late, after the answers to the lines that follow (as SDKs
    /// that run each request in a task of its own do). Not wrong in itself: with another mode it
    /// proves the runner still waits for an answer that comes after its barrier's.
    Late,
}

/// Behaviours that are unusual but allowed, each one a way real servers answer that a suite
/// narrower than the specification took for a violation. The witness stays correct under every
/// one: the tests run the catalogue with each and expect nothing to fail by default (while
/// `--strict`, which wants the best answer, may).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum Quirk {
    /// A body it cannot read strictly but that is JSON with one detectable request id (a
    /// duplicated member elsewhere, say) is refused with that id, not null (JSON-RPC 2.0
    /// section 5 asks for null only when the id could not be detected).
    EchoDetectableId,
    /// HTTP: a request without a session is refused with -32000, the TypeScript SDK's "Bad
    /// Request: No valid session ID provided", whatever the body holds (before it is parsed).
    SessionCode,
    /// Invalid UTF-8 is replaced (U+FFFD) before a body is read, as the Python SDK's stdio
    /// reader and the TypeScript SDK's HTTP reader do: REQUIREMENTS 13 A18's lenient pass, as
    /// long as no tool runs that should not (its canary still runs from a repaired call).
    RepairUtf8,
}

/// Witness settings.
#[derive(Debug, Clone, Default)]
pub struct WitnessConfig {
    pub broken: BTreeSet<Broken>,
    /// Allowed but unusual behaviours (none by default).
    pub quirks: BTreeSet<Quirk>,
    /// Answer HTTP requests with an SSE stream (priming event, then the response) instead of
    /// JSON, when the client accepts it.
    pub sse: bool,
    /// How it reads ambiguous JSON (the `lax-json` broken mode reads as [`Personality::Lenient`]).
    pub personality: Personality,
    /// The protocol versions it speaks; empty: [`SUPPORTED_VERSIONS`].
    pub versions: Vec<Version>,
    /// What the canary answers when it runs; `None`: [`CANARY_MARKER`]. A real server's denied
    /// tool says whatever it says, so tests use a plain text to prove the suite sees the run
    /// without the marker.
    pub canary_text: Option<String>,
    /// HTTP: issue no `Mcp-Session-Id` and serve legacy requests without one, as the SDKs'
    /// stateless modes do.
    pub stateless: bool,
    /// A file the canary appends a line to each time it runs: the kind of execution side
    /// channel `run --canary-log` watches on real servers.
    pub canary_log: Option<std::path::PathBuf>,
    /// Streamable HTTP: also serve the HTTP+SSE transport (2024-11-05) on the same port, at
    /// `/sse` and `/messages`, as servers that keep it for older clients do.
    pub also_sse: bool,
    /// HTTP: require a valid OAuth access token on every request, checked as the reference
    /// gate checks them (the positive control of the `auth/` cases).
    pub auth: Option<std::sync::Arc<reference_gate::auth::Verifier>>,
    /// With `auth`: tools a token must grant a scope to call, as (tool, scope).
    pub tool_scopes: Vec<(String, String)>,
}

impl WitnessConfig {
    pub fn is(&self, b: Broken) -> bool {
        self.broken.contains(&b)
    }

    pub fn has(&self, q: Quirk) -> bool {
        self.quirks.contains(&q)
    }

    /// The versions it speaks, oldest first.
    pub fn versions(&self) -> Vec<Version> {
        if self.versions.is_empty() {
            SUPPORTED_VERSIONS.to_vec()
        } else {
            let mut v = self.versions.clone();
            v.sort();
            v.dedup();
            v
        }
    }

    /// Whether it speaks the version a client wrote (`version`, as sent).
    pub fn speaks(&self, version: &str) -> bool {
        Version::parse(version).is_some_and(|v| self.versions().contains(&v))
    }

    /// Whether it speaks any modern (handshake-free) version.
    pub(crate) fn speaks_modern(&self) -> bool {
        self.versions().iter().any(|v| v.is_modern())
    }

    /// The newest legacy version it speaks, if any: what `initialize` offers.
    pub(crate) fn newest_legacy(&self) -> Option<Version> {
        self.versions().into_iter().filter(|v| !v.is_modern()).max()
    }
}

/// What the witness does in answer to one message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reply {
    /// Nothing: a notification or a response was accepted (HTTP 202).
    Accepted,
    /// A JSON-RPC message (or, in batch mode, an array of them).
    Message(Value),
    /// A refusal of the whole body: HTTP 400 with this error envelope.
    Refused(Value),
    /// A modern request for a method the witness does not have: HTTP 404 with this error.
    Unknown(Value),
    /// The `fault_*` tools' transport-level misbehaviour.
    Fault(Fault),
    /// No answer, ever (`fault_hang`, the `mute` mode).
    Hang,
    /// A crash on the input (`fragile` mode).
    Crash,
    /// Messages to the client before the answer (a request of the server's own, then the
    /// answer): SSE events over HTTP, lines over stdio.
    Sequence(Vec<Value>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Fault {
    Empty,
    Garbage,
    Close,
}

/// Per-connection (stdio) or per-session (HTTP) state.
#[derive(Debug, Clone, Default)]
pub struct Conversation {
    /// The version agreed by `initialize`, once answered.
    pub negotiated: Option<String>,
    /// `legacy-batch` mode: the transport said the version is one that had batches.
    pub batches: bool,
    /// `drop-first-call` mode: `notifications/initialized` came, and no request since.
    pub just_initialized: bool,
}

impl Conversation {
    /// The version agreed is one whose JSON-RPC takes batches (2025-03-26 and before; over
    /// HTTP+SSE, where the witness speaks them).
    fn takes_batches(&self) -> bool {
        self.negotiated
            .as_deref()
            .and_then(Version::parse)
            .is_some_and(Version::has_batches)
    }
}

/// The witness's protocol core, shared by its fronts.
#[derive(Debug)]
pub struct Witness {
    pub config: WitnessConfig,
    pub recorder: Recorder,
    sessions: Mutex<Sessions>,
    /// What the broken modes that accumulate keep: never let go.
    kept: Mutex<Kept>,
    /// HTTP with `auth`: the token subject that opened each session.
    owners: Mutex<HashMap<String, String>>,
    /// `shared-transport`: tool answers waiting for another request with the same id, by id.
    crossing: Mutex<HashMap<String, (Value, tokio::sync::oneshot::Sender<Value>)>>,
}

/// Sessions the witness keeps at most: at the cap the least recently used one goes (its id then
/// answers 404, as an ended session's must), so no client can grow it without bound.
pub const MAX_SESSIONS: usize = 1000;

/// Why a session gets no listening stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoStream {
    /// It has one open already.
    Open,
    /// It ended (or was let go) meanwhile.
    Gone,
}

/// The open sessions: each conversation with when it was last used (a counter), and in the
/// `keep-sessions` mode the state it holds.
#[derive(Debug, Default)]
struct Sessions {
    open: HashMap<String, (Conversation, u64, Option<Vec<u8>>)>,
    /// Each session's listening streams (its `GET`s), ended with the session.
    listening: HashMap<String, Vec<tokio::sync::mpsc::Sender<bytes::Bytes>>>,
    clock: u64,
}

impl Sessions {
    fn evict_least_recently_used(&mut self) {
        let oldest = self
            .open
            .iter()
            .min_by_key(|(_, (_, used, _))| *used)
            .map(|(id, _)| id.clone());
        if let Some(id) = oldest {
            self.open.remove(&id);
            self.listening.remove(&id);
        }
    }
}

/// What the broken modes that accumulate keep.
#[derive(Debug, Default)]
struct Kept {
    refused: Vec<Vec<u8>>,
    names: HashMap<String, Vec<u8>>,
    deleted: Vec<Vec<u8>>,
    notified: HashMap<String, Vec<u8>>,
    /// `keep-closed-connections`: a descriptor of every connection accepted.
    connections: Vec<std::os::fd::OwnedFd>,
}

/// The state a broken mode keeps per request or name: 64 KiB (what the advisories measured on
/// real servers is 40 to 75 KiB), written so that it is resident (zeroed pages from the
/// allocator would not be).
fn ballast() -> Vec<u8> {
    vec![0x5a; 64 * 1024]
}

/// `quadratic-reader`: each escape, digit and `:` sends the reader back over everything before
/// it (what it counts there is only what keeps the scan from being optimised away).
fn rescanned(body: &[u8]) -> usize {
    body.iter()
        .enumerate()
        .filter(|(_, b)| matches!(b, b'\\' | b'0'..=b'9' | b':'))
        .map(|(i, b)| body[..i].iter().filter(|c| *c == b).count())
        .fold(0, usize::wrapping_add)
}

/// How long a `shared-transport` answer waits for a request with the same id to swap with.
const PARTNER_WAIT: std::time::Duration = std::time::Duration::from_millis(150);

impl Witness {
    /// `keep-closed-connections`: keep a copy of `socket`'s descriptor, never closed.
    pub(crate) fn keep_connection(&self, socket: &impl std::os::fd::AsFd) {
        if let Ok(fd) = socket.as_fd().try_clone_to_owned() {
            crate::sync::lock(&self.kept).connections.push(fd);
        }
    }

    pub fn new(config: WitnessConfig, recorder: Recorder) -> Witness {
        Witness {
            config,
            recorder,
            sessions: Mutex::new(Sessions::default()),
            kept: Mutex::new(Kept::default()),
            owners: Mutex::new(HashMap::new()),
            crossing: Mutex::new(HashMap::new()),
        }
    }

    /// `shared-transport`: the answer to give a request whose own answer is `answer`. If another
    /// request with the same id is waiting, the two answers are swapped; otherwise this one
    /// waits up to [`PARTNER_WAIT`] for such a request, and keeps its own answer if none comes.
    pub(crate) async fn cross(&self, answer: Value) -> Value {
        let Some(key) = answer.get("id").map(Value::to_string) else {
            return answer;
        };
        let rx = {
            let mut waiting = crate::sync::lock(&self.crossing);
            if let Some((theirs, tx)) = waiting.remove(&key) {
                return match tx.send(answer) {
                    Ok(()) => theirs,
                    // It stopped waiting: each keeps its own.
                    Err(own) => own,
                };
            }
            let (tx, rx) = tokio::sync::oneshot::channel();
            waiting.insert(key.clone(), (answer.clone(), tx));
            rx
        };
        match tokio::time::timeout(PARTNER_WAIT, rx).await {
            Ok(Ok(theirs)) => theirs,
            _ => {
                crate::sync::lock(&self.crossing).remove(&key);
                answer
            }
        }
    }

    /// Record that the token subject `owner` opened session `id`.
    pub(crate) fn bind_owner(&self, id: &str, owner: &str) {
        crate::sync::lock(&self.owners).insert(id.to_string(), owner.to_string());
    }

    /// Whether `caller` (a token subject, or none) may use session `id`: only the subject that
    /// opened it, when one did.
    pub(crate) fn owns(&self, id: &str, caller: Option<&str>) -> bool {
        crate::sync::lock(&self.owners).get(id).map(String::as_str) == caller
    }

    /// Create a session for a successful HTTP initialize and return its id.
    pub(crate) fn open_session(&self, negotiated: String) -> String {
        let id = random_session_id();
        let conv = Conversation {
            negotiated: Some(negotiated),
            batches: false,
            just_initialized: false,
        };
        let keep_all = self.config.is(Broken::KeepSessions);
        let mut sessions = crate::sync::lock(&self.sessions);
        if !keep_all && sessions.open.len() >= MAX_SESSIONS {
            sessions.evict_least_recently_used();
        }
        let ballast = keep_all.then(ballast);
        sessions.clock += 1;
        let used = sessions.clock;
        sessions.open.insert(id.clone(), (conv, used, ballast));
        drop(sessions);
        id
    }

    pub fn session(&self, id: &str) -> Option<Conversation> {
        let mut sessions = crate::sync::lock(&self.sessions);
        sessions.clock += 1;
        let now = sessions.clock;
        let (conv, used, _) = sessions.open.get_mut(id)?;
        *used = now;
        Some(conv.clone())
    }

    /// A listening stream (a `GET`) on open session `id`: what feeds it, or why there is none
    /// (one a session, as the SDKs allow; the `get-stream-per-request` mode gives every `GET`
    /// its own). The stream ends with the session, or when its client goes.
    pub(crate) fn listen(
        &self,
        id: &str,
    ) -> Result<tokio::sync::mpsc::Receiver<bytes::Bytes>, NoStream> {
        let mut sessions = crate::sync::lock(&self.sessions);
        if !sessions.open.contains_key(id) {
            return Err(NoStream::Gone);
        }
        let streams = sessions.listening.entry(id.to_string()).or_default();
        streams.retain(|tx| !tx.is_closed());
        if !streams.is_empty() && !self.config.is(Broken::GetStreamPerRequest) {
            return Err(NoStream::Open);
        }
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        streams.push(tx);
        Ok(rx)
    }

    pub(crate) fn close_session(&self, id: &str) -> bool {
        let mut sessions = crate::sync::lock(&self.sessions);
        sessions.listening.remove(id);
        let ended = sessions.open.remove(id).is_some();
        drop(sessions);
        if ended && self.config.is(Broken::KeepDeleted) {
            crate::sync::lock(&self.kept).deleted.push(ballast());
        }
        ended
    }

    /// `keep-notified`: what a notification naming a request or a progress token leaves.
    fn notified(&self, method: &str, params: &Map<String, Value>) {
        if !self.config.is(Broken::KeepNotified) {
            return;
        }
        let named = match method {
            "notifications/cancelled" => params.get("requestId"),
            "notifications/progress" => params.get("progressToken"),
            _ => None,
        };
        if let Some(named) = named {
            crate::sync::lock(&self.kept)
                .notified
                .insert(named.to_string(), ballast());
        }
    }

    /// `leak-refused`: what a refused request leaves behind.
    pub(crate) fn refused(&self) {
        if self.config.is(Broken::LeakRefused) {
            crate::sync::lock(&self.kept).refused.push(ballast());
        }
    }

    /// `cache-names`: a name a request asked about, cached for good.
    pub(crate) fn cache_name(&self, name: &str) {
        if self.config.is(Broken::CacheNames) {
            crate::sync::lock(&self.kept)
                .names
                .entry(name.to_string())
                .or_insert_with(ballast);
        }
    }

    /// Handle one received message body (an HTTP body or a stdio line, framing removed).
    /// `conv` is the conversation's state; `initialize` fills in `negotiated`.
    pub(crate) fn handle_body(&self, body: &[u8], conv: &mut Conversation) -> Reply {
        if self.config.is(Broken::QuadraticReader) {
            std::hint::black_box(rescanned(body));
        }
        if (self.config.is(Broken::Fragile) || self.config.is(Broken::Exits))
            && (body.len() > 512 * 1024 || crate::reading::nesting_depth(body) > 1000)
        {
            return Reply::Crash;
        }
        if self.config.is(Broken::Mute) && !body_mentions_initialize(body) {
            return Reply::Hang;
        }
        if self.config.is(Broken::LaxEnvelope) && body.iter().all(u8::is_ascii_whitespace) {
            return Reply::Accepted;
        }
        let personality = if self.config.is(Broken::LaxJson) {
            Personality::Lenient
        } else {
            self.config.personality
        };
        let repaired;
        let body = if self.config.has(Quirk::RepairUtf8) && std::str::from_utf8(body).is_err() {
            repaired = String::from_utf8_lossy(body).into_owned();
            repaired.as_bytes()
        } else {
            body
        };
        let values = crate::reading::read(personality, body);
        let values = match values {
            Ok(v) => v,
            Err(e) => {
                let id = Some(body)
                    .filter(|_| self.config.has(Quirk::EchoDetectableId))
                    .and_then(crate::reading::detectable_id)
                    .map(|d| d.id);
                return Reply::Refused(self.error(
                    id.unwrap_or(Value::Null),
                    -32700,
                    "Parse error",
                    &e.detail,
                ));
            }
        };
        let mut replies = Vec::new();
        for value in values {
            replies.push(self.handle_value(value, conv));
        }
        // A concatenation (lax mode only) answers with the first reply that says something.
        replies
            .into_iter()
            .find(|r| *r != Reply::Accepted)
            .unwrap_or(Reply::Accepted)
    }

    /// A batch where the agreed version takes them (JSON-RPC 2.0 section 6): each member run in
    /// turn, `initialize` refused inside one (2025-03-26 forbids it) and a member that is not an
    /// object refused with a null id; answered with one array of what the members got, or with
    /// nothing when none gets an answer (a batch of notifications).
    fn batch(&self, items: Vec<Value>, conv: &mut Conversation) -> Reply {
        let first_only = self.config.is(Broken::BatchFirstOnly);
        let mut out = Vec::new();
        for item in items {
            let is_initialize = item.get("method").and_then(Value::as_str) == Some("initialize");
            let reply = match item {
                Value::Object(o) if is_initialize => {
                    let id = o.get("id").cloned().unwrap_or(Value::Null);
                    let why = "Invalid Request: initialize may not be part of a batch";
                    Reply::Refused(self.error(id, -32600, why, "initialize in a batch"))
                }
                Value::Object(o) => self.handle_object(o, conv),
                _ => Reply::Refused(self.error(
                    Value::Null,
                    -32600,
                    "Invalid Request: a batch member must be a JSON object",
                    "not an object",
                )),
            };
            match reply {
                Reply::Message(m) | Reply::Refused(m) | Reply::Unknown(m) if first_only => {
                    return Reply::Message(m)
                }
                Reply::Message(m) | Reply::Refused(m) | Reply::Unknown(m) => out.push(m),
                Reply::Sequence(ms) => out.extend(ms),
                Reply::Accepted => {}
                other @ (Reply::Fault(_) | Reply::Hang | Reply::Crash) => return other,
            }
            if first_only {
                return Reply::Message(Value::Array(out));
            }
        }
        if out.is_empty() {
            Reply::Accepted
        } else {
            Reply::Message(Value::Array(out))
        }
    }

    fn handle_value(&self, value: Value, conv: &mut Conversation) -> Reply {
        match value {
            Value::Object(obj) if self.config.is(Broken::LaxEnvelope) => {
                self.handle_object(loosen_envelope(obj), conv)
            }
            Value::Object(obj) => self.handle_object(obj, conv),
            Value::Array(items)
                if self.config.is(Broken::Batch)
                    || (self.config.is(Broken::LegacyBatch) && conv.batches) =>
            {
                let mut out = Vec::new();
                for item in items {
                    match self.handle_value(item, conv) {
                        Reply::Message(m) | Reply::Refused(m) => out.push(m),
                        _ => {}
                    }
                }
                Reply::Message(Value::Array(out))
            }
            Value::Array(items) if !items.is_empty() && conv.takes_batches() => {
                self.batch(items, conv)
            }
            Value::Array(_) => Reply::Refused(self.error(
                Value::Null,
                -32600,
                "Invalid Request: batches are not supported",
                "array body",
            )),
            _ => Reply::Refused(self.error(
                Value::Null,
                -32600,
                "Invalid Request: a message must be a JSON object",
                "not an object",
            )),
        }
    }

    fn handle_object(&self, obj: Map<String, Value>, conv: &mut Conversation) -> Reply {
        let Envelope {
            method,
            params,
            id,
            echo,
        } = match self.envelope(&obj) {
            Ok(envelope) => envelope,
            Err(reply) => return reply,
        };
        // The era is the request's own: a `_meta` protocol version makes it modern (served
        // statelessly), when the witness speaks a modern version at all.
        let meta_version = params
            .get("_meta")
            .and_then(|m| m.get(crate::versions::META_VERSION));
        if meta_version.is_some() && self.config.speaks_modern() {
            return self.handle_modern(&method, &params, id, echo);
        }
        if self.config.newest_legacy().is_none() {
            // A modern-only witness: a request without per-request metadata is malformed;
            // `initialize` is told which versions there are.
            return match (id, method.as_str()) {
                (None, _) => self.accepted(),
                (Some(id), "initialize") => Reply::Refused(self.unsupported(id, None)),
                (Some(id), _) => Reply::Refused(self.error(
                    id,
                    -32602,
                    "Invalid params: _meta must name the protocol version",
                    "no _meta",
                )),
            };
        }
        let Some(id) = id else {
            // A notification: never answered.
            conv.just_initialized = method == "notifications/initialized";
            self.notified(&method, &params);
            if self.config.is(Broken::AnyId) {
                let _ = self.call(&method, &params, conv);
            }
            return self.accepted();
        };
        if std::mem::take(&mut conv.just_initialized) && self.config.is(Broken::DropFirstCall) {
            return Reply::Hang;
        }
        if conv.negotiated.is_none() && method != "initialize" && method != "ping" {
            return Reply::Message(self.error(
                id,
                -32600,
                "Server not initialized",
                "no initialize",
            ));
        }
        let outcome = self.call(&method, &params, conv);
        self.finish(id, outcome)
    }

    /// The JSON-RPC envelope checks, in the order the witness reports them (each a broken mode
    /// may relax): the request's parts, or the reply that ends it (a client's response is
    /// accepted or refused here).
    fn envelope(&self, obj: &Map<String, Value>) -> Result<Envelope, Reply> {
        let any_id = self.config.is(Broken::AnyId);
        // The id, when it is a valid one, is echoed even in errors about other members.
        let id = obj.get("id").cloned();
        let id_ok = match &id {
            None => true,
            Some(v) => any_id || valid_id(v),
        };
        let echo = match &id {
            Some(v) if id_ok => v.clone(),
            _ => Value::Null,
        };
        let invalid =
            |what: &str| Reply::Refused(self.error(echo.clone(), -32600, "Invalid Request", what));
        if obj.get("jsonrpc") != Some(&Value::String("2.0".into())) {
            return Err(invalid("jsonrpc"));
        }
        if !id_ok {
            return Err(invalid("id"));
        }
        let method = match obj.get("method") {
            None => {
                // A response from the client: well formed ones are accepted and ignored.
                let has_result = obj.contains_key("result");
                let has_error = obj.contains_key("error");
                // A refused response is answered without an id: its id is the client's own.
                let lax = self.config.is(Broken::LaxEnvelope);
                return Err(if (id.is_some() && has_result != has_error) || lax {
                    self.accepted()
                } else {
                    Reply::Refused(self.error(Value::Null, -32600, "Invalid Request", "response"))
                });
            }
            Some(Value::String(m)) => m.clone(),
            Some(_) => return Err(invalid("method")),
        };
        if obj.contains_key("result") || obj.contains_key("error") {
            return Err(invalid("request with result or error"));
        }
        let params = match obj.get("params") {
            None => Map::new(),
            Some(Value::Object(p)) => p.clone(),
            Some(Value::Array(_)) if id.is_some() => {
                return Err(Reply::Message(self.error(
                    echo,
                    -32602,
                    "Invalid params",
                    "params array",
                )))
            }
            Some(_) => return Err(invalid("params")),
        };
        let id = match id {
            // `any-id`: a null id makes this a notification that still runs.
            Some(Value::Null) if any_id => None,
            other => other,
        };
        Ok(Envelope {
            method,
            params,
            id,
            echo,
        })
    }

    /// The reply to a request whose method ran (or was refused by its params).
    fn finish(&self, id: Value, outcome: Result<Outcome, i64>) -> Reply {
        match outcome {
            Ok(Outcome::Result(r)) => {
                Reply::Message(json!({"jsonrpc": "2.0", "id": id, "result": r}))
            }
            Ok(Outcome::Error(code, msg)) => Reply::Message(self.error(id, code, msg, msg)),
            Ok(Outcome::Fault(f)) => Reply::Fault(f),
            Ok(Outcome::Hang) => Reply::Hang,
            Ok(Outcome::AskClient) => {
                let n = ASKED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Reply::Sequence(vec![
                    json!({"jsonrpc": "2.0", "id": format!("witness-sample-{n}"),
                           "method": "sampling/createMessage",
                           "params": {"messages": [{"role": "user", "content":
                               {"type": "text", "text": "Say something."}}], "maxTokens": 16}}),
                    json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text",
                        "text": "asked the client to sample"}], "isError": false}}),
                ])
            }
            Ok(Outcome::Leak) => Reply::Message(json!({
                "jsonrpc": "2.0", "id": id,
                "error": {"code": -32603,
                          "message": "Internal error: Traceback (most recent call last): File \"/srv/witness/tools.py\", line 12",
                          "data": {"trace": "at Object.<anonymous> (/srv/witness/tools.js:12:7)",
                                   "token": "Bearer witness-internal-token-0123456789"}}
            })),
            Err(code) => Reply::Message(self.error(id, code, "Invalid params", "params")),
        }
    }

    /// A modern request: its `_meta` names the version and the client's capabilities; no
    /// handshake is needed and none is possible.
    fn handle_modern(
        &self,
        method: &str,
        params: &Map<String, Value>,
        id: Option<Value>,
        echo: Value,
    ) -> Reply {
        let meta = params.get("_meta").and_then(Value::as_object);
        let version = match self.modern_meta(meta, echo) {
            Ok(version) => version,
            Err(reply) => return reply,
        };
        let capabilities = meta.and_then(|m| m.get(crate::versions::META_CAPABILITIES));
        let mut conv = Conversation {
            negotiated: Some(version.clone()),
            batches: false,
            just_initialized: false,
        };
        let Some(id) = id else {
            self.notified(method, params);
            if self.config.is(Broken::AnyId) {
                let _ = self.call(method, params, &mut conv);
            }
            return self.accepted();
        };
        let outcome = match method {
            // Gone in 2026-07-28: the handshake and `ping`.
            "initialize" | "ping" => Ok(Outcome::Error(-32601, "Method not found")),
            "server/discover" => Ok(Outcome::Result(json!({
                "supportedVersions": self.config.versions(),
                "capabilities": methods::capabilities(),
                "ttlMs": 0,
                "_meta": {"io.modelcontextprotocol/serverInfo":
                    {"name": "mcp-gauntlet-witness", "version": env!("CARGO_PKG_VERSION")}}
            }))),
            _ => self.call(method, params, &mut conv),
        };
        match outcome {
            Ok(Outcome::Result(mut r)) => {
                if let Value::Object(o) = &mut r {
                    o.insert("resultType".into(), Value::String("complete".into()));
                    // 2026-07-28 requires the caching directives on these results (a client
                    // on the SDKs' 2026 types refuses a list without them): never cached,
                    // never shared.
                    if CACHEABLE_METHODS.contains(&method) {
                        o.entry("ttlMs").or_insert(json!(0));
                        o.entry("cacheScope").or_insert(json!("private"));
                    }
                }
                Reply::Message(json!({"jsonrpc": "2.0", "id": id, "result": r}))
            }
            Ok(Outcome::Error(-32601, msg)) => Reply::Unknown(self.error(id, -32601, msg, msg)),
            Ok(Outcome::AskClient) => Reply::Message(json!({
                "jsonrpc": "2.0", "id": id, "result": ask_for_input(params, capabilities)
            })),
            other => self.finish(id, other),
        }
    }

    /// A modern request's `_meta`: the version it names (one the witness speaks) and the
    /// client's capabilities (an object), or the refusal; `any-version` takes any.
    fn modern_meta(&self, meta: Option<&Map<String, Value>>, echo: Value) -> Result<String, Reply> {
        let lax = self.config.is(Broken::AnyVersion);
        let version = meta
            .and_then(|m| m.get(crate::versions::META_VERSION))
            .and_then(Value::as_str);
        let version = match version {
            Some(v) => v.to_string(),
            // `any-version`: a version of any type is taken, as its text.
            None if lax => meta
                .and_then(|m| m.get(crate::versions::META_VERSION))
                .map(Value::to_string)
                .unwrap_or_default(),
            None => {
                return Err(Reply::Refused(self.error(
                    echo,
                    -32602,
                    "Invalid params: _meta protocolVersion must be a string",
                    "_meta version",
                )))
            }
        };
        let speaks = self.config.speaks(&version) && crate::versions::is_modern(&version);
        if !speaks && !lax {
            return Err(Reply::Refused(self.unsupported(echo, Some(&version))));
        }
        let capabilities = meta.and_then(|m| m.get(crate::versions::META_CAPABILITIES));
        if !capabilities.is_some_and(Value::is_object) && !lax {
            return Err(Reply::Refused(self.error(
                echo,
                -32602,
                "Invalid params: _meta must carry the client capabilities",
                "_meta capabilities",
            )));
        }
        Ok(version)
    }

    /// The 2026-07-28 unsupported-version error, listing what the witness speaks.
    fn unsupported(&self, id: Value, requested: Option<&str>) -> Value {
        let mut e = self.error(
            id,
            crate::versions::UNSUPPORTED_VERSION,
            "Unsupported protocol version",
            "version",
        );
        e["error"]["data"] = json!({"supported": self.config.versions(), "requested": requested});
        e
    }

    /// The answer to an accepted notification or response: nothing (`reply-to-all`: an error).
    fn accepted(&self) -> Reply {
        if self.config.is(Broken::ReplyToAll) {
            Reply::Message(self.error(Value::Null, -32601, "Method not found", "notification"))
        } else {
            Reply::Accepted
        }
    }

    /// A JSON-RPC error envelope. `detail` is internal and appears only in `leaky` mode.
    fn error(&self, id: Value, code: i64, message: &str, detail: &str) -> Value {
        let mut err = json!({"code": code, "message": message});
        if self.config.is(Broken::Leaky) {
            err["data"] = json!({
                "detail": detail,
                "trace": "Traceback (most recent call last):\n  File \"/srv/witness/server.py\", line 42, in handle"
            });
        }
        json!({"jsonrpc": "2.0", "id": id, "error": err})
    }
}

/// The methods whose 2026-07-28 results carry `ttlMs` and `cacheScope` (both required there).
const CACHEABLE_METHODS: &[&str] = &[
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

/// Ids of the witness's own requests to clients.
static ASKED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A request's envelope, checked: its method and params, its id (`None`: a notification),
/// and the id its errors echo (`null` when the id itself is what is wrong).
struct Envelope {
    method: String,
    params: Map<String, Value>,
    id: Option<Value>,
    echo: Value,
}

enum Outcome {
    /// A request to the client (`sampling/createMessage`) before the tool's answer.
    AskClient,
    Result(Value),
    Error(i64, &'static str),
    Fault(Fault),
    Hang,
    Leak,
}

/// The `lax-envelope` reading: names folded to lower case (last wins), `jsonrpc` forced, bad
/// `params` replaced by `{}` (their names folded too), `result`/`error` beside `method` dropped.
fn loosen_envelope(obj: Map<String, Value>) -> Map<String, Value> {
    /// Member names matched onto the protocol's spelling as go-sdk's readers did: ignoring
    /// case with Unicode's folds (`ſ` is `s`, `K` is `k`: encoding/json, before 1.3.1) and
    /// with trailing NULs dropped (before 1.4.1); the last one wins.
    fn fold(obj: Map<String, Value>, known: &[&str]) -> Map<String, Value> {
        let mut out = Map::new();
        for (k, v) in obj {
            let folded: String = k
                .trim_end_matches('\0')
                .chars()
                .map(|c| match c {
                    '\u{17f}' => 's',
                    '\u{212a}' => 'k',
                    c => c,
                })
                .collect();
            let name = known
                .iter()
                .find(|n| n.eq_ignore_ascii_case(&folded))
                .map_or(k, |n| n.to_string());
            out.insert(name, v);
        }
        out
    }
    const ENVELOPE: &[&str] = &["jsonrpc", "id", "method", "params", "result", "error"];
    const PARAMS: &[&str] = &[
        "name",
        "arguments",
        "protocolVersion",
        "capabilities",
        "clientInfo",
        "_meta",
    ];
    let mut out = fold(obj, ENVELOPE);
    out.insert("jsonrpc".into(), Value::String("2.0".into()));
    if let Some(Value::Number(n)) = out.get("method").cloned() {
        out.insert("method".into(), Value::String(n.to_string()));
    }
    if out.contains_key("method") {
        out.remove("result");
        out.remove("error");
        let params = match out.remove("params") {
            Some(Value::Object(p)) => fold(p, PARAMS),
            _ => Map::new(),
        };
        out.insert("params".into(), Value::Object(params));
    }
    out
}

/// MCP request ids: a string, or an integer within +-(2^53-1).
pub(crate) fn valid_id(v: &Value) -> bool {
    const MAX: i64 = (1 << 53) - 1;
    match v {
        Value::String(_) => true,
        Value::Number(n) => n.as_i64().is_some_and(|i| (-MAX..=MAX).contains(&i)),
        _ => false,
    }
}

fn body_mentions_initialize(body: &[u8]) -> bool {
    body.windows(b"\"initialize\"".len())
        .any(|w| w == b"\"initialize\"")
}

fn random_session_id() -> String {
    use rand::Rng;
    let bytes: [u8; 16] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::methods::resolve_uri;
    use super::*;

    fn witness() -> Witness {
        Witness::new(WitnessConfig::default(), Recorder::default())
    }

    fn initialized() -> Conversation {
        Conversation {
            negotiated: Some(LATEST_VERSION.to_string()),
            batches: false,
            just_initialized: false,
        }
    }

    #[test]
    fn a_session_listens_on_one_stream_unless_broken() {
        let w = witness();
        let id = w.open_session(LATEST_VERSION.to_string());
        let first = w.listen(&id).expect("a first stream");
        let second = w.listen(&id).err();
        assert_eq!(
            second,
            Some(NoStream::Open),
            "a second while the first is open"
        );
        drop(first);
        let again = w.listen(&id).expect("a stream once the first has gone");
        assert_eq!(w.listen("no-such-session").err(), Some(NoStream::Gone));
        assert!(w.close_session(&id));
        let ended = w.listen(&id).err();
        assert_eq!(ended, Some(NoStream::Gone), "an ended session has none");
        drop(again);
        let mut config = WitnessConfig::default();
        config.broken.insert(Broken::GetStreamPerRequest);
        let broken = Witness::new(config, Recorder::default());
        let id = broken.open_session(LATEST_VERSION.to_string());
        let streams: Vec<_> = (0..100).filter_map(|_| broken.listen(&id).ok()).collect();
        assert_eq!(streams.len(), 100);
    }

    #[test]
    fn resources_are_found_the_careless_way() {
        for spelling in [
            "test://secret/key",
            "test://public/../secret/key",
            "test://public/%2e%2E/secret/key",
            "test://%73ecret/key",
            "test://SECRET/key",
            "TEST://secret%2Fkey",
            "test://secret\\key",
        ] {
            assert_eq!(resolve_uri(spelling), "test://secret/key", "{spelling}");
        }
        assert_eq!(resolve_uri("test://../../x"), "test://x");
        assert_ne!(resolve_uri("test://public/readme"), "test://secret/key");
    }

    #[test]
    fn refuses_batches_and_null_ids_without_running_anything() {
        let w = witness();
        let mut c = initialized();
        let batch = br#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_everything"}}]"#;
        assert!(
            matches!(w.handle_body(batch, &mut c), Reply::Refused(e) if e["error"]["code"] == -32600)
        );
        let null_id = br#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"delete_everything"}}"#;
        assert!(matches!(w.handle_body(null_id, &mut c), Reply::Refused(e) if e["id"].is_null()));
        assert!(w.recorder.is_empty());
    }

    #[test]
    fn canary_runs_only_when_called_plainly_and_is_recorded() {
        let w = witness();
        let mut c = initialized();
        let call = br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"delete_everything","arguments":{}}}"#;
        let Reply::Message(m) = w.handle_body(call, &mut c) else {
            panic!("expected a message");
        };
        assert_eq!(m["id"], "a");
        assert!(m.to_string().contains(CANARY_MARKER));
        assert_eq!(w.recorder.since(0).len(), 1);
    }

    #[test]
    fn requests_before_initialize_are_refused() {
        let w = witness();
        let mut c = Conversation::default();
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        assert!(
            matches!(w.handle_body(call, &mut c), Reply::Message(e) if e["error"]["code"] == -32600)
        );
    }
}
