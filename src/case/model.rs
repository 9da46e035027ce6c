//! The case file model: the JSON format of docs/case-format.md as Rust types.

use crate::versions::Version;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One value or a list of values: every `expect` field is an acceptable set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T> OneOrMany<T> {
    pub fn as_slice(&self) -> &[T] {
        match self {
            OneOrMany::One(v) => std::slice::from_ref(v),
            OneOrMany::Many(v) => v,
        }
    }
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Must,
    Should,
    Info,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// Streamable HTTP.
    Http,
    Stdio,
    /// HTTP+SSE, the transport of 2024-11-05: a GET event stream and POSTs to the URL its
    /// `endpoint` event names.
    Sse,
}

impl TransportKind {
    pub const ALL: [TransportKind; 3] = [
        TransportKind::Http,
        TransportKind::Stdio,
        TransportKind::Sse,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Http => "http",
            TransportKind::Stdio => "stdio",
            TransportKind::Sse => "sse",
        }
    }
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    #[default]
    Server,
    Gate,
}

impl Profile {
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Server => "server",
            Profile::Gate => "gate",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SessionMode {
    None,
    #[default]
    Initialized,
}

/// What the runner's alive probe after a case asks (`alive_probe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AliveProbe {
    /// The endpoint's own liveness request (`ping`; `server/discover` in 2026-07-28).
    #[default]
    Ping,
    /// That, then a call of the allowed tool, which must come back with a result.
    Downstream,
}

impl AliveProbe {
    fn is_ping(&self) -> bool {
        *self == AliveProbe::Ping
    }
}

/// What becomes of the session's stream before the case's POST, over HTTP+SSE (`sse`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SseSpec {
    #[serde(default)]
    pub stream: SseStream,
    /// With `"stream": "unread"`: how many times the request is POSTed while the stream is not
    /// read (1 to 5000; default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 5000))]
    pub posts: Option<u32>,
}

/// The state of the session's stream when the case's bytes are POSTed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SseStream {
    /// Open and read (as for every case without `sse`).
    #[default]
    Open,
    /// Closed by the client (after the handshake): the case's bytes then go to the message URL
    /// of a session whose stream is gone, and the POST's own answer is the case's.
    Closed,
    /// No longer read by the client (after the handshake), and left open: the request is POSTed
    /// `posts` times, one after another, until one is not accepted; a server that takes them all
    /// queues their answers for a client that reads none (judged with the case's resources).
    Unread,
}

/// How a series repeats its request (`series`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SeriesSpec {
    /// How many times the request is sent at most (1 to 20000).
    #[schemars(range(min = 1, max = 20000))]
    pub count: u32,
    /// Steps sent before memory is measured (the slope is taken after them): caches filling,
    /// allocators settling.
    #[serde(default)]
    pub warmup: u32,
    /// How many connections send steps at once (1 to 16).
    #[serde(default = "one_connection")]
    #[schemars(range(min = 1, max = 16))]
    pub connections: u8,
    /// Steps per second at most, over all connections (none: as fast as the server answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100000))]
    pub rate: Option<u32>,
    /// How long the whole series may take, in milliseconds (at most 600000; default 300000):
    /// what was sent by then is judged, and the findings say it was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 600000))]
    pub budget_ms: Option<u64>,
    /// Answers that end the series as a bound the protocol allows (a session cap's 503, a rate
    /// limit's 429): the server refused to keep more, which is what the series looks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<OneOrMany<StatusPattern>>,
    /// After the series, the runner closes every session a step opened (`DELETE` with its id),
    /// so the next case meets the server as it was; a server that frees nothing on `DELETE`
    /// shows it in the memory read after.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub close_sessions: bool,
    /// Each session a step opens is closed with `DELETE` right after the step's answer, so
    /// the series asks whether ending a session frees what it held: every `DELETE` must be
    /// accepted (2xx), the first session must answer 404 afterwards, and memory is judged
    /// (its 404 is no bound here). A server that refuses `DELETE` with 405 (it may) makes the
    /// case not applicable.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub close_each: bool,
    /// What the runner asks the server before the series, for the steps to use: `resource-
    /// template` sends `resources/templates/list` and gives `{{template_prefix}}`, the literal
    /// text of its first template up to its first variable (one with an exploded variable,
    /// `{/path*}`, is preferred). A server that lists none makes the case not applicable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discover: Option<Discover>,
    /// A request of about the same size that costs nothing special (plain text where the
    /// case's request has escapes, one member where it has thousands): sent first, `count`
    /// times, as a series of its own, so CPU is judged against what the same server spends on
    /// a plain request (`expect.series.cpu_ratio`), not against a clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Box<RequestSpec>>,
    /// Instead of sending the request `count` times, hold `count` connections open the slow way
    /// (the `connections/` family): each sends the request, or part of it, as `hold.trickle`
    /// says, and is held for `hold.for_ms` while another connection pings; then the request is
    /// sent whole on a fresh connection (that answer is the one judged), the held connections
    /// are closed, and the process is read again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<HoldSpec>,
}

