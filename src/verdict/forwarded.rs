//! What a gate let through: the forwarded oracle (what reached the witness behind it) and the
//! server's own requests reaching the client.

use super::{show_bytes, Check, Context, Judge, Observed, Status};
use crate::case::{Case, Expect, Forwarding, Outcome, Profile};
use crate::record::Event;
use crate::transport::Observation;
use serde_json::Value;

impl Judge<'_> {
    /// Gate profile: what reached the witness. A case that expects only refusals or silence
    /// forwards nothing unless it says otherwise.
    pub(super) fn forwarded(&mut self) {
        let ctx = self.ctx;
        let default_forwarded = (ctx.profile == Profile::Gate)
            .then(|| {
                self.expect.outcome.as_ref().and_then(|o| {
                    o.as_slice()
                        .iter()
                        .all(|o| matches!(o, Outcome::Reject | Outcome::Silent | Outcome::Closed))
                        .then_some(false)
                })
            })
            .flatten();
        if let (Profile::Gate, Some(events)) = (ctx.profile, &self.obs.after.witness) {
            let resolved = self.resolved_ambiguity(events);
            let (problems, reached) = forwarding_problems(
                self.case,
                self.obs,
                &self.expect,
                default_forwarded,
                events,
                ctx,
                resolved,
            );
            if let Some(seen) = &self.obs.answer.series {
                self.add(
                    Check::Forwarded,
                    Status::Pass,
                    format!(
                        "{reached} of the client's messages reached the witness over {} steps",
                        seen.sent
                    ),
                );
            }
            for (status, problem) in problems {
                self.add(Check::Forwarded, status, problem);
            }
            if resolved {
                self.resolved_downgrade();
            }
        }
    }

    /// Judged fail-closed, a body whose plain readings disagree (duplicate or case-folded
    /// members) that the gate resolved itself: the canary did not run, and whatever reached the
    /// witness is one message every reader reads alike. Such a gate passed on no differential
    /// (what GATE-PARSE-02/03 guard against); refusing the body is what they prefer.
    fn resolved_ambiguity(&self, events: &[Event]) -> bool {
        let canary_ran = self
            .findings
            .iter()
            .any(|f| f.check == Check::Canary && f.status == Status::Fail);
        self.fail_closed
            && self.obs.sent.ambiguous
            && !canary_ran
            && events.iter().all(|e| match e {
                Event::Message { raw, raw_len, .. } => {
                    raw.len() as u64 == *raw_len
                        && !crate::reading::ambiguous(raw.as_bytes())
                        && crate::reading::parse_strict(raw.as_bytes()).is_ok()
                }
                Event::Tool { .. } => true,
            })
    }

    /// After a resolved ambiguity, what the answer checks found (the gate answered the call as
    /// it read it, not with the refusal the case wants) is a warning.
    fn resolved_downgrade(&mut self) {
        let changed = self.downgrade(&[
            Check::Outcome,
            Check::HttpStatus,
            Check::Id,
            Check::ErrorCode,
        ]);
        if changed {
            self.add(
                Check::Forwarded,
                Status::Warn,
                "the gate resolved a body its readers read differently itself, and passed on only what every reader reads alike (no differential reached the witness); refusing such a body (400) is preferred".into(),
            );
        }
    }

    /// Judged fail-closed (a gate whose error table is not known), two things a gate may do
    /// that hold nothing open are warnings, not failures:
    /// - silence on a stdio line it cannot read as JSON: nothing forwarded, still alive (a
    ///   parse error is what JSON-RPC wants, and what is preferred);
    /// - a call of a tool whose name is neither the denied tool's nor the allowed one's (a
    ///   look-alike its exact-match policy did not match) forwarded, which the downstream
    ///   refused as a tool it does not have: nothing ran. Behind a downstream that folds names
    ///   (the personality lanes) the canary shows whether it would have.
    pub(super) fn fail_closed_leniency(&mut self, observed: &Observed) {
        if !self.fail_closed {
            return;
        }
        let failed = |j: &Self, c: Check| {
            j.findings
                .iter()
                .any(|f| f.check == c && f.status == Status::Fail)
        };
        let harmless = |j: &Self| j.harmless();
        let unreadable = self.obs.transport == crate::case::TransportKind::Stdio
            && !self.obs.sent.readable
            && self.obs.sent.batch.is_none();
        if unreadable
            && *observed == Observed::Outcome(Outcome::Silent)
            && !failed(self, Check::Forwarded)
            && harmless(self)
            && self.downgrade(&[Check::Outcome, Check::Id, Check::ErrorCode])
        {
            self.add(
                Check::Outcome,
                Status::Warn,
                "the gate said nothing to a line it could not read, forwarded nothing and stayed alive: fail-closed; a parse error (-32700) is preferred".into(),
            );
        }
        if let Some(name) = self.refused_look_alike() {
            if harmless(self) && self.downgrade(&[Check::Forwarded]) {
                self.add(
                    Check::Forwarded,
                    Status::Warn,
                    format!("the gate forwarded a call of `{name}`, a name its policy did not match, and the downstream refused it as a tool it does not have: nothing ran; refusing look-alikes of a denied name is preferred"),
                );
            }
        }
    }

    /// The tool name of what a gate forwarded, when every client call that reached the witness
    /// named a tool that is neither the denied nor the allowed one, and no tool ran there.
    fn refused_look_alike(&self) -> Option<String> {
        let events = self.obs.after.witness.as_ref()?;
        if events.iter().any(|e| matches!(e, Event::Tool { .. })) {
            return None;
        }
        let denied = self.ctx.placeholders.get("denied_tool")?;
        let allowed = self
            .ctx
            .placeholders
            .get("allowed_tool")
            .unwrap_or_default();
        let names: Vec<String> = events
            .iter()
            .filter_map(|e| match e {
                Event::Message { raw, .. } => serde_json::from_str::<Value>(raw).ok(),
                Event::Tool { .. } => None,
            })
            .filter(|v| v.get("method").and_then(Value::as_str) == Some("tools/call"))
            .map(|v| {
                v.pointer("/params/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        let look_alikes = !names.is_empty()
            && names
                .iter()
                .all(|n| !n.is_empty() && n != denied && n != allowed);
        look_alikes.then(|| names[0].clone())
    }

    /// Whether nothing harmful was found so far: no tool ran that should not, the target is
    /// alive, nothing leaked, nothing was served behind the request.
    pub(super) fn harmless(&self) -> bool {
        [Check::Canary, Check::Alive, Check::Leak, Check::Framing]
            .iter()
            .all(|c| {
                !self
                    .findings
                    .iter()
                    .any(|f| f.check == *c && f.status == Status::Fail)
            })
    }

    /// Turns the failures of `checks` into warnings (`preferred: …`); whether there were any.
    pub(super) fn downgrade(&mut self, checks: &[Check]) -> bool {
        let mut changed = false;
        for f in &mut self.findings {
            if checks.contains(&f.check) && f.status == Status::Fail {
                f.status = Status::Warn;
                f.message = format!("preferred: {}", f.message);
                changed = true;
            }
        }
        changed
    }

    /// A request of the server's own (a method and an id) among what the client was sent, when
    /// the case says none may reach it.
    pub(super) fn server_requests(&mut self) {
        if self.expect.server_requests != Some(false) {
            return;
        }
        let relayed: Vec<String> = self
            .obs
            .answer
            .messages
            .iter()
            .filter(|m| m.get("id").is_some())
            .filter_map(|m| m.get("method").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        if !relayed.is_empty() {
            self.add(
                Check::Forwarded,
                self.level_status,
                format!(
                    "the client was sent the server's own request ({}), which must not reach it",
                    relayed.join(", ")
                ),
            );
        }
    }
}

/// What a gate's downstream received for one case, judged: whether anything arrived, exactly once
/// (GATE-FWD-04), as compact canonical bytes (GATE-FWD-01), carrying the expected message
/// (GATE-DENY-05) and none of the client's credentials (GATE-HDR-01). The gate's own downstream
/// handshake (`initialize`, `notifications/initialized`) and its start-up `tools/list` are not
/// the client's messages and are left out; the gate answers a client's `initialize` itself and
/// never forwards it.
#[allow(
    clippy::too_many_lines,
    reason = "the forwarded oracle's rules (arrived, exactly once, canonical, the expected message, no credentials) over the one list of the client's messages the witness got, in the order failures are reported"
)]
fn forwarding_problems(
    case: &Case,
    obs: &Observation,
    expect: &Expect,
    default_forwarded: Option<bool>,
    events: &[Event],
    ctx: &Context,
    resolved: bool,
) -> (Vec<(Status, String)>, usize) {
    let mut out = Vec::new();
    type Forwarded<'a> = (&'a String, u64, &'a Vec<(String, String)>);
    let forwarded: Vec<Forwarded> = events
        .iter()
        .filter_map(|e| match e {
            Event::Message {
                raw,
                raw_len,
                headers,
                ..
            } => Some((raw, *raw_len, headers)),
            Event::Tool { .. } => None,
        })
        .filter(|(raw, _, _)| {
            let value = serde_json::from_str::<Value>(raw).ok();
            let method = value
                .as_ref()
                .and_then(|v| v.get("method").and_then(Value::as_str).map(str::to_string));
            let asked = |m: &str| obs.sent.method.as_deref() == Some(m);
            // A gate's own traffic to its downstream: its handshake, the lists it asks for to
            // learn the tools, resources and prompts (at start-up, or before routing a call by
            // name), and the cancellation of the case's own request when its deadline passed
            // (GATE-DOWN-04) — unless the client sent such a message.
            match method.as_deref() {
                Some("initialize") | Some("notifications/initialized") => false,
                Some(
                    m @ ("tools/list"
                    | "resources/list"
                    | "resources/templates/list"
                    | "prompts/list"),
                ) => asked(m),
                Some("notifications/cancelled") => {
                    let names_case = value
                        .as_ref()
                        .and_then(|v| v.pointer("/params/requestId"))
                        .is_some_and(|r| Some(r) == obs.sent.id.as_ref());
                    asked("notifications/cancelled") || !names_case
                }
                _ => true,
            }
        })
        .collect();
    // `"either"` says nothing of whether it arrives (no default either); a series sends its
    // message once a step, so each step's may arrive once.
    let want = match expect.forwarded {
        Some(f) => f.must(),
        None => default_forwarded.or(expect.forwarded_json.as_ref().map(|_| true)),
    };
    let once = obs.answer.series.as_ref().map_or(1, |s| s.sent as usize);
    let either = matches!(expect.forwarded, Some(Forwarding::Either(_)));
    let reached = forwarded.len();
    match want {
        Some(false) if !forwarded.is_empty() && resolved => out.push((
            Status::Warn,
            format!(
                "preferred: nothing reaching the witness; it received what the gate read, re-encoded: {}",
                show_bytes(forwarded[0].0.as_bytes(), 160)
            ),
        )),
        Some(false) if !forwarded.is_empty() => {
            out.push((
                Status::Fail,
                format!(
                    "expected nothing to reach the witness; it received {}",
                    show_bytes(forwarded[0].0.as_bytes(), 160)
                ),
            ));
            return (out, reached);
        }
        Some(true) if forwarded.is_empty() => {
            out.push((
                Status::Fail,
                "expected the message to reach the witness; nothing arrived".into(),
            ));
            return (out, reached);
        }
        Some(true) | None if once == 1 && forwarded.len() > 1 && (want.is_some() || either) => {
            out.push((
                Status::Fail,
                format!(
                    "one client message reached the witness {} times",
                    forwarded.len()
                ),
            ));
        }
        _ if once > 1 && forwarded.len() > once => {
            out.push((
                Status::Fail,
                format!(
                    "{} client messages reached the witness for {once} steps",
                    forwarded.len()
                ),
            ));
        }
        _ => {}
    }
    if once > 1 {
        // Through a gate that keeps the client's ids, the same bytes twice are one step's
        // message forwarded twice (a gate that gives ids of its own is held to the total).
        let mut times: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for (raw, _, _) in &forwarded {
            *times.entry(raw.as_str()).or_default() += 1;
        }
        if let Some((raw, n)) = times
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .max_by_key(|(_, n)| *n)
        {
            out.push((
                Status::Fail,
                format!(
                    "one step's message reached the witness {n} times: {}",
                    show_bytes(raw.as_bytes(), 160)
                ),
            ));
        }
    }
    let before = out.len();
    for (raw, raw_len, headers) in &forwarded {
        // Secrets never travel downstream, in headers or in the body.
        for s in ctx.secrets.iter().filter(|s| s.len() >= 4) {
            if raw.contains(s.as_str()) || headers.iter().any(|(_, v)| v.contains(s.as_str())) {
                out.push((
                    Status::Fail,
                    "a credential the client sent reached the witness".into(),
                ));
            }
        }
        if raw.len() as u64 != *raw_len {
            continue; // the record keeps only the first 4 KiB
        }
        match serde_json::from_str::<Value>(raw) {
            Ok(v) => {
                if v.to_string().as_str() != raw.as_str() {
                    out.push(not_canonical(case, ctx, raw));
                }
                if let Some(expected) = &expect.forwarded_json {
                    let mut expected = ctx.placeholders.apply_json_value(expected);
                    // The request's `_meta` as the runner sent it (a modern lane's, or written
                    // as `{{meta}}` by the case) is part of what the gate must forward.
                    if let Some(meta) = &obs.sent.meta {
                        crate::versions::add_meta_value(&mut expected, meta);
                    }
                    // The caller's identity arguments are the gate's to keep or drop.
                    let mut v = v.clone();
                    if let Some(Value::Object(args)) = v.pointer_mut("/params/arguments") {
                        for name in &ctx.identity_arguments {
                            args.shift_remove(name);
                        }
                    }
                    // A gate that is not ours is a client of its downstream in its own right: the
                    // request id on that hop is its own (it multiplexes callers), and the
                    // protocol's per-request `_meta` (version, client info, capabilities) is that
                    // hop's, spoken at whatever version the gate and its downstream agreed. The
                    // id the client gets back is the id oracle's.
                    // A progress token the gate asked for on its own (the client sent none)
                    // is that hop's too: it re-issued the call as a client.
                    if ctx.profile == Profile::Gate && !ctx.narrows() {
                        if expected.pointer("/params/_meta/progressToken").is_none() {
                            if let Some(Value::Object(meta)) = v.pointer_mut("/params/_meta") {
                                meta.shift_remove("progressToken");
                            }
                        }
                        for m in [&mut v, &mut expected] {
                            strip_hop_meta(m);
                            if let Value::Object(o) = m {
                                o.shift_remove("id");
                            }
                        }
                    }
                    if v != expected {
                        out.push((
                            Status::Fail,
                            format!("the witness received {v}, not {expected}"),
                        ));
                    }
                }
            }
            Err(_) => out.push((
                Status::Fail,
                format!(
                    "the witness received bytes that are not JSON: {}",
                    show_bytes(raw.as_bytes(), 160)
                ),
            )),
        }
    }
    if once > 1 {
        collapse(&mut out, before);
    }
    (out, reached)
}

/// A series' per-message problems past `from`, one of each kind (a gate that re-encodes does
/// so for every step): the first, and how many more there were like it.
fn collapse(out: &mut Vec<(Status, String)>, from: usize) {
    let mut kept: Vec<((Status, String), usize)> = Vec::new();
    for (status, message) in out.drain(from..) {
        let kind: String = message.chars().take(24).collect();
        match kept
            .iter_mut()
            .find(|((s, m), _)| *s == status && m.starts_with(&kind))
        {
            Some((_, more)) => *more += 1,
            None => kept.push(((status, message), 0)),
        }
    }
    for ((status, message), more) in kept {
        out.push(match more {
            0 => (status, message),
            n => (status, format!("{message} (and {n} more messages like it)")),
        });
    }
}

/// The finding for forwarded bytes that are JSON but not compact canonical JSON. Canonical bytes
/// only (GATE-FWD-01) is the reference gate's design, and a gate with a known table or
/// `--strict` is held to it; any other gate that re-encodes what it read (with spaces, its own
/// member order or escapes) forwards one reading, not the client's bytes: preferred, not
/// failed. The client's own text forwarded as it came is raw forwarding, and bytes no re-encoder
/// writes (duplicate or case-folded names, lone surrogates) pass on a differential: both fail on
/// every gate.
fn not_canonical(case: &Case, ctx: &Context, raw: &str) -> (Status, String) {
    let shown = show_bytes(raw.as_bytes(), 160);
    let sent_text = match &case.spec.request.body {
        Some(crate::case::BodySpec::Text(t)) => Some(ctx.placeholders.apply(t)),
        _ => None,
    };
    let as_sent = sent_text.is_some_and(|t| t.trim_end_matches(['\r', '\n']) == raw);
    // What a re-encoder writes: one strict reading, no names that readers resolve apart.
    let re_encoded = !as_sent
        && crate::reading::parse_strict(raw.as_bytes()).is_ok()
        && !crate::reading::ambiguous(raw.as_bytes());
    let judged_exactly = ctx.profile != Profile::Gate || ctx.narrows();
    if judged_exactly {
        (
            Status::Fail,
            format!("the forwarded bytes are not compact canonical JSON: {shown}"),
        )
    } else if as_sent {
        (
            Status::Fail,
            format!("the client's bytes were forwarded as they came, not re-encoded: {shown}"),
        )
    } else if !re_encoded {
        (
            Status::Fail,
            format!("the forwarded bytes are not one strict reading of JSON: {shown}"),
        )
    } else {
        (
            Status::Warn,
            format!("preferred: compact canonical JSON forwarded (GATE-FWD-01); the gate re-encoded what it read as {shown}"),
        )
    }
}

/// Removes the protocol's own keys (`io.modelcontextprotocol/…`) from `params._meta`, and the
/// `_meta` itself when nothing else is left in it: what a proxy says of itself to its downstream.
fn strip_hop_meta(message: &mut Value) {
    let Some(Value::Object(params)) = message.get_mut("params") else {
        return;
    };
    let empty = match params.get_mut("_meta") {
        Some(Value::Object(meta)) => {
            meta.retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
            meta.is_empty()
        }
        _ => false,
    };
    if empty {
        params.shift_remove("_meta");
    }
}

#[cfg(test)]
mod tests {
    use super::strip_hop_meta;
    use serde_json::json;

    #[test]
    fn only_the_protocols_own_meta_is_the_hops() {
        let mut with_hop = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "echo", "arguments": {"text": "hi"},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "gw", "version": "1"}}}});
        strip_hop_meta(&mut with_hop);
        assert_eq!(
            with_hop,
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "hi"}}})
        );
        // What the client put in `_meta` is still compared.
        let mut progress = json!({"params": {"_meta": {"progressToken": 7,
            "io.modelcontextprotocol/protocolVersion": "2025-11-25"}}});
        strip_hop_meta(&mut progress);
        assert_eq!(progress, json!({"params": {"_meta": {"progressToken": 7}}}));
    }
}
