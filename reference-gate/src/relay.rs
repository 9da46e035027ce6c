//! Client sessions and what passes from a downstream to a client.
//!
//! Every message a downstream sends is canonicalized with the same parser and bounds as a
//! client's, then decided: the answer to the client's request is validated and filtered; a
//! notification passes when it is one the protocol defines (a resource update only for a URI the
//! policy allows); a request to the client (sampling, elicitation, roots) passes only when the
//! policy allows it for this server, under a gate-owned id that exists only in this client's
//! session, and is otherwise refused to the downstream and never shown to the client. Progress
//! passes only for a token the client itself sent in that session. A downstream's JSON-RPC error
//! keeps its code, never its text (GATE-DOWN-03). Each decision is traced.

use crate::canonical::{self, CanonicalReply, Id, Incoming, Json, Limits, Message, Outcome, Reply};
use crate::config::{DownstreamErrors, ErrorCodes};
use crate::forward::{Downstream, Event, ForwardError};
use crate::policy::{Action, ActionKind, Decision, Engine};
use crate::trace::{Trace, Tracer};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Most event ids remembered per session for resumption.
const MAX_EVENT_IDS: usize = 4096;
/// Most server-to-client requests outstanding per session.
const MAX_OUTGOING: usize = 256;
/// Most streamed requests remembered per session for a resumed answer.
const MAX_PENDING: usize = 256;

/// Gate-owned ids of server-to-client requests: unique across every session of this process.
static NEXT_OUTGOING: AtomicU64 = AtomicU64::new(1);

/// How a session opens its downstream session when it first needs it.
pub(crate) struct Opener {
    pub forwarder: Arc<dyn crate::forward::Forwarder>,
    pub server_id: String,
    /// The canonical `initialize` to open it with.
    pub init: Vec<u8>,
    /// The version the client was told: the downstream must agree to it.
    pub version: crate::Version,
}

/// The gate's state for one client session.
pub struct Session {
    downstream: tokio::sync::OnceCell<Arc<dyn Downstream>>,
    opener: Option<Opener>,
    /// Server-to-client requests relayed to this client: gate id -> the downstream's id.
    outgoing: Mutex<HashMap<String, Id>>,
    /// This client's requests forwarded and not yet answered: id -> method.
    pending: Mutex<HashMap<Id, String>>,
    /// The progress tokens of this client's requests still being answered: the token's
    /// canonical JSON -> the request's id. Progress for any other token is not this client's.
    progress: Mutex<HashMap<Vec<u8>, Id>>,
    /// Event ids given to this client, oldest first, with the downstream's.
    events: Mutex<VecDeque<(String, String)>>,
    next_event: AtomicU64,
}

impl Session {
    pub fn new(downstream: Option<Arc<dyn Downstream>>) -> Arc<Session> {
        Session::build(downstream, None)
    }

    /// A session whose downstream session opens when the first message needs it.
    pub(crate) fn lazy(opener: Opener) -> Arc<Session> {
        Session::build(None, Some(opener))
    }

    fn build(downstream: Option<Arc<dyn Downstream>>, opener: Option<Opener>) -> Arc<Session> {
        let cell = tokio::sync::OnceCell::new();
        if let Some(d) = downstream {
            let _ = cell.set(d);
        }
        Arc::new(Session {
            downstream: cell,
            opener,
            outgoing: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            progress: Mutex::new(HashMap::new()),
            events: Mutex::new(VecDeque::new()),
            next_event: AtomicU64::new(1),
        })
    }

    /// The session's own downstream session, if it is open.
    pub fn downstream(&self) -> Option<&Arc<dyn Downstream>> {
        self.downstream.get()
    }

    /// The session's own downstream session, opened now if it is not yet; `Ok(None)` when the
    /// forwarder keeps none per client. A downstream that will not agree to the version the
    /// client was told fails.
    pub(crate) async fn open(&self) -> Result<Option<Arc<dyn Downstream>>, ForwardError> {
        if let Some(d) = self.downstream.get() {
            return Ok(Some(d.clone()));
        }
        let Some(o) = &self.opener else {
            return Ok(None);
        };
        let d = self
            .downstream
            .get_or_try_init(|| async {
                let (d, answer) = o
                    .forwarder
                    .open(&o.server_id, &o.init)
                    .await?
                    .ok_or(ForwardError::BadAnswer)?;
                let agreed = serde_json::from_slice::<serde_json::Value>(&answer)
                    .ok()
                    .and_then(|v| {
                        v.pointer("/result/protocolVersion")
                            .and_then(|v| v.as_str())
                            .and_then(crate::Version::parse)
                    });
                if agreed != Some(o.version) {
                    d.close().await;
                    return Err(ForwardError::BadAnswer);
                }
                Ok(d)
            })
            .await?;
        Ok(Some(d.clone()))
    }