/// How the connections of a `series.hold` are held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HoldSpec {
    pub trickle: Trickle,
    /// A byte every this many milliseconds (`headers`, `body`; 10 to 10000, default 250).
    #[serde(default = "trickle_every")]
    #[schemars(range(min = 10, max = 10000))]
    pub every_ms: u64,
    /// How long the connections are held, in milliseconds (100 to 60000).
    #[schemars(range(min = 100, max = 60000))]
    pub for_ms: u64,
    /// `idle` only: each connection is opened, and sends its request, once the one before has
    /// the head of its answer (after one wait of half a second in vain, or once `for_ms` is up,
    /// the rest without waiting), as a client opening streams one after another does; by
    /// default they are all opened first and send at once. What is judged is then a server's
    /// bound, not whether its check and its bookkeeping race.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_turn: bool,
}

/// What a held connection sends (`series.hold.trickle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Trickle {
    /// The request line and headers, then a header line that never ends, a byte at a time:
    /// the head is never finished (a slowloris client).
    Headers,
    /// The whole head, then the body a byte at a time, its last byte never sent.
    Body,
    /// The whole request, its answer read, then nothing: an idle keep-alive connection.
    Idle,
}

fn trickle_every() -> u64 {
    250
}

/// What a series learns from the server before its first step (`series.discover`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Discover {
    ResourceTemplate,
}

fn one_connection() -> u8 {
    1
}

/// What a whole series may cost (`expect.series`). Memory and CPU are read from the target's
/// process (`--serve`, `--pid`, a stdio server); without one they are "not observed".
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SeriesExpect {
    /// Resident memory the target may keep per step, in bytes: the least-squares slope of its
    /// memory over the steps after the warm-up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retained_bytes_per_step: Option<u64>,
    /// CPU time the target may spend per step, in microseconds (over the whole series).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_step: Option<u64>,
    /// The slowest answer a `ping` on another connection may take while the series runs, in
    /// milliseconds: a server whose event loop one client's input blocks fails it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ping_ms: Option<u64>,
    /// Open descriptors the target may gain over the series.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fds_growth: Option<u64>,
    /// CPU per step may be at most this many times the baseline's (`series.baseline`), which
    /// is counted as at least 100 µs a step (the kernel counts CPU in 10 ms ticks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2, max = 1000))]
    pub cpu_ratio: Option<u32>,
    /// Event streams the held connections (`series.hold`) may have open at once when the runner
    /// lets them go: those answered 2xx `text/event-stream` whose stream had not ended. A server
    /// that gives every `GET` on one session a stream of its own, without a bound, fails it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_streams: Option<u32>,
}

/// An inclusive range of protocol versions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VersionRange {
    #[serde(default)]
    pub from: Option<Version>,
    #[serde(default)]
    pub to: Option<Version>,
}

impl VersionRange {
    pub fn contains(&self, version: Version) -> bool {
        self.from.is_none_or(|f| version >= f) && self.to.is_none_or(|t| version <= t)
    }
}

/// What an authorization case needs to know of the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AuthNeed {
    Token,
    /// A good token that is a JWT (the bad ones are made from it).
    Jwt,
    Issuer,
    Scope,
}

/// Who an `identity/` case says is calling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Caller {
    /// A principal no gate knows.
    Unknown,
    /// No identity at all.
    Missing,
    /// The granted principal with its letters in the other case (`BOB`).
    GrantedOtherCase,
    /// The granted principal between spaces (` bob `).
    GrantedPadded,
    /// The granted principal in fullwidth letters (NFKC folds them to it).
    GrantedFullwidth,
    /// The run's principal where identity is read, the granted one in every other place.
    GrantedInASecondPlace,
}

/// The call mapping a case is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum MappingNeed {
    MetaTool,
}

/// What a `WWW-Authenticate` answer must hold: a `Bearer` challenge (RFC 6750 section 3), and
/// of its parameters what is given here.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChallengeSpec {
    /// The acceptable `error` values; `"none"` stands for no `error` parameter.
    #[serde(default)]
    pub error: Option<OneOrMany<String>>,
    /// Whether it must carry `resource_metadata` (the Protected Resource Metadata URL).
    #[serde(default)]
    pub resource_metadata: Option<bool>,
    /// Whether it must name the `scope` a call needs.
    #[serde(default)]
    pub scope: Option<bool>,
}

