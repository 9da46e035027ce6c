//! Oracles: an [`Observation`] judged against a case's acceptable set.
//!
//! **Architecture invariant:** verdicts never parse with the gate's parser and know nothing of
//! sockets or processes; they read an Observation and a case, and nothing else.

pub mod leak;

use crate::case::{Case, CodePattern, Expect, IdRule, Level, Outcome, Profile, TransportKind};
use crate::record::Event;
use crate::settings::CodeTable;
use crate::settings::DenyStyle;
use crate::transport::{Ending, Observation};
use serde_json::Value;

/// The result of a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Warn,
    Fail,
}

/// Which oracle spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    Setup,
    Outcome,
    HttpStatus,
    ErrorCode,
    Id,
    Shape,
    Output,
    Canary,
    Forwarded,
    Alive,
    Leak,
    /// A request smuggled behind the case's own on one connection was served.
    Framing,
    /// The bytes or memory a server spent on an input before refusing it.
    Resources,
    /// The `WWW-Authenticate` challenge of an authorization refusal.
    Challenge,
}

impl Check {
    pub fn as_str(self) -> &'static str {
        match self {
            Check::Setup => "setup",
            Check::Outcome => "outcome",
            Check::HttpStatus => "http_status",
            Check::ErrorCode => "error_code",
            Check::Id => "id",
            Check::Shape => "shape",
            Check::Output => "output",
            Check::Canary => "canary",
            Check::Forwarded => "forwarded",
            Check::Alive => "alive",
            Check::Leak => "leak",
            Check::Framing => "framing",
            Check::Resources => "resources",
            Check::Challenge => "challenge",
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Finding {
    pub check: Check,
    pub status: Status,
    pub message: String,
}

/// What was observed, in the terms of a case.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Observed {
    Outcome(Outcome),
    /// No answer at all (deadline, closed connection, process gone).
    NoAnswer(String),
    /// An answer that is none of reject, accept or silent.
    Malformed(String),
}

impl std::fmt::Display for Observed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Observed::Outcome(o) => f.write_str(o.as_str()),
            Observed::NoAnswer(d) => write!(f, "no answer ({d})"),
            Observed::Malformed(d) => write!(f, "a malformed answer ({d})"),
        }
    }
}

/// A case's verdict on one transport.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Verdict {
    pub status: Status,
    pub findings: Vec<Finding>,
    pub observed: Observed,
    pub http_status: Option<u16>,
    pub error_code: Option<i64>,
}

impl Verdict {
    /// A failure message a reader can act on without the source: every finding with the
    /// acceptable set next to what was observed.
    pub fn explain(&self, case: &Case, obs: &Observation) -> String {
        let mut out = format!(
            "[{}] {}: {}\n  requirements: {}\n",
            obs.transport.as_str(),
            case.id,
            case.spec.title,
            case.spec.requirements.join(", ")
        );
        for f in &self.findings {
            let tag = match f.status {
                Status::Fail => "FAIL",
                Status::Warn => "warn",
                Status::Pass => "note",
            };
            out.push_str(&format!("  {tag} [{}] {}\n", f.check.as_str(), f.message));
        }
        out.push_str(&format!("  observed: {}", self.observed));
        if let Some(s) = self.http_status {
            out.push_str(&format!(", HTTP {s}"));
        }
        if let Some(c) = self.error_code {
            out.push_str(&format!(", error code {c}"));
        }
        if !obs.body_prefix.is_empty() {
            out.push_str(&format!(
                "\n  answer begins: {}",
                show_bytes(&obs.body_prefix, 200)
            ));
        }
        out.push('\n');
        out
    }
}

/// Bytes for a human: lossy UTF-8 with control characters escaped, cut at `n`.
pub fn show_bytes(bytes: &[u8], n: usize) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(n)]);
    let mut out: String = text.escape_debug().collect();
    if bytes.len() > n {
        out.push('…');
    }
    out
}

/// What the judge needs besides the case and the observation.
#[derive(Debug, Clone)]
pub struct Context {
    pub profile: Profile,
    pub strict: bool,
    pub transport: TransportKind,
    /// Values of `--header`: they must never come back.
    pub secrets: Vec<String>,
    /// The gate's error codes in force.
    pub codes: CodeTable,
    /// The method of the case's request (GET streams count as accepted).
    pub method: String,
    /// Placeholder values, for expectations that name the tools (`forwarded_json`).
    pub placeholders: crate::case::Placeholders,
    /// The protocol version the case spoke.
    pub version: String,
    /// The text the denied tool answers when it runs (`--canary-text`).
    pub canary_text: String,
    /// How a gate says no to a tool call (`--deny-style`).
    pub deny_style: DenyStyle,
}

/// Whether a response is a tool result that says the tool failed or was refused
/// (`result.isError: true`).
fn is_error_result(r: &Value) -> bool {
    r.get("result")
        .and_then(|x| x.get("isError"))
        .and_then(Value::as_bool)
        == Some(true)
}

/// Whether a response says a request succeeded: a `result`, no `error`, and not a tool result
/// marked `isError`.
fn is_success(r: &Value) -> bool {
    r.get("result").is_some() && r.get("error").is_none() && !is_error_result(r)
}

