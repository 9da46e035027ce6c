//! The transport-neutral coordinator: one raw message in; canonicalize first, decide exactly once,
//! forward only canonical bytes; answer from a fixed vocabulary.

use crate::canonical::{self, Canonical, Id, Json, Limits, Message};
use crate::config::ErrorCodes;
use crate::era::{self, Claim, Version};
use crate::forward::{Event, Events, ForwardError, Forwarder};
use crate::policy::{ActionKind, Engine};
use crate::relay::{self, error_bytes, RelayCtx, Relayed, Session, Step};
use crate::trace::Tracer;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

mod methods;
mod request;
mod session;
mod tool_call;

use request::Request;

/// Protocol versions the gate speaks to clients unless configured otherwise, oldest first.
pub const SUPPORTED_VERSIONS: &[Version] = era::DEFAULT_VERSIONS;
/// How long the engine may take before its silence counts as a denial.
const ENGINE_DEADLINE: Duration = Duration::from_secs(2);

/// What the client presented. Never forwarded; redacted from `Debug`.
#[derive(Clone, Default)]
pub struct Credentials {
    /// The principal the front established (from a verified token), if any.
    pub principal: Option<String>,
    /// The scopes a verified access token grants; `None` when the front checks no token
    /// scopes (then rules that require a scope never allow).
    pub scopes: Option<Vec<String>>,
    /// The auth fault `scopes_only_at_latest` applies to this request: its tools' required
    /// scopes are not checked.
    #[cfg(feature = "faults")]
    pub(crate) scopes_unchecked: bool,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credentials(redacted)")
    }
}

/// How a message was handled; the fronts map it to transport status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// Refused before any decision: not a canonical message.
    Malformed,
    /// Answered by the gate itself (initialize, ping, unknown method).
    Local,
    /// A notification, accepted and not answered.
    Accepted,
    /// Denied by policy.
    Denied,
    /// Forwarded, and the downstream's answer relayed.
    Forwarded,
    /// Forwarded, but the downstream failed.
    DownstreamFailed,
    /// A modern request the gate will not serve: a version it is not configured for, missing
    /// capabilities, headers that do not match the body (HTTP 400).
    Refused,
    /// A method the gate does not have (a modern HTTP request: 404).
    UnknownMethod,
}

/// The result of one message. The bytes are a private copy and are not shown by `Debug`.
#[derive(Clone)]
pub struct ProxyResult {
    bytes: Option<Vec<u8>>,
    pub handled: Handled,
    /// Safe to log: correlates with the trace line.
    pub decision_id: String,
    /// For an `initialize` answered locally: the version agreed.
    pub negotiated: Option<Version>,
    /// Whether the message was served as a modern (per-request `_meta`) one.
    pub modern: bool,
    /// Denied for want of a scope the caller's token lacks: the scope (HTTP: 403
    /// `insufficient_scope` naming it).
    pub scope_needed: Option<String>,
}

/// What a front sends back for one message.
pub enum Answer {
    /// One message, or none.
    Done(ProxyResult),
    /// Messages as the downstream sends them, the answer last (over HTTP an SSE stream). The
    /// result carries no bytes.
    Stream(ProxyResult, tokio::sync::mpsc::Receiver<Relayed>),
}

/// Why a client's message that is not a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("not a response to a request this session was sent")]
    UnknownResponse,
    #[error("no such event to resume after")]
    UnknownEvent,
    #[error("the downstream failed")]
    Downstream,
    /// The downstream holds this session's stream open already (it said 409): the client is
    /// told so, not that the downstream failed.
    #[error("the session's stream is open already")]
    StreamOpen,
}

impl ProxyResult {
    /// The answer to send, if any (a copy).
    pub(crate) fn response_bytes(&self) -> Option<Vec<u8>> {
        self.bytes.clone()
    }
}

