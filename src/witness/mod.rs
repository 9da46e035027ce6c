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
pub mod process;
mod rules;
pub mod sse;
pub mod stdio;

pub use crate::canary::{CANARY_MARKER, CANARY_TOOL};
pub use crate::reading::Personality;
pub use crate::record::Recorder;
pub(crate) use crate::record::{LogReader, WitnessView};

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

/// The witness's one resource template, and what a URI of it starts with.
const NOTES_TEMPLATE: &str = "test://notes{/path*}";
const NOTES_PREFIX: &str = "test://notes/";

/// Whether `path` fills the template's `{/path*}`: one or more comma-separated items in one
/// segment, which (an item may itself hold commas, as `[^/]+` does) is any non-empty text
/// without `/`. Read once, left to right.
fn comma_items(path: &str) -> bool {
    !path.is_empty() && !path.contains('/')
}

/// The same question answered as a backtracking matcher of `[^/]+(?:,[^/]+)*$` does: each item
/// may end at any of its bytes (commas included), and every split is tried before giving up,
/// so a path of n commas that cannot match costs about 2^n steps (`backtracking-matcher`).
fn backtracking_items(path: &[u8]) -> bool {
    fn item_from(path: &[u8], start: usize) -> bool {
        let stop = path[start..]
            .iter()
            .position(|b| *b == b'/')
            .map_or(path.len(), |p| start + p);
        (start + 1..=stop).rev().any(|end| rest_from(path, end))
    }
    fn rest_from(path: &[u8], at: usize) -> bool {
        at == path.len() || (path[at] == b',' && at + 1 < path.len() && item_from(path, at + 1))
    }
    !path.is_empty() && item_from(path, 0)
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

    #[allow(
        clippy::too_many_lines,
        reason = "the JSON-RPC envelope checks of the witness in the order it reports them, each a broken mode may relax"
    )]
    fn handle_object(&self, obj: Map<String, Value>, conv: &mut Conversation) -> Reply {
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
            return invalid("jsonrpc");
        }
        if !id_ok {
            return invalid("id");
        }
        let method = match obj.get("method") {
            None => {
                // A response from the client: well formed ones are accepted and ignored.
                let has_result = obj.contains_key("result");
                let has_error = obj.contains_key("error");
                // A refused response is answered without an id: its id is the client's own.
                let lax = self.config.is(Broken::LaxEnvelope);
                return if (id.is_some() && has_result != has_error) || lax {
                    self.accepted()
                } else {
                    Reply::Refused(self.error(Value::Null, -32600, "Invalid Request", "response"))
                };
            }
            Some(Value::String(m)) => m.clone(),
            Some(_) => return invalid("method"),
        };
        if obj.contains_key("result") || obj.contains_key("error") {
            return invalid("request with result or error");
        }
        let params = match obj.get("params") {
            None => Map::new(),
            Some(Value::Object(p)) => p.clone(),
            Some(Value::Array(_)) if id.is_some() => {
                return Reply::Message(self.error(echo, -32602, "Invalid params", "params array"))
            }
            Some(_) => return invalid("params"),
        };
        let id = match id {
            // `any-id`: a null id makes this a notification that still runs.
            Some(Value::Null) if any_id => None,
            other => other,
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
            if any_id {
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
        let lax = self.config.is(Broken::AnyVersion);
        let meta = params.get("_meta").and_then(Value::as_object);
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
                return Reply::Refused(self.error(
                    echo,
                    -32602,
                    "Invalid params: _meta protocolVersion must be a string",
                    "_meta version",
                ))
            }
        };
        let version = version.as_str();
        let speaks = self.config.speaks(version) && crate::versions::is_modern(version);
        if !speaks && !lax {
            return Reply::Refused(self.unsupported(echo, Some(version)));
        }
        let capabilities = meta.and_then(|m| m.get(crate::versions::META_CAPABILITIES));
        if !capabilities.is_some_and(Value::is_object) && !lax {
            return Reply::Refused(self.error(
                echo,
                -32602,
                "Invalid params: _meta must carry the client capabilities",
                "_meta capabilities",
            ));
        }
        let mut conv = Conversation {
            negotiated: Some(version.to_string()),
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
                "capabilities": self::capabilities(),
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

    /// Run a method. `Err(code)` is a protocol error about the params.
    #[allow(
        clippy::too_many_lines,
        reason = "the witness's method table: one short arm per MCP method it serves"
    )]
    fn call(
        &self,
        method: &str,
        params: &Map<String, Value>,
        conv: &mut Conversation,
    ) -> Result<Outcome, i64> {
        match method {
            "initialize" => {
                let requested = params
                    .get("protocolVersion")
                    .and_then(Value::as_str)
                    .ok_or(-32602)?;
                if !params.get("capabilities").is_some_and(Value::is_object)
                    || !params.get("clientInfo").is_some_and(Value::is_object)
                {
                    return Err(-32602);
                }
                let Some(newest) = self.config.newest_legacy() else {
                    return Ok(Outcome::Error(-32601, "Method not found"));
                };
                // One handshake per conversation: a second initialize may not renegotiate or
                // take over the session (`any-version` lets it).
                if conv.negotiated.is_some() && !self.config.is(Broken::AnyVersion) {
                    return Ok(Outcome::Error(
                        -32600,
                        "Invalid Request: already initialized",
                    ));
                }
                let speaks =
                    self.config.speaks(requested) && !crate::versions::is_modern(requested);
                // `legacy-batch`: agrees to the version that had batches, and allows them.
                let batch_era = self.config.is(Broken::LegacyBatch) && requested == "2025-03-26";
                conv.batches = batch_era;
                let version = if speaks || batch_era || self.config.is(Broken::AnyVersion) {
                    requested.to_string()
                } else {
                    newest.to_string()
                };
                conv.negotiated = Some(version.clone());
                Ok(Outcome::Result(json!({
                    "protocolVersion": version,
                    "capabilities": capabilities(),
                    "serverInfo": {"name": "mcp-gauntlet-witness", "version": env!("CARGO_PKG_VERSION")}
                })))
            }
            "ping" => Ok(Outcome::Result(json!({}))),
            "tools/list" => Ok(Outcome::Result(json!({ "tools": tool_list() }))),
            "tools/call" => {
                let name = params.get("name").and_then(Value::as_str).ok_or(-32602)?;
                let args = match params.get("arguments") {
                    None => Map::new(),
                    Some(Value::Object(a)) => a.clone(),
                    Some(_) => return Err(-32602),
                };
                self.run_tool(name, &args)
            }
            "resources/list" => Ok(Outcome::Result(json!({
                "resources": RESOURCES.iter().map(|(uri, name, _)|
                    json!({"uri": uri, "name": name, "mimeType": "text/plain"})).collect::<Vec<_>>()
            }))),
            "resources/templates/list" => Ok(Outcome::Result(json!({"resourceTemplates": [
                {"uriTemplate": NOTES_TEMPLATE, "name": "notes", "mimeType": "text/plain"}
            ]}))),
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                let uri = params.get("uri").and_then(Value::as_str).ok_or(-32602)?;
                // Like a file server: the URI is resolved before it is looked up.
                let Some((found, _, text)) = RESOURCES
                    .iter()
                    .find(|(u, _, _)| resolve_uri(uri) == resolve_uri(u))
                else {
                    let modern = conv
                        .negotiated
                        .as_deref()
                        .is_some_and(crate::versions::is_modern);
                    return Ok(self.read_note(method, uri, modern));
                };
                let secret = *found == SECRET_RESOURCE;
                if method != "resources/read" {
                    self.recorder.tool(&format!("{method} {found}"), secret);
                    return Ok(Outcome::Result(json!({})));
                }
                self.recorder
                    .tool(&format!("resources/read {found}"), secret);
                let text = if secret {
                    self.canary_ran();
                    self.canary_text()
                } else {
                    text.to_string()
                };
                Ok(Outcome::Result(json!({
                    "contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]
                })))
            }
            "prompts/list" => Ok(Outcome::Result(json!({
                "prompts": PROMPTS.iter().map(|(name, desc)|
                    json!({"name": name, "description": desc})).collect::<Vec<_>>()
            }))),
            "prompts/get" => {
                let name = params.get("name").and_then(Value::as_str).ok_or(-32602)?;
                self.cache_name(name);
                // Prompt names matched ignoring case, as some servers do.
                let Some((found, _)) = PROMPTS.iter().find(|(n, _)| n.eq_ignore_ascii_case(name))
                else {
                    return Ok(Outcome::Error(-32602, "Unknown prompt"));
                };
                let secret = *found == SECRET_PROMPT;
                self.recorder.tool(&format!("prompts/get {found}"), secret);
                let text = if secret {
                    self.canary_ran();
                    self.canary_text()
                } else {
                    "Say hello.".to_string()
                };
                Ok(Outcome::Result(json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": text}}]
                })))
            }
            _ => Ok(Outcome::Error(-32601, "Method not found")),
        }
    }

    /// What the canary answers.
    fn canary_text(&self) -> String {
        self.config
            .canary_text
            .clone()
            .unwrap_or_else(|| CANARY_MARKER.to_string())
    }

    /// The canary's side channel: a line in `--canary-log`, like a real tool's own log.
    fn canary_ran(&self) {
        if let Some(path) = &self.config.canary_log {
            use std::io::Write as _;
            // Best effort: a failed append is not the client's error.
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                let _ = writeln!(f, "{CANARY_TOOL} ran");
            }
        }
    }

    /// A URI of its template (`test://notes/a,b`): the note that names those items; anything
    /// else is not found (-32002 before 2026-07-28, which retired that code for -32602).
    fn read_note(&self, method: &str, uri: &str, modern: bool) -> Outcome {
        self.cache_name(uri);
        let items = uri.strip_prefix(NOTES_PREFIX).filter(|path| {
            if self.config.is(Broken::BacktrackingMatcher) {
                backtracking_items(path.as_bytes())
            } else {
                comma_items(path)
            }
        });
        match items {
            Some(path) if method == "resources/read" => Outcome::Result(json!({
                "contents": [{"uri": uri, "mimeType": "text/plain", "text": format!("notes: {path}")}]
            })),
            Some(_) => Outcome::Result(json!({})),
            None if modern => Outcome::Error(-32602, "Resource not found"),
            None => Outcome::Error(-32002, "Resource not found"),
        }
    }

    fn run_tool(&self, name: &str, args: &Map<String, Value>) -> Result<Outcome, i64> {
        let text = |t: String| {
            Outcome::Result(json!({"content": [{"type": "text", "text": t}], "isError": false}))
        };
        let tool_error = |t: &str| {
            Outcome::Result(json!({"content": [{"type": "text", "text": t}], "isError": true}))
        };
        self.cache_name(name);
        if !TOOLS.iter().any(|(n, _)| *n == name) {
            return Ok(Outcome::Error(-32602, "Unknown tool"));
        }
        self.recorder.tool(name, name == CANARY_TOOL);
        if name == CANARY_TOOL {
            self.canary_ran();
        }
        Ok(match name {
            "echo" => match args.get("text").and_then(Value::as_str) {
                Some(t) => text(t.to_string()),
                None => tool_error("echo needs a string `text`"),
            },
            "add" => match (
                args.get("a").and_then(Value::as_f64),
                args.get("b").and_then(Value::as_f64),
            ) {
                (Some(a), Some(b)) => text(format!("{}", a + b)),
                _ => tool_error("add needs numbers `a` and `b`"),
            },
            CANARY_TOOL => text(self.canary_text()),
            "fault_hang" => Outcome::Hang,
            "fault_oversize" => text("x".repeat(2 * 1024 * 1024)),
            "fault_empty" => Outcome::Fault(Fault::Empty),
            "fault_garbage" => Outcome::Fault(Fault::Garbage),
            "fault_close" => Outcome::Fault(Fault::Close),
            "fault_leak" => Outcome::Leak,
            "ask_client" => Outcome::AskClient,
            _ => tool_error("unknown"),
        })
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

enum Outcome {
    /// A request to the client (`sampling/createMessage`) before the tool's answer.
    AskClient,
    Result(Value),
    Error(i64, &'static str),
    Fault(Fault),
    Hang,
    Leak,
}

/// Tools and their one-line descriptions.
pub(crate) const TOOLS: &[(&str, &str)] = &[
    ("echo", "Returns `text` unchanged."),
    ("add", "Returns a + b."),
    (
        CANARY_TOOL,
        "The canary: denied by the test policy; if it ever runs, it says so in its answer.",
    ),
    ("fault_hang", "Never answers."),
    ("fault_oversize", "Answers with a 2 MiB result."),
    ("fault_empty", "Answers with an empty body."),
    ("fault_garbage", "Answers with bytes that are not JSON."),
    ("fault_close", "Drops the connection without answering."),
    (
        "fault_leak",
        "Answers with an error whose message and data hold a stack trace, a path and a token.",
    ),
    (
        "ask_client",
        "Sends the client a sampling/createMessage request, then answers without waiting for it (2026-07-28: asks for a sample in an input_required result, and completes on the retry).",
    ),
];

/// `ask_client` in 2026-07-28, where a server asks the client only through its answer (a multi
/// round-trip request): the first round is an `input_required` result asking the client to
/// sample; the retry, carrying `inputResponses`, completes. A client that did not declare
/// `sampling` is not asked (the tool reports that it could not ask).
fn ask_for_input(params: &Map<String, Value>, capabilities: Option<&Value>) -> Value {
    let text = |t: &str| {
        json!({"content": [{"type": "text", "text": t}], "isError": false,
                                 "resultType": "complete"})
    };
    if params.get("inputResponses").is_some_and(Value::is_object) {
        return text("the client's input was received");
    }
    if capabilities.and_then(|c| c.get("sampling")).is_none() {
        let mut r = text("the client cannot sample");
        r["isError"] = json!(true);
        return r;
    }
    json!({
        "resultType": "input_required",
        "inputRequests": {"sample": {"method": "sampling/createMessage", "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Say something."}}],
            "maxTokens": 16}}},
        "requestState": "witness-round-1"
    })
}