/// Why the denied tool counts as having run, if it did: its marker text in any answer, its call
/// in the witness's record, growth of the side-channel log, a successful result for a request
/// every reading takes as its call, or a result for a request smuggled behind another.
fn canary_evidence(obs: &Observation, ctx: &Context, resp: &[&Value]) -> Option<String> {
    let in_witness = obs.witness.as_ref().is_some_and(|evs| {
        evs.iter()
            .any(|e| matches!(e, Event::Tool { canary: true, .. }))
    });
    if in_witness {
        return Some("the witness recorded its call".into());
    }
    if !ctx.canary_text.is_empty() && obs.scan_text.contains(&ctx.canary_text) {
        return Some(format!("the answer holds {}", ctx.canary_text));
    }
    if let Some(log) = obs.canary_log.as_deref().filter(|l| !l.is_empty()) {
        return Some(format!(
            "the side-channel log grew: {}",
            show_bytes(log.as_bytes(), 120)
        ));
    }
    let ran =
        |r: &Value| is_success(r) && r.get("id").is_some_and(|id| obs.denied_ids.contains(id));
    if let Some(r) = resp.iter().find(|r| ran(r)) {
        return Some(format!(
            "a successful result answered the call of the denied tool with id {}",
            r.get("id").map_or(String::new(), Value::to_string)
        ));
    }
    for t in &obs.trailing_answers {
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

/// The JSON-RPC responses among what came back. The body of an HTTP 401 or 403 may instead be
/// an OAuth error document (RFC 6750 section 3, RFC 6749 section 5.2: `{"error": "invalid_token",
/// "error_description": ...}`, no `jsonrpc`), as SDKs' bearer middleware answers; that is not a
/// malformed response.
fn responses(obs: &Observation) -> Vec<&Value> {
    let auth_refusal = obs
        .http
        .as_ref()
        .is_some_and(|h| h.status == 401 || h.status == 403);
    let oauth_document = |v: &Value| {
        auth_refusal && v.get("jsonrpc").is_none() && v.get("error").is_some_and(Value::is_string)
    };
    let mut out = Vec::new();
    for m in &obs.messages {
        match m {
            Value::Array(items) => out.extend(items.iter().filter(|v| is_response(v))),
            v if is_response(v) && !oauth_document(v) => out.push(v),
            _ => {}
        }
    }
    out
}

fn is_response(v: &Value) -> bool {
    v.get("result").is_some() || v.get("error").is_some()
}

/// Classify what came back.
/// `close_allowed`: the case lets the endpoint end (its `alive` is false), so closing without a
/// word counts as silence.
pub fn observe(obs: &Observation, ctx: &Context, close_allowed: bool) -> Observed {
    match &obs.ending {
        Ending::TimedOut => return Observed::NoAnswer("nothing before the deadline".into()),
        Ending::Closed if close_allowed && obs.http.is_none() => {
            return Observed::Outcome(Outcome::Silent)
        }
        Ending::Closed => return Observed::NoAnswer("closed without answering".into()),
        Ending::Unreachable(e) => return Observed::NoAnswer(format!("unreachable: {e}")),
        Ending::Answered => {}
    }
    let resp = responses(obs);
    if resp.iter().any(|r| r.get("result").is_some()) {
        return Observed::Outcome(Outcome::Accept);
    }
    match &obs.http {
        Some(h) if (200..300).contains(&h.status) => {
            if !resp.is_empty() {
                Observed::Outcome(Outcome::Reject)
            } else if h.status == 202 && h.body_len == 0 {
                Observed::Outcome(Outcome::Silent)
            } else if ctx.method == "GET" && h.content_type.as_deref() == Some("text/event-stream")
            {
                Observed::Outcome(Outcome::Accept)
            } else if h.timed_out {
                Observed::NoAnswer(format!(
                    "HTTP {} but no JSON-RPC response before the deadline",
                    h.status
                ))
            } else {
                Observed::Malformed(format!("HTTP {} without a JSON-RPC response", h.status))
            }
        }
        Some(h) if h.status >= 300 => Observed::Outcome(Outcome::Reject),
        Some(h) => Observed::Malformed(format!("HTTP status {}", h.status)),
        None => {
            if resp.is_empty() {
                Observed::Outcome(Outcome::Silent)
            } else {
                Observed::Outcome(Outcome::Reject)
            }
        }
    }
}

fn list<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Judge one observation.
pub fn judge(case: &Case, obs: &Observation, ctx: &Context) -> Verdict {
    let strict = ctx.strict || ctx.profile == Profile::Gate;
    let expect: Expect = case.expectation(ctx.profile, ctx.strict, &ctx.version);
    let level_status = match case.spec.level {
        Level::Must => Status::Fail,
        Level::Should if ctx.strict => Status::Fail,
        Level::Should | Level::Info => Status::Warn,
    };
    let mut findings = Vec::new();
    let mut add = |check: Check, status: Status, message: String| {
        findings.push(Finding {
            check,
            status,
            message,
        })
    };

    let resp = responses(obs);
    let first_error_code = resp.iter().find_map(|r| {
        r.get("error")
            .and_then(|e| e.get("code"))
            .and_then(Value::as_i64)
    });
    let observed = if obs.setup_error.is_some() {
        Observed::NoAnswer("not sent".into())
    } else {
        observe(obs, ctx, expect.alive == Some(false))
    };
    let verdict_base = |findings: Vec<Finding>, observed: Observed| {
        let status = findings
            .iter()
            .map(|f| f.status)
            .max()
            .unwrap_or(Status::Pass);
        Verdict {
            status,
            findings,
            observed,
            http_status: obs.http.as_ref().map(|h| h.status),
            error_code: first_error_code,
        }
    };

    if let Some(e) = &obs.setup_error {
        add(
            Check::Setup,
            Status::Fail,
            format!("the case could not be sent: {e}"),
        );
        return verdict_base(findings, observed);
    }

    // The canary never runs, whatever the case's level.
    if let Some(evidence) = canary_evidence(obs, ctx, &resp) {
        add(
            Check::Canary,
            Status::Fail,
            format!("the denied tool RAN ({evidence})"),
        );
    }
    // RFC 9112 6.1: a request with both Content-Length and Transfer-Encoding is answered and the
    // connection closed; a further answer on it means smuggled bytes were served as a request.
    if let Some(t) = obs.trailing_answers.first() {
        add(
            Check::Framing,
            Status::Fail,
            format!(
                "the connection was kept after the first answer and {} more answer(s) came on it (the first HTTP {}): bytes smuggled behind the request were served as a request",
                obs.trailing_answers.len(),
                t.status
            ),
        );
    }

    // A gate that refuses tool calls with an `isError: true` result (`--deny-style result`)
    // said no: such an answer counts as a refusal.
    let result_refusal = ctx.deny_style == DenyStyle::Result
        && observed == Observed::Outcome(Outcome::Accept)
        && !resp.is_empty()
        && resp
            .iter()
            .all(|r| r.get("error").is_some() || is_error_result(r));
    let observed = if result_refusal {
        add(
            Check::Outcome,
            Status::Pass,
            "refused with a tool result marked isError (--deny-style result)".into(),
        );
        Observed::Outcome(Outcome::Reject)
    } else {
        observed
    };
    // 2026-07-28 over HTTP: a body the runner could read no method in went out without
    // `Mcp-Method`, and a server may refuse it for that alone (400 -32020) before reading it.
    let binding_refusal = crate::versions::is_modern(&ctx.version)
        && obs.http.as_ref().is_some_and(|h| h.status == 400)
        && !obs.sent_mcp_method
        && first_error_code == Some(crate::versions::HEADER_MISMATCH);
    if binding_refusal {
        add(
            Check::Outcome,
            Status::Pass,
            "refused with 400 -32020: the request carried no Mcp-Method header (the runner read no method in the body to mirror)".into(),
        );
    }

    if let Some(want) = expect.outcome.as_ref().filter(|_| !binding_refusal) {
        let ok = matches!(&observed, Observed::Outcome(o) if want.as_slice().contains(o));
        if !ok {
            let names: Vec<&str> = want.as_slice().iter().map(|o| o.as_str()).collect();
            let hint = if observed == Observed::Outcome(Outcome::Accept)
                && !resp.is_empty()
                && resp.iter().all(|r| is_error_result(r))
            {
                " (a tool result marked isError: if that is how the target refuses, say --deny-style result)"
            } else {
                ""
            };
            add(
                Check::Outcome,
                level_status,
                format!("expected {}; observed {observed}{hint}", names.join(" or ")),
            );
        }
    }

    if let (Some(want), Some(h), false) = (&expect.http_status, &obs.http, binding_refusal) {
        if !want.as_slice().iter().any(|p| p.matches(h.status)) {
            add(
                Check::HttpStatus,
                level_status,
                format!(
                    "expected HTTP {}; observed HTTP {}",
                    list(want.as_slice()),
                    h.status
                ),
            );
        }
    }

    if let (Some(want), Some(h)) = (&expect.challenge, &obs.http) {
        if let Some(problem) = challenge_problem(want, &h.headers) {
            add(Check::Challenge, level_status, problem);
        }
    }

    if let Some(want) = expect
        .error_code
        .as_ref()
        .filter(|_| !binding_refusal && !result_refusal)
    {
        let codes: Vec<i64> = want
            .as_slice()
            .iter()
            .filter_map(|c| match c {
                CodePattern::Code(c) => Some(*c),
                CodePattern::Placeholder(p) => ctx.codes.by_placeholder(p),
            })
            .collect();
        match first_error_code {
            Some(c) if !codes.contains(&c) => {
                add(
                    Check::ErrorCode,
                    level_status,
                    format!("expected error code {}; observed {c}", list(&codes)),
                );
            }
            None if strict && observed == Observed::Outcome(Outcome::Reject) => {
                add(
                    Check::ErrorCode,
                    level_status,
                    format!(
                        "expected a JSON-RPC error with code {}; the refusal carried none",
                        list(&codes)
                    ),
                );
            }
            _ => {}
        }
    }

    if let Some(rules) = &expect.id {
        for r in &resp {
            let id = r.get("id");
            let ok = rules.as_slice().iter().any(|rule| match rule {
                IdRule::Echo => obs.request_id.is_some() && id == obs.request_id.as_ref(),
                IdRule::Null => id == Some(&Value::Null),
                IdRule::Absent => id.is_none(),
                IdRule::NullOrAbsent => id.is_none_or(Value::is_null),
            });
            if !ok {
                let names: Vec<&str> = rules.as_slice().iter().map(|r| r.as_str()).collect();
                add(
                    Check::Id,
                    level_status,
                    format!(
                        "expected the response id to be {} (request id {}); observed {}",
                        names.join(" or "),
                        obs.request_id
                            .as_ref()
                            .map_or("none".into(), Value::to_string),
                        id.map_or("no id".into(), Value::to_string)
                    ),
                );
                break;
            }
        }
    }

    // Implied: well-formed JSON-RPC, and output that is nothing but messages.
    for problem in shape_problems(obs, &resp) {
        add(Check::Shape, Status::Fail, problem);
    }
    // An answer comes in a media type the request accepted (RFC 9110 12.5.1; MCP-HTTP-POST-02).
    if let (Some(h), Some(accept)) = (&obs.http, &obs.request_accept) {
        if (200..300).contains(&h.status) && h.body_len > 0 {
            if let Some(ct) = &h.content_type {
                if !media_accepted(accept, ct) {
                    add(
                        Check::Shape,
                        level_status,
                        format!("the answer came as {ct}, which the request's Accept ({accept}) does not list"),
                    );
                }
            }
        }
    }
    // initialize never agrees to a version that is not an MCP version (MCP-LIFE-04).
    if obs.request_method.as_deref() == Some("initialize") {
        for r in &resp {
            if let Some(v) = r.get("result").and_then(|x| x.get("protocolVersion")) {
                if !v.as_str().is_some_and(|v| KNOWN_VERSIONS.contains(&v)) {
                    add(
                        Check::Shape,
                        level_status,
                        format!("initialize agreed to protocol version {v}, which is not an MCP version"),
                    );
                }
            }
        }
    }
    // 2026-07-28 error-code allocation (MCP26-ERR-01): -32020..-32099 holds only the codes the
    // specification defines, -32002 and -32042 are retired, and -32000..-32019 are legacy codes
    // new implementations should not use.
    if crate::versions::is_modern(&ctx.version) {
        for code in resp
            .iter()
            .filter_map(|r| r.get("error")?.get("code")?.as_i64())
        {
            let defined = [
                crate::versions::HEADER_MISMATCH,
                crate::versions::MISSING_CAPABILITY,
                crate::versions::UNSUPPORTED_VERSION,
            ];
            if ((-32099..=-32020).contains(&code) && !defined.contains(&code))
                || code == -32002
                || code == -32042
            {
                add(
                    Check::ErrorCode,
                    Status::Fail,
                    format!(
                        "error code {code} is reserved or retired in {} (MCP26-ERR-01)",
                        ctx.version
                    ),
                );
            } else if (-32019..=-32000).contains(&code) {
                add(
                    Check::ErrorCode,
                    Status::Warn,
                    format!("error code {code} is in the legacy range -32000..-32019, which {} implementations should not use (MCP26-ERR-01)", ctx.version),
                );
            }
        }
    }
    if !obs.garbage.is_empty() {
        let refusal_body = obs.http.as_ref().is_some_and(|h| h.status >= 300);
        if !refusal_body {
            let what = if ctx.transport == TransportKind::Stdio {
                "stdout carried a line that is not a JSON-RPC message (MCP-STDIO-05)"
            } else {
                "the answer carried data that is not strict JSON (UTF-8, no lone surrogates)"
            };
            add(
                Check::Output,
                Status::Fail,
                format!("{what}: {}", show_bytes(&obs.garbage[0], 120)),
            );
        }
    }

    // Gate profile: what reached the witness.
    let default_forwarded = (ctx.profile == Profile::Gate)
        .then(|| {
            expect.outcome.as_ref().and_then(|o| {
                o.as_slice()
                    .iter()
                    .all(|o| matches!(o, Outcome::Reject | Outcome::Silent))
                    .then_some(false)
            })
        })
        .flatten();
    if let (Profile::Gate, Some(events)) = (ctx.profile, &obs.witness) {
        for problem in forwarding_problems(case, obs, &expect, default_forwarded, events, ctx) {
            add(Check::Forwarded, Status::Fail, problem);
        }
    }

    if expect.server_requests == Some(false) {
        // A request of the server's own (a method and an id) among what the client was sent.
        let relayed: Vec<String> = obs
            .messages
            .iter()
            .filter(|m| m.get("id").is_some())
            .filter_map(|m| m.get("method").and_then(Value::as_str))
            .map(str::to_string)
            .collect();
        if !relayed.is_empty() {
            add(
                Check::Forwarded,
                level_status,
                format!(
                    "the client was sent the server's own request ({}), which must not reach it",
                    relayed.join(", ")
                ),
            );
        }
    }

    if expect.alive.unwrap_or(true) && obs.alive == Some(false) {
        add(
            Check::Alive,
            level_status.max(Status::Fail),
            format!(
                "the endpoint is not alive after the case: {}",
                obs.alive_detail.clone().unwrap_or_default()
            ),
        );
    }

    // What an input cost the server before it refused it: body bytes taken before the answer
    // (HTTP), peak memory growth (stdio, /proc VmHWM).
    const MIB: f64 = 1024.0 * 1024.0;
    if let (Some(max), Some(h)) = (expect.max_body_sent, &obs.http) {
        if h.body_sent > max {
            add(
                Check::Resources,
                level_status,
                format!(
                    "the server took {:.1} MiB of the body before answering (after {} ms); at most {:.1} MiB expected: it reads a body it will refuse",
                    h.body_sent as f64 / MIB,
                    h.answered_after.as_millis(),
                    max as f64 / MIB
                ),
            );
        }
    }
    if let Some(max) = expect.max_memory_growth_kib {
        match obs.memory_growth_kib {
            Some(grew) if grew > max => add(
                Check::Resources,
                level_status,
                format!(
                    "the server's peak memory grew by {:.1} MiB over the case; at most {:.1} MiB expected: it buffers an input it should bound",
                    grew as f64 / 1024.0,
                    max as f64 / 1024.0
                ),
            ),
            Some(_) => {}
            None if obs.transport == TransportKind::Stdio => add(
                Check::Resources,
                Status::Pass,
                "peak memory not measured (/proc did not tell, or the process had exited)".into(),
            ),
            None => {}
        }
    }

    // Leaks: only what the endpoint said about errors, not results it was asked to echo.
    let mut leak_text = String::new();
    for r in &resp {
        if let Some(e) = r.get("error") {
            leak_text.push_str(&e.to_string());
            leak_text.push('\n');
        }
    }
    for g in &obs.garbage {
        leak_text.push_str(&String::from_utf8_lossy(g));
        leak_text.push('\n');
    }
    if let Some(h) = &obs.http {
        for (k, v) in &h.headers {
            leak_text.push_str(&format!("{k}: {v}\n"));
        }
    }
    let leaks = leak::find_leaks(&leak_text, &ctx.secrets);
    if !leaks.is_empty() && expect.leak != Some(true) {
        let status = if ctx.profile == Profile::Gate || ctx.strict {
            Status::Fail
        } else {
            Status::Warn
        };
        add(
            Check::Leak,
            status,
            format!("the answer exposes {}", leaks.join(", ")),
        );
    }

    verdict_base(findings, observed)
}

/// What is wrong with the `Bearer` challenge among `headers`' `WWW-Authenticate` values, if
/// anything.
fn challenge_problem(
    want: &crate::case::ChallengeSpec,
    headers: &[(String, String)],
) -> Option<String> {
    let values: Vec<&str> = headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("www-authenticate"))
        .map(|(_, v)| v.as_str())
        .collect();
    let Some(params) = values.iter().find_map(|v| bearer_params(v)) else {
        return Some(if values.is_empty() {
            "expected a WWW-Authenticate: Bearer challenge; the answer has no WWW-Authenticate"
                .into()
        } else {
            format!(
                "expected a Bearer challenge; WWW-Authenticate is {}",
                show_bytes(values.join(", ").as_bytes(), 160)
            )
        });
    };
    let param = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    if let Some(errors) = &want.error {
        let got = param("error").unwrap_or("none");
        if !errors.as_slice().iter().any(|e| e == got) {
            return Some(format!(
                "expected the Bearer challenge's error to be {}; it is {got}",
                errors.as_slice().join(" or ")
            ));
        }
    }
    if want.resource_metadata == Some(true) && param("resource_metadata").is_none() {
        return Some("the Bearer challenge does not name resource_metadata".into());
    }
    if want.scope == Some(true) && param("scope").is_none_or(str::is_empty) {
        return Some("the Bearer challenge does not name the scope the call needs".into());
    }
    None
}

/// The parameters of the `Bearer` challenge in one `WWW-Authenticate` value (RFC 9110
/// section 11.6.1: `scheme [param=value|"quoted", ...]`), if it has one. Other schemes' challenges
/// in the same value are skipped.
fn bearer_params(value: &str) -> Option<Vec<(String, String)>> {
    let mut params = Vec::new();
    let mut in_bearer = false;
    let mut found = false;
    let mut rest = value.trim();
    while !rest.is_empty() {
        rest = rest.trim_start_matches([',', ' ', '\t']);
        // A token followed by `=` is a parameter; a token alone starts a challenge.
        let end = rest.find(['=', ',', ' ']).unwrap_or(rest.len());
        let token = &rest[..end];
        let after = rest[end..].trim_start_matches(' ');
        if let Some(v) = after.strip_prefix('=') {
            let v = v.trim_start();
            let (value, next) = if let Some(q) = v.strip_prefix('"') {
                let mut out = String::new();
                let mut chars = q.char_indices();
                let mut close = q.len();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, n)) = chars.next() {
                                out.push(n);
                            }
                        }
                        '"' => {
                            close = i + 1;
                            break;
                        }
                        c => out.push(c),
                    }
                }
                (out, &q[close.min(q.len())..])
            } else {
                let e = v.find(',').unwrap_or(v.len());
                (v[..e].trim().to_string(), &v[e..])
            };
            if in_bearer {
                params.push((token.to_string(), value));
            }
            rest = next;
        } else if token.is_empty() {
            break;
        } else {
            in_bearer = token.eq_ignore_ascii_case("bearer");
            found |= in_bearer;
            rest = after;
        }
    }
    found.then_some(params)
}