impl fmt::Debug for ProxyResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyResult")
            .field("handled", &self.handled)
            .field("decision_id", &self.decision_id)
            .field(
                "bytes",
                &self
                    .bytes
                    .as_ref()
                    .map(|b| format!("<{} bytes redacted>", b.len())),
            )
            .finish()
    }
}

#[cfg(feature = "faults")]
pub use crate::faults::Faults;
#[cfg(not(feature = "faults"))]
use crate::faults::Faults;

/// Most downstream `initialize` answers remembered (one per version and client capabilities).
const MAX_CACHED_ANSWERS: usize = 16;

/// A downstream's answer to one `initialize` (without its id): the version and the result the
/// client is given.
type CachedAnswer = (Vec<u8>, (Version, Vec<(String, Json)>));

/// The gate's coordinator.
pub struct Proxy {
    /// Downstream answers to `initialize`, so a client session opens its own downstream session
    /// only when it first needs it.
    answers: std::sync::Mutex<Vec<CachedAnswer>>,
    engine: Arc<dyn Engine>,
    forwarder: Arc<dyn Forwarder>,
    limits: Limits,
    codes: ErrorCodes,
    /// The codes for modern requests (outside the JSON-RPC reserved range by default).
    modern_codes: ErrorCodes,
    /// The versions the gate speaks, oldest first.
    versions: Vec<Version>,
    tracer: Tracer,
    faults: Faults,
}

