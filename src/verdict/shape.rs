//! The oracles every answer obeys, whatever the case: well-formed JSON-RPC, a media type the
//! request accepted, a real protocol version, 2026-07-28's error-code allocation, and output
//! that is nothing but messages.

use super::{show_bytes, truncate, Check, Judge, Status};
use crate::case::TransportKind;
use crate::transport::{BatchSent, Observation};
use serde_json::Value;

impl Judge<'_> {
    /// Implied: well-formed JSON-RPC, and output that is nothing but messages.
    pub(super) fn shape(&mut self) {
        let batch = self.legal_batch().is_some();
        let (problems, warnings) = shape_problems(self.obs, &self.resp, batch);
        for problem in problems {
            self.add(Check::Shape, Status::Fail, problem);
        }
        for warning in warnings {
            self.add(Check::Shape, Status::Warn, warning);
        }
    }

    /// The case's body is a batch on a lane whose version takes batches (2025-03-26 and
    /// before): JSON-RPC 2.0 section 6 says how it is answered.
    fn legal_batch(&self) -> Option<&BatchSent> {
        self.obs
            .sent
            .batch
            .as_ref()
            .filter(|_| self.ctx.version.has_batches())
    }

    /// A batch where batches are legal, answered as JSON-RPC 2.0 section 6 says: refused whole
    /// with one error, or every request answered once (and nothing else), in one array, and
    /// nothing at all for a batch of notifications (JSONRPC-BATCH-01/04).
    pub(super) fn batch(&mut self) {
        let Some(batch) = self.legal_batch() else {
            return;
        };
        for (status, problem) in batch_problems(self.obs, batch, &self.resp) {
            self.add(Check::Shape, status, problem);
        }
    }

    /// An answer comes in a media type the request accepted (RFC 9110 12.5.1;
    /// MCP-HTTP-POST-02).
    pub(super) fn media_type(&mut self) {
        let (Some(h), Some(accept)) = (&self.obs.answer.http, &self.obs.sent.accept) else {
            return;
        };
        if (200..300).contains(&h.status) && h.body_len > 0 {
            if let Some(ct) = &h.content_type {
                if !media_accepted(accept, ct) {
                    self.add(
                        Check::Shape,
                        self.level_status,
                        format!("the answer came as {ct}, which the request's Accept ({accept}) does not list"),
                    );
                }
            }
        }
    }

    /// initialize never agrees to a version that is not an MCP version (MCP-LIFE-04).
    pub(super) fn negotiated_version(&mut self) {
        if self.obs.sent.method.as_deref() != Some("initialize") {
            return;
        }
        for r in self.resp.clone() {
            if let Some(v) = r.get("result").and_then(|x| x.get("protocolVersion")) {
                let published = v
                    .as_str()
                    .and_then(crate::versions::Version::parse)
                    .is_some_and(|v| crate::versions::PUBLISHED.contains(&v));
                if !published {
                    self.add(
                        Check::Shape,
                        self.level_status,
                        format!("initialize agreed to protocol version {v}, which is not an MCP version"),
                    );
                }
            }
        }
    }

    /// 2026-07-28 error-code allocation (MCP26-ERR-01): -32020..-32099 holds only the codes the
    /// specification defines, -32002 and -32042 are retired, and -32000..-32019 are legacy
    /// codes new implementations should not use.
    pub(super) fn modern_error_codes(&mut self) {
        if !self.ctx.version.is_modern() {
            return;
        }
        let codes: Vec<i64> = self
            .resp
            .iter()
            .filter_map(|r| r.get("error")?.get("code")?.as_i64())
            .collect();
        let version = self.ctx.version;
        for code in codes {
            let defined = [
                crate::versions::HEADER_MISMATCH,
                crate::versions::MISSING_CAPABILITY,
                crate::versions::UNSUPPORTED_VERSION,
            ];
            if ((-32099..=-32020).contains(&code) && !defined.contains(&code))
                || code == -32002
                || code == -32042
            {
                self.add(
                    Check::ErrorCode,
                    Status::Fail,
                    format!("error code {code} is reserved or retired in {version} (MCP26-ERR-01)"),
                );
            } else if (-32019..=-32000).contains(&code) {
                self.add(
                    Check::ErrorCode,
                    Status::Warn,
                    format!("error code {code} is in the legacy range -32000..-32019, which {version} implementations should not use (MCP26-ERR-01)"),
                );
            }
        }
    }

    /// A refusal of a message the case expects a JSON-RPC error for, answered over HTTP with
    /// a body that holds none (`400 text/plain Bad Request`, a framework's `{"detail": ...}`):
    /// the status says no, but MCP answers a message it cannot accept with a JSON-RPC error
    /// (MCP-HTTP-POST-05, JSONRPC-ERR-02). An empty body is a plain refusal the catalogue allows
    /// (MCP-HTTP-POST-13); a gate judged fail-closed may refuse with any 4xx. A warning: under
    /// `--strict` a failure.
    pub(super) fn refusal_body(&mut self) {
        // HTTP+SSE (2024-11-05) says nothing of what a refused POST's body holds.
        let Some(h) = self
            .obs
            .answer
            .http
            .as_ref()
            .filter(|_| self.ctx.transport != TransportKind::Sse)
        else {
            return;
        };
        let plain = (400..500).contains(&h.status)
            && !matches!(h.status, 401 | 403)
            && h.body_len > 0
            && self.resp.is_empty()
            && !self.fail_closed
            && self.expect.error_code.is_some();
        if plain {
            let message =
                format!(
                "preferred: a JSON-RPC error; the refusal (HTTP {}) is {} {} (MCP-HTTP-POST-05)",
                h.status,
                h.content_type.as_deref().unwrap_or("a body without a content type"),
                show_bytes(&self.obs.answer.prefix, 80)
            );
            self.add(Check::Shape, Status::Warn, message);
        }
    }

    /// Output that is not a message: on stdout (MCP-STDIO-05), or in an HTTP answer that is
    /// not a refusal.
    pub(super) fn output(&mut self) {
        let obs = self.obs;
        if obs.answer.garbage.is_empty()
            || obs.answer.http.as_ref().is_some_and(|h| h.status >= 300)
        {
            return;
        }
        let what = if self.ctx.transport == TransportKind::Stdio {
            "stdout carried a line that is not a JSON-RPC message (MCP-STDIO-05)"
        } else {
            "the answer carried data that is not strict JSON (UTF-8, no lone surrogates)"
        };
        self.add(
            Check::Output,
            Status::Fail,
            format!("{what}: {}", show_bytes(&obs.answer.garbage[0], 120)),
        );
    }
}