    /// The downstream's id for a gate id this session's client was given; taken (answered once).
    pub(crate) fn take_outgoing(&self, gate_id: &Id) -> Option<Id> {
        let Id::Str(s) = gate_id else { return None };
        self.outgoing.lock().ok()?.remove(s)
    }

    fn give_outgoing(&self, downstream_id: Id) -> Option<Id> {
        let mut map = self.outgoing.lock().ok()?;
        if map.len() >= MAX_OUTGOING {
            return None;
        }
        let gate = format!("gate-{}", NEXT_OUTGOING.fetch_add(1, Ordering::Relaxed));
        map.insert(gate.clone(), downstream_id);
        Some(Id::Str(gate))
    }

    fn outgoing_by_downstream(&self, downstream_id: &Id) -> Option<String> {
        let map = self.outgoing.lock().ok()?;
        map.iter()
            .find(|(_, d)| *d == downstream_id)
            .map(|(g, _)| g.clone())
    }

    /// Remember a request whose answer may come on a resumed stream (at most `MAX_PENDING`;
    /// past that, a resumed answer is not relayed).
    pub(crate) fn add_pending(&self, id: &Id, method: &str) {
        if let Ok(mut p) = self.pending.lock() {
            if p.len() < MAX_PENDING || p.contains_key(id) {
                p.insert(id.clone(), method.to_string());
            }
        }
    }

    pub(crate) fn take_pending(&self, id: &Id) -> Option<String> {
        self.pending.lock().ok()?.remove(id)
    }

    /// Remember the progress token of a request this client sends (its `_meta.progressToken`;
    /// at most `MAX_PENDING` at once, past that its progress is not relayed).
    pub(crate) fn add_progress(&self, request: &canonical::Canonical) {
        let (Message::Request { id, .. }, Some(token)) =
            (request.message(), progress_token(request))
        else {
            return;
        };
        if let Ok(mut p) = self.progress.lock() {
            if p.len() < MAX_PENDING {
                p.insert(token, id.clone());
            }
        }
    }

    /// Whether `token` belongs to a request of this client that is still being answered.
    fn owns_progress(&self, token: &Json) -> bool {
        self.progress
            .lock()
            .is_ok_and(|p| p.contains_key(&token.to_canonical()))
    }

    /// The request `id` is answered: its progress token is no longer this client's.
    pub(crate) fn release_progress(&self, id: &Id) {
        if let Ok(mut p) = self.progress.lock() {
            p.retain(|_, r| r != id);
        }
    }

    /// A gate event id for a downstream one.
    fn event_id(&self, downstream: &str) -> Option<String> {
        let mut events = self.events.lock().ok()?;
        let id = self.next_event.fetch_add(1, Ordering::Relaxed).to_string();
        if events.len() >= MAX_EVENT_IDS {
            events.pop_front();
        }
        events.push_back((id.clone(), downstream.to_string()));
        Some(id)
    }

    /// The downstream event id behind one this client was given.
    pub(crate) fn downstream_event(&self, gate: &str) -> Option<String> {
        let events = self.events.lock().ok()?;
        events
            .iter()
            .find(|(g, _)| g == gate)
            .map(|(_, d)| d.clone())
    }
}

/// A request's progress token (`_meta.progressToken`, a string or a number) as canonical JSON.
pub(crate) fn progress_token(request: &canonical::Canonical) -> Option<Vec<u8>> {
    let token = request
        .message()
        .param("_meta")
        .and_then(|m| m.get("progressToken"));
    match token {
        Some(t @ (Json::String(_) | Json::Number(_))) => Some(t.to_canonical()),
        _ => None,
    }
}

/// One message for the client (empty bytes: an event that only carries an id or retry hint).
#[derive(Debug, Clone, Default)]
pub struct Relayed {
    pub bytes: Vec<u8>,
    pub event_id: Option<String>,
    pub retry: Option<u64>,
}

/// What one downstream message becomes.
pub(crate) enum Step {
    /// Passed on to the client.
    Relay(Relayed),
    /// The answer to the request being relayed: the last message of the exchange.
    Final(Relayed),
    /// Not for the client; the downstream is answered with these bytes (a refused server
    /// request) before the next message is taken, so the refusal reaches it before the answer
    /// to the client's request is relayed.
    Answer(Vec<u8>),
    /// Not for the client.
    Drop,
}

/// Notifications a server may send a client (2025-06-18 .. 2026-07-28).
const SERVER_NOTIFICATIONS: &[&str] = &[
    "notifications/message",
    "notifications/progress",
    "notifications/cancelled",
    "notifications/resources/updated",
    "notifications/resources/list_changed",
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/elicitation/complete",
];