fn result_bytes(id: &Id, result: &str) -> Vec<u8> {
    let mut out = br#"{"jsonrpc":"2.0","id":"#.to_vec();
    out.extend_from_slice(&id.to_canonical());
    out.extend_from_slice(format!(r#","result":{result}}}"#).as_bytes());
    out
}

/// Fixed messages: nothing else ever reaches a client.
const MSG_MALFORMED: &str = "Invalid Request";
const MSG_DENIED: &str = "Request denied by policy";
const MSG_NO_METHOD: &str = "Method not found";
const MSG_HEADER_MISMATCH: &str = "Header mismatch";
const MSG_UNSUPPORTED: &str = "Unsupported protocol version";
const MSG_BAD_META: &str = "Invalid params";

fn decision_id() -> String {
    use rand::Rng;
    let b: [u8; 12] = rand::rng().random();
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Proxy {
    pub fn new(
        engine: Arc<dyn Engine>,
        forwarder: Arc<dyn Forwarder>,
        limits: Limits,
        codes: ErrorCodes,
        tracer: Tracer,
    ) -> Proxy {
        Proxy {
            answers: std::sync::Mutex::new(Vec::new()),
            engine,
            forwarder,
            limits,
            codes,
            modern_codes: ErrorCodes::modern(),
            versions: SUPPORTED_VERSIONS.to_vec(),
            tracer,
            faults: Faults::NONE,
        }
    }

    /// The versions the gate speaks and its codes for modern requests.
    pub fn with_versions(mut self, versions: Vec<Version>, modern_codes: ErrorCodes) -> Proxy {
        let mut versions = versions;
        versions.sort();
        versions.dedup();
        self.versions = versions;
        self.modern_codes = modern_codes;
        self
    }

    /// The versions the gate speaks, oldest first.
    pub fn versions(&self) -> &[Version] {
        &self.versions
    }

    /// Whether the gate speaks `version` as a legacy (initialize) version.
    pub(crate) fn speaks_legacy(&self, version: Version) -> bool {
        !version.is_modern() && self.versions.contains(&version)
    }

    /// Whether `text` names a modern version the gate speaks.
    fn speaks_modern(&self, text: &str) -> bool {
        Version::parse(text).is_some_and(|v| v.is_modern() && self.versions.contains(&v))
    }

    /// The legacy version a client's text names, when the gate speaks it.
    pub(crate) fn legacy_named(&self, text: &str) -> Option<Version> {
        Version::parse(text).filter(|v| self.speaks_legacy(*v))
    }

    /// The answer to a modern request whose headers do not match its body (HTTP 400).
    pub(crate) fn header_mismatch(&self, c: &Canonical) -> ProxyResult {
        ProxyResult {
            bytes: Some(error_bytes(
                c.message().id(),
                era::HEADER_MISMATCH,
                MSG_HEADER_MISMATCH,
            )),
            handled: Handled::Refused,
            decision_id: decision_id(),
            scope_needed: None,
            negotiated: None,
            modern: true,
        }
    }

    /// The unsupported-version error, listing the versions the gate speaks.
    fn unsupported(&self, id: Option<&Id>, requested: Option<&str>) -> Vec<u8> {
        let data = serde_json::json!({"supported": self.versions, "requested": requested});
        let id = id.map_or_else(|| b"null".to_vec(), Id::to_canonical);
        let mut out = br#"{"jsonrpc":"2.0","id":"#.to_vec();
        out.extend_from_slice(&id);
        out.extend_from_slice(
            format!(
                r#","error":{{"code":{},"message":"{MSG_UNSUPPORTED}","data":{data}}}}}"#,
                era::UNSUPPORTED_VERSION
            )
            .as_bytes(),
        );
        out
    }

    /// A deliberately broken proxy, for the suite's tests (feature `faults` only). Says so on
    /// stderr when any defect is on.
    #[cfg(feature = "faults")]
    pub fn with_faults(mut self, faults: Faults) -> Proxy {
        if faults != Faults::NONE {
            eprintln!("{}", crate::faults::FAULTS_MARKER);
        }
        self.faults = faults;
        self
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The defects switched on (none, outside the suite's tests; constants without the
    /// `faults` feature).
    pub(crate) fn faults(&self) -> Faults {
        self.faults
    }

    /// Canonicalize only (the fronts need to know what a message is before session checks).
    pub fn parse(&self, raw: &[u8]) -> Result<Canonical, canonical::Malformed> {
        #[cfg(feature = "faults")]
        if self.faults != Faults::NONE {
            return self.parse_with_faults(raw);
        }
        canonical::parse(raw, &self.limits)
    }

    /// The parser a broken proxy uses: lenient, or without a size limit.
    #[cfg(feature = "faults")]
    fn parse_with_faults(&self, raw: &[u8]) -> Result<Canonical, canonical::Malformed> {
        let mut limits = self.limits;
        if self.faults.no_size_limit {
            limits.max_bytes = usize::MAX;
        }
        let leniency = self.faults.leniency();
        if leniency != canonical::Leniency::default() {
            return canonical::parse_leniently(raw, &limits, leniency);
        }
        canonical::parse(raw, &limits)
    }

    /// The `batch_skips_policy` fault: a batch array forwarded element by element, no policy.
    /// `None` for anything else, and always `None` in a correct gate (not compiled without the
    /// `faults` feature).
    #[cfg(feature = "faults")]
    pub(crate) async fn batch_fault(&self, server_id: &str, raw: &[u8]) -> Option<ProxyResult> {
        if !self.faults.batch_skips_policy {
            return None;
        }
        let Ok(serde_json::Value::Array(items)) = serde_json::from_slice::<serde_json::Value>(raw)
        else {
            return None;
        };
        let mut answers = Vec::new();
        for item in items {
            let bytes = item.to_string().into_bytes();
            if let Ok(a) = self
                .forwarder
                .forward(server_id, &bytes, item.get("id").is_some())
                .await
            {
                if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&a) {
                    answers.push(v);
                }
            }
        }
        Some(ProxyResult {
            bytes: Some(serde_json::Value::Array(answers).to_string().into_bytes()),
            handled: Handled::Forwarded,
            decision_id: decision_id(),
            scope_needed: None,
            negotiated: None,
            modern: false,
        })
    }

    /// The `unpoliced_routes` fault: a POST on another spelling of the endpoint goes to the
    /// downstream as it came, through the client's downstream session when it names one, with
    /// no parse and no policy; the downstream's answer comes back as it is. Not compiled
    /// without the `faults` feature.
    #[cfg(feature = "faults")]
    pub(crate) async fn route_fault(
        &self,
        server_id: &str,
        session: Option<&Arc<Session>>,
        raw: &[u8],
    ) -> Option<Vec<u8>> {
        let downstream = match session {
            Some(s) => s.open().await.ok().flatten(),
            None => None,
        };
        let Some(d) = downstream else {
            return self.forwarder.forward(server_id, raw, true).await.ok();
        };
        let mut events = d.send(raw, true).await.ok()?;
        let mut last = None;
        while let Some(Ok(event)) = events.recv().await {
            last = Some(event.data);
        }
        last
    }

    /// Whether `raw` is a well-formed response (a client answering a server request).
    pub(crate) fn is_reply(&self, raw: &[u8]) -> bool {
        matches!(
            canonical::parse_incoming(raw, &self.limits),
            Ok(canonical::Incoming::Reply(_))
        )
    }

    /// The answer to a message that is not canonical.
    pub fn malformed(&self) -> ProxyResult {
        ProxyResult {
            bytes: Some(error_bytes(None, self.codes.malformed, MSG_MALFORMED)),
            handled: Handled::Malformed,
            decision_id: decision_id(),
            scope_needed: None,
            negotiated: None,
            modern: false,
        }
    }

    /// Handle one raw message for `server_id`.
    pub async fn handle(
        &self,
        server_id: &str,
        raw: &[u8],
        credentials: &Credentials,
    ) -> ProxyResult {
        #[cfg(feature = "faults")]
        if let Some(r) = self.batch_fault(server_id, raw).await {
            return r;
        }
        match self.parse(raw) {
            Ok(c) => self.handle_parsed(server_id, raw, &c, credentials).await,
            Err(_) => self.malformed(),
        }
    }

    /// Handle a message already canonicalized by [`Proxy::parse`]; `raw` is what it came from.
    /// Outside a client session: what the downstream sends before its answer is not relayed.
    pub(crate) async fn handle_parsed(
        &self,
        server_id: &str,
        raw: &[u8],
        c: &Canonical,
        credentials: &Credentials,
    ) -> ProxyResult {
        match self.handle_in(server_id, None, raw, c, credentials).await {
            Answer::Done(r) => r,
            Answer::Stream(mut r, mut rx) => {
                let mut last = None;
                while let Some(m) = rx.recv().await {
                    if !m.bytes.is_empty() {
                        last = Some(m.bytes);
                    }
                }
                r.bytes = last;
                r
            }
        }
    }

    /// Handle a message in a client session (or none): canonicalized by [`Proxy::parse`], `raw`
    /// is what it came from. The era's claim is checked first; a notification goes to
    /// [`Proxy::notify`]; a request's facts are fixed in a [`Request`] and its method's handler
    /// decides (`methods.rs`).
    pub(crate) async fn handle_in(
        &self,
        server_id: &str,
        session: Option<&Arc<Session>>,
        raw: &[u8],
        c: &Canonical,
        credentials: &Credentials,
    ) -> Answer {
        let decision = decision_id();
        // The era is the message's own claim; a modern claim must be a version the gate
        // speaks, with the client's capabilities, before anything else happens.
        let claim = era::claim(c);
        let modern = claim != Claim::Legacy;
        let id = c.message().id();
        let refusal = match &claim {
            Claim::Legacy => None,
            Claim::Malformed => Some(error_bytes(id, -32602, MSG_BAD_META)),
            Claim::Modern(v) if !self.speaks_modern(v) => Some(self.unsupported(id, Some(v))),
            Claim::Modern(_) if !era::has_capabilities(c) => {
                Some(error_bytes(id, -32602, MSG_BAD_META))
            }
            Claim::Modern(_) => None,
        };
        if let Some(bytes) = refusal {
            let bytes = id.map(|_| bytes);
            return Answer::Done(request::result(&decision, modern, bytes, Handled::Refused));
        }
        match c.message() {
            Message::Notification { method, .. } => {
                self.notify(server_id, session, c, method, credentials.scopes.as_deref())
                    .await;
                Answer::Done(request::result(&decision, modern, None, Handled::Accepted))
            }
            Message::Request { id, method, .. } => {
                let r = Request::new(
                    self,
                    server_id,
                    session,
                    raw,
                    c,
                    credentials,
                    (id, method.as_str()),
                    decision,
                    modern,
                );
                self.dispatch(&r).await
            }
        }
    }

    /// The bounds for what a downstream sends: the client limits, with the response bound.
    fn downstream_limits(&self) -> Limits {
        Limits {
            max_bytes: self.limits.max_bytes.max(1024 * 1024),
            max_string: self.limits.max_string.max(1024 * 1024),
            ..self.limits
        }
    }

    /// A client notification: in a session with its own downstream, the ones that concern it
    /// (cancellation, progress, roots changed) and any a rule allows go on; the rest, and
    /// everything outside such a session, stop here.
    async fn notify(
        &self,
        server_id: &str,
        session: Option<&Arc<Session>>,
        c: &Canonical,
        method: &str,
        credentials_scopes: Option<&[String]>,
    ) {
        let Some(downstream) = session.and_then(|s| s.downstream()) else {
            return;
        };
        let engine = self.engine.as_ref();
        let allowed = match method {
            "notifications/initialized" => false,
            "notifications/cancelled" | "notifications/progress" => true,
            "notifications/roots/list_changed" => relay::allowed(
                engine,
                server_id,
                ActionKind::ServerRequest,
                "roots/list",
                credentials_scopes,
            ),
            other => relay::allowed(
                engine,
                server_id,
                ActionKind::Method,
                other,
                credentials_scopes,
            ),
        };
        if allowed {
            // Best effort: a notification has no answer to fail with.
            let _ = downstream.deliver(c.forwarding_bytes()).await;
        }
    }

    /// Forward a decided request (`bytes`, the canonical form of `request` the policy judged)
    /// and relay what comes back: one answer, or, when the downstream sends anything before it,
    /// a stream. While it is being answered, progress for its token reaches its client.
    async fn forward(&self, ctx: RelayCtx, request: &Canonical, bytes: Vec<u8>) -> Answer {
        let result = |bytes: Option<Vec<u8>>, handled: Handled| {
            ctx.settled();
            request::result(&ctx.decision, ctx.modern, bytes, handled)
        };
        let failed = ctx.failed().bytes;
        let Some(mut events) = self.send(&ctx, request, &bytes).await else {
            return Answer::Done(result(Some(failed), Handled::DownstreamFailed));
        };
        loop {
            let event = events.recv().await;
            if let Some(Err(ForwardError::Timeout)) = &event {
                relay::cancel(&ctx, "timeout").await;
            }
            let Some(Ok(event)) = event else {
                if ctx.faults.relay_downstream_verbatim() {
                    // The relay-verbatim fault: no answer is relayed as it came, empty.
                    return Answer::Done(result(Some(Vec::new()), Handled::Forwarded));
                }
                return Answer::Done(result(Some(failed), Handled::DownstreamFailed));
            };
            match ctx.step(event) {
                Step::Drop => continue,
                Step::Answer(bytes) => relay::answer_downstream(&ctx, &bytes).await,
                Step::Final(r) => {
                    let handled = if r.bytes == failed {
                        Handled::DownstreamFailed
                    } else {
                        Handled::Forwarded
                    };
                    return Answer::Done(result(Some(r.bytes), handled));
                }
                Step::Relay(first) => {
                    if let (Some(s), Some((id, method))) = (&ctx.session, &ctx.request) {
                        s.add_pending(id, method);
                    }
                    let (tx, rx) = tokio::sync::mpsc::channel(16);
                    let _ = tx.try_send(first);
                    let streamed =
                        request::result(&ctx.decision, ctx.modern, None, Handled::Forwarded);
                    tokio::spawn(relay::pump(ctx, events, tx));
                    return Answer::Stream(streamed, rx);
                }
            }
        }
    }

    /// Send a decided request downstream: through the client's own downstream session (its
    /// progress token then counts as the client's), else, for a modern request, as a stream of
    /// its own when the forwarder streams, else through the forwarder. `None` when it could not
    /// be sent (on a timeout the downstream is told the request is abandoned).
    async fn send(&self, ctx: &RelayCtx, request: &Canonical, bytes: &[u8]) -> Option<Events> {
        let downstream = match &ctx.session {
            Some(s) => s.open().await.ok()?,
            None => None,
        };
        let Some(d) = downstream else {
            if ctx.modern {
                if let Some(events) = self.forwarder.stream(&ctx.server_id, bytes).await.ok()? {
                    return Some(events);
                }
            }
            let answer = self
                .forwarder
                .forward(&ctx.server_id, bytes, true)
                .await
                .ok()?;
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            let _ = tx.try_send(Ok(Event {
                data: answer,
                ..Event::default()
            }));
            return Some(rx);
        };
        if let Some(s) = &ctx.session {
            s.add_progress(request);
        }
        match d.send(bytes, true).await {
            Ok(events) => Some(events),
            Err(e) => {
                if matches!(e, ForwardError::Timeout) {
                    // GATE-DOWN-04: the downstream hears that the request is abandoned.
                    relay::cancel(ctx, "timeout").await;
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forward::{ForwardFuture, StreamFuture};
    use crate::policy::{Effect, Rule, RuleEngine};

    /// A downstream that answers a modern request as a stream: progress for the request's own
    /// token and for another, a log message, then the answer.
    struct Streaming;

    impl Forwarder for Streaming {
        fn forward<'a>(&'a self, _: &'a str, _: &'a [u8], _: bool) -> ForwardFuture<'a> {
            Box::pin(async { Err(ForwardError::Unreachable) })
        }

        fn stream<'a>(&'a self, _: &'a str, _: &'a [u8]) -> StreamFuture<'a> {
            Box::pin(async {
                let (tx, rx) = tokio::sync::mpsc::channel(8);
                for line in [
                    r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-1","progress":1}}"#,
                    r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-other","progress":1}}"#,
                    r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}}"#,
                    r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete"}}"#,
                ] {
                    let _ = tx.try_send(Ok(Event {
                        data: line.as_bytes().to_vec(),
                        ..Event::default()
                    }));
                }
                Ok(Some(rx))
            })
        }
    }

    /// What a server sends before a 2026-07-28 answer reaches the client as it comes: progress
    /// for the request's own token and the log message, then the answer; progress for any
    /// other token does not.
    #[tokio::test]
    async fn a_modern_answer_streams_what_the_downstream_sends_before_it() {
        let proxy = Proxy::new(
            Arc::new(RuleEngine {
                rules: vec![Rule::tool(Effect::Allow, "*", "echo")],
            }),
            Arc::new(Streaming),
            Limits::default(),
            ErrorCodes::default(),
            Tracer::none(),
        );
        let raw = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p-1"}}}"#;
        let c = proxy.parse(raw).expect("a modern call");
        let Answer::Stream(r, mut rx) = proxy
            .handle_in("s", None, raw, &c, &Credentials::default())
            .await
        else {
            panic!("the answer did not stream");
        };
        assert_eq!(r.handled, Handled::Forwarded);
        let mut seen = Vec::new();
        while let Some(m) = rx.recv().await {
            seen.push(serde_json::from_slice::<serde_json::Value>(&m.bytes).unwrap_or_default());
        }
        let what: Vec<String> = seen
            .iter()
            .map(|m| {
                m["method"].as_str().map_or_else(
                    || format!("answer {}", m["id"]),
                    |method| format!("{method} {}", m["params"]["progressToken"]),
                )
            })
            .collect();
        assert_eq!(
            what,
            [
                r#"notifications/progress "p-1""#,
                "notifications/message null",
                "answer 1"
            ],
            "{seen:?}"
        );
    }
}