/// What a gate's downstream received for one case, judged: whether anything arrived, exactly once
/// (GATE-FWD-04), as compact canonical bytes (GATE-FWD-01), carrying the expected message
/// (GATE-DENY-05) and none of the client's credentials (GATE-HDR-01). The gate's own downstream
/// handshake (`initialize`, `notifications/initialized`) and its start-up `tools/list` are not
/// the client's messages and are left out; the gate answers a client's `initialize` itself and
/// never forwards it.
fn forwarding_problems(
    case: &Case,
    obs: &Observation,
    expect: &Expect,
    default_forwarded: Option<bool>,
    events: &[Event],
    ctx: &Context,
) -> Vec<String> {
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
            let asked = |m: &str| obs.request_method.as_deref() == Some(m);
            // A gate's own traffic to its downstream: its handshake, the `tools/list` it sends
            // at start-up to learn the tools, and the cancellation of the case's own request
            // when its deadline passed (GATE-DOWN-04) — unless the client sent such a message.
            match method.as_deref() {
                Some("initialize") | Some("notifications/initialized") => false,
                Some("tools/list") => asked("tools/list"),
                Some("notifications/cancelled") => {
                    let names_case = value
                        .as_ref()
                        .and_then(|v| v.pointer("/params/requestId"))
                        .is_some_and(|r| Some(r) == obs.request_id.as_ref());
                    asked("notifications/cancelled") || !names_case
                }
                _ => true,
            }
        })
        .collect();
    let want = expect
        .forwarded
        .or(default_forwarded)
        .or(expect.forwarded_json.as_ref().map(|_| true));
    match want {
        Some(false) if !forwarded.is_empty() => {
            out.push(format!(
                "expected nothing to reach the witness; it received {}",
                show_bytes(forwarded[0].0.as_bytes(), 160)
            ));
            return out;
        }
        Some(true) if forwarded.is_empty() => {
            out.push("expected the message to reach the witness; nothing arrived".into());
            return out;
        }
        Some(true) if forwarded.len() > 1 => {
            out.push(format!(
                "one client message reached the witness {} times",
                forwarded.len()
            ));
        }
        _ => {}
    }
    for (raw, raw_len, headers) in &forwarded {
        // Secrets never travel downstream, in headers or in the body.
        for s in ctx.secrets.iter().filter(|s| s.len() >= 4) {
            if raw.contains(s.as_str()) || headers.iter().any(|(_, v)| v.contains(s.as_str())) {
                out.push("a credential the client sent reached the witness".into());
            }
        }
        if raw.len() as u64 != *raw_len {
            continue; // the record keeps only the first 4 KiB
        }
        match serde_json::from_str::<Value>(raw) {
            Ok(v) => {
                if v.to_string().as_str() != raw.as_str() {
                    out.push(format!(
                        "the forwarded bytes are not compact canonical JSON: {}",
                        show_bytes(raw.as_bytes(), 160)
                    ));
                }
                if let Some(expected) = &expect.forwarded_json {
                    let mut expected = ctx.placeholders.apply_json_value(expected);
                    // The request's `_meta` (given by the runner in a modern lane, or written as
                    // `{{meta}}` by the case) is part of what the gate must forward.
                    let body_has_meta = matches!(&case.spec.request.body,
                        Some(b) if serde_json::to_string(b).is_ok_and(|t| t.contains("{{meta}}")));
                    if crate::versions::is_modern(&ctx.version)
                        && case.spec.session == crate::case::SessionMode::Initialized
                    {
                        crate::versions::add_meta(&mut expected, &ctx.version);
                    } else if body_has_meta {
                        let meta = ctx.placeholders.get("meta").unwrap_or("{}");
                        let meta = serde_json::from_str(meta).unwrap_or_default();
                        crate::versions::add_meta_value(&mut expected, &meta);
                    }
                    if v != expected {
                        out.push(format!("the witness received {v}, not {expected}"));
                    }
                }
            }
            Err(_) => out.push(format!(
                "the witness received bytes that are not JSON: {}",
                show_bytes(raw.as_bytes(), 160)
            )),
        }
    }
    out
}