/// Everything the relay needs, owned, so a stream can outlive the request that started it.
#[derive(Clone)]
pub(crate) struct RelayCtx {
    pub engine: Arc<dyn Engine>,
    pub server_id: String,
    pub limits: Limits,
    pub codes: ErrorCodes,
    pub session: Option<Arc<Session>>,
    /// The request whose answer ends the exchange (none on a server stream).
    pub request: Option<(Id, String)>,
    pub modern: bool,
    /// The proxy's defects (`relay_downstream_verbatim`, `relay_server_requests`); constants
    /// without the `faults` feature.
    pub faults: crate::faults::Faults,
    /// The progress token of the request being relayed (canonical JSON): progress for it is
    /// this client's even without a session (a modern request's stream).
    pub progress_token: Option<Vec<u8>>,
    /// Where the relay's own decisions (list filtering, server requests) are traced, under the
    /// decision id of the exchange and the client's principal.
    pub tracer: Tracer,
    pub decision: String,
    pub principal: Option<String>,
}

pub(crate) fn error_bytes(id: Option<&Id>, code: i64, message: &str) -> Vec<u8> {
    let id = id.map_or_else(|| b"null".to_vec(), Id::to_canonical);
    let mut out = br#"{"jsonrpc":"2.0","id":"#.to_vec();
    out.extend_from_slice(&id);
    out.extend_from_slice(
        format!(r#","error":{{"code":{code},"message":"{message}"}}}}"#).as_bytes(),
    );
    out
}

pub(crate) const MSG_DOWNSTREAM: &str = "Downstream server failed";
const MSG_REFUSED: &str = "Request denied by policy";

/// The message a client gets with a downstream's error code: the gate's own words, never the
/// downstream's (its text and `data` may hold paths, traces or tokens).
fn downstream_error_message(code: i64) -> &'static str {
    match code {
        -32700 => "Parse error",
        -32600 => "Invalid Request",
        -32601 => "Method not found",
        -32602 => "Invalid params",
        -32603 => "Internal error",
        _ => "Downstream error",
    }
}

/// Whether the engine allows an action, for a caller whose token grants `held` scopes (`None`:
/// no token scopes); an engine error denies.
pub(crate) fn allowed(
    engine: &dyn Engine,
    server_id: &str,
    kind: ActionKind,
    subject: &str,
    held: Option<&[String]>,
) -> bool {
    let action = Action {
        kind,
        subject: subject.to_string(),
        scopes: held.map(<[String]>::to_vec),
    };
    matches!(
        engine.decide_action(server_id, &action),
        Ok(Decision::Allow)
    )
}

impl RelayCtx {
    fn allows(&self, kind: ActionKind, subject: &str) -> bool {
        // What the server asks of the client: no client token stands behind it.
        allowed(self.engine.as_ref(), &self.server_id, kind, subject, None)
    }

    /// One trace line of the relay's, under the exchange's decision id.
    fn trace(&self, kind: &str, subject: &str, verdict: &str, shown: Option<(usize, usize)>) {
        self.tracer.record(&Trace {
            decision_id: &self.decision,
            server: &self.server_id,
            tool: crate::trace::bounded(subject),
            kind: Some(kind),
            principal: self.principal.as_deref(),
            verdict,
            shown: shown.map(|(s, _)| s),
            hidden: shown.map(|(_, h)| h),
        });
    }

    /// The request being relayed is answered: it is no longer pending, and its progress token
    /// no longer its client's.
    pub(crate) fn answered(&self) {
        if let (Some(s), Some((id, _))) = (&self.session, &self.request) {
            s.take_pending(id);
        }
        self.settled();
    }

    /// The exchange for the request being relayed is over (answered here, failed, or given up
    /// by its client): its progress token is no longer its client's. Its answer may still come
    /// on a resumed stream (it stays pending).
    pub(crate) fn settled(&self) {
        if let (Some(s), Some((id, _))) = (&self.session, &self.request) {
            s.release_progress(id);
        }
    }

    /// The downstream-failure answer for the request being relayed.
    pub(crate) fn failed(&self) -> Relayed {
        Relayed {
            bytes: error_bytes(
                self.request.as_ref().map(|(id, _)| id),
                self.codes.downstream,
                MSG_DOWNSTREAM,
            ),
            ..Relayed::default()
        }
    }