/// Whether `accept` (an Accept header value) admits media type `ct` (lower case, no parameters).
/// Written here, apart from the witness's own check, so the oracle does not trust the code it
/// judges.
/// RFC 9110 section 12.5.1: the most specific range that matches decides (exact 3, `type/*` 2,
/// `*/*` 1), the heaviest among equals, by its weight; 0, a weight that is not a qvalue, or two
/// weights refuse.
pub(crate) fn media_accepted(accept: &str, ct: &str) -> bool {
    let ct_type = ct.split('/').next().unwrap_or("");
    let ranked = accept.split(',').filter_map(|item| {
        let mut parts = item.split(';');
        let range = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let rank = if range == ct {
            3
        } else if range == format!("{ct_type}/*") {
            2
        } else if range == "*/*" {
            1
        } else {
            return None;
        };
        let mut qs = parts.filter_map(|p| {
            p.split_once('=')
                .filter(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .map(|(_, v)| v.trim())
        });
        let q = match (qs.next(), qs.next()) {
            (None, _) => 1.0,
            (Some(v), None) => qvalue_weight(v),
            // Two weights for one range: none of them holds.
            (Some(_), Some(_)) => 0.0,
        };
        Some((rank, q))
    });
    // Highest rank first; at the same rank the highest weight.
    ranked
        .max_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)))
        .is_some_and(|(_, q)| q > 0.0)
}