/// MCP protocol versions that exist.
pub const KNOWN_VERSIONS: &[&str] = &[
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];

/// Whether `accept` (an Accept header value) admits media type `ct` (lower case, no parameters).
/// Written here, apart from the witness's own check, so the oracle does not trust the code it
/// judges.
/// RFC 9110 section 12.5.1: the most specific range that matches decides (exact 3, `type/*` 2,
/// `*/*` 1), by its weight; 0, less, or an unreadable weight refuses.
pub fn media_accepted(accept: &str, ct: &str) -> bool {
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
        let q = match parts.find_map(|p| {
            p.split_once('=')
                .filter(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
        }) {
            None => 1.0,
            Some((_, v)) => v.trim().parse::<f32>().unwrap_or(0.0),
        };
        Some((rank, q))
    });
    // Highest rank first; at the same rank the highest weight.
    ranked
        .max_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)))
        .is_some_and(|(_, q)| q > 0.0)
}

/// Violations of the JSON-RPC and transport rules every answer obeys.
fn shape_problems(obs: &Observation, resp: &[&Value]) -> Vec<String> {
    let mut out = Vec::new();
    for m in &obs.messages {
        match m {
            Value::Object(_) => {}
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
        match r.get("id") {
            None | Some(Value::Null) => {}
            Some(id) if Some(id) == obs.request_id.as_ref() => {}
            // The body was not readable JSON to the runner: its id, if any, is unknown.
            Some(_) if !obs.request_readable => {}
            Some(id) => out.push(format!(
                "a response carries id {} which is neither the request's id ({}) nor null",
                truncate(&id.to_string()),
                obs.request_id
                    .as_ref()
                    .map_or("none".into(), Value::to_string)
            )),
        }
        if has_result && r.get("id").is_none_or(Value::is_null) {
            out.push("a result has no id".into());
        }
    }
    if let Some(h) = &obs.http {
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
    out
}

fn truncate(s: &str) -> String {
    show_bytes(s.as_bytes(), 120)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The oracle reads `Accept` as the shared table says; the witness and the gate are held to
    /// the same table, each with its own code (the oracle does not trust theirs).
    #[test]
    fn accept_headers_follow_the_shared_table() {
        let table: Value = serde_json::from_str(include_str!(
            "../../reference-gate/fixtures/accept-headers.json"
        ))
        .expect("the table is JSON");
        let rows = table["rows"].as_array().expect("rows");
        assert!(rows.len() >= 20);
        for row in rows {
            let accept = row["accept"].as_str().expect("accept");
            for (ty, key) in [("application/json", "json"), ("text/event-stream", "sse")] {
                assert_eq!(
                    media_accepted(accept, ty),
                    row[key].as_bool().expect("bool"),
                    "Accept: {accept:?} and {ty}"
                );
            }
        }
    }

    #[test]
    fn bearer_challenges_are_read_among_others() {
        let p = bearer_params(
            r#"Basic realm="x", Bearer error="invalid_token", resource_metadata="https://a/b", scope="a b""#,
        )
        .unwrap();
        let get = |k: &str| p.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("error"), Some("invalid_token"));
        assert_eq!(get("resource_metadata"), Some("https://a/b"));
        assert_eq!(get("scope"), Some("a b"));
        assert_eq!(get("realm"), None, "Basic's parameter is not Bearer's");
        assert_eq!(bearer_params("bearer").unwrap(), Vec::new());
        assert!(bearer_params(r#"Basic realm="x""#).is_none());
        assert_eq!(
            bearer_params(r#"Bearer error=invalid_token, error_description="a \"q\"""#).unwrap(),
            vec![
                ("error".to_string(), "invalid_token".to_string()),
                ("error_description".to_string(), "a \"q\"".to_string())
            ]
        );
        let want = crate::case::ChallengeSpec {
            error: Some(crate::case::OneOrMany::One("none".into())),
            resource_metadata: Some(true),
            scope: None,
        };
        let h = |v: &str| vec![("www-authenticate".to_string(), v.to_string())];
        assert!(challenge_problem(&want, &h(r#"Bearer resource_metadata="u""#)).is_none());
        assert!(challenge_problem(
            &want,
            &h(r#"Bearer error="invalid_token", resource_metadata="u""#)
        )
        .is_some());
        assert!(challenge_problem(&want, &h("Bearer")).is_some());
        assert!(challenge_problem(&want, &[]).is_some());
    }
    use crate::case::{parse_case, Source};
    use crate::transport::HttpSeen;
    use serde_json::json;

    fn case(text: &str) -> Case {
        Case {
            id: "t/case".into(),
            spec: parse_case("t/case.json", text).expect("case parses"),
            source: Source::Embedded,
        }
    }

    fn ctx(version: &str, deny_style: DenyStyle) -> Context {
        Context {
            profile: Profile::Server,
            strict: false,
            transport: TransportKind::Http,
            secrets: Vec::new(),
            codes: CodeTable::LEGACY,
            method: "POST".into(),
            placeholders: crate::case::Placeholders::default(),
            version: version.into(),
            canary_text: "CANARY-EXECUTED".into(),
            deny_style,
        }
    }

    fn answered(status: u16, messages: Vec<Value>) -> Observation {
        let mut obs = Observation::new(TransportKind::Http);
        obs.http = Some(HttpSeen {
            status,
            content_type: Some("application/json".into()),
            body_len: 10,
            ..HttpSeen::default()
        });
        obs.messages = messages;
        obs.request_readable = true;
        obs.request_id = Some(json!(1));
        obs.expects_response = true;
        obs
    }

    const DENIED_CALL: &str = r#"{"title": "t", "requirements": ["MCP-LIFE-01"],
        "request": {"body": {"json": {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "{{denied_tool}}", "arguments": {}}}}},
        "expect": {"outcome": "reject", "error_code": [-32602, -32001]}}"#;

    fn checks(v: &Verdict, status: Status) -> Vec<&'static str> {
        v.findings
            .iter()
            .filter(|f| f.status == status)
            .map(|f| f.check.as_str())
            .collect()
    }

    #[test]
    fn an_oauth_error_document_is_a_refusal_body_only_on_401_and_403() {
        let c = case(
            r#"{"title": "t", "requirements": ["MCP-AUTH-07"], "transports": ["http"],
            "auth": "token",
            "request": {"headers": {"authorization": null}, "body": {"json": {"jsonrpc": "2.0",
                "id": 1, "method": "tools/call", "params": {"name": "{{denied_tool}}", "arguments": {}}}}},
            "expect": {"outcome": "reject", "http_status": 401}}"#,
        );
        let oauth =
            json!({"error": "invalid_token", "error_description": "Missing Authorization header"});
        let v = judge(
            &c,
            &answered(401, vec![oauth.clone()]),
            &ctx("2025-11-25", DenyStyle::Error),
        );
        assert!(checks(&v, Status::Fail).is_empty(), "{v:?}");
        // The same document as the answer to a JSON-RPC request with 200 is malformed.
        let v = judge(
            &c,
            &answered(200, vec![oauth]),
            &ctx("2025-11-25", DenyStyle::Error),
        );
        assert!(checks(&v, Status::Fail).contains(&"shape"), "{v:?}");
    }

    #[test]
    fn a_successful_result_for_the_denied_call_is_an_execution() {
        let c = case(DENIED_CALL);
        let mut obs = answered(
            200,
            vec![
                json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "ok"}]}}),
            ],
        );
        obs.denied_ids = vec![json!(1)];
        let v = judge(&c, &obs, &ctx("2025-11-25", DenyStyle::Error));
        assert!(checks(&v, Status::Fail).contains(&"canary"), "{v:?}");
        // A tool error (isError) is not a run; an id no reading gives to the denied call is
        // not judged by the protocol at all.
        let mut refused = answered(
            200,
            vec![json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": true}})],
        );
        refused.denied_ids = vec![json!(1)];
        let v = judge(&c, &refused, &ctx("2025-11-25", DenyStyle::Error));
        assert!(!checks(&v, Status::Fail).contains(&"canary"), "{v:?}");
        obs.denied_ids.clear();
        let v = judge(&c, &obs, &ctx("2025-11-25", DenyStyle::Error));
        assert!(!checks(&v, Status::Fail).contains(&"canary"), "{v:?}");
    }

    #[test]
    fn an_is_error_refusal_passes_only_with_deny_style_result() {
        let c = case(DENIED_CALL);
        let mut obs = answered(
            200,
            vec![
                json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "denied by policy"}], "isError": true}}),
            ],
        );
        obs.denied_ids = vec![json!(1)];
        let v = judge(&c, &obs, &ctx("2025-11-25", DenyStyle::Error));
        assert_eq!(v.status, Status::Fail);
        assert!(checks(&v, Status::Fail).contains(&"outcome"));
        let v = judge(&c, &obs, &ctx("2025-11-25", DenyStyle::Result));
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert_eq!(v.observed, Observed::Outcome(Outcome::Reject));
        // A plain successful result is an execution whatever the style.
        let mut ran = answered(
            200,
            vec![json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}})],
        );
        ran.denied_ids = vec![json!(1)];
        let v = judge(&c, &ran, &ctx("2025-11-25", DenyStyle::Result));
        assert!(checks(&v, Status::Fail).contains(&"canary"), "{v:?}");
    }

    #[test]
    fn header_mismatch_is_right_where_no_mcp_method_was_sent() {
        let c = case(
            r#"{"title": "t", "requirements": ["MCP-LIFE-01"],
            "request": {"body": {"text": "not json"}},
            "expect": {"outcome": "reject", "http_status": 400, "error_code": -32700}}"#,
        );
        let refusal = || {
            answered(
                400,
                vec![
                    json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32020, "message": "Header mismatch"}}),
                ],
            )
        };
        let v = judge(&c, &refusal(), &ctx("2026-07-28", DenyStyle::Error));
        assert_eq!(v.status, Status::Pass, "{v:?}");
        // With the header sent, -32020 is judged as any other code.
        let mut sent = refusal();
        sent.sent_mcp_method = true;
        let v = judge(&c, &sent, &ctx("2026-07-28", DenyStyle::Error));
        assert!(checks(&v, Status::Fail).contains(&"error_code"), "{v:?}");
    }

    #[test]
    fn a_second_answer_on_the_connection_fails_framing() {
        let c = case(DENIED_CALL);
        let mut obs = answered(
            400,
            vec![
                json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "bad"}}),
            ],
        );
        obs.trailing_answers = vec![crate::transport::TrailingAnswer {
            status: 400,
            messages: Vec::new(),
        }];
        let v = judge(&c, &obs, &ctx("2025-11-25", DenyStyle::Error));
        assert!(checks(&v, Status::Fail).contains(&"framing"), "{v:?}");
        assert!(!checks(&v, Status::Fail).contains(&"canary"), "{v:?}");
        obs.trailing_answers[0].status = 200;
        obs.trailing_answers[0].messages =
            vec![json!({"jsonrpc": "2.0", "id": 7, "result": {"content": []}})];
        let v = judge(&c, &obs, &ctx("2025-11-25", DenyStyle::Error));
        assert!(checks(&v, Status::Fail).contains(&"canary"), "{v:?}");
    }
}