    /// Decide one downstream message.
    pub(crate) fn step(&self, event: Event) -> Step {
        let mut relayed = Relayed {
            bytes: Vec::new(),
            event_id: None,
            retry: event.retry,
        };
        if let (Some(id), Some(s)) = (&event.id, &self.session) {
            relayed.event_id = s.event_id(id);
        }
        if event.data.is_empty() {
            // A priming event: its id and retry hint only.
            return if relayed.event_id.is_some() || relayed.retry.is_some() {
                Step::Relay(relayed)
            } else {
                Step::Drop
            };
        }
        if self.faults.relay_downstream_verbatim() && self.request.is_some() {
            // The relay-verbatim fault: whatever came is the answer.
            relayed.bytes = event.data;
            return Step::Final(relayed);
        }
        let parsed = canonical::parse_incoming(&event.data, &self.limits);
        let answer_to = |id: &Id| -> Option<String> {
            match &self.request {
                Some((rid, method)) if rid == id => Some(method.clone()),
                _ => None,
            }
        };
        match parsed {
            Ok(Incoming::Reply(reply)) => {
                let id = reply.reply().id.clone();
                if let Some(method) = answer_to(&id) {
                    relayed.bytes = self.finish(&method, &reply).unwrap_or_else(|| {
                        error_bytes(Some(&id), self.codes.downstream, MSG_DOWNSTREAM)
                    });
                    return Step::Final(relayed);
                }
                // An answer to an earlier request of this session, replayed on a resumed stream.
                let earlier = self.session.as_ref().and_then(|s| {
                    let method = s.take_pending(&id)?;
                    s.release_progress(&id);
                    Some(method)
                });
                match earlier {
                    Some(method) => {
                        relayed.bytes = self.finish(&method, &reply).unwrap_or_else(|| {
                            error_bytes(Some(&id), self.codes.downstream, MSG_DOWNSTREAM)
                        });
                        Step::Relay(relayed)
                    }
                    None => Step::Drop,
                }
            }
            Ok(Incoming::Message(c)) => match c.message() {
                Message::Request { id, method, .. } => self.server_request(&c, id, method, relayed),
                Message::Notification { method, .. } => {
                    if !SERVER_NOTIFICATIONS.contains(&method.as_str()) {
                        return Step::Drop;
                    }
                    match self.notification(&c) {
                        Some(bytes) => {
                            relayed.bytes = bytes;
                            Step::Relay(relayed)
                        }
                        None => Step::Drop,
                    }
                }
            },
            // Not a message: if an answer was awaited, the exchange has failed (fail closed).
            Err(_) if self.request.is_some() => Step::Final(self.failed()),
            Err(_) => Step::Drop,
        }
    }

    /// A notification for the client, canonical, or `None` when it is not for this client.
    fn notification(&self, c: &canonical::Canonical) -> Option<Vec<u8>> {
        let m = c.message();
        match m.method() {
            "notifications/resources/updated" => {
                let uri = m.param("uri")?.as_str()?;
                let uri = crate::uri::normalize(uri)?;
                self.allows(ActionKind::Resource, &uri)
                    .then(|| c.forwarding_bytes().to_vec())
            }
            "notifications/cancelled" => {
                // The downstream cancels one of its requests to the client: name it by the id
                // the client was given.
                let session = self.session.as_ref()?;
                let rid = match m.param("requestId")? {
                    Json::String(s) => Id::Str(s.clone()),
                    Json::Number(n) => Id::Int(n.parse().ok()?),
                    _ => return None,
                };
                let gate = session.outgoing_by_downstream(&rid)?;
                let params = replace_param(m.params()?, "requestId", Json::String(gate));
                Some(
                    canonical::Canonical::new(Message::Notification {
                        method: m.method().to_string(),
                        params: Some(params),
                    })
                    .forwarding_bytes()
                    .to_vec(),
                )
            }
            "notifications/progress" => {
                // Only for a request this client sent in this session and is still waiting on:
                // another client's token, or a made-up one, says nothing to this client.
                let token = m.param("progressToken")?;
                let own = self.progress_token.as_deref() == Some(token.to_canonical().as_slice());
                let ours = own
                    || self
                        .session
                        .as_ref()
                        .is_some_and(|s| s.owns_progress(token));
                ours.then(|| c.forwarding_bytes().to_vec())
            }
            _ => Some(c.forwarding_bytes().to_vec()),
        }
    }

    /// A request from the downstream to the client.
    fn server_request(
        &self,
        c: &canonical::Canonical,
        id: &Id,
        method: &str,
        mut relayed: Relayed,
    ) -> Step {
        let session = self.session.as_ref();
        let routed = session.and_then(|s| s.downstream().cloned().map(|d| (s, d)));
        let Some((session, _)) = routed else {
            // No way to route an answer back: nothing to relay.
            return Step::Drop;
        };
        let allowed =
            self.faults.relay_server_requests() || self.allows(ActionKind::ServerRequest, method);
        self.trace(
            "server_request",
            method,
            if allowed { "allow" } else { "deny" },
            None,
        );
        let gate_id = if allowed {
            session.give_outgoing(id.clone())
        } else {
            None
        };
        let Some(gate_id) = gate_id else {
            // Refused: the downstream hears so, the client never sees it (GATE-DOWN-05).
            return Step::Answer(error_bytes(Some(id), self.codes.denied, MSG_REFUSED));
        };
        let params = c.message().params().cloned();
        relayed.bytes = canonical::Canonical::new(Message::Request {
            id: gate_id,
            method: method.to_string(),
            params,
        })
        .forwarding_bytes()
        .to_vec();
        Step::Relay(relayed)
    }

