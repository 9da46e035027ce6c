//! The transport-neutral coordinator: one raw message in; canonicalize first, decide exactly once,
//! forward only canonical bytes; answer from a fixed vocabulary.

use crate::canonical::{self, Canonical, Id, Json, Limits, Message};
use crate::config::ErrorCodes;
use crate::era::{self, Claim};
use crate::forward::{Event, Events, ForwardError, Forwarder};
use crate::policy::{ActionKind, AgentActionRequest, Decision, Engine};
use crate::relay::{self, error_bytes, RelayCtx, Relayed, Session, Step, MSG_DOWNSTREAM};
use crate::trace::{Trace, Tracer};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

mod methods;
mod request;

use request::Request;

/// Protocol versions the gate speaks to clients unless configured otherwise, oldest first.
pub const SUPPORTED_VERSIONS: &[&str] = era::DEFAULT_VERSIONS;
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
    pub negotiated: Option<String>,
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
}

impl ProxyResult {
    /// The answer to send, if any (a copy).
    pub fn response_bytes(&self) -> Option<Vec<u8>> {
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
type CachedAnswer = (Vec<u8>, (String, Vec<(String, Json)>));

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
    versions: Vec<String>,
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
            versions: SUPPORTED_VERSIONS.iter().map(|v| v.to_string()).collect(),
            tracer,
            faults: Faults::NONE,
        }
    }

    /// The versions the gate speaks and its codes for modern requests.
    pub fn with_versions(mut self, versions: Vec<String>, modern_codes: ErrorCodes) -> Proxy {
        let mut versions = versions;
        versions.sort();
        versions.dedup();
        self.versions = versions;
        self.modern_codes = modern_codes;
        self
    }

    /// The versions the gate speaks, oldest first.
    pub fn versions(&self) -> &[String] {
        &self.versions
    }

    /// Whether the gate speaks `version` as a legacy (initialize) version.
    pub fn speaks_legacy(&self, version: &str) -> bool {
        !era::is_modern(version) && self.versions.iter().any(|v| v == version)
    }

    /// The answer to a modern request whose headers do not match its body (HTTP 400).
    pub fn header_mismatch(&self, c: &Canonical) -> ProxyResult {
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
    pub fn is_reply(&self, raw: &[u8]) -> bool {
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
    pub async fn handle_parsed(
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
    pub async fn handle_in(
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
            Claim::Modern(v) if !(era::is_modern(v) && self.versions.iter().any(|s| s == v)) => {
                Some(self.unsupported(id, Some(v)))
            }
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

    /// A client's `initialize` in a front that keeps sessions: the session, with its own
    /// downstream session when the forwarder keeps one per client (the client's version, and
    /// only the client capabilities the policy lets the server use), else answered here.
    #[allow(
        clippy::too_many_lines,
        reason = "opening a client session and its downstream session is one transaction (version, narrowed capabilities, cached answer, session binding): every early return must leave no half-open session behind"
    )]
    pub async fn open_session(
        &self,
        server_id: &str,
        raw: &[u8],
        c: &Canonical,
        credentials: &Credentials,
    ) -> (ProxyResult, Option<Arc<Session>>) {
        let (Message::Request { id, .. }, Claim::Legacy) = (c.message(), era::claim(c)) else {
            return self.open_locally(server_id, raw, c, credentials).await;
        };
        let requested = c.message().param("protocolVersion").and_then(Json::as_str);
        let Some(requested) = requested.filter(|v| self.speaks_legacy(v)) else {
            return self.open_locally(server_id, raw, c, credentials).await;
        };
        let allows = |method: &str| {
            relay::allowed(
                self.engine.as_ref(),
                server_id,
                ActionKind::ServerRequest,
                method,
                None,
            )
        };
        let client_caps = c.message().param("capabilities");
        let mut caps = Vec::new();
        for (cap, method) in [
            ("sampling", "sampling/createMessage"),
            ("elicitation", "elicitation/create"),
            ("roots", "roots/list"),
        ] {
            if let Some(v @ Json::Object(_)) = client_caps.and_then(|c| c.get(cap)) {
                if allows(method) {
                    caps.push((cap.to_string(), v.clone()));
                }
            }
        }
        let client_info = match c.message().param("clientInfo") {
            Some(v @ Json::Object(_)) => v.clone(),
            _ => Json::Object(vec![
                ("name".into(), Json::String("reference-gate".into())),
                (
                    "version".into(),
                    Json::String(env!("CARGO_PKG_VERSION").into()),
                ),
            ]),
        };
        let init_params = vec![
            (
                "protocolVersion".into(),
                Json::String(requested.to_string()),
            ),
            ("capabilities".into(), Json::Object(caps)),
            ("clientInfo".into(), client_info),
        ];
        let key = Json::Object(init_params.clone()).to_canonical();
        let init = Canonical::new(Message::Request {
            id: id.clone(),
            method: "initialize".into(),
            params: Some(init_params),
        });
        let decision = decision_id();
        // The downstream answered this very initialize before (the same version and client
        // capabilities): answer from that, and open the client's downstream session only when
        // a message needs it.
        let cached = self
            .answers
            .lock()
            .ok()
            .and_then(|c| c.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone()));
        let answered = |version: String, out: Vec<(String, Json)>, session: Arc<Session>| {
            let answer = canonical::CanonicalReply::new(canonical::Reply {
                id: id.clone(),
                outcome: canonical::Outcome::Result(out),
            });
            let r = ProxyResult {
                bytes: Some(answer.forwarding_bytes().to_vec()),
                handled: Handled::Forwarded,
                decision_id: decision.clone(),
                scope_needed: None,
                negotiated: Some(version),
                modern: false,
            };
            (r, Some(session))
        };
        if let Some((version, out)) = cached {
            let session = Session::lazy(relay::Opener {
                forwarder: self.forwarder.clone(),
                server_id: server_id.to_string(),
                init: init.forwarding_bytes().to_vec(),
                version: version.clone(),
            });
            return answered(version, out, session);
        }
        let failed = || ProxyResult {
            bytes: Some(error_bytes(Some(id), self.codes.downstream, MSG_DOWNSTREAM)),
            handled: Handled::DownstreamFailed,
            decision_id: decision.clone(),
            scope_needed: None,
            negotiated: None,
            modern: false,
        };
        let (downstream, answer) = match self
            .forwarder
            .open(server_id, init.forwarding_bytes())
            .await
        {
            Ok(Some(opened)) => opened,
            Ok(None) => return self.open_locally(server_id, raw, c, credentials).await,
            Err(_) => return (failed(), None),
        };
        let Some((version, out)) = self.initialize_result(&answer, id) else {
            tokio::spawn(async move { downstream.close().await });
            return (failed(), None);
        };
        if let Ok(mut cache) = self.answers.lock() {
            if cache.len() >= MAX_CACHED_ANSWERS {
                cache.remove(0);
            }
            cache.push((key, (version.clone(), out.clone())));
        }
        answered(version, out, Session::new(Some(downstream)))
    }

    /// The downstream's answer to the client's `initialize` (`id`), as the client is given it:
    /// a result agreeing to a legacy version the gate speaks, its capabilities narrowed to what
    /// the gate relays (tools, resources, prompts, logging, completions), with the server's
    /// `serverInfo` and `instructions`. `None` for anything else.
    fn initialize_result(&self, answer: &[u8], id: &Id) -> Option<(String, Vec<(String, Json)>)> {
        let reply = match canonical::parse_incoming(answer, &self.downstream_limits()) {
            Ok(canonical::Incoming::Reply(r)) if &r.reply().id == id => r,
            _ => return None,
        };
        let canonical::Outcome::Result(result) = &reply.reply().outcome else {
            return None;
        };
        let result = Json::Object(result.clone());
        let version = result
            .get("protocolVersion")
            .and_then(Json::as_str)
            .filter(|v| self.speaks_legacy(v))?
            .to_string();
        let mut server_caps = Vec::new();
        if let Some(Json::Object(offered)) = result.get("capabilities") {
            for (k, v) in offered {
                if ["tools", "resources", "prompts", "logging", "completions"].contains(&k.as_str())
                {
                    server_caps.push((k.clone(), v.clone()));
                }
            }
        }
        let mut out = vec![
            ("protocolVersion".to_string(), Json::String(version.clone())),
            ("capabilities".to_string(), Json::Object(server_caps)),
        ];
        for key in ["serverInfo", "instructions"] {
            if let Some(v) = result.get(key) {
                out.push((key.to_string(), v.clone()));
            }
        }
        Some((version, out))
    }

    /// A session without a downstream of its own: `initialize` answered by the gate.
    async fn open_locally(
        &self,
        server_id: &str,
        raw: &[u8],
        c: &Canonical,
        credentials: &Credentials,
    ) -> (ProxyResult, Option<Arc<Session>>) {
        let r = self.handle_parsed(server_id, raw, c, credentials).await;
        let session = r.negotiated.is_some().then(|| Session::new(None));
        (r, session)
    }

    /// A client's response to a request the gate relayed to it in this session: forwarded, under
    /// the downstream's id, as canonical bytes; anything else is refused and goes nowhere.
    pub async fn client_reply(&self, session: &Session, raw: &[u8]) -> Result<(), Refusal> {
        let reply = match canonical::parse_incoming(raw, &self.limits) {
            Ok(canonical::Incoming::Reply(r)) => r,
            _ => return Err(Refusal::UnknownResponse),
        };
        let original = match session.take_outgoing(&reply.reply().id) {
            Some(original) => original,
            // The any-response-id fault: whatever id the client names goes downstream.
            None if self.faults.any_response_id() => reply.reply().id.clone(),
            None => return Err(Refusal::UnknownResponse),
        };
        let downstream = match session.open().await {
            Ok(Some(d)) => d,
            Ok(None) => return Err(Refusal::UnknownResponse),
            Err(_) => return Err(Refusal::Downstream),
        };
        let bytes = reply.with_id(original);
        downstream
            .deliver(bytes.forwarding_bytes())
            .await
            .map_err(|_| Refusal::Downstream)
    }

    /// The server's own stream for this session, resuming after an event id the client was
    /// given; `Ok(None)` when the downstream has none.
    pub async fn listen(
        &self,
        server_id: &str,
        session: &Arc<Session>,
        last_event_id: Option<&str>,
        principal: Option<&str>,
    ) -> Result<Option<tokio::sync::mpsc::Receiver<Relayed>>, Refusal> {
        let downstream = match session.open().await {
            Ok(Some(d)) => d,
            Ok(None) => return Ok(None),
            Err(_) => return Err(Refusal::Downstream),
        };
        let last = match last_event_id {
            Some(gate) => Some(
                session
                    .downstream_event(gate)
                    .ok_or(Refusal::UnknownEvent)?,
            ),
            None => None,
        };
        let events = match downstream.listen(last.as_deref()).await {
            Ok(Some(events)) => events,
            Ok(None) => return Ok(None),
            Err(_) => return Err(Refusal::Downstream),
        };
        let ctx = RelayCtx {
            engine: self.engine.clone(),
            server_id: server_id.to_string(),
            limits: self.downstream_limits(),
            codes: self.codes,
            session: Some(session.clone()),
            request: None,
            modern: false,
            faults: self.faults,
            progress_token: None,
            tracer: self.tracer.clone(),
            decision: decision_id(),
            principal: principal.map(str::to_string),
        };
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(relay::pump(ctx, events, tx));
        Ok(Some(rx))
    }

    /// A `tools/call` request (`c` holds a request, so it has an id).
    #[allow(
        clippy::too_many_lines,
        reason = "the one decision of a tools/call (engine under its deadline, trace, deny or forward) with the fault branches of the test build beside the branches they break"
    )]
    async fn tools_call(
        &self,
        ctx: RelayCtx,
        raw: &[u8],
        c: &Canonical,
        credentials: &Credentials,
        decision: &str,
    ) -> Answer {
        let server_id = ctx.server_id.as_str();
        let codes = ctx.codes;
        let result = |bytes: Vec<u8>, handled: Handled| {
            Answer::Done(ProxyResult {
                bytes: Some(bytes),
                handled,
                decision_id: decision.to_string(),
                scope_needed: None,
                negotiated: None,
                modern: false,
            })
        };
        let Some(id) = c.message().id() else {
            return result(
                error_bytes(None, codes.malformed, MSG_MALFORMED),
                Handled::Malformed,
            );
        };
        let Some(call) = c.tool_call() else {
            if self.faults.leniency().lax_envelope() {
                // The lax-envelope fault: a call the gate cannot read goes through unchecked.
                return match self
                    .forwarder
                    .forward(server_id, c.forwarding_bytes(), true)
                    .await
                {
                    Ok(answer) => result(answer, Handled::Forwarded),
                    Err(_) => result(
                        error_bytes(Some(id), codes.downstream, MSG_DOWNSTREAM),
                        Handled::DownstreamFailed,
                    ),
                };
            }
            // The canonical parser guarantees a tool call here; refuse if not.
            return result(
                error_bytes(None, codes.malformed, MSG_MALFORMED),
                Handled::Malformed,
            );
        };
        #[allow(unused_mut)]
        let mut scopes = credentials.scopes.clone();
        // The fault's "older handler": whatever scope the tool needs counts as held.
        #[cfg(feature = "faults")]
        if credentials.scopes_unchecked {
            let held = scopes.as_deref();
            if let Some(needed) = self.engine.missing_scope(server_id, None, &call.name, held) {
                scopes.get_or_insert_with(Vec::new).push(needed);
            }
        }
        let request = AgentActionRequest {
            server_id: server_id.to_string(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            principal: credentials.principal.clone(),
            scopes,
            timestamp: SystemTime::now(),
            request_id: call.id.clone(),
        };
        let (verdict, engine_text) = self.decide(request.clone()).await;
        self.tracer.record(&Trace {
            decision_id: decision,
            server: server_id,
            tool: &call.name,
            kind: None,
            principal: credentials.principal.as_deref(),
            verdict: match verdict {
                Decision::Allow => "allow",
                Decision::Deny => "deny",
            },
            shown: None,
            hidden: None,
        });
        if verdict == Decision::Deny {
            let message = match (&engine_text, self.faults.leak_engine_text()) {
                (Some(text), true) => format!("{MSG_DENIED}: {}", text.replace(['"', '\\'], "'")),
                _ => MSG_DENIED.to_string(),
            };
            let scope = self.engine.missing_scope(
                server_id,
                None,
                &call.name,
                credentials.scopes.as_deref(),
            );
            return Answer::Done(ProxyResult {
                bytes: Some(error_bytes(Some(id), codes.denied, &message)),
                handled: Handled::Denied,
                decision_id: decision.to_string(),
                negotiated: None,
                modern: false,
                scope_needed: scope,
            });
        }
        let outgoing = if self.faults.forward_raw() {
            raw
        } else {
            c.forwarding_bytes()
        };
        // Only a well-formed success answer for this id is relayed; a downstream error is a
        // failure.
        self.forward(ctx, c, outgoing.to_vec()).await
    }

    /// Ask the engine once, off the async threads, bounded; an error, a panic or silence denies.
    /// The engine's error text is returned for the trace-free fault path only.
    async fn decide(&self, request: AgentActionRequest) -> (Decision, Option<String>) {
        let failed = if self.faults.allow_on_engine_error() {
            Decision::Allow
        } else {
            Decision::Deny
        };
        let engine = self.engine.clone();
        let ask = move || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| engine.decide(&request)))
        };
        let answer = if self.engine.runs_inline() {
            // A pure engine (the rule engine): no thread hand-off, no deadline needed.
            Ok(Ok(ask()))
        } else {
            tokio::time::timeout(ENGINE_DEADLINE, tokio::task::spawn_blocking(ask)).await
        };
        match answer {
            Ok(Ok(Ok(Ok(d)))) => (d, None),
            Ok(Ok(Ok(Err(e)))) => (failed, Some(e.0)),
            _ => (failed, None),
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