/// The witness's capabilities (legacy `initialize` and modern `server/discover`).
fn capabilities() -> Value {
    json!({
        "tools": {"listChanged": false},
        "resources": {"subscribe": true, "listChanged": false},
        "prompts": {"listChanged": false}
    })
}

/// The resource a gate's policy denies (`fixtures/gate/witness-policy.json`): reading it is the
/// canary, and its text is the canary's.
pub(crate) const SECRET_RESOURCE: &str = "test://secret/key";
/// The prompt the policy does not allow: getting it is the canary.
pub(crate) const SECRET_PROMPT: &str = crate::canary::DENIED_PROMPT;

/// Resources: URI, name, text.
pub(crate) const RESOURCES: &[(&str, &str, &str)] = &[
    ("test://public/readme", "readme", "A public text."),
    (SECRET_RESOURCE, "key", ""),
];

/// Prompts and their descriptions.
pub(crate) const PROMPTS: &[(&str, &str)] = &[
    ("greet", "A greeting."),
    (
        SECRET_PROMPT,
        "The canary prompt: not allowed by the test policy.",
    ),
];

/// How the witness finds a resource, like a careless file server: every escape decoded, `.`
/// and `..` segments resolved, case folded. A gate must judge a URI the way its downstream
/// will read it, or refuse it.
fn resolve_uri(uri: &str) -> String {
    let bytes = uri.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(v)) => {
                decoded.push(v);
                i += 3;
            }
            (b'\\', _) => {
                decoded.push(b'/');
                i += 1;
            }
            (b, _) => {
                decoded.push(b);
                i += 1;
            }
        }
    }
    let text = String::from_utf8_lossy(&decoded).to_ascii_lowercase();
    let (head, path) = match text.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest.to_string()),
        None => (String::new(), text),
    };
    let mut out: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "." => {}
            ".." => {
                // Like a file server's path: the authority is just the first directory.
                out.pop();
            }
            s => out.push(s),
        }
    }
    head + &out.join("/")
}

fn tool_list() -> Vec<Value> {
    TOOLS
        .iter()
        .map(|(name, desc)| {
            let schema = match *name {
                "echo" => json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
                "add" => json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}),
                _ => json!({"type": "object", "properties": {}}),
            };
            json!({"name": name, "description": desc, "inputSchema": schema})
        })
        .collect()
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
mod template_tests {
    use super::{backtracking_items, comma_items};

    #[test]
    fn both_matchers_agree_on_what_matches() {
        for path in [
            "a", "a,b", "a,b,c", "", "a,", ",a", "a//b", "a/b", "a,,b", "a,b/x",
        ] {
            assert_eq!(
                comma_items(path),
                backtracking_items(path.as_bytes()),
                "{path:?}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
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