    /// The answer to `method`, validated and filtered by policy; `None` when it is not one to
    /// relay (a result that is not an object, or an error the table flattens).
    fn finish(&self, method: &str, reply: &CanonicalReply) -> Option<Vec<u8>> {
        let members = match &reply.reply().outcome {
            Outcome::Result(members) => members,
            Outcome::Error { code, .. } => return self.passed_error(&reply.reply().id, *code),
        };
        if let Err(answer) = self.input_required(&reply.reply().id, members) {
            return answer;
        }
        let (list, key, kind) = match method {
            "tools/list" => ("tools", "name", None),
            "resources/list" => ("resources", "uri", Some(ActionKind::Resource)),
            "resources/templates/list" => (
                "resourceTemplates",
                "uriTemplate",
                Some(ActionKind::Resource),
            ),
            "prompts/list" => ("prompts", "name", Some(ActionKind::Prompt)),
            _ => return Some(reply.forwarding_bytes().to_vec()),
        };
        let visible = |item: &Json| -> bool {
            let Some(subject) = item.get(key).and_then(Json::as_str) else {
                return false;
            };
            match kind {
                None => self.engine.visible(&self.server_id, subject),
                Some(ActionKind::Resource) if key == "uri" => crate::uri::normalize(subject)
                    .is_some_and(|u| self.allows(ActionKind::Resource, &u)),
                Some(k) => self.allows(k, subject),
            }
        };
        let mut out: Vec<(String, Json)> = Vec::new();
        for (k, v) in members {
            if k == list {
                let Json::Array(all) = v else {
                    return None;
                };
                let items: Vec<Json> = all.iter().filter(|i| visible(i)).cloned().collect();
                let hidden = all.len() - items.len();
                self.trace("list", method, "filter", Some((items.len(), hidden)));
                out.push((k.clone(), Json::Array(items)));
            } else {
                out.push((k.clone(), v.clone()));
            }
        }
        if !out.iter().any(|(k, _)| k == list) {
            out.push((list.to_string(), Json::Array(Vec::new())));
        }
        if self.modern && !out.iter().any(|(k, _)| k == "resultType") {
            out.push(("resultType".into(), Json::String("complete".into())));
        }
        let reply = CanonicalReply::new(Reply {
            id: reply.reply().id.clone(),
            outcome: Outcome::Result(out),
        });
        Some(reply.forwarding_bytes().to_vec())
    }
}

/// What a 2026-07-28 server may ask of a client inside an `input_required` result.
const INPUT_REQUESTS: &[&str] = &["sampling/createMessage", "elicitation/create", "roots/list"];

impl RelayCtx {
    /// An `input_required` result (a 2026-07-28 multi round-trip request) carries the server's
    /// requests to the client inside it: each is decided like a server request (GATE-DOWN-05),
    /// and the round reaches the client only when every one is allowed. `Ok`: not such a
    /// result, or every request allowed (the result is relayed as it is). `Err`: the answer
    /// instead, the denied code for a refused request, or `None` (the downstream-failure
    /// answer) for requests the gate cannot read.
    fn input_required(&self, id: &Id, members: &[(String, Json)]) -> Result<(), Option<Vec<u8>>> {
        let result = |k: &str| members.iter().find(|(m, _)| m == k).map(|(_, v)| v);
        if result("resultType").and_then(Json::as_str) != Some("input_required") {
            return Ok(());
        }
        let requests = match result("inputRequests") {
            None => return Ok(()),
            Some(Json::Object(requests)) => requests,
            Some(_) => return Err(None),
        };
        for (_, request) in requests {
            let Some(method) = request.get("method").and_then(Json::as_str) else {
                return Err(None);
            };
            let allowed = INPUT_REQUESTS.contains(&method)
                && (self.faults.relay_server_requests()
                    || self.allows(ActionKind::ServerRequest, method));
            self.trace(
                "server_request",
                method,
                if allowed { "allow" } else { "deny" },
                None,
            );
            if !allowed {
                return Err(Some(error_bytes(Some(id), self.codes.denied, MSG_REFUSED)));
            }
        }
        Ok(())
    }

