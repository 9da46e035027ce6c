//! One client request's facts, fixed before any handler runs: its id and method, the decision
//! id its trace lines share, the era it claimed and the error codes that follow from it, the
//! relay context a forward uses, and the scope a denial would have needed. Its methods are the
//! only ways a handler decides (`allows`), refuses (`denied`, `bad_params`, `unknown`), answers
//! (`answer`) or forwards (`forward`), so every method's handler reads the same way.

use super::{
    error_bytes, Answer, Credentials, Handled, Proxy, ProxyResult, MSG_BAD_META, MSG_DENIED,
    MSG_NO_METHOD,
};
use crate::canonical::{Canonical, Id};
use crate::config::ErrorCodes;
use crate::policy::ActionKind;
use crate::relay::{self, RelayCtx, Session};
use crate::trace::{bounded, Trace};
use std::sync::{Arc, Mutex};

/// A result with no bytes of its own decided yet: the decision id and era of the message.
pub(super) fn result(
    decision: &str,
    modern: bool,
    bytes: Option<Vec<u8>>,
    handled: Handled,
) -> ProxyResult {
    ProxyResult {
        bytes,
        handled,
        decision_id: decision.to_string(),
        scope_needed: None,
        negotiated: None,
        modern,
    }
}

/// A request being handled.
pub(super) struct Request<'a> {
    pub proxy: &'a Proxy,
    pub server_id: &'a str,
    /// What the message came as (the `tools/call` path judges these bytes too).
    pub raw: &'a [u8],
    pub c: &'a Canonical,
    pub credentials: &'a Credentials,
    pub id: &'a Id,
    pub method: &'a str,
    /// Shared by every trace line and the answer of this request.
    pub decision: String,
    /// Whether the message claimed a modern era (per-request `_meta`).
    pub modern: bool,
    pub codes: ErrorCodes,
    pub ctx: RelayCtx,
    /// The scope a denied use would have needed (403 `insufficient_scope` over HTTP).
    needed: Mutex<Option<String>>,
}

impl<'a> Request<'a> {
    #[allow(
        clippy::too_many_arguments,
        reason = "the request's facts as the dispatcher has them; each handler then reads them from one place"
    )]
    pub(super) fn new(
        proxy: &'a Proxy,
        server_id: &'a str,
        session: Option<&Arc<Session>>,
        raw: &'a [u8],
        c: &'a Canonical,
        credentials: &'a Credentials,
        (id, method): (&'a Id, &'a str),
        decision: String,
        modern: bool,
    ) -> Request<'a> {
        let codes = if modern {
            proxy.modern_codes
        } else {
            proxy.codes
        };
        let ctx = RelayCtx {
            engine: proxy.engine.clone(),
            server_id: server_id.to_string(),
            limits: proxy.downstream_limits(),
            codes,
            session: session.cloned(),
            request: Some((id.clone(), method.to_string())),
            modern,
            faults: proxy.faults,
            progress_token: relay::progress_token(c),
            tracer: proxy.tracer.clone(),
            decision: decision.clone(),
            principal: credentials.principal.clone(),
        };
        Request {
            proxy,
            server_id,
            raw,
            c,
            credentials,
            id,
            method,
            decision,
            modern,
            codes,
            ctx,
            needed: Mutex::new(None),
        }
    }

    /// An answer the gate gives itself.
    pub(super) fn answer(&self, bytes: Vec<u8>, handled: Handled) -> Answer {
        Answer::Done(result(&self.decision, self.modern, Some(bytes), handled))
    }

    /// Whether a rule allows this use of a resource, prompt or method: decided once, traced,
    /// and on a denial the scope it would have needed is kept for the answer.
    pub(super) fn allows(&self, kind: ActionKind, subject: &str) -> bool {
        let (proxy, held) = (self.proxy, self.credentials.scopes.as_deref());
        let allowed = relay::allowed(proxy.engine.as_ref(), self.server_id, kind, subject, held);
        if !allowed {
            let scope = proxy
                .engine
                .missing_scope(self.server_id, Some(kind), subject, held);
            if let (Some(scope), Ok(mut n)) = (scope, self.needed.lock()) {
                n.get_or_insert(scope);
            }
        }
        proxy.tracer.record(&Trace {
            decision_id: &self.decision,
            server: self.server_id,
            tool: bounded(subject),
            kind: Some(match kind {
                ActionKind::Resource => "resource",
                ActionKind::Prompt => "prompt",
                ActionKind::Method => "method",
                ActionKind::ServerRequest => "server_request",
            }),
            principal: self.credentials.principal.as_deref(),
            verdict: if allowed { "allow" } else { "deny" },
            shown: None,
            hidden: None,
        });
        allowed
    }

    /// The policy's refusal, with the scope a denied use would have needed.
    pub(super) fn denied(&self) -> Answer {
        let mut r = result(
            &self.decision,
            self.modern,
            Some(error_bytes(Some(self.id), self.codes.denied, MSG_DENIED)),
            Handled::Denied,
        );
        r.scope_needed = self.needed.lock().ok().and_then(|mut n| n.take());
        Answer::Done(r)
    }

    /// Parameters the gate cannot judge (a missing or malformed name or URI).
    pub(super) fn bad_params(&self) -> Answer {
        self.answer(
            error_bytes(Some(self.id), -32602, MSG_BAD_META),
            Handled::Local,
        )
    }

    /// A method that does not exist here.
    pub(super) fn unknown(&self) -> Answer {
        self.answer(
            error_bytes(Some(self.id), -32601, MSG_NO_METHOD),
            Handled::UnknownMethod,
        )
    }

    /// `bytes` (canonical) downstream, in this request's session and era.
    pub(super) async fn forward(&self, bytes: Vec<u8>) -> Answer {
        self.proxy.forward(self.ctx.clone(), self.c, bytes).await
    }

    /// The request's own canonical bytes downstream.
    pub(super) async fn forward_as_sent(&self) -> Answer {
        self.forward(self.c.forwarding_bytes().to_vec()).await
    }
}
