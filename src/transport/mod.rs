//! Transports: how a case's bytes reach an endpoint and what comes back.
//!
//! `http` and `stdio` are the wire clients; `exchange` runs one case over one of them (handshake,
//! the case's bytes, the alive probe) and returns an [`Observation`], the transport-neutral record
//! that `verdict/` judges.
//!
//! **Architecture invariant:** nothing here decides pass or fail; an Observation only says what
//! was seen.

pub mod exchange;
pub mod http;
mod pacing;
pub mod procfs;
pub(crate) mod sse;
pub mod stdio;
pub mod tls;

use serde_json::Value;
use std::time::Duration;

/// Why an exchange could not be carried out. Kinds matter, text does not.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    #[error("not a target this transport can reach: {0}")]
    BadTarget(String),
    #[error("cannot connect")]
    Connect(#[source] std::io::Error),
    #[error("cannot start the server process")]
    Spawn(#[source] std::io::Error),
    #[error("deadline passed waiting for the {0}")]
    Timeout(&'static str),
    #[error("the connection closed before a response")]
    ClosedWithoutResponse,
    #[error("the response head is larger than 64 KiB")]
    HeadTooLarge,
    #[error("the response is not valid HTTP/1.1")]
    MalformedResponse,
    #[error("i/o error")]
    Io(#[source] std::io::Error),
    #[error("the MCP handshake failed: {0}")]
    Handshake(String),
    #[error("the TLS handshake failed")]
    Tls(#[source] std::io::Error),
    #[error("cannot set up TLS")]
    TlsSetup(#[source] reference_gate::tls::TlsError),
}

impl TransportError {
    pub(crate) fn is_timeout(&self) -> bool {
        matches!(self, TransportError::Timeout(_))
    }
}

/// How the exchange for the case ended.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Ending {
    /// An answer (complete, or as much as the caps allowed) arrived.
    #[default]
    Answered,
    /// Nothing came back before the deadline.
    TimedOut,
    /// The connection closed, or the process exited, without an answer.
    Closed,
    /// The request could not be sent at all (connect or spawn failed).
    Unreachable(String),
}

/// The HTTP layer of an answer.
#[derive(Debug, Clone, Default)]
pub struct HttpSeen {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub content_type: Option<String>,
    pub body_len: usize,
    pub truncated: bool,
    pub timed_out: bool,
    pub cut_short: bool,
    /// Body bytes handed to the connection when the answer was complete.
    pub body_sent: u64,
    /// When the answer was complete, from the start of the exchange.
    pub answered_after: Duration,
}

/// Everything seen for one case on one transport: what the runner sent, what came back, and
/// what the case left behind.
#[derive(Debug, Clone)]
pub struct Observation {
    pub transport: crate::case::TransportKind,
    pub sent: Sent,
    pub answer: Answer,
    pub after: After,
    pub elapsed: Duration,
}

/// What the runner sent for the case (or why it sent nothing), as it read its own bytes: the
/// request facts both transports note once and the judge reads.
#[derive(Debug, Clone, Default)]
pub struct Sent {
    /// The id of the case's request, when its body is a JSON object with one.
    pub id: Option<Value>,
    /// The id a server could detect in the case's body (see [`crate::reading::detectable_id`]):
    /// an error may echo it instead of null.
    pub detectable_id: Option<crate::reading::DetectedId>,
    /// The id only a reader that repairs what is not JSON finds in the case's body (see
    /// [`crate::reading::repaired_id`]).
    pub repaired_id: Option<Value>,
    /// Whether the plain readings of the case's body disagree (see [`crate::reading::ambiguous`]).
    pub ambiguous: bool,
    /// Whether the case's request was a request (has an id), not a notification.
    pub expects_response: bool,
    /// Whether the runner could read the case's body as one JSON object (else its id is unknown).
    pub readable: bool,
    /// The case's body read as a JSON-RPC batch (a non-empty array), when it is one: what a
    /// lane whose version takes batches answers per member.
    pub batch: Option<BatchSent>,
    /// The JSON-RPC method of the case's message, when its body is an object with one.
    pub method: Option<String>,
    /// How long the case's body was (lines and bytes), when the runner could hold it: a parser
    /// position within it only points into what the client itself sent.
    pub extent: Option<Extent>,
    /// The first bytes of the case's body and its whole length, for failure messages (what
    /// was sent, beside what came back).
    pub prefix: Vec<u8>,
    pub len: u64,
    /// stdio: the runner closed the process's input after the case's bytes (`close_input`).
    pub input_closed: bool,
    /// HTTP: the `Accept` header the case's request carried, if any.
    pub accept: Option<String>,
    /// Ids of requests in the case's body that are, in every reading of the body that holds
    /// them (strict, duplicate names first or last wins, lenient, case-insensitive), a
    /// `tools/call` of the denied tool: a successful result for one of them means it ran.
    pub denied_ids: Vec<Value>,
    /// HTTP, modern lanes: whether the runner sent an `Mcp-Method` header (it mirrors one only
    /// from a body it can read a method in).
    pub mcp_method_header: bool,
    /// The placeholder values the exchange learned from the target and filled in the case's
    /// request with (`host`, `path`, the negotiated `protocol_version`, `session_id`, the first
    /// client's mark): the judge reads the case's expectations with the same values.
    pub learned: Vec<(&'static str, String)>,
    /// The `_meta` the case's request carried as the runner gave it (a modern lane's, or the
    /// `{{meta}}` a case wrote), when it carried one: what a gate must forward with it.
    pub meta: Option<Value>,
    /// Setup failed (handshake); the case was not sent.
    pub setup_error: Option<String>,
    /// What the exchange learned makes the case not apply to this target (a series that needs
    /// a resource template, on a server that lists none): the trial is shown as not run, why.
    pub inapplicable: Option<String>,
}

/// What came back for the case.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    /// HTTP only.
    pub http: Option<HttpSeen>,
    /// JSON values received for the case: the JSON body, SSE `data` values, stdout lines.
    pub messages: Vec<Value>,
    /// Output that is not a JSON value where one was due (stdout lines, 2xx bodies, SSE data),
    /// first bytes of each.
    pub garbage: Vec<Vec<u8>>,
    /// The first bytes of the answer, for failure messages.
    pub prefix: Vec<u8>,
    /// All answer text that the leak and canary oracles scan (lossy UTF-8, bounded).
    pub scan_text: String,
    pub ending: Ending,
    /// HTTP: answers that came after the first on the same connection (a request smuggled
    /// behind the case's own was served).
    pub trailing_answers: Vec<TrailingAnswer>,
    /// A `clients` case: every client's mark and what each of the others saw (the first
    /// client's answer is this observation's own).
    pub clients: Option<ClientsSeen>,
    /// A series case: what the whole series did (its first step's answer is this
    /// observation's own).
    pub series: Option<Box<SeriesSeen>>,
    /// HTTP+SSE (2024-11-05): the session's stream and the POST of the case.
    pub sse: Option<SseSeen>,
}

/// What the case left behind: whether the target still answers, what reached the witness, and
/// what the target's process and side channel showed.
#[derive(Debug, Clone, Default)]
pub struct After {
    /// `Some(true)`: a ping after the case answered. `None`: not probed.
    pub alive: Option<bool>,
    /// What the alive probe saw when it failed.
    pub alive_detail: Option<String>,
    /// Filled in by the runner, not the transport: the HTTP target stopped answering with this
    /// case, and what the runner did about it (restarted it, or will not run the lane's later
    /// trials). The judge fails the trial with it.
    pub target_down: Option<String>,
    /// The witness's record for this case, when the runner can read one.
    pub witness: Option<Vec<crate::record::Event>>,
    /// stdio: the process's exit, if it exited during the case.
    pub exited: Option<String>,
    /// stdio: the tail of stderr (only informative, MCP-STDIO-04).
    pub stderr_tail: Vec<u8>,
    /// stdio: how much the server process's peak resident memory (VmHWM) grew from just before
    /// the case's bytes to the end of the case, in KiB, when /proc tells.
    pub memory_growth_kib: Option<u64>,
    /// What the target appended to `--canary-log` during the case (the denied tool's side
    /// channel), when a log is watched.
    pub canary_log: Option<String>,
}

/// A case's body that is a non-empty JSON array: its members as JSON-RPC 2.0 section 6 counts
/// them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchSent {
    /// The ids of its requests (members with a method and a non-null id), in order: each gets
    /// one response.
    pub ids: Vec<Value>,
    /// How many of its members are notifications (a method, no id): none gets a response.
    pub notifications: usize,
    /// How many are not a request or notification (a number, a nested array, a null id): each
    /// gets an error with a null id.
    pub invalid: usize,
}

impl BatchSent {
    /// The batch a JSON value is, if it is a non-empty array.
    pub fn of(value: &Value) -> Option<BatchSent> {
        let items = value.as_array().filter(|items| !items.is_empty())?;
        let mut batch = BatchSent::default();
        for item in items {
            let method = item.get("method").is_some_and(Value::is_string);
            match item.get("id") {
                _ if !item.is_object() || !method => batch.invalid += 1,
                None => batch.notifications += 1,
                // MCP gives no request a null id: such a member is refused, id null.
                Some(Value::Null) => batch.invalid += 1,
                Some(id) => batch.ids.push(id.clone()),
            }
        }
        Some(batch)
    }
}

/// What the HTTP+SSE transport showed of one case beside its answer.
#[derive(Debug, Clone, Default)]
pub struct SseSeen {
    /// The stream's `endpoint` event, as sent.
    pub endpoint: String,
    /// The case's POST, when the server accepted it (2xx): its answer then came on the stream.
    pub post: Option<HttpSeen>,
    /// Events on the stream that were neither messages nor the first `endpoint` (`event: data`).
    pub stray_events: Vec<String>,
    /// The stream ended while the runner read the case's answer: closed, or why it broke.
    pub stream_ended: Option<String>,
    /// `sse.stream: unread`: what became of the POSTs sent while the stream was not read.
    pub unread: Option<UnreadSeen>,
    /// The endpoint named another origin: nothing was posted (the runner posts nowhere else).
    pub elsewhere: bool,
}

/// The POSTs of an `unread` case: sent one after another on a session whose stream the client
/// does not read, until one is not accepted.
#[derive(Debug, Clone, Default)]
pub struct UnreadSeen {
    /// The POSTs the case asked for, and how many the server accepted (2xx).
    pub asked: u32,
    pub accepted: u32,
    /// How the first POST not accepted was answered (an HTTP status, left waiting, the
    /// connection refused or closed), when one was.
    pub stopped_by: Option<String>,
    /// The case's time ran out before every POST was sent.
    pub cut: bool,
    /// The size of the request each POST carried.
    pub bytes: usize,
    /// The target's resident memory (KiB) before the POSTs and after them, the stream still
    /// unread, when its process is known (`--serve`, `--pid`).
    pub memory_kib: Option<(u64, u64)>,
}

/// What a series sent, got and cost the target.
#[derive(Debug, Clone, Default)]
pub struct SeriesSeen {
    /// The steps the case asked for.
    pub count: u32,
    /// The steps sent.
    pub sent: u32,
    /// The first step answered with a status in the case's `cap` set, and that status: the
    /// series ended there.
    pub capped_at: Option<(u32, u16)>,
    /// The series' budget ran out before its count (and no cap came).
    pub cut: bool,
    /// One example of each kind of answer, the first step's first.
    pub kinds: Vec<StepKind>,
    /// Whether the target's process was known (`--serve`, `--pid`): without it memory, CPU and
    /// descriptors are not observed.
    pub watched: bool,
    /// The process before the first step, while the steps ran (with the steps done by then),
    /// after the last, and after its sessions were closed.
    pub before: Option<crate::transport::procfs::ProcSample>,
    pub samples: Vec<(u32, crate::transport::procfs::ProcSample)>,
    pub after: Option<crate::transport::procfs::ProcSample>,
    pub after_close: Option<crate::transport::procfs::ProcSample>,
    /// How long each `ping` on the other connection took (ms), those that got no answer at
    /// all, and those refused (an HTTP answer without a result, a refused handshake).
    pub pings: Vec<u64>,
    pub ping_failures: Vec<String>,
    pub ping_refusals: Vec<String>,
    /// The status a ping in the first session a step opened got after the series: 404 says
    /// the server let it go (evicted or expired), so sessions are bounded.
    pub first_session_answer: Option<u16>,
    /// Sessions closed with `DELETE` after the series.
    pub sessions_closed: usize,
    /// `close_each`: how each step's `DELETE` was answered (HTTP status, 0 for no answer),
    /// with how many got it.
    pub deletes: std::collections::BTreeMap<u16, u32>,
    /// `series.baseline`: the plain request's own series, sent first.
    pub baseline: Option<BaselineSeen>,
    /// Over stdio: the process has one client, so there is no other connection to ping.
    pub one_client: bool,
    /// `series.hold`: what became of the held connections.
    pub held: Option<HeldSeen>,
    pub elapsed: Duration,
}

/// What became of a series' held connections (`series.hold`).
#[derive(Debug, Clone, Default)]
pub struct HeldSeen {
    pub trickle: Option<crate::case::Trickle>,
    pub every_ms: u64,
    pub for_ms: u64,
    /// Connections that could not be opened, were still open when the runner let them go, or
    /// that the server closed (the earliest this long after the hold began).
    pub not_opened: u32,
    pub held_to_the_end: u32,
    pub closed_by_server: u32,
    pub first_closed_after: Option<Duration>,
    /// Held connections answered with an event stream that was still open when let go.
    pub streams_open: u32,
    /// The statuses the server answered held connections with, counted.
    pub answers: std::collections::BTreeMap<u16, u32>,
    /// The process with every connection still held.
    pub held_sample: Option<crate::transport::procfs::ProcSample>,
}

/// What a series' baseline (a plain request of about the same size) cost the same process.
#[derive(Debug, Clone, Default)]
pub struct BaselineSeen {
    pub sent: u32,
    /// CPU over its steps (ms), when the process was read.
    pub cpu_ms: Option<u64>,
    /// How its first step was answered (the kind's words), and its body's size.
    pub answer: String,
    pub bytes: Option<u64>,
    pub elapsed: Duration,
}

impl BaselineSeen {
    /// What a baseline's own series saw and the kinds of answer it got, the first step's first.
    pub(crate) fn of(seen: &SeriesSeen, kinds: &[StepKind]) -> BaselineSeen {
        let first = kinds.first();
        BaselineSeen {
            sent: seen.sent,
            cpu_ms: seen
                .before
                .zip(seen.after)
                .map(|(b, a)| a.cpu_ms.saturating_sub(b.cpu_ms)),
            answer: first.map(|k| k.key.clone()).unwrap_or_default(),
            bytes: first
                .and_then(|k| k.observation.sent.extent)
                .map(|e| e.bytes as u64),
            elapsed: seen.elapsed,
        }
    }
}

/// One kind of answer in a series: how many steps got it and the first one's observation.
#[derive(Debug, Clone)]
pub struct StepKind {
    /// What the kind is (status, error code or result, ending), in words.
    pub key: String,
    pub step: u32,
    pub count: u32,
    /// Its status is in the case's `cap` set.
    pub capped: bool,
    pub observation: Box<Observation>,
}

/// What the clients of a `clients` case sent and got.
#[derive(Debug, Clone, Default)]
pub struct ClientsSeen {
    /// Each client's `{{client}}`, the first client's first: unique in the trial, none a part
    /// of another.
    pub marks: Vec<String>,
    /// The second client's answer onwards.
    pub others: Vec<ClientAnswer>,
}

/// One further client's answer in a `clients` case.
#[derive(Debug, Clone)]
pub struct ClientAnswer {
    /// Its handshake was refused or failed: it sent nothing else.
    pub setup_error: Option<String>,
    pub ending: Ending,
    pub status: Option<u16>,
    /// The JSON-RPC messages in its answer.
    pub messages: Vec<Value>,
    /// Its answer's body (lossy UTF-8, bounded), where another client's mark would show.
    pub text: String,
}

/// The size of a body the runner sent: its lines (a body without a newline is one line) and bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub lines: usize,
    pub bytes: usize,
}

impl Extent {
    pub fn of(bytes: &[u8]) -> Extent {
        Extent {
            lines: bytes.iter().filter(|b| **b == b'\n').count() + 1,
            bytes: bytes.len(),
        }
    }
}

/// A further HTTP response read on a connection after the first one.
#[derive(Debug, Clone, Default)]
pub struct TrailingAnswer {
    pub status: u16,
    /// JSON-RPC messages in its body (JSON or SSE).
    pub messages: Vec<Value>,
}

impl Observation {
    pub fn new(transport: crate::case::TransportKind) -> Observation {
        Observation {
            transport,
            sent: Sent::default(),
            answer: Answer::default(),
            after: After::default(),
            elapsed: Duration::ZERO,
        }
    }

    /// The trial found its target gone before it could send the case, or with it: unreachable,
    /// or unable to open a session.
    pub(crate) fn found_gone(&self) -> bool {
        matches!(self.answer.ending, Ending::Unreachable(_)) || self.sent.setup_error.is_some()
    }
}