    /// A downstream's JSON-RPC error as the client gets it (GATE-DOWN-03): its code, the gate's
    /// message for it, no `data`. `None` (the downstream-failure answer) when the table
    /// flattens downstream errors, or for a code the gate answers with itself.
    fn passed_error(&self, id: &Id, code: i64) -> Option<Vec<u8>> {
        let c = self.codes;
        let own = [c.malformed, c.denied, c.downstream].contains(&code);
        if c.downstream_errors == DownstreamErrors::Flatten || own {
            return None;
        }
        Some(error_bytes(Some(id), code, downstream_error_message(code)))
    }
}

/// `params` with one member replaced (or added).
pub(crate) fn replace_param(
    params: &[(String, Json)],
    key: &str,
    value: Json,
) -> Vec<(String, Json)> {
    let mut out: Vec<(String, Json)> = params.iter().filter(|(k, _)| k != key).cloned().collect();
    out.push((key.to_string(), value));
    out
}

/// Feed a downstream stream through the relay until the answer (or the end), sending what
/// passes to `out`. On a timeout or failure the client gets the downstream-failure answer and
/// the downstream a cancellation (GATE-DOWN-04). A stream that ends after an event id without
/// the answer ends quietly: the client resumes it with `Last-Event-ID`.
pub(crate) async fn pump(
    ctx: RelayCtx,
    mut events: crate::forward::Events,
    out: tokio::sync::mpsc::Sender<Relayed>,
) {
    let mut resumable = false;
    loop {
        let event = tokio::select! {
            _ = out.closed() => None,
            e = events.recv() => Some(e),
        };
        let Some(event) = event else {
            // The client went away: the downstream need not go on.
            cancel(&ctx, "client disconnected").await;
            ctx.settled();
            return;
        };
        match event {
            Some(Ok(event)) => {
                resumable = event.id.is_some();
                match ctx.step(event) {
                    Step::Relay(r) => {
                        if out.send(r).await.is_err() {
                            cancel(&ctx, "client disconnected").await;
                            ctx.settled();
                            return;
                        }
                    }
                    Step::Final(r) => {
                        ctx.answered();
                        let _ = out.send(r).await;
                        return;
                    }
                    Step::Answer(bytes) => answer_downstream(&ctx, &bytes).await,
                    Step::Drop => {}
                }
            }
            Some(Err(e)) => {
                if ctx.request.is_some() {
                    if matches!(e, ForwardError::Timeout) {
                        cancel(&ctx, "timeout").await;
                    }
                    ctx.settled();
                    let _ = out.send(ctx.failed()).await;
                }
                return;
            }
            None => {
                if ctx.request.is_some() && !resumable {
                    ctx.settled();
                    let _ = out.send(ctx.failed()).await;
                }
                return;
            }
        }
    }
}

/// How long the relay waits for the downstream to take a message of the gate's own (a refusal,
/// a cancellation) before it goes on (the delivery itself goes on in the background).
const DELIVERY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Send the downstream a message of the gate's own and wait until it took it, so that it is on
/// record there before the client's answer goes out, but at most [`DELIVERY_WAIT`]: a downstream
/// that keeps its answer stream open, or stopped reading, does not hold the client's exchange.
async fn deliver_bounded(ctx: &RelayCtx, bytes: Vec<u8>) {
    let downstream = ctx.session.as_ref().and_then(|s| s.downstream().cloned());
    if let Some(downstream) = downstream {
        let delivery = tokio::spawn(async move { downstream.deliver(&bytes).await });
        let _ = tokio::time::timeout(DELIVERY_WAIT, delivery).await;
    }
}

/// Answer the downstream (a refused server request) before the client's exchange goes on.
pub(crate) async fn answer_downstream(ctx: &RelayCtx, bytes: &[u8]) {
    deliver_bounded(ctx, bytes.to_vec()).await;
}

