//! The canary oracle (the denied tool never runs, whatever the case's level) and the framing
//! oracle (no answer to bytes smuggled behind a request).

use super::{is_error_result, is_success, show_bytes, truncate, Check, Context, Judge, Status};
use crate::record::Event;
use crate::transport::Observation;
use serde_json::Value;

impl Judge<'_> {
    /// The canary never runs, whatever the case's level.
    pub(super) fn canary(&mut self) {
        if let Some(evidence) = canary_evidence(self.obs, self.ctx, &self.resp) {
            self.add(
                Check::Canary,
                Status::Fail,
                format!("the denied tool RAN ({evidence})"),
            );
        }
    }

    /// RFC 9112 6.1: a request with both Content-Length and Transfer-Encoding is answered and
    /// the connection closed; a further answer on it means the bytes behind it were served as a
    /// request (smuggled where the two lengths disagree, pipelined where they agree: the
    /// connection had to be closed either way).
    pub(super) fn framing(&mut self) {
        if let Some(t) = self.obs.answer.trailing_answers.first() {
            self.add(
                Check::Framing,
                Status::Fail,
                format!(
                    "the connection was kept after the answer to a request with both Content-Length and Transfer-Encoding (RFC 9112 6.1: close it after responding), and {} more answer(s) came on it, the first of them HTTP {}: the bytes behind the request were served as a request of their own",
                    self.obs.answer.trailing_answers.len(),
                    t.status
                ),
            );
        }
    }
}

/// Why the denied tool counts as having run, if it did: its marker text in any answer, its call
/// in the witness's record, growth of the side-channel log, a successful result for a request
/// every reading takes as its call, or a result for a request smuggled behind another.
fn canary_evidence(obs: &Observation, ctx: &Context, resp: &[&Value]) -> Option<String> {
    let in_witness = obs.after.witness.as_ref().is_some_and(|evs| {
        evs.iter()
            .any(|e| matches!(e, Event::Tool { canary: true, .. }))
    });
    if in_witness {
        return Some("the witness recorded its call".into());
    }
    if !ctx.canary_text.is_empty() && obs.answer.scan_text.contains(&ctx.canary_text) {
        return Some(format!("the answer holds {}", ctx.canary_text));
    }
    if let Some(log) = obs.after.canary_log.as_deref().filter(|l| !l.is_empty()) {
        return Some(format!(
            "the side-channel log grew: {}",
            show_bytes(log.as_bytes(), 120)
        ));
    }
    // A result that says the tool does not exist (some servers answer an unknown tool with a
    // result not marked isError) is no run of it.
    let denied = ctx.placeholders.get("denied_tool").unwrap_or_default();
    let ran = |r: &Value| {
        is_success(r)
            && r.get("id")
                .is_some_and(|id| obs.sent.denied_ids.contains(id))
            && (denied.is_empty() || !super::answer::says_unknown_tool(r, denied))
    };
    if let Some(r) = resp.iter().find(|r| ran(r)) {
        return Some(format!(
            "a successful result answered the call of the denied tool with id {}",
            r.get("id").map_or(String::new(), Value::to_string)
        ));
    }
    for t in &obs.answer.trailing_answers {
        if let Some(r) = t
            .messages
            .iter()
            .find(|r| r.get("result").is_some() && r.get("error").is_none() && !is_error_result(r))
        {
            return Some(format!(
                "a request smuggled behind the first on the same connection was answered with a result ({})",
                truncate(&r.to_string())
            ));
        }
    }
    None
}