/// The weight a qvalue (RFC 9110 section 12.4.2) gives: its value when it is one (`0` to `1`,
/// three decimals at most), else 0.
fn qvalue_weight(v: &str) -> f32 {
    let bytes = v.as_bytes();
    let decimals_ok = |rest: &[u8], only_zeros: bool| {
        rest.len() <= 3
            && rest
                .iter()
                .all(|b| b.is_ascii_digit() && (!only_zeros || *b == b'0'))
    };
    let ok = match bytes {
        [b'0'] | [b'1'] => true,
        [b'0', b'.', rest @ ..] => decimals_ok(rest, false),
        [b'1', b'.', rest @ ..] => decimals_ok(rest, true),
        _ => false,
    };
    if ok {
        v.parse().unwrap_or(0.0)
    } else {
        0.0
    }
}

/// Violations of the JSON-RPC and transport rules every answer obeys.
/// What is wrong with the answer's messages (failures), and what is allowed but not the best
/// answer (warnings).
/// An array is an answer only to a batch where batches are legal (`batch`; the batch oracle
/// judges what it holds).
fn shape_problems(obs: &Observation, resp: &[&Value], batch: bool) -> (Vec<String>, Vec<String>) {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for m in &obs.answer.messages {
        match m {
            Value::Object(_) => {}
            Value::Array(_) if batch => {}
            Value::Array(_) => out.push("answered with a JSON array (a batch answer)".into()),
            other => out.push(format!(
                "answered with a JSON value that is not a message: {}",
                truncate(&other.to_string())
            )),
        }
    }
    for r in resp {
        let has_result = r.get("result").is_some();
        let has_error = r.get("error").is_some();
        if r.get("jsonrpc") != Some(&Value::String("2.0".into())) {
            out.push("a response lacks \"jsonrpc\": \"2.0\"".into());
        }
        if has_result && has_error {
            out.push("a response holds both result and error".into());
        }
        if let Some(e) = r.get("error") {
            if !e.get("code").is_some_and(|c| c.is_i64() || c.is_u64()) {
                out.push(format!(
                    "error.code is not an integer: {}",
                    truncate(&e.to_string())
                ));
            }
            if !e.get("message").is_some_and(Value::is_string) {
                out.push("error.message is not a string".into());
            }
        }
        if has_result && !r.get("result").is_some_and(Value::is_object) {
            out.push("result is not an object".into());
        }
        match id_problem(obs, r) {
            Some((Status::Warn, w)) => warnings.push(w),
            Some((_, problem)) => out.push(problem),
            None => {}
        }
        if has_result && r.get("id").is_none_or(Value::is_null) {
            out.push("a result has no id".into());
        }
    }
    // Streamable HTTP's rules for the answer's framing; HTTP+SSE's POST sets none (the SDKs
    // answer `202 Accepted` with that text).
    if let Some(h) = obs
        .answer
        .http
        .as_ref()
        .filter(|_| obs.transport != crate::case::TransportKind::Sse)
    {
        if h.status == 202 && h.body_len > 0 {
            out.push("HTTP 202 with a body (MCP-HTTP-POST-04 says no body)".into());
        }
        if h.status == 200 && resp.iter().any(|r| r.get("result").is_some()) {
            match h.content_type.as_deref() {
                Some("application/json") | Some("text/event-stream") => {}
                other => out.push(format!(
                    "a response came as {} instead of application/json or text/event-stream",
                    other.unwrap_or("no content type")
                )),
            }
        }
    }
    (out, warnings)
}

