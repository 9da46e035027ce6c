//! Client sessions: opening one (with the client's own downstream session when the forwarder
//! keeps one per client), a client's answer to a server request relayed in it, and the server's
//! own stream for it.

use super::{
    decision_id, error_bytes, Credentials, Handled, Proxy, ProxyResult, Refusal, MAX_CACHED_ANSWERS,
};
use crate::canonical::{self, Canonical, Id, Json, Message};
use crate::era::{self, Claim, Version};
use crate::policy::ActionKind;
use crate::relay::{self, RelayCtx, Relayed, Session, MSG_DOWNSTREAM};
use std::sync::Arc;

/// The `initialize` a client's downstream session opens with, and the key its answer is
/// remembered under.
struct DownstreamInit {
    init: Canonical,
    key: Vec<u8>,
}

impl Proxy {
    /// A client's `initialize` in a front that keeps sessions: the session, with its own
    /// downstream session when the forwarder keeps one per client (the client's version, and
    /// only the client capabilities the policy lets the server use), else answered here. Every
    /// early return leaves no half-open session behind: a downstream session whose answer is
    /// unusable is closed.
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
        let Some(requested) = requested.and_then(|v| self.legacy_named(v)) else {
            return self.open_locally(server_id, raw, c, credentials).await;
        };
        let DownstreamInit { init, key } = self.downstream_init(server_id, c, id, requested);
        let decision = decision_id();
        // The downstream answered this very initialize before (the same version and client
        // capabilities): answer from that, and open the client's downstream session only when
        // a message needs it.
        if let Some((version, out)) = self.cached_answer(&key) {
            let session = Session::lazy(relay::Opener {
                forwarder: self.forwarder.clone(),
                server_id: server_id.to_string(),
                init: init.forwarding_bytes().to_vec(),
                version,
            });
            return (opened(id, &decision, version, out), Some(session));
        }
        let failed = || {
            let bytes = error_bytes(Some(id), self.codes.downstream, MSG_DOWNSTREAM);
            let r =
                super::request::result(&decision, false, Some(bytes), Handled::DownstreamFailed);
            (r, None)
        };
        let (downstream, answer) = match self
            .forwarder
            .open(server_id, init.forwarding_bytes())
            .await
        {
            Ok(Some(opened)) => opened,
            Ok(None) => return self.open_locally(server_id, raw, c, credentials).await,
            Err(_) => return failed(),
        };
        let Some((version, out)) = self.initialize_result(&answer, id) else {
            tokio::spawn(async move { downstream.close().await });
            return failed();
        };
        self.remember_answer(key, version, &out);
        let session = Session::new(Some(downstream));
        (opened(id, &decision, version, out), Some(session))
    }

    /// The `initialize` sent downstream for a client: its version, only the client
    /// capabilities whose server requests the policy allows, and its `clientInfo` (else the
    /// gate's).
    fn downstream_init(
        &self,
        server_id: &str,
        c: &Canonical,
        id: &Id,
        version: Version,
    ) -> DownstreamInit {
        let client_caps = c.message().param("capabilities");
        let mut caps = Vec::new();
        for (cap, method) in [
            ("sampling", "sampling/createMessage"),
            ("elicitation", "elicitation/create"),
            ("roots", "roots/list"),
        ] {
            let engine = self.engine.as_ref();
            if let Some(v @ Json::Object(_)) = client_caps.and_then(|c| c.get(cap)) {
                if relay::allowed(engine, server_id, ActionKind::ServerRequest, method, None) {
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
        let params = vec![
            ("protocolVersion".into(), Json::String(version.to_string())),
            ("capabilities".into(), Json::Object(caps)),
            ("clientInfo".into(), client_info),
        ];
        let key = Json::Object(params.clone()).to_canonical();
        let init = Canonical::new(Message::Request {
            id: id.clone(),
            method: "initialize".into(),
            params: Some(params),
        });
        DownstreamInit { init, key }
    }

    /// The downstream's remembered answer to this `initialize`, if any.
    fn cached_answer(&self, key: &[u8]) -> Option<(Version, Vec<(String, Json)>)> {
        let cache = self.answers.lock().ok()?;
        cache.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    /// Remember a downstream's answer to an `initialize`; the oldest goes at the bound.
    fn remember_answer(&self, key: Vec<u8>, version: Version, out: &[(String, Json)]) {
        if let Ok(mut cache) = self.answers.lock() {
            if cache.len() >= MAX_CACHED_ANSWERS {
                cache.remove(0);
            }
            cache.push((key, (version, out.to_vec())));
        }
    }

    /// The downstream's answer to the client's `initialize` (`id`), as the client is given it:
    /// a result agreeing to a legacy version the gate speaks, its capabilities narrowed to what
    /// the gate relays (tools, resources, prompts, logging, completions), with the server's
    /// `serverInfo` and `instructions`. `None` for anything else.
    fn initialize_result(&self, answer: &[u8], id: &Id) -> Option<(Version, Vec<(String, Json)>)> {
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
            .and_then(|v| self.legacy_named(v))?;
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
            (
                "protocolVersion".to_string(),
                Json::String(version.to_string()),
            ),
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
    pub(crate) async fn client_reply(&self, session: &Session, raw: &[u8]) -> Result<(), Refusal> {
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
            Err(crate::forward::ForwardError::StreamOpen) => return Err(Refusal::StreamOpen),
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
}

/// The answer to a client's `initialize` whose session opened: the result it is given, at the
/// version agreed.
fn opened(id: &Id, decision: &str, version: Version, out: Vec<(String, Json)>) -> ProxyResult {
    let answer = canonical::CanonicalReply::new(canonical::Reply {
        id: id.clone(),
        outcome: canonical::Outcome::Result(out),
    });
    let bytes = Some(answer.forwarding_bytes().to_vec());
    let mut r = super::request::result(decision, false, bytes, Handled::Forwarded);
    r.negotiated = Some(version);
    r
}
