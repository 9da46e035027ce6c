//! `tools/call`: the one decision the policy engine makes on a tool's use (under its deadline,
//! traced), then a denial in the gate's words or the canonical bytes downstream. The test
//! build's faults sit beside the branches they break.

use super::request::{self, Request};
use super::{error_bytes, Answer, Handled, Proxy, ENGINE_DEADLINE, MSG_DENIED, MSG_MALFORMED};
use crate::policy::{AgentActionRequest, Decision};
use crate::relay::MSG_DOWNSTREAM;
use crate::trace::Trace;
use std::time::SystemTime;

impl Proxy {
    /// A `tools/call` request: decided once by the engine, traced, then denied or forwarded.
    pub(super) async fn tools_call(&self, r: &Request<'_>) -> Answer {
        let Some(call) = r.c.tool_call() else {
            return self.unreadable_call(r).await;
        };
        let request = AgentActionRequest {
            server_id: r.server_id.to_string(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            principal: r.credentials.principal.clone(),
            scopes: self.scopes_held(r, &call.name),
            timestamp: SystemTime::now(),
            request_id: call.id.clone(),
        };
        let (verdict, engine_text) = self.decide(request).await;
        self.tracer.record(&Trace {
            decision_id: &r.decision,
            server: r.server_id,
            tool: &call.name,
            kind: None,
            principal: r.credentials.principal.as_deref(),
            verdict: match verdict {
                Decision::Allow => "allow",
                Decision::Deny => "deny",
            },
            shown: None,
            hidden: None,
        });
        if verdict == Decision::Deny {
            return self.call_denied(r, &call.name, engine_text);
        }
        let outgoing = if self.faults.forward_raw() {
            r.raw
        } else {
            r.c.forwarding_bytes()
        };
        // Only a well-formed success answer for this id is relayed (or a downstream error in
        // the gate's words, GATE-DOWN-03).
        r.forward(outgoing.to_vec()).await
    }

    /// A call the canonical parser let through without a readable tool call. It cannot happen
    /// (the parser guarantees one), so it is refused; under the lax-envelope fault it goes
    /// through unchecked.
    async fn unreadable_call(&self, r: &Request<'_>) -> Answer {
        if !self.faults.leniency().lax_envelope() {
            return r.answer(
                error_bytes(None, r.codes.malformed, MSG_MALFORMED),
                Handled::Malformed,
            );
        }
        let sent = self
            .forwarder
            .forward(r.server_id, r.c.forwarding_bytes(), true)
            .await;
        match sent {
            Ok(answer) => r.answer(answer, Handled::Forwarded),
            Err(_) => r.answer(
                error_bytes(Some(r.id), r.codes.downstream, MSG_DOWNSTREAM),
                Handled::DownstreamFailed,
            ),
        }
    }

    /// The scopes the caller's token grants, as the engine is told them. Under the
    /// `scopes_only_at_latest` fault (the "older handler") the scope the tool needs counts as
    /// held.
    fn scopes_held(&self, r: &Request<'_>, tool: &str) -> Option<Vec<String>> {
        #[allow(unused_mut)]
        let mut scopes = r.credentials.scopes.clone();
        #[cfg(feature = "faults")]
        if r.credentials.scopes_unchecked {
            let held = scopes.as_deref();
            if let Some(needed) = self.engine.missing_scope(r.server_id, None, tool, held) {
                scopes.get_or_insert_with(Vec::new).push(needed);
            }
        }
        #[cfg(not(feature = "faults"))]
        let _ = tool;
        scopes
    }

    /// The denial of a call, with the scope the caller's token lacked (HTTP: 403
    /// `insufficient_scope`). The message is fixed; only the leak-engine-text fault adds the
    /// engine's words.
    fn call_denied(&self, r: &Request<'_>, tool: &str, engine_text: Option<String>) -> Answer {
        let message = match (&engine_text, self.faults.leak_engine_text()) {
            (Some(text), true) => format!("{MSG_DENIED}: {}", text.replace(['"', '\\'], "'")),
            _ => MSG_DENIED.to_string(),
        };
        let bytes = error_bytes(Some(r.id), r.codes.denied, &message);
        let mut denied = request::result(&r.decision, r.modern, Some(bytes), Handled::Denied);
        denied.scope_needed =
            self.engine
                .missing_scope(r.server_id, None, tool, r.credentials.scopes.as_deref());
        Answer::Done(denied)
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
