//! Client sessions and what passes from a downstream to a client.
//!
//! Every message a downstream sends is canonicalized with the same parser and bounds as a
//! client's, then decided: the answer to the client's request is validated and filtered; a
//! notification passes when it is one the protocol defines (a resource update only for a URI the
//! policy allows); a request to the client (sampling, elicitation, roots) passes only when the
//! policy allows it for this server, under a gate-owned id that exists only in this client's
//! session, and is otherwise refused to the downstream and never shown to the client.

use crate::canonical::{self, CanonicalReply, Id, Incoming, Json, Limits, Message, Outcome, Reply};
use crate::config::ErrorCodes;
use crate::forward::{Downstream, Event, ForwardError};
use crate::policy::{Action, ActionKind, Decision, Engine};
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
    pub version: String,
}

/// The gate's state for one client session.
pub struct Session {
    downstream: tokio::sync::OnceCell<Arc<dyn Downstream>>,
    opener: Option<Opener>,
    /// Server-to-client requests relayed to this client: gate id -> the downstream's id.
    outgoing: Mutex<HashMap<String, Id>>,
    /// This client's requests forwarded and not yet answered: id -> method.
    pending: Mutex<HashMap<Id, String>>,
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
                            .map(str::to_string)
                    });
                if agreed.as_deref() != Some(o.version.as_str()) {
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
    pub fn downstream_event(&self, gate: &str) -> Option<String> {
        let events = self.events.lock().ok()?;
        events
            .iter()
            .find(|(g, _)| g == gate)
            .map(|(_, d)| d.clone())
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

    /// The downstream-failure answer for the request being relayed.
    pub fn failed(&self) -> Relayed {
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
    pub fn step(&self, event: Event) -> Step {
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
                let earlier = self.session.as_ref().and_then(|s| s.take_pending(&id));
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
                let uri = normalize_uri(uri)?;
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
    /// relay (an error, or a result that is not an object).
    fn finish(&self, method: &str, reply: &CanonicalReply) -> Option<Vec<u8>> {
        let Outcome::Result(members) = &reply.reply().outcome else {
            return None;
        };
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
                Some(ActionKind::Resource) if key == "uri" => {
                    normalize_uri(subject).is_some_and(|u| self.allows(ActionKind::Resource, &u))
                }
                Some(k) => self.allows(k, subject),
            }
        };
        let mut out: Vec<(String, Json)> = Vec::new();
        for (k, v) in members {
            if k == list {
                let items = match v {
                    Json::Array(items) => items.iter().filter(|i| visible(i)).cloned().collect(),
                    _ => return None,
                };
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
            return;
        };
        match event {
            Some(Ok(event)) => {
                resumable = event.id.is_some();
                match ctx.step(event) {
                    Step::Relay(r) => {
                        if out.send(r).await.is_err() {
                            cancel(&ctx, "client disconnected").await;
                            return;
                        }
                    }
                    Step::Final(r) => {
                        if let (Some(s), Some((id, _))) = (&ctx.session, &ctx.request) {
                            s.take_pending(id);
                        }
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
                    let _ = out.send(ctx.failed()).await;
                }
                return;
            }
            None => {
                if ctx.request.is_some() && !resumable {
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

/// The one spelling of a resource URI the policy judges and the downstream receives, or `None`
/// for a URI the gate refuses to judge: not `scheme:rest`, control or space characters,
/// backslashes, malformed or encoded-reserved percent escapes (`%2F`), or `.`/`..` path
/// segments in any spelling. The scheme is lowercased, escapes of unreserved characters are
/// decoded and the remaining escapes uppercased (RFC 3986 section 6.2.2).
pub fn normalize_uri(uri: &str) -> Option<String> {
    let (scheme, rest) = uri.split_once(':')?;
    let scheme_ok = scheme
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.');
    if !scheme_ok {
        return None;
    }
    let mut out = scheme.to_ascii_lowercase();
    out.push(':');
    let bytes = rest.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b <= 0x20 || b == 0x7f || b == b'\\' {
            return None;
        }
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let text = std::str::from_utf8(hex).ok()?;
            let v = u8::from_str_radix(text, 16).ok()?;
            let unreserved = v.is_ascii_alphanumeric() || b"-._~".contains(&v);
            if unreserved {
                decoded.push(v);
            } else if v == b'/' || v == b'\\' || v == b'%' || v < 0x20 || v == 0x7f {
                // An encoded separator or escape means another reader may see another path.
                return None;
            } else {
                decoded.extend_from_slice(format!("%{v:02X}").as_bytes());
            }
            i += 3;
            continue;
        }
        decoded.push(b);
        i += 1;
    }
    let rest = String::from_utf8(decoded).ok()?;
    // The path part (before `?` or `#`): no dot segments.
    let path = rest.split(['?', '#']).next().unwrap_or("");
    let path = path.strip_prefix("//").map_or(path, |p| match p.find('/') {
        Some(i) => &p[i..],
        None => "",
    });
    if path.split('/').any(|seg| seg == "." || seg == "..") {
        return None;
    }
    out.push_str(&rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_have_one_spelling_or_none() {
        let n = |u: &str| normalize_uri(u);
        assert_eq!(
            n("test://static-text").as_deref(),
            Some("test://static-text")
        );
        assert_eq!(
            n("TEST://static-text").as_deref(),
            Some("test://static-text")
        );
        assert_eq!(
            n("test://secret%2Dkey").as_deref(),
            Some("test://secret-key")
        );
        assert_eq!(n("test://s%65cret").as_deref(), Some("test://secret"));
        assert_eq!(n("test://a%3ab").as_deref(), Some("test://a%3Ab"));
        for bad in [
            "test://public/../secret",
            "test://public/%2e%2e/secret",
            "test://public/.%2E/secret",
            "test://public/./secret",
            "test://public%2Fsecret",
            "test://public\\secret",
            "test://a b",
            "test://a%zz",
            "test://a%4",
            "no-scheme",
            "1x://a",
            "test://a%00",
        ] {
            assert_eq!(n(bad), None, "{bad}");
        }
        // Dots inside a name are not segments.
        assert!(n("file:///srv/a..b/c.txt").is_some());
    }
}