/// Tell the downstream the request being relayed is abandoned (GATE-DOWN-04), before the client
/// hears of the failure: a cancellation that arrived after the client's answer would land in
/// whatever the client sends next.
pub(crate) async fn cancel(ctx: &RelayCtx, reason: &str) {
    let Some((id, _)) = &ctx.request else {
        return;
    };
    let id = String::from_utf8_lossy(&id.to_canonical()).into_owned();
    let bytes = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"reason":"{reason}","requestId":{id}}}}}"#
    )
    .into_bytes();
    deliver_bounded(ctx, bytes).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Effect, Rule, RuleEngine};

    /// Trace lines written to memory.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::ErrorKind::Other)?
                .extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Lines {
        fn traces(&self) -> Vec<serde_json::Value> {
            let text = self.0.lock().map(|b| b.clone()).unwrap_or_default();
            String::from_utf8_lossy(&text)
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        }
    }

    /// A relay for request `id` (`method`) in a session, under a policy that allows the tool
    /// `echo` and nothing else.
    fn relay(id: Id, method: &str, codes: ErrorCodes) -> (RelayCtx, Arc<Session>, Lines) {
        let session = Session::new(None);
        let lines = Lines::default();
        let ctx = RelayCtx {
            engine: Arc::new(RuleEngine {
                rules: vec![Rule::tool(Effect::Allow, "*", "echo")],
            }),
            server_id: "s".into(),
            limits: Limits::default(),
            codes,
            session: Some(session.clone()),
            request: Some((id, method.into())),
            modern: false,
            faults: crate::faults::Faults::NONE,
            progress_token: None,
            tracer: Tracer::to(Box::new(lines.clone())),
            decision: "d-1".into(),
            principal: Some("alice".into()),
        };
        (ctx, session, lines)
    }

    fn event(json: &str) -> Event {
        Event {
            data: json.as_bytes().to_vec(),
            ..Event::default()
        }
    }

    fn relayed(step: Step) -> Option<serde_json::Value> {
        match step {
            Step::Relay(r) | Step::Final(r) => serde_json::from_slice(&r.bytes).ok(),
            Step::Answer(_) | Step::Drop => None,
        }
    }

    #[test]
    fn progress_passes_only_for_a_token_the_client_sent_while_its_request_is_open() {
        let (ctx, session, _) = relay(Id::Int(5), "tools/call", ErrorCodes::default());
        let request = canonical::parse(
            br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"progressToken":"mine"}}}"#,
            &Limits::default(),
        )
        .expect("a request");
        session.add_progress(&request);
        let progress = |token: &str| {
            event(&format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{token},"progress":1}}}}"#
            ))
        };
        assert!(relayed(ctx.step(progress(r#""mine""#))).is_some());
        // Another client's token, a made-up one, or the same text as a number: not this
        // client's.
        for other in [r#""theirs""#, "5", r#""mine ""#] {
            assert!(relayed(ctx.step(progress(other))).is_none(), "{other}");
        }
        // Once the request is answered its token is no longer this client's.
        ctx.answered();
        assert!(relayed(ctx.step(progress(r#""mine""#))).is_none());
    }

    #[test]
    fn a_downstream_error_keeps_its_code_in_the_gate_s_words() {
        let answer = r#"{"jsonrpc":"2.0","id":9,"error":{"code":CODE,"message":"at /srv/app.py line 3","data":{"token":"s3cret"}}}"#;
        let answer_with = |code: i64| event(&answer.replace("CODE", &code.to_string()));
        let codes = ErrorCodes::default();
        let (ctx, _, _) = relay(Id::Int(9), "tools/call", codes);
        let got = relayed(ctx.step(answer_with(-32602))).expect("an answer");
        assert_eq!(got["id"], 9);
        assert_eq!(got["error"]["code"], -32602);
        assert_eq!(got["error"]["message"], "Invalid params");
        assert!(got["error"].get("data").is_none(), "{got}");
        let got = relayed(ctx.step(answer_with(-31337))).expect("an answer");
        assert_eq!(got["error"]["code"], -31337);
        assert_eq!(got["error"]["message"], "Downstream error");
        // A code the gate answers with itself would read as the gate's own verdict: flattened.
        for own in [codes.denied, codes.malformed, codes.downstream] {
            let got = relayed(ctx.step(answer_with(own))).expect("an answer");
            assert_eq!(got["error"]["code"], codes.downstream, "{own}");
        }
        // Configured to flatten: every downstream error is the downstream-failure answer.
        let flatten = ErrorCodes {
            downstream_errors: DownstreamErrors::Flatten,
            ..codes
        };
        let (ctx, _, _) = relay(Id::Int(9), "tools/call", flatten);
        let got = relayed(ctx.step(answer_with(-32602))).expect("an answer");
        assert_eq!(got["error"]["code"], codes.downstream);
        assert_eq!(got["error"]["message"], MSG_DOWNSTREAM);
    }

    #[test]
    fn list_filtering_and_server_requests_are_traced() {
        let (ctx, _, lines) = relay(Id::Int(3), "tools/list", ErrorCodes::default());
        let list = r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"echo"},{"name":"delete_everything"},{"name":"other"}]}}"#;
        let got = relayed(ctx.step(event(list))).expect("the list");
        assert_eq!(got["result"]["tools"].as_array().map(Vec::len), Some(1));
        // A server request needs a downstream session to be answered through; the policy
        // allows none, so it is refused and traced.
        let (ctx, _, server_lines) = relay(Id::Int(4), "tools/call", ErrorCodes::default());
        let downstream: Arc<dyn Downstream> = Arc::new(NoDownstream);
        let session = Session::new(Some(downstream));
        let ctx = RelayCtx {
            session: Some(session),
            ..ctx
        };
        let ask = r#"{"jsonrpc":"2.0","id":70,"method":"sampling/createMessage","params":{}}"#;
        assert!(matches!(ctx.step(event(ask)), Step::Answer(_)));
        let traces = lines.traces();
        assert_eq!(traces.len(), 1, "{traces:?}");
        let t = &traces[0];
        assert_eq!(
            (&t["kind"], &t["tool"], &t["verdict"]),
            (&"list".into(), &"tools/list".into(), &"filter".into())
        );
        assert_eq!((&t["shown"], &t["hidden"]), (&1.into(), &2.into()));
        assert_eq!(
            (&t["decision_id"], &t["principal"]),
            (&"d-1".into(), &"alice".into())
        );
        let traces = server_lines.traces();
        assert_eq!(traces.len(), 1, "{traces:?}");
        let t = &traces[0];
        assert_eq!(
            (&t["kind"], &t["tool"], &t["verdict"]),
            (
                &"server_request".into(),
                &"sampling/createMessage".into(),
                &"deny".into()
            )
        );
    }

    #[test]
    fn an_input_required_round_reaches_the_client_only_when_the_policy_allows_every_request() {
        let (ctx, _, lines) = relay(Id::Int(8), "tools/call", ErrorCodes::modern());
        let rules = vec![
            Rule::tool(Effect::Allow, "*", "echo"),
            serde_json::from_str::<Rule>(
                r#"{"effect":"allow","server_request":"elicitation/create"}"#,
            )
            .expect("a rule"),
        ];
        let ctx = RelayCtx {
            engine: Arc::new(RuleEngine { rules }),
            ..ctx
        };
        let round = |requests: &str| {
            event(&format!(
                r#"{{"jsonrpc":"2.0","id":8,"result":{{"resultType":"input_required","inputRequests":{requests},"requestState":"s-1"}}}}"#
            ))
        };
        let ask =
            |key: &str, method: &str| format!(r#""{key}":{{"method":"{method}","params":{{}}}}"#);
        // Every request allowed: the round is relayed as it is.
        let got = relayed(ctx.step(round(&format!("{{{}}}", ask("q", "elicitation/create")))))
            .expect("the round");
        assert_eq!(
            got["result"]["inputRequests"]["q"]["method"],
            "elicitation/create"
        );
        // One request the policy refuses (or no method the protocol has): the client is refused,
        // and never sees the requests.
        for requests in [
            format!(
                "{{{},{}}}",
                ask("q", "elicitation/create"),
                ask("s", "sampling/createMessage")
            ),
            format!("{{{}}}", ask("x", "tools/call")),
        ] {
            let got = relayed(ctx.step(round(&requests))).expect("an answer");
            assert_eq!(
                got["error"]["code"],
                ErrorCodes::modern().denied,
                "{requests}"
            );
            assert!(got.get("result").is_none());
        }
        // Requests the gate cannot read: the downstream failed.
        let got = relayed(ctx.step(round(r#"[{"method":"roots/list"}]"#))).expect("an answer");
        assert_eq!(got["error"]["code"], ErrorCodes::modern().downstream);
        // A complete result is not a round.
        let done = r#"{"jsonrpc":"2.0","id":8,"result":{"resultType":"complete","content":[]}}"#;
        assert!(
            relayed(ctx.step(event(done))).is_some_and(|v| v["result"]["resultType"] == "complete")
        );
        let verdicts: Vec<(String, String)> = lines
            .traces()
            .iter()
            .map(|t| (t["tool"].to_string(), t["verdict"].to_string()))
            .collect();
        assert!(
            verdicts.contains(&(r#""sampling/createMessage""#.into(), r#""deny""#.into())),
            "{verdicts:?}"
        );
    }

    /// A downstream session that is never used.
    struct NoDownstream;

    impl Downstream for NoDownstream {
        fn send<'a>(
            &'a self,
            _canonical: &'a [u8],
            _expects_answer: bool,
        ) -> crate::forward::BoxFuture<'a, Result<crate::forward::Events, ForwardError>> {
            Box::pin(async { Err(ForwardError::Unreachable) })
        }
        fn listen<'a>(
            &'a self,
            _last_event_id: Option<&'a str>,
        ) -> crate::forward::BoxFuture<'a, Result<Option<crate::forward::Events>, ForwardError>>
        {
            Box::pin(async { Ok(None) })
        }
        fn close(&self) -> crate::forward::BoxFuture<'_, ()> {
            Box::pin(async {})
        }
        fn version(&self) -> &str {
            "2025-11-25"
        }
    }
}