/// A case as written in its file.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    pub title: String,
    pub requirements: Vec<String>,
    /// Published advisories the case reproduces: `CVE-YYYY-N`, `GHSA-xxxx-xxxx-xxxx`,
    /// `RUSTSEC-YYYY-NNNN`, or an upstream issue or pull request (`owner/repo#N`) where there is
    /// no id; each one listed in `cases/advisories.json`. A run names them beside a failure and
    /// ends with the advisories the target reproduced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub advisories: Vec<String>,
    #[serde(default = "default_level")]
    pub level: Level,
    #[serde(default)]
    pub transports: Option<Vec<TransportKind>>,
    #[serde(default)]
    pub profiles: Option<Vec<Profile>>,
    #[serde(default)]
    pub versions: Option<VersionRange>,
    #[serde(default)]
    pub session: SessionMode,
    /// The case is about sessions (what a server that issues `Mcp-Session-Id` must do without
    /// one, with an unknown one, or before `initialize`): over HTTP it applies only to targets
    /// that keep sessions, and a stateless target's trials are shown as ignored.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stateful: bool,
    /// The case is about servers without sessions (what a target that issues no
    /// `Mcp-Session-Id` must answer): over HTTP it applies only to such targets, and a target
    /// that keeps sessions shows its trials as ignored. Not with `stateful`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stateless: bool,
    /// An authorization case: what the run must know of the endpoint's authorization for it to
    /// apply (otherwise its trials are shown as ignored). `token`: a good token
    /// (`--auth-token`, or an issuer key); `jwt`: a good token that is a JWT, which bad ones are
    /// derived from; `issuer`: the issuer's key, to mint bad tokens;
    /// `scope`: a good token and a tool its scopes do not cover (`--auth-scoped-tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthNeed>,
    /// A case written for one kind of call mapping (`meta-tool`: a gate that exposes its tools
    /// through a meta-tool): it spells the meta-tool's arguments itself (`{{meta_tool}}`,
    /// `{{meta_tool_key}}`, `{{meta_arguments_key}}`, `{{meta_arguments_open}}`) and applies
    /// only when the run names one (`--meta-tool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapping: Option<MappingNeed>,
    /// A case about who calls, for gates that decide per principal: what the request presents
    /// where the gate reads identity (`--identity`) instead of the run's `--principal`. It
    /// applies only with an identity given (and the spellings of a granted principal only with
    /// `--granted-principal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<Caller>,
    /// HTTP: the request is sent by this many clients at once (2 to 16), each on its own
    /// connection and, where the lane has them, its own handshake and session, each writing
    /// `{{client}}` as its own mark; all use the ids the case writes, as SDK clients' ids
    /// collide. Each must get its own answer and nothing of another's (the `crossed` check);
    /// the first client's answer is judged by `expect` as any case's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2, max = 16))]
    pub clients: Option<u8>,
    /// The version the runner's `initialize` asks for, when not the lane's (a legacy lane only):
    /// for cases about what a server agrees to.
    #[serde(default)]
    pub handshake_version: Option<Version>,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// What the alive probe after the case asks. `ping` (the default; `server/discover` in
    /// 2026-07-28) shows the endpoint itself still answers. `downstream`, for a case that may
    /// break what is behind a gate: the probe then also calls the allowed tool (`echo`, through
    /// the call mapping), and the endpoint counts as alive only when that call is answered with
    /// a result, so a gate that answers on its own but forwards nothing any more is dead.
    #[serde(default, skip_serializing_if = "AliveProbe::is_ping")]
    pub alive_probe: AliveProbe,
    /// The request is sent many times over (a series), to see what accumulates: sessions never
    /// expired, state kept per name asked, CPU spent per input. Each step writes `{{step}}` and
    /// `{{fresh}}` anew; `expect` judges every step's answer, `expect.series` the whole series.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<SeriesSpec>,
    /// HTTP+SSE only (its `transports` are `["sse"]`): the session's stream before the case's
    /// POST (`{"stream": "closed"}`: closed by the client first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sse: Option<SseSpec>,
    pub request: RequestSpec,
    pub expect: Expect,
    #[serde(default)]
    pub strict: Option<Expect>,
    /// What a good endpoint answers where the rules the case cites leave a choice (405 over 404
    /// for a PUT, 400 or 413 over 500 for input too deep to read): narrowing `expect`, a miss is
    /// a warning in a default run; every narrowed set (`strict`, `gate`) includes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefer: Option<Expect>,
    /// The set in force under the gate profile (narrowing `expect`), when it differs from
    /// `strict`: the reference gate's error table differs from plain JSON-RPC (malformed input,
    /// parse errors included, is `{{code_malformed}}`).
    #[serde(default)]
    pub gate: Option<Expect>,
    /// What 2026-07-28 and later require where it differs (unknown methods are 404, header
    /// mismatches -32020…): its keys replace the others' in a modern lane, after any narrowing.
    #[serde(default)]
    pub modern: Option<Expect>,
}