/// What is wrong with the answer to a batch (JSON-RPC 2.0 section 6), as (status, why). A
/// batch refused whole (one error object, id null) is a refusal like any other, for the case's
/// expectations to judge; once any response names one of its requests, or an array came back,
/// it was answered member by member.
fn batch_problems(obs: &Observation, batch: &BatchSent, resp: &[&Value]) -> Vec<(Status, String)> {
    let mut out = Vec::new();
    let arrays: Vec<&Vec<Value>> = obs
        .answer
        .messages
        .iter()
        .filter_map(Value::as_array)
        .collect();
    if arrays.iter().any(|a| a.is_empty()) {
        out.push((
            Status::Fail,
            "answered a batch with an empty array: what gets no response is answered with nothing at all".into(),
        ));
    }
    let same = |a: &Value, b: &Value| a == b || same_number(a, b);
    let asked = |id: &Value| batch.ids.iter().any(|b| same(b, id));
    let per_member =
        arrays.iter().any(|a| !a.is_empty()) || resp.iter().any(|r| r.get("id").is_some_and(asked));
    if !per_member {
        return out;
    }
    if batch.ids.is_empty() && batch.invalid == 0 {
        out.push((
            Status::Fail,
            format!(
                "answered a batch of {} notifications with {}: nothing is returned for notifications (JSONRPC-BATCH-04)",
                batch.notifications,
                truncate(&Value::Array(resp.iter().map(|r| (*r).clone()).collect()).to_string())
            ),
        ));
        return out;
    }
    for id in &batch.ids {
        let n = resp
            .iter()
            .filter(|r| r.get("id").is_some_and(|r| same(r, id)))
            .count();
        if n != 1 {
            out.push((
                Status::Fail,
                format!("the batch's request with id {id} got {n} responses, where it gets one"),
            ));
        }
    }
    for r in resp {
        match r.get("id") {
            Some(id) if !id.is_null() && !asked(id) => out.push((
                Status::Fail,
                format!(
                    "a response carries id {}, which no request of the batch has",
                    truncate(&id.to_string())
                ),
            )),
            _ => {}
        }
    }
    let null_ids = resp
        .iter()
        .filter(|r| r.get("id").is_none_or(Value::is_null))
        .count();
    if null_ids > batch.invalid {
        out.push((
            Status::Fail,
            format!(
                "{null_ids} responses without an id for {} members that are not requests: a notification was answered",
                batch.invalid
            ),
        ));
    }
    if out.is_empty() && came_apart(obs, arrays.len()) {
        out.push((
            Status::Warn,
            "preferred: a batch's responses together in one array (JSON-RPC 2.0 section 6); they came apart".into(),
        ));
    }
    out
}

/// Whether a batch's responses came apart (bare responses, or more than one of the `arrays`)
/// where they belong in one array. Streamable HTTP (2025-03-26) lets an event stream carry a
/// batch's responses one by one; a JSON body and HTTP+SSE's stream answer it with one array.
fn came_apart(obs: &Observation, arrays: usize) -> bool {
    let answer = &obs.answer;
    let event_stream = obs.transport == TransportKind::Http
        && answer
            .http
            .as_ref()
            .is_some_and(|h| h.content_type.as_deref() == Some("text/event-stream"));
    let bare = answer
        .messages
        .iter()
        .filter(|m| m.is_object() && super::is_response(m))
        .count();
    !event_stream && (bare > 0 || arrays > 1)
}

/// What is wrong with a response's id, if anything: a failure, or a warning when it is the
/// request's id written as another spelling of the same number.
fn id_problem(obs: &Observation, r: &Value) -> Option<(Status, String)> {
    match r.get("id") {
        None | Some(Value::Null) => None,
        Some(id) if Some(id) == obs.sent.id.as_ref() => None,
        Some(id)
            if obs
                .sent
                .id
                .as_ref()
                .is_some_and(|sent| same_number(id, sent)) =>
        {
            Some((
                Status::Warn,
                format!(
                    "preferred: the id as sent: {} came back as {} (the same JSON number)",
                    obs.sent
                        .id
                        .as_ref()
                        .map_or_else(String::new, Value::to_string),
                    truncate(&id.to_string())
                ),
            ))
        }
        Some(id) if obs.sent.detectable_id.as_ref().is_some_and(|d| d.id == *id) => None,
        // The body was not readable JSON to the runner: its id, if any, is unknown.
        Some(_) if !obs.sent.readable => None,
        Some(id) => Some((
            Status::Fail,
            format!(
                "a response carries id {} which is neither the request's id ({}) nor null",
                truncate(&id.to_string()),
                obs.sent.id.as_ref().map_or("none".into(), Value::to_string)
            ),
        )),
    }
}

/// Two JSON numbers of the same value written differently (`-0.0` and `0`, `1e0` and `1`).
pub(super) fn same_number(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => a.is_number() && b.is_number() && x == y,
        _ => false,
    }
}