fn default_level() -> Level {
    Level::Must
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestSpec {
    /// The HTTP method (POST when none is named): an HTTP token of letters, digits, `-` and
    /// `_`, refused as the case is read when it is not one.
    #[serde(default, with = "method_token")]
    #[schemars(with = "Option<String>")]
    pub method: Option<hyper::Method>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, Option<String>>,
    #[serde(default)]
    pub body: Option<BodySpec>,
    #[serde(default)]
    pub chunked: bool,
    /// HTTP: compress the body (after placeholders) with this content coding and send
    /// `Content-Encoding` naming it (a `headers` entry can override or remove the header).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_encoding: Option<ContentCoding>,
    #[serde(default)]
    pub raw_line: bool,
    #[serde(default)]
    pub close_input: bool,
    #[serde(default)]
    pub raw_http: Option<String>,
}

impl RequestSpec {
    /// The HTTP method the request goes out with: its own, else POST.
    pub fn http_method(&self) -> hyper::Method {
        self.method.clone().unwrap_or(hyper::Method::POST)
    }
}

/// A case's `method` as the case file spells it: a token of letters, digits, `-` and `_` (a
/// narrower set than HTTP allows, so every case's method reaches any server as written).
mod method_token {
    use hyper::Method;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(m: &Option<Method>, s: S) -> Result<S::Ok, S::Error> {
        match m {
            Some(m) => s.serialize_some(m.as_str()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Method>, D::Error> {
        let Some(text) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        let token = !text.is_empty()
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        token
            .then(|| Method::from_bytes(text.as_bytes()).ok())
            .flatten()
            .map(Some)
            .ok_or_else(|| {
                serde::de::Error::custom(format!("`method` `{text}` is not an HTTP token"))
            })
    }
}

/// A content coding the runner can apply to a request body (RFC 9110 §8.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ContentCoding {
    /// gzip (RFC 1952), as `Content-Encoding: gzip`.
    Gzip,
}

impl ContentCoding {
    /// The coding's name in `Content-Encoding`.
    pub fn token(self) -> &'static str {
        match self {
            ContentCoding::Gzip => "gzip",
        }
    }
}

/// Exactly one body kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum BodySpec {
    Json(serde_json::Value),
    Text(String),
    Base64(String),
    Repeat(RepeatSpec),
    Nest(NestSpec),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RepeatSpec {
    #[serde(default)]
    pub prefix: String,
    pub unit: String,
    pub count: u64,
    #[serde(default)]
    pub suffix: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NestSpec {
    #[serde(default)]
    pub prefix: String,
    pub open: String,
    pub close: String,
    pub depth: u64,
    #[serde(default)]
    pub inner: String,
    #[serde(default)]
    pub suffix: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Reject,
    Accept,
    Silent,
    /// HTTP: the connection closed before any answer began (a server that stops reading a body
    /// too large to take). Only where a case lists it; elsewhere that is no answer at all.
    Closed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Reject => "reject",
            Outcome::Accept => "accept",
            Outcome::Silent => "silent",
            Outcome::Closed => "closed",
        }
    }
}

/// One acceptable HTTP status: an exact code or a class such as `"4xx"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum StatusPattern {
    Code(u16),
    Class(String),
}

impl StatusPattern {
    pub fn matches(&self, status: u16) -> bool {
        match self {
            StatusPattern::Code(c) => *c == status,
            StatusPattern::Class(c) => {
                let digit = c.as_bytes().first().map(|d| d.wrapping_sub(b'0'));
                digit.is_some_and(|d| u16::from(d) == status / 100)
            }
        }
    }

    pub(crate) fn is_valid(&self) -> bool {
        match self {
            StatusPattern::Code(c) => (100..=599).contains(c),
            StatusPattern::Class(c) => {
                c.len() == 3 && matches!(c.as_bytes()[0], b'1'..=b'5') && &c[1..] == "xx"
            }
        }
    }
}

impl std::fmt::Display for StatusPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatusPattern::Code(c) => write!(f, "{c}"),
            StatusPattern::Class(c) => write!(f, "{c}"),
        }
    }
}

/// An error code, or a placeholder such as `"{{code_denied}}"` resolved from the gate's table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum CodePattern {
    Code(i64),
    Placeholder(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum IdRule {
    Echo,
    Null,
    Absent,
    NullOrAbsent,
}

impl IdRule {
    pub fn as_str(self) -> &'static str {
        match self {
            IdRule::Echo => "echo",
            IdRule::Null => "null",
            IdRule::Absent => "absent",
            IdRule::NullOrAbsent => "null-or-absent",
        }
    }
}

/// Gate profile: whether the witness behind the gate may receive the case's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Forwarding {
    /// `true`: it must arrive; `false`: nothing may.
    Must(bool),
    /// `"either"`: the gate may pass it to the server, which alone knows the answer (a
    /// resource that may or may not exist), or refuse it itself.
    Either(EitherWord),
}

/// The word `"either"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EitherWord {
    Either,
}

impl Forwarding {
    /// `Some(must)` when the case says whether it must arrive; `None` for `"either"`.
    pub fn must(self) -> Option<bool> {
        match self {
            Forwarding::Must(b) => Some(b),
            Forwarding::Either(_) => None,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    #[serde(default)]
    pub outcome: Option<OneOrMany<Outcome>>,
    #[serde(default)]
    pub http_status: Option<OneOrMany<StatusPattern>>,
    #[serde(default)]
    pub error_code: Option<OneOrMany<CodePattern>>,
    #[serde(default)]
    pub id: Option<OneOrMany<IdRule>>,
    #[serde(default)]
    pub forwarded: Option<Forwarding>,
    #[serde(default)]
    pub alive: Option<bool>,
    #[serde(default)]
    pub leak: Option<bool>,
    /// Gate profile: the JSON-RPC message the witness must have received (compared as JSON,
    /// placeholders replaced), exactly once, as compact canonical bytes.
    #[serde(default)]
    pub forwarded_json: Option<serde_json::Value>,
    /// HTTP: at most this many body bytes may have been sent when the answer is complete (a
    /// server that reads a huge body whole before refusing it exceeds it).
    #[serde(default)]
    pub max_body_sent: Option<u64>,
    /// stdio: the server process's peak resident memory may grow by at most this many KiB over
    /// the case (read from /proc VmHWM; not judged where /proc does not tell).
    #[serde(default)]
    pub max_memory_growth_kib: Option<u64>,
    /// `false`: no request from the server (`sampling/createMessage`, `elicitation/create`,
    /// `roots/list`, ...) may reach the client in the answer (a gate whose policy refuses them
    /// must not relay them, GATE-DOWN-05).
    #[serde(default)]
    pub server_requests: Option<bool>,
    /// HTTP: the refusal carries this `WWW-Authenticate` challenge.
    #[serde(default)]
    pub challenge: Option<ChallengeSpec>,
    /// A series: what the whole of it may cost the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<SeriesExpect>,
    /// HTTP+SSE: `true`, the stream's `endpoint` event must name a message URL on the stream's
    /// own origin (the runner never posts elsewhere: an endpoint on another origin is this
    /// case's finding, and every other case of the lane is not applicable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_same_origin: Option<bool>,
}

impl Expect {
    /// `self` narrowed by `strict`: every key `strict` sets replaces the lenient one.
    pub(crate) fn narrowed_by(&self, strict: &Expect) -> Expect {
        Expect {
            outcome: strict.outcome.clone().or_else(|| self.outcome.clone()),
            http_status: strict
                .http_status
                .clone()
                .or_else(|| self.http_status.clone()),
            error_code: strict
                .error_code
                .clone()
                .or_else(|| self.error_code.clone()),
            id: strict.id.clone().or_else(|| self.id.clone()),
            forwarded: strict.forwarded.or(self.forwarded),
            alive: strict.alive.or(self.alive),
            leak: strict.leak.or(self.leak),
            forwarded_json: strict
                .forwarded_json
                .clone()
                .or_else(|| self.forwarded_json.clone()),
            max_body_sent: strict.max_body_sent.or(self.max_body_sent),
            max_memory_growth_kib: strict.max_memory_growth_kib.or(self.max_memory_growth_kib),
            server_requests: strict.server_requests.or(self.server_requests),
            challenge: strict.challenge.clone().or_else(|| self.challenge.clone()),
            series: strict.series.clone().or_else(|| self.series.clone()),
            endpoint_same_origin: strict.endpoint_same_origin.or(self.endpoint_same_origin),
        }
    }
}
