//! Oracles: an [`Observation`] judged against a case's acceptable set.
//!
//! **Architecture invariant:** verdicts never parse with the gate's parser and know nothing of
//! sockets or processes; they read an Observation and a case, and nothing else.

mod answer;
pub use answer::{UNKNOWN_ALLOWED_TOOL, UNKNOWN_DENIED_TOOL};
mod canary;
mod clients;
mod effects;
mod forwarded;
mod leak;
mod series;
mod shape;

use crate::case::{Case, Expect, Level, Outcome, Profile, TransportKind};
use crate::settings::CodeTable;
use crate::settings::DenyStyle;
use crate::transport::{Ending, Observation};
use crate::versions::Version;
use serde_json::Value;

/// The result of a trial.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Warn,
    Fail,
}

/// Declares [`Check`] with each variant's one spelling: the name reports, baselines, JUnit,
/// SARIF and the summaries print and read back.
macro_rules! checks {
    ($($(#[$doc:meta])* $variant:ident => $name:literal,)*) => {
        /// Which oracle spoke.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Check {
            $($(#[$doc])* $variant,)*
        }

        impl Check {
            /// Every check, in declaration order.
            pub const ALL: &[Check] = &[$(Check::$variant),*];

            /// Its name, the one spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Check::$variant => $name,)*
                }
            }
        }
    };
}

checks! {
    Setup => "setup",
    Outcome => "outcome",
    HttpStatus => "http_status",
    ErrorCode => "error_code",
    Id => "id",
    Shape => "shape",
    Output => "output",
    Canary => "canary",
    Forwarded => "forwarded",
    Alive => "alive",
    Leak => "leak",
    /// A request smuggled behind the case's own on one connection was served.
    Framing => "framing",
    /// The bytes or memory a server spent on an input before refusing it.
    Resources => "resources",
    /// The `WWW-Authenticate` challenge of an authorization refusal.
    Challenge => "challenge",
    /// A `clients` case: an answer reached a client other than the one that asked, or none.
    Crossed => "crossed",
    /// A series: what it sent and got, and whether the server bounded it.
    Series => "series",
    /// A series: memory the target kept per step.
    Memory => "memory",
    /// A series: CPU the target spent per step.
    Cpu => "cpu",
    /// A series: how long a `ping` on another connection took while it ran.
    Latency => "latency",
    /// HTTP+SSE: where the stream's `endpoint` event sends the client's messages.
    Endpoint => "endpoint",
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Checks sort by name, as reports list causes.
impl Ord for Check {
    fn cmp(&self, other: &Check) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for Check {
    fn partial_cmp(&self, other: &Check) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl serde::Serialize for Check {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Check {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Check, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Check::ALL
            .iter()
            .copied()
            .find(|c| c.as_str() == name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown check `{name}`")))
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Finding {
    pub check: Check,
    pub status: Status,
    pub message: String,
}

/// What was observed, in the terms of a case.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// acceptable set next to what was observed, under the lane's name as libtest lists the
    /// trial (`[gate/http@last-wins]`).
    pub(crate) fn explain(&self, lane: &str, case: &Case, obs: &Observation) -> String {
        let mut out = format!(
            "[{lane}] {}: {}\n  requirements: {}\n",
            case.id,
            case.spec.title,
            case.spec.requirements.join(", ")
        );
        if !case.spec.advisories.is_empty() {
            // Each with the releases it affects, so the line says where it was published.
            let named: Vec<String> = case
                .spec
                .advisories
                .iter()
                .map(|id| match crate::advisory::find(id) {
                    Some(a) => format!("{id} ({} {})", a.package, a.affected),
                    None => id.clone(),
                })
                .collect();
            out.push_str(&format!("  advisories: {}\n", named.join(", ")));
        }
        for f in &self.findings {
            let tag = match f.status {
                Status::Fail => "FAIL",
                Status::Warn => "warn",
                Status::Pass => "note",
            };
            out.push_str(&format!("  {tag} [{}] {}\n", f.check.as_str(), f.message));
        }
        if obs.sent.len > 0 {
            let mut sent = show_bytes(&obs.sent.prefix, obs.sent.prefix.len());
            if obs.sent.len > obs.sent.prefix.len() as u64 {
                sent.push('…');
            }
            out.push_str(&format!("  sent ({} bytes): {sent}\n", obs.sent.len));
        }
        out.push_str(&format!("  observed: {}", self.observed));
        if let Some(s) = self.http_status {
            out.push_str(&format!(", HTTP {s}"));
        }
        if let Some(c) = self.error_code {
            out.push_str(&format!(", error code {c}"));
        }
        if !obs.answer.prefix.is_empty() {
            out.push_str(&format!(
                "\n  answer begins: {}",
                show_bytes(&obs.answer.prefix, 200)
            ));
        }
        out.push('\n');
        out
    }
}

/// Bytes for a human: lossy UTF-8 with control characters escaped, cut at `n`.
pub(crate) fn show_bytes(bytes: &[u8], n: usize) -> String {
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
    pub method: hyper::Method,
    /// Placeholder values, for expectations that name the tools (`forwarded_json`).
    pub placeholders: crate::case::Placeholders,
    /// The protocol version the case spoke.
    pub version: Version,
    /// The text the denied tool answers when it runs (`--canary-text`).
    pub canary_text: String,
    /// How a gate says no to a tool call (`--deny-style`).
    pub deny_style: DenyStyle,
    /// Whether the gate's error table is known (`Settings::exact_codes`).
    pub exact_codes: bool,
    /// The tool-call arguments that carry the caller's identity (`--identity argument:NAME`).
    pub identity_arguments: Vec<String>,
}

impl Context {
    /// Whether a case's narrower set applies: `--strict`, or a gate whose error table is known
    /// (the reference gate, `--gate-codes`). Any other gate is judged by `expect` and
    /// fail-closed (see [`Judge::fail_closed`]).
    pub fn narrows(&self) -> bool {
        self.strict || (self.profile == Profile::Gate && self.exact_codes)
    }

    /// The acceptable set in force for `case` on this lane (see [`Case::expectation`]): the one
    /// place it is derived, for the runner's decision to probe the endpoint after the case and
    /// for the judge.
    pub fn expectation(&self, case: &Case) -> Expect {
        case.expectation(self.profile, self.narrows(), self.version)
    }
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

/// The JSON-RPC responses among what came back. The body of an HTTP 401 or 403 may instead be
/// an OAuth error document (RFC 6750 section 3, RFC 6749 section 5.2: `{"error": "invalid_token",
/// "error_description": ...}`, no `jsonrpc`), as SDKs' bearer middleware answers; that is not a
/// malformed response.
fn responses(obs: &Observation) -> Vec<&Value> {
    let auth_refusal = obs
        .answer
        .http
        .as_ref()
        .is_some_and(|h| h.status == 401 || h.status == 403);
    let oauth_document = |v: &Value| {
        auth_refusal && v.get("jsonrpc").is_none() && v.get("error").is_some_and(Value::is_string)
    };
    let mut out = Vec::new();
    for m in &obs.answer.messages {
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

/// Classify what came back, in the terms of `expect`: where it lets the endpoint end (its
/// `alive` is false), closing without a word counts as silence; where it lists `closed`, an
/// HTTP connection closed before any answer is that.
pub(crate) fn observe(obs: &Observation, ctx: &Context, expect: &Expect) -> Observed {
    let listed = |o: Outcome| {
        expect
            .outcome
            .as_ref()
            .is_some_and(|set| set.as_slice().contains(&o))
    };
    match &obs.answer.ending {
        // A stdio server whose input was closed, that said nothing and lingers instead of
        // exiting, was silent: where the case lets it end, it may as well stay.
        Ending::TimedOut
            if obs.sent.input_closed && expect.alive == Some(false) && listed(Outcome::Silent) =>
        {
            return Observed::Outcome(Outcome::Silent)
        }
        Ending::TimedOut => return Observed::NoAnswer("nothing before the deadline".into()),
        Ending::Closed
            if obs.answer.http.is_none()
                && matches!(ctx.transport, TransportKind::Http | TransportKind::Sse)
                && listed(Outcome::Closed) =>
        {
            return Observed::Outcome(Outcome::Closed)
        }
        Ending::Closed if expect.alive == Some(false) && obs.answer.http.is_none() => {
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
    match &obs.answer.http {
        Some(h) if (200..300).contains(&h.status) => {
            if !resp.is_empty() {
                Observed::Outcome(Outcome::Reject)
            } else if h.status == 202 && h.body_len == 0 {
                Observed::Outcome(Outcome::Silent)
            } else if ctx.method == hyper::Method::GET
                && h.content_type.as_deref() == Some("text/event-stream")
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

/// Judge one observation: the oracles in a fixed order (findings are reported in it). A case
/// with a `prefer` set is judged a second time by it (where the reading does not narrow
/// anyway): what only that reading finds is a warning (`preferred: ...`).
pub fn judge(case: &Case, obs: &Observation, ctx: &Context) -> Verdict {
    // The case's expectations read with the values the exchange filled its request in with.
    let mut learned = ctx.clone();
    for (name, value) in &obs.sent.learned {
        learned.placeholders.set(name, value.clone());
    }
    let ctx = &learned;
    let mut verdict = judge_by(case, obs, ctx, ctx.expectation(case));
    if let Some(preferred) = case.preferred(ctx.narrows(), ctx.version) {
        let seen: Vec<Check> = verdict.findings.iter().map(|f| f.check).collect();
        let more: Vec<Finding> = judge_by(case, obs, ctx, preferred)
            .findings
            .into_iter()
            .filter(|f| f.status != Status::Pass && !seen.contains(&f.check))
            .map(|f| Finding {
                check: f.check,
                status: Status::Warn,
                message: format!("preferred: {}", f.message),
            })
            .collect();
        if !more.is_empty() {
            verdict.findings.extend(more);
            verdict.status = verdict.status.max(Status::Warn);
        }
    }
    if let Some(seen) = &obs.answer.series {
        judge_steps(case, seen, ctx, &mut verdict);
    }
    // The target this case left gone fails it, whatever the case lets the endpoint do. A case
    // that could not be sent did not leave it so: it found it gone (often the runner's own
    // restart, for a trial beside it), tested nothing, and says so as part of its setup.
    if let Some(note) = &obs.after.target_down {
        verdict.findings.push(Finding {
            check: if not_sent(obs).is_some() {
                Check::Setup
            } else {
                Check::Alive
            },
            status: Status::Fail,
            message: note.clone(),
        });
        verdict.status = Status::Fail;
    }
    verdict
}

/// Every kind of answer a series' steps got besides the first step's (which `verdict` judged),
/// judged as that case's answer; a kind in the case's `cap` set is judged as a refusal with
/// one of those statuses. Findings name the step and how many steps got that kind.
fn judge_steps(
    case: &Case,
    seen: &crate::transport::SeriesSeen,
    ctx: &Context,
    verdict: &mut Verdict,
) {
    let cap = case.spec.series.as_ref().and_then(|s| s.cap.clone());
    for kind in seen.kinds.iter().skip(1) {
        let mut expect = ctx.expectation(case);
        if kind.capped {
            expect.outcome = Some(crate::case::OneOrMany::One(Outcome::Reject));
            expect.http_status = cap.clone();
            expect.error_code = None;
            expect.id = None;
        }
        // Memory, CPU and liveness are the series' own: judged once, on the whole.
        expect.series = None;
        let step = judge_by(case, &kind.observation, ctx, expect);
        for f in step
            .findings
            .into_iter()
            .filter(|f| f.status != Status::Pass)
        {
            verdict.findings.push(Finding {
                check: f.check,
                status: f.status,
                message: format!(
                    "step {} ({}; {} steps answered so): {}",
                    kind.step + 1,
                    kind.key,
                    kind.count,
                    f.message
                ),
            });
            verdict.status = verdict.status.max(f.status);
        }
    }
}

/// Why the case's own bytes never went out, if they did not: its setup failed, or the target
/// did not take the connection (or, on stdio, did not start) for its single request. A series'
/// steps are judged as they went.
fn not_sent(obs: &Observation) -> Option<String> {
    if let Some(e) = &obs.sent.setup_error {
        return Some(e.clone());
    }
    match (&obs.answer.ending, &obs.answer.series) {
        (Ending::Unreachable(e), None) => Some(format!("the target did not take it: {e}")),
        _ => None,
    }
}

fn judge_by(case: &Case, obs: &Observation, ctx: &Context, expect: Expect) -> Verdict {
    let mut j = Judge::new(case, obs, ctx, expect);
    let unsent = not_sent(obs);
    let observed = if unsent.is_some() {
        Observed::NoAnswer("not sent".into())
    } else {
        observe(obs, ctx, &j.expect)
    };
    if let Some(e) = &unsent {
        j.add(
            Check::Setup,
            Status::Fail,
            format!("the case could not be sent: {e}"),
        );
        return j.verdict(observed);
    }
    if j.endpoint_elsewhere() {
        return j.verdict(Observed::NoAnswer("not sent".into()));
    }
    j.canary();
    j.framing();
    let (observed, result_refusal) = j.deny_style(observed);
    let binding_refusal = j.binding_refusal();
    j.outcome(&observed, binding_refusal);
    j.http_status(&observed, binding_refusal);
    j.challenge();
    let session_refusal = j.session_refusal(&observed);
    j.error_code(
        &observed,
        binding_refusal || result_refusal || session_refusal,
    );
    j.ids(&observed, result_refusal);
    j.shape();
    j.batch();
    j.refusal_body();
    j.media_type();
    j.negotiated_version();
    j.modern_error_codes();
    j.output();
    j.forwarded();
    j.server_requests();
    j.alive();
    j.resources();
    j.unread_queue();
    j.series();
    j.crossed();
    j.leaks();
    j.repair_leniency(&observed);
    j.fail_closed_leniency(&observed);
    j.verdict(observed)
}

/// One judgement in progress: the case, what was seen, the expectation in force, and the
/// findings so far. Each oracle family is a method (in `answer.rs`, `shape.rs`, `canary.rs`,
/// `forwarded.rs`, `effects.rs`, `clients.rs` and `leak.rs`).
struct Judge<'a> {
    case: &'a Case,
    obs: &'a Observation,
    ctx: &'a Context,
    expect: Expect,
    /// The JSON-RPC responses among what came back.
    resp: Vec<&'a Value>,
    /// The code of the first error among them.
    first_error_code: Option<i64>,
    /// How a missed expectation counts at the case's level (`should` fails under `--strict`).
    level_status: Status,
    /// Strict reading of refusals: `--strict`, or a gate whose error table is known.
    strict: bool,
    /// A gate whose error table is not known: the form of a refusal is not judged (gate cases
    /// are written in the reference gate's terms, its statuses, codes and ids), only that it is
    /// one: any JSON-RPC error with a sane id (null, absent, or the request's), a 4xx, or a 2xx
    /// carrying an error. What the gate did (forwarded, canary, alive, leak) and what it answers
    /// to what must succeed are judged as always.
    fail_closed: bool,
    findings: Vec<Finding>,
}

impl<'a> Judge<'a> {
    fn new(case: &'a Case, obs: &'a Observation, ctx: &'a Context, expect: Expect) -> Judge<'a> {
        let resp = responses(obs);
        let first_error_code = resp.iter().find_map(|r| {
            r.get("error")
                .and_then(|e| e.get("code"))
                .and_then(Value::as_i64)
        });
        let narrows = ctx.narrows();
        Judge {
            case,
            obs,
            ctx,
            expect,
            resp,
            first_error_code,
            level_status: match case.spec.level {
                Level::Must => Status::Fail,
                Level::Should if ctx.strict => Status::Fail,
                Level::Should | Level::Info => Status::Warn,
            },
            strict: narrows,
            fail_closed: ctx.profile == Profile::Gate && !narrows,
            findings: Vec::new(),
        }
    }

    fn add(&mut self, check: Check, status: Status, message: String) {
        self.findings.push(Finding {
            check,
            status,
            message,
        });
    }

    /// The verdict: the worst finding's status (pass when there is none), after the run's
    /// severity rule: a `should` or `info` case never fails a default run (whatever fired in
    /// it, the canary included, warns), and under `--strict` every warning fails. A case that
    /// could not be sent fails either way: that is no verdict on the target.
    fn verdict(mut self, observed: Observed) -> Verdict {
        let (strict, must) = (self.ctx.strict, self.case.spec.level == Level::Must);
        for f in self.findings.iter_mut().filter(|f| f.check != Check::Setup) {
            f.status = match f.status {
                Status::Warn if strict => Status::Fail,
                Status::Fail if !strict && !must => Status::Warn,
                other => other,
            };
        }
        let status = self
            .findings
            .iter()
            .map(|f| f.status)
            .max()
            .unwrap_or(Status::Pass);
        Verdict {
            status,
            findings: self.findings,
            observed,
            http_status: self.obs.answer.http.as_ref().map(|h| h.status),
            error_code: self.first_error_code,
        }
    }
}

fn truncate(s: &str) -> String {
    show_bytes(s.as_bytes(), 120)
}

#[cfg(test)]
mod tests {
    use super::answer::{bearer_params, challenge_problem};
    use super::shape::media_accepted;
    use super::*;

    /// Each check has one spelling: names are distinct, and what is written reads back as the
    /// same check (an unknown name is refused, not defaulted).
    #[test]
    fn every_check_reads_back_as_itself() {
        let names: std::collections::BTreeSet<&str> =
            Check::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), Check::ALL.len());
        for c in Check::ALL {
            let text = serde_json::to_string(c).expect("a check serializes");
            assert_eq!(text, format!("\"{}\"", c.as_str()));
            let back: Check = serde_json::from_str(&text).expect("a check reads back");
            assert_eq!(back, *c);
        }
        assert!(serde_json::from_str::<Check>("\"Outcome\"").is_err());
    }

    /// The oracle reads `Accept` as the shared table says; the witness and the gate are held to
    /// the same table, each with its own code (the oracle does not trust theirs).
    #[test]
    fn accept_headers_follow_the_shared_table() {
        for (accept, json, sse) in crate::testing::accept_rows() {
            assert_eq!(
                media_accepted(&accept, "application/json"),
                json,
                "{accept:?}"
            );
            assert_eq!(
                media_accepted(&accept, "text/event-stream"),
                sse,
                "{accept:?}"
            );
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

    /// A server-profile HTTP context at `version` (the clients oracle's tests use it too).
    pub(super) fn ctx(version: Version, deny_style: DenyStyle) -> Context {
        Context {
            profile: Profile::Server,
            strict: false,
            transport: TransportKind::Http,
            secrets: Vec::new(),
            codes: CodeTable::LEGACY,
            method: hyper::Method::POST,
            placeholders: crate::case::Placeholders::default(),
            version,
            canary_text: "CANARY-EXECUTED".into(),
            deny_style,
            exact_codes: false,
            identity_arguments: Vec::new(),
        }
    }

    fn answered(status: u16, messages: Vec<Value>) -> Observation {
        let mut obs = Observation::new(TransportKind::Http);
        obs.answer.http = Some(HttpSeen {
            status,
            content_type: Some("application/json".into()),
            body_len: 10,
            ..HttpSeen::default()
        });
        obs.answer.messages = messages;
        obs.sent.readable = true;
        obs.sent.id = Some(json!(1));
        obs.sent.expects_response = true;
        obs
    }

    const DENIED_CALL: &str = r#"{"title": "t", "requirements": ["MCP-LIFE-01"],
        "request": {"body": {"json": {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "{{denied_tool}}", "arguments": {}}}}},
        "expect": {"outcome": "reject", "error_code": [-32602, -32001]}}"#;

    /// The statuses of a verdict's `forwarded` findings, in order.
    fn forwarded(v: &Verdict) -> Vec<Status> {
        v.findings
            .iter()
            .filter(|f| f.check == Check::Forwarded)
            .map(|f| f.status)
            .collect()
    }

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
            &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
        );
        assert!(checks(&v, Status::Fail).is_empty(), "{v:?}");
        // The same document as the answer to a JSON-RPC request with 200 is malformed.
        let v = judge(
            &c,
            &answered(200, vec![oauth]),
            &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
        );
        assert!(checks(&v, Status::Fail).contains(&"shape"), "{v:?}");
    }

    #[test]
    fn a_batch_where_batches_are_legal_is_answered_once_per_request() {
        let c = case(
            r#"{"title": "t", "requirements": ["JSONRPC-BATCH-01"], "versions": {"to": "2025-03-26"},
            "request": {"body": {"json": [{"jsonrpc": "2.0", "id": 1, "method": "ping"},
                {"jsonrpc": "2.0", "method": "notifications/cancelled"},
                {"jsonrpc": "2.0", "id": "two", "method": "ping"}]}},
            "expect": {"outcome": ["accept", "reject"], "http_status": ["2xx", "4xx"]}}"#,
        );
        let sent = json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/cancelled"},
            {"jsonrpc": "2.0", "id": "two", "method": "ping"}]);
        let ok = |id: Value| json!({"jsonrpc": "2.0", "id": id, "result": {}});
        let judged = |version: Version, messages: Vec<Value>| {
            let mut obs = answered(200, messages);
            obs.sent.readable = false;
            obs.sent.id = None;
            obs.sent.batch = crate::transport::BatchSent::of(&sent);
            judge(&c, &obs, &ctx(version, DenyStyle::Error))
        };
        let old = Version::new(2025, 3, 26);
        let right = vec![json!([ok(json!("two")), ok(json!(1))])];
        assert_eq!(judged(old, right.clone()).status, Status::Pass);
        // Where batches are gone, an array is no answer at all.
        let gone = judged(crate::versions::NEWEST_LEGACY, right);
        assert!(checks(&gone, Status::Fail).contains(&"shape"), "{gone:?}");
        // A whole refusal is one.
        let refused =
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "no"}});
        assert_eq!(judged(old, vec![refused]).status, Status::Pass);
        // A request left out, one answered twice, a stray id, the notification answered.
        for wrong in [
            vec![ok(json!(1))],
            vec![json!([ok(json!(1))])],
            vec![json!([ok(json!(1)), ok(json!(1)), ok(json!("two"))])],
            vec![json!([ok(json!(1)), ok(json!("two")), ok(json!(3))])],
            vec![json!([ok(json!(1)), ok(json!("two")), ok(Value::Null)])],
            vec![json!([])],
        ] {
            let v = judged(old, wrong.clone());
            assert_eq!(v.status, Status::Fail, "{wrong:?}: {v:?}");
            assert!(
                checks(&v, Status::Fail).contains(&"shape"),
                "{wrong:?}: {v:?}"
            );
        }
        // Each once but not together: preferred in one array.
        let apart = judged(old, vec![ok(json!(1)), ok(json!("two"))]);
        assert_eq!(apart.status, Status::Warn, "{apart:?}");
        // A batch of notifications gets nothing, not an array.
        let notes = json!([{"jsonrpc": "2.0", "method": "notifications/cancelled"}]);
        let mut obs = answered(200, vec![json!([])]);
        obs.sent.batch = crate::transport::BatchSent::of(&notes);
        let v = judge(&c, &obs, &ctx(old, DenyStyle::Error));
        assert!(checks(&v, Status::Fail).contains(&"shape"), "{v:?}");
        assert_eq!(
            crate::transport::BatchSent::of(
                &json!([1, {"jsonrpc": "2.0", "id": null, "method": "x"}])
            ),
            Some(crate::transport::BatchSent {
                ids: Vec::new(),
                notifications: 0,
                invalid: 2
            })
        );
        assert_eq!(crate::transport::BatchSent::of(&json!([])), None);
    }

    #[test]
    fn an_id_that_comes_back_as_the_same_number_written_otherwise_is_a_warning() {
        let c = case(
            r#"{"title": "t", "requirements": ["MCP-LIFE-01"],
            "request": {"body": {"text": "{\"jsonrpc\":\"2.0\",\"id\":-0.0,\"method\":\"ping\"}"}},
            "expect": {"outcome": "accept", "id": "echo"}}"#,
        );
        let mut obs = answered(200, vec![json!({"jsonrpc": "2.0", "id": 0, "result": {}})]);
        obs.sent.id = Some(json!(-0.0));
        let mut strict = ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error);
        let v = judge(
            &c,
            &obs,
            &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
        );
        assert_eq!(v.status, Status::Warn, "{v:?}");
        assert_eq!(checks(&v, Status::Warn), vec!["shape"]);
        strict.strict = true;
        assert_eq!(judge(&c, &obs, &strict).status, Status::Fail);
        // Another number is another id.
        obs.answer.messages = vec![json!({"jsonrpc": "2.0", "id": 1, "result": {}})];
        let v = judge(
            &c,
            &obs,
            &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
        );
        assert_eq!(v.status, Status::Fail, "{v:?}");
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
        obs.sent.denied_ids = vec![json!(1)];
        let v = judge(
            &c,
            &obs,
            &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
        );
        assert!(checks(&v, Status::Fail).contains(&"canary"), "{v:?}");
        // A tool error (isError) is not a run; an id no reading gives to the denied call is
        // not judged by the protocol at all.
        let mut refused = answered(
            200,
            vec![json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": true}})],
        );
        refused.sent.denied_ids = vec![json!(1)];
        let v = judge(
            &c,
            &refused,
            &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
        );
        assert!(!checks(&v, Status::Fail).contains(&"canary"), "{v:?}");
        obs.sent.denied_ids.clear();
        let v = judge(
            &c,
            &obs,
            &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
        );
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
        obs.sent.denied_ids = vec![json!(1)];
        let v = judge(
            &c,
            &obs,
            &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
        );
        assert_eq!(v.status, Status::Fail);
        assert!(checks(&v, Status::Fail).contains(&"outcome"));
        let v = judge(
            &c,
            &obs,
            &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Result),
        );
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert_eq!(v.observed, Observed::Outcome(Outcome::Reject));
        // A plain successful result is an execution whatever the style.
        let mut ran = answered(
            200,
            vec![json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}})],
        );
        ran.sent.denied_ids = vec![json!(1)];
        let v = judge(
            &c,
            &ran,
            &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Result),
        );
        assert!(checks(&v, Status::Fail).contains(&"canary"), "{v:?}");
    }

    #[test]
    fn a_call_of_a_tool_the_target_does_not_have_is_refused_whatever_the_style() {
        let c = case(DENIED_CALL);
        let mut context = ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error);
        context.placeholders.set("denied_tool", "delete_everything");
        let answer = |text: &str| {
            answered(
                200,
                vec![
                    json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}], "isError": true}}),
                ],
            )
        };
        // A server without the tool: refused, and the trial says what it could not check.
        let v = judge(
            &c,
            &answer("MCP error -32602: Tool delete_everything not found"),
            &context,
        );
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert_eq!(v.observed, Observed::Outcome(Outcome::Reject));
        assert!(v.findings.iter().any(|f| f.message == UNKNOWN_DENIED_TOOL));
        // An isError result that does not say so is not a refusal under the error style.
        let v = judge(&c, &answer("delete_everything failed: disk busy"), &context);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        // Nor one that says another tool is unknown.
        let v = judge(&c, &answer("Tool echo not found"), &context);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        // A result not marked isError that says the tool is unknown is no run of it (the
        // outcome, an acceptance, still fails where a refusal is due).
        let mut unflagged = answered(
            200,
            vec![
                json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "Error: Unknown tool: delete_everything"}], "isError": false}}),
            ],
        );
        unflagged.sent.denied_ids = vec![json!(1)];
        let v = judge(&c, &unflagged, &context);
        assert!(!checks(&v, Status::Fail).contains(&"canary"), "{v:?}");
        // A plain success still counts as a run.
        let mut ran = answered(
            200,
            vec![
                json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "deleted"}]}}),
            ],
        );
        ran.sent.denied_ids = vec![json!(1)];
        let v = judge(&c, &ran, &context);
        assert!(checks(&v, Status::Fail).contains(&"canary"), "{v:?}");
    }

    #[test]
    fn a_call_of_an_allowed_tool_the_target_does_not_have_is_answered_not_refused() {
        let c = case(
            r#"{"title": "t", "requirements": ["MCP-STDIO-03"],
            "request": {"body": {"json": {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "{{allowed_tool}}", "arguments": {}}}}},
            "expect": {"outcome": "accept", "id": "echo"}}"#,
        );
        let mut context = ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error);
        context.placeholders.set("allowed_tool", "echo");
        let error = |message: &str| {
            answered(
                200,
                vec![
                    json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": message}}),
                ],
            )
        };
        let v = judge(&c, &error("MCP error -32601: Unknown tool: echo"), &context);
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!(v.findings.iter().any(|f| f.message == UNKNOWN_ALLOWED_TOOL));
        // Any other refusal of a call that must be answered is still one.
        let v = judge(&c, &error("Server not initialized"), &context);
        assert_eq!(v.status, Status::Fail, "{v:?}");
    }

    #[test]
    fn a_stdio_server_that_says_nothing_and_lingers_after_its_input_closed_was_silent() {
        let c = case(
            r#"{"title": "t", "requirements": ["MCP-STDIO-09"], "transports": ["stdio"],
            "request": {"body": {"text": "{\"jsonrpc\":\"2.0\",\"id\":1"}, "raw_line": true,
                "close_input": true},
            "expect": {"outcome": ["reject", "silent"], "alive": false}}"#,
        );
        let mut context = ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error);
        context.transport = TransportKind::Stdio;
        let mut obs = Observation::new(TransportKind::Stdio);
        obs.answer.ending = Ending::TimedOut;
        obs.sent.input_closed = true;
        let v = judge(&c, &obs, &context);
        assert_eq!(v.observed, Observed::Outcome(Outcome::Silent), "{v:?}");
        assert_eq!(v.status, Status::Pass, "{v:?}");
        // Input still open, the same silence is no answer.
        obs.sent.input_closed = false;
        let v = judge(&c, &obs, &context);
        assert_eq!(v.status, Status::Fail, "{v:?}");
    }

    #[test]
    fn a_case_that_found_its_target_gone_before_it_was_sent_tested_nothing() {
        let c = case(
            r#"{"title": "t", "requirements": ["MCP-HTTP-POST-03"],
            "request": {"body": {"json": [{"jsonrpc": "2.0", "id": 1, "method": "ping"}]}},
            "expect": {"outcome": "reject"}}"#,
        );
        let context = ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error);
        let mut obs = Observation::new(TransportKind::Http);
        obs.sent.setup_error = Some("i/o error: Connection reset by peer".into());
        obs.after.target_down = Some(
            "the target was not accepting connections when this case began (it was restarted)"
                .into(),
        );
        let v = judge(&c, &obs, &context);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        let unpassed: Vec<Check> = v
            .findings
            .iter()
            .filter(|f| f.status != Status::Pass)
            .map(|f| f.check)
            .collect();
        assert_eq!(unpassed, vec![Check::Setup, Check::Setup], "{v:?}");
        // So does one whose connection the target did not take.
        obs.sent.setup_error = None;
        obs.answer.ending = Ending::Unreachable("Connection refused (os error 111)".into());
        let v = judge(&c, &obs, &context);
        assert!(
            v.findings
                .iter()
                .all(|f| f.status == Status::Pass || f.check == Check::Setup),
            "{v:?}"
        );
        // A case that was sent and left it gone fails on it.
        obs.answer.ending = Ending::Closed;
        let v = judge(&c, &obs, &context);
        assert!(v
            .findings
            .iter()
            .any(|f| f.check == Check::Alive && f.status == Status::Fail));
    }

    #[test]
    fn an_id_a_lenient_reader_sees_is_a_warning_not_a_second_failure() {
        let c = case(
            r#"{"title": "t", "requirements": ["JSON-NUM-01"],
            "request": {"body": {"text": "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"n\":Infinity}}}"}},
            "expect": {"outcome": "reject", "error_code": [-32700, -32600], "id": "null-or-absent"}}"#,
        );
        let mut obs = answered(
            200,
            vec![
                json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Unknown tool"}}),
            ],
        );
        obs.sent.id = None;
        obs.sent.readable = false;
        obs.sent.repaired_id = Some(json!(1));
        let v = judge(
            &c,
            &obs,
            &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
        );
        assert_eq!(checks(&v, Status::Fail), ["error_code"], "{v:?}");
        assert!(checks(&v, Status::Warn).contains(&"id"), "{v:?}");
        // Another id than the one a lenient reader sees still fails, saying what it saw.
        obs.answer.messages = vec![
            json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32602, "message": "Unknown tool"}}),
        ];
        let v = judge(
            &c,
            &obs,
            &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
        );
        assert!(checks(&v, Status::Fail).contains(&"id"), "{v:?}");
        let id = v.findings.iter().find(|f| f.check == Check::Id);
        assert!(
            id.is_some_and(|f| !f.message.contains("request id none")),
            "{v:?}"
        );
    }

    #[test]
    fn a_server_that_repairs_invalid_utf8_and_reads_the_request_passes_the_lenient_reading() {
        let c = case(
            r#"{"title": "t", "requirements": ["JSON-ENC-01"],
            "request": {"body": {"base64": "e30="}},
            "expect": {"outcome": ["reject", "silent"], "http_status": ["4xx"],
                "error_code": [-32700, -32600, -32602], "id": "null-or-absent"},
            "strict": {"outcome": "reject", "error_code": -32700}}"#,
        );
        let mut obs = answered(
            200,
            vec![
                json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "a\u{fffd}b"}]}}),
            ],
        );
        obs.sent.readable = false;
        obs.sent.id = None;
        obs.sent.detectable_id = Some(crate::reading::DetectedId {
            id: json!(1),
            json: false,
        });
        let server = ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error);
        let v = judge(&c, &obs, &server);
        assert_eq!(v.status, Status::Warn, "{v:?}");
        assert!(
            v.findings
                .iter()
                .any(|f| f.message == answer::REPAIRED_UTF8),
            "{v:?}"
        );
        // --strict holds the server to the refusal; a gate must refuse such bytes.
        let strict = Context {
            strict: true,
            ..ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error)
        };
        assert_eq!(judge(&c, &obs, &strict).status, Status::Fail);
        let gate = gate_ctx(false, DenyStyle::Error);
        assert_eq!(judge(&c, &obs, &gate).status, Status::Fail);
        // A tool that ran where it should not stays a failure.
        obs.answer.messages = vec![
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "CANARY-EXECUTED"}]}}),
        ];
        obs.answer.scan_text = obs.answer.messages[0].to_string();
        assert_eq!(judge(&c, &obs, &server).status, Status::Fail);
        obs.answer.scan_text = String::new();
        // A parse error (here with a 500) refused the bytes: judged as always; so is an answer
        // with another id than the one found only by repairing the body.
        let refused = answered(
            500,
            vec![
                json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}),
            ],
        );
        let mut refused = refused;
        refused.sent.detectable_id = obs.sent.detectable_id.clone();
        refused.sent.readable = false;
        refused.sent.id = None;
        let v = judge(&c, &refused, &server);
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(!v
            .findings
            .iter()
            .any(|f| f.message == answer::REPAIRED_UTF8));
        obs.answer.messages = vec![json!({"jsonrpc": "2.0", "id": 7, "result": {}})];
        assert_eq!(judge(&c, &obs, &server).status, Status::Fail);
        // Bytes that are JSON as sent are not a repair.
        obs.answer.messages = vec![json!({"jsonrpc": "2.0", "id": 1, "result": {}})];
        obs.sent.detectable_id = Some(crate::reading::DetectedId {
            id: json!(1),
            json: true,
        });
        assert_eq!(judge(&c, &obs, &server).status, Status::Fail);
    }

    /// A gate-only case written in the reference gate's terms (400, its malformed code, id null).
    const GATE_REFUSAL: &str = r#"{"title": "t", "requirements": ["GATE-PARSE-02"],
        "profiles": ["gate"],
        "request": {"body": {"json": {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "{{denied_tool}}", "arguments": {}}}}},
        "expect": {"outcome": "reject", "http_status": 400, "error_code": "{{code_malformed}}",
            "id": "null-or-absent", "forwarded": false}}"#;

    fn gate_ctx(exact_codes: bool, deny_style: DenyStyle) -> Context {
        Context {
            profile: Profile::Gate,
            exact_codes,
            ..ctx(crate::versions::NEWEST_LEGACY, deny_style)
        }
    }

    #[test]
    fn a_gate_whose_table_is_unknown_is_judged_by_what_it_did_not_by_its_codes() {
        let c = case(GATE_REFUSAL);
        // Another gate's refusal: 200, its own code, the request's id.
        let refusal = || {
            let mut obs = answered(
                200,
                vec![
                    json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32099, "message": "no"}}),
                ],
            );
            obs.after.witness = Some(Vec::new());
            obs
        };
        let v = judge(&c, &refusal(), &gate_ctx(false, DenyStyle::Error));
        assert_eq!(v.status, Status::Pass, "{v:?}");
        // With the table known, the same answer misses status, code and id.
        let v = judge(&c, &refusal(), &gate_ctx(true, DenyStyle::Error));
        assert_eq!(
            checks(&v, Status::Fail),
            ["http_status", "error_code", "id"]
        );
        // Fail-closed still wants a refusal with a sane id, and nothing forwarded.
        let mut other_id = refusal();
        other_id.answer.messages =
            vec![json!({"jsonrpc": "2.0", "id": 9, "error": {"code": -32099, "message": "no"}})];
        let v = judge(&c, &other_id, &gate_ctx(false, DenyStyle::Error));
        assert!(checks(&v, Status::Fail).contains(&"id"), "{v:?}");
        let mut server_error = refusal();
        if let Some(h) = server_error.answer.http.as_mut() {
            h.status = 500;
        }
        let v = judge(&c, &server_error, &gate_ctx(false, DenyStyle::Error));
        assert!(checks(&v, Status::Fail).contains(&"http_status"), "{v:?}");
        let mut forwarded = refusal();
        let raw = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_everything","arguments":{}}}"#;
        forwarded.after.witness = Some(vec![crate::record::Event::Message {
            seq: 1,
            transport: "http".into(),
            raw: raw.into(),
            raw_len: raw.len() as u64,
            headers: Vec::new(),
        }]);
        let v = judge(&c, &forwarded, &gate_ctx(false, DenyStyle::Error));
        assert!(checks(&v, Status::Fail).contains(&"forwarded"), "{v:?}");
        let mut accepted = refusal();
        accepted.answer.messages =
            vec![json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}})];
        let v = judge(&c, &accepted, &gate_ctx(false, DenyStyle::Error));
        assert!(checks(&v, Status::Fail).contains(&"outcome"), "{v:?}");
        // What must succeed keeps its rule: a result with a null id is not the request's answer.
        let allowed = case(
            r#"{"title": "t", "requirements": ["GATE-FWD-01"], "profiles": ["gate"],
            "request": {"body": {"json": {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "{{allowed_tool}}", "arguments": {}}}}},
            "expect": {"outcome": "accept", "id": "echo"}}"#,
        );
        let mut null_id = refusal();
        null_id.answer.messages =
            vec![json!({"jsonrpc": "2.0", "id": null, "result": {"content": []}})];
        let v = judge(&allowed, &null_id, &gate_ctx(false, DenyStyle::Error));
        assert!(checks(&v, Status::Fail).contains(&"id"), "{v:?}");
    }

    fn witnessed(raws: &[&str]) -> Option<Vec<crate::record::Event>> {
        Some(
            raws.iter()
                .enumerate()
                .map(|(i, raw)| crate::record::Event::Message {
                    seq: i as u64 + 1,
                    transport: "http".into(),
                    raw: (*raw).into(),
                    raw_len: raw.len() as u64,
                    headers: Vec::new(),
                })
                .collect(),
        )
    }

    #[test]
    fn a_gate_that_resolves_an_ambiguous_body_itself_and_passes_on_no_differential_is_warned() {
        // A gate reads duplicated names last-wins, sees echo, and forwards echo re-encoded.
        let c = case(GATE_REFUSAL);
        let echo = r#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#;
        let resolved = |forwarded: &str| {
            let mut obs = answered(
                200,
                vec![
                    json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "hi"}]}}),
                ],
            );
            obs.sent.ambiguous = true;
            obs.after.witness = witnessed(&[forwarded]);
            obs
        };
        let v = judge(&c, &resolved(echo), &gate_ctx(false, DenyStyle::Error));
        assert_eq!(v.status, Status::Warn, "{v:?}");
        // The same answer from the reference gate, whose rule is to refuse, fails.
        let v = judge(&c, &resolved(echo), &gate_ctx(true, DenyStyle::Error));
        assert_eq!(v.status, Status::Fail, "{v:?}");
        // Forwarding the ambiguity itself (the duplicate names as sent) fails.
        let dup = r#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"delete_everything","name":"echo","arguments":{}}}"#;
        let v = judge(&c, &resolved(dup), &gate_ctx(false, DenyStyle::Error));
        assert!(checks(&v, Status::Fail).contains(&"forwarded"), "{v:?}");
        // So does a body every reader reads alike: nothing was ambiguous to resolve.
        let mut plain = resolved(echo);
        plain.sent.ambiguous = false;
        let v = judge(&c, &plain, &gate_ctx(false, DenyStyle::Error));
        assert!(checks(&v, Status::Fail).contains(&"outcome"), "{v:?}");
        // And the denied tool running behind it fails whatever was forwarded.
        let mut ran = resolved(echo);
        if let Some(events) = ran.after.witness.as_mut() {
            events.push(crate::record::Event::Tool {
                seq: 2,
                tool: "delete_everything".into(),
                canary: true,
            });
        }
        let v = judge(&c, &ran, &gate_ctx(false, DenyStyle::Error));
        assert!(checks(&v, Status::Fail).contains(&"canary"), "{v:?}");
    }

    #[test]
    fn a_gate_that_re_encodes_with_its_own_spacing_is_warned_and_raw_forwarding_fails() {
        let text = r#"{"title": "t", "requirements": ["GATE-FWD-01"], "profiles": ["gate"],
            "request": {"body": {"text": "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/call\", \"params\": {\"name\": \"echo\", \"arguments\": {}}}"}},
            "expect": {"outcome": "accept", "forwarded": true}}"#;
        let c = case(text);
        let seen = |forwarded: &str| {
            let mut obs = answered(
                200,
                vec![json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}})],
            );
            obs.after.witness = witnessed(&[forwarded]);
            obs
        };
        // Python's json.dumps: its own spacing and member order, one strict reading.
        let spaced = r#"{"id": 1, "jsonrpc": "2.0", "method": "tools/call", "params": {"name": "echo", "arguments": {}}}"#;
        let v = judge(&c, &seen(spaced), &gate_ctx(false, DenyStyle::Error));
        assert_eq!(forwarded(&v), [Status::Warn], "{v:?}");
        // The reference gate, and --strict, keep canonical bytes a must.
        let v = judge(&c, &seen(spaced), &gate_ctx(true, DenyStyle::Error));
        assert_eq!(forwarded(&v), [Status::Fail], "{v:?}");
        // The client's own bytes, as they came, are raw forwarding.
        let sent = r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {}}}"#;
        let v = judge(&c, &seen(sent), &gate_ctx(false, DenyStyle::Error));
        assert_eq!(forwarded(&v), [Status::Fail], "{v:?}");
        // Bytes no re-encoder writes pass a differential on.
        let folded = r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "NAME": "x", "arguments": {}}}"#;
        let v = judge(&c, &seen(folded), &gate_ctx(false, DenyStyle::Error));
        assert!(forwarded(&v).contains(&Status::Fail), "{v:?}");
    }

    /// A third-party gate silent on a stdio line it cannot read, forwarding nothing and alive,
    /// held it closed: a warning. Held to a known table, or over HTTP (which always answers),
    /// silence stays a failure.
    #[test]
    fn a_gate_silent_on_an_unreadable_line_that_forwards_nothing_is_a_warning() {
        let c = case(
            r#"{"title": "t", "requirements": ["GATE-PARSE-01"], "profiles": ["gate"],
            "request": {"body": {"text": "{\"jsonrpc\": \"2.0\", \"id\": 1,"}},
            "expect": {"outcome": "reject", "error_code": "{{code_malformed}}",
                "id": "null-or-absent", "forwarded": false}}"#,
        );
        let silent = |transport: TransportKind, forwarded: &[&str]| {
            let mut obs = Observation::new(transport);
            obs.sent.readable = false;
            obs.sent.expects_response = true;
            obs.after.alive = Some(true);
            obs.after.witness = witnessed(forwarded);
            obs
        };
        let stdio_gate = |exact| Context {
            transport: TransportKind::Stdio,
            ..gate_ctx(exact, DenyStyle::Error)
        };
        let v = judge(&c, &silent(TransportKind::Stdio, &[]), &stdio_gate(false));
        assert_eq!(v.status, Status::Warn, "{v:?}");
        assert!(checks(&v, Status::Warn).contains(&"outcome"), "{v:?}");
        let v = judge(&c, &silent(TransportKind::Stdio, &[]), &stdio_gate(true));
        assert_eq!(v.status, Status::Fail, "held to the table: {v:?}");
        // Something reached the downstream: not held.
        let v = judge(
            &c,
            &silent(
                TransportKind::Stdio,
                &[r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#],
            ),
            &stdio_gate(false),
        );
        assert_eq!(v.status, Status::Fail, "{v:?}");
        // Dead afterwards: not held either.
        let mut dead = silent(TransportKind::Stdio, &[]);
        dead.after.alive = Some(false);
        let v = judge(&c, &dead, &stdio_gate(false));
        assert_eq!(v.status, Status::Fail, "{v:?}");
    }

    /// A third-party gate that forwarded a look-alike of the denied name (its exact-match
    /// policy did not match it), refused downstream as an unknown tool with nothing run: a
    /// warning. Had a tool run there, or under a known table, it stays a failure.
    #[test]
    fn a_look_alike_the_downstream_refused_as_unknown_is_a_warning_from_a_third_party_gate() {
        let c = case(
            r#"{"title": "t", "requirements": ["GATE-DENY-02"], "profiles": ["gate"],
            "request": {"body": {"json": {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "{{denied_tool}}\u200b", "arguments": {}}}}},
            "expect": {"outcome": "reject", "id": "echo", "forwarded": false}}"#,
        );
        let forwarded = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_everything\u200b","arguments":{}}}"#;
        let refused = |ran: bool| {
            let mut obs = answered(
                200,
                vec![json!({"jsonrpc": "2.0", "id": 1,
                    "error": {"code": -32602, "message": "Unknown tool: delete_everything\u{200b}"}})],
            );
            obs.sent.method = Some("tools/call".into());
            obs.after.witness = witnessed(&[forwarded]);
            if ran {
                if let Some(events) = &mut obs.after.witness {
                    events.push(crate::record::Event::Tool {
                        seq: 2,
                        tool: "delete_everything".into(),
                        canary: true,
                    });
                }
            }
            obs
        };
        let named = |exact| {
            let mut ctx = gate_ctx(exact, DenyStyle::Error);
            ctx.placeholders
                .set("denied_tool", "delete_everything")
                .set("allowed_tool", "echo");
            ctx
        };
        let v = judge(&c, &refused(false), &named(false));
        assert_eq!(v.status, Status::Warn, "{v:?}");
        assert!(checks(&v, Status::Warn).contains(&"forwarded"), "{v:?}");
        assert_eq!(
            judge(&c, &refused(false), &named(true)).status,
            Status::Fail
        );
        assert_eq!(
            judge(&c, &refused(true), &named(false)).status,
            Status::Fail
        );
    }

    /// A third-party gate re-issues a call as a client of its own: a progress token it asked
    /// for, members in its own order. Neither is the forwarded message differing; under a
    /// known table the token is.
    #[test]
    fn a_gate_that_re_issues_a_call_with_its_own_progress_token_forwarded_the_call() {
        let c = case(
            r#"{"title": "t", "requirements": ["GATE-FWD-01"], "profiles": ["gate"],
            "request": {"body": {"json": {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "hi"}}}}},
            "expect": {"outcome": "accept", "id": "echo",
                "forwarded_json": {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": "hi"}}}}}"#,
        );
        let mut obs = answered(
            200,
            vec![json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}})],
        );
        obs.after.witness = witnessed(&[
            r#"{"method":"tools/call","params":{"arguments":{"text":"hi"},"name":"echo","_meta":{"progressToken":7}},"jsonrpc":"2.0","id":5}"#,
        ]);
        let v = judge(&c, &obs, &gate_ctx(false, DenyStyle::Error));
        assert!(forwarded(&v).iter().all(|s| *s != Status::Fail), "{v:?}");
        let v = judge(&c, &obs, &gate_ctx(true, DenyStyle::Error));
        assert!(forwarded(&v).contains(&Status::Fail), "{v:?}");
    }

    #[test]
    fn a_fail_closed_refusal_may_answer_the_id_its_gate_read_in_a_body_that_is_not_json() {
        // UTF-16, NaN or Infinity: the runner reads no id, a repairing reader finds 1.
        let c = case(GATE_REFUSAL);
        let refusal = |id: Value| {
            let mut obs = answered(
                200,
                vec![
                    json!({"jsonrpc": "2.0", "id": id, "result": {"content": [], "isError": true}}),
                ],
            );
            obs.sent.id = None;
            obs.sent.readable = false;
            obs.sent.repaired_id = Some(json!(1));
            obs.after.witness = Some(Vec::new());
            obs
        };
        let v = judge(&c, &refusal(json!(1)), &gate_ctx(false, DenyStyle::Result));
        assert_eq!(v.status, Status::Warn, "{v:?}");
        assert_eq!(checks(&v, Status::Warn), ["id"]);
        let v = judge(&c, &refusal(json!(9)), &gate_ctx(false, DenyStyle::Result));
        assert!(checks(&v, Status::Fail).contains(&"id"), "{v:?}");
        // Held to the table, a body that is not JSON is a parse error with a null id.
        let v = judge(&c, &refusal(json!(1)), &gate_ctx(true, DenyStyle::Result));
        assert!(checks(&v, Status::Fail).contains(&"id"), "{v:?}");
    }

    #[test]
    fn an_empty_result_to_a_denied_read_serves_nothing_and_is_a_refusal_in_all_but_form() {
        let c = case(
            r#"{"title": "t", "requirements": ["GATE-DENY-01"], "profiles": ["gate"],
            "request": {"body": {"json": {"jsonrpc": "2.0", "id": 1, "method": "resources/read",
                "params": {"uri": "test://secret/key"}}}},
            "expect": {"outcome": "reject", "error_code": "{{code_denied}}", "id": "echo"}}"#,
        );
        let read = |contents: Value| {
            let mut obs = answered(
                200,
                vec![json!({"jsonrpc": "2.0", "id": 1, "result": {"contents": contents}})],
            );
            obs.sent.method = Some("resources/read".into());
            // The gate asked its downstream for the list, to route the URI: its own traffic.
            obs.after.witness =
                witnessed(&[r#"{"jsonrpc":"2.0","id":3,"method":"resources/list"}"#]);
            obs
        };
        let v = judge(&c, &read(json!([])), &gate_ctx(false, DenyStyle::Error));
        assert_eq!(v.status, Status::Warn, "{v:?}");
        let served = json!([{"uri": "test://secret/key", "text": "s3cret"}]);
        let v = judge(&c, &read(served), &gate_ctx(false, DenyStyle::Error));
        assert!(checks(&v, Status::Fail).contains(&"outcome"), "{v:?}");
        let v = judge(&c, &read(json!([])), &gate_ctx(true, DenyStyle::Error));
        assert!(checks(&v, Status::Fail).contains(&"outcome"), "{v:?}");
    }

    #[test]
    fn an_is_error_refusal_carries_the_request_id_even_where_errors_carry_none() {
        let c = case(GATE_REFUSAL);
        let mut obs = answered(
            200,
            vec![json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": true}})],
        );
        obs.after.witness = Some(Vec::new());
        // Exact judging with --deny-style result: the code and status are the refusal's form,
        // and the id is the request's, as a tool result's must be.
        let c_lenient = case(&GATE_REFUSAL.replace(r#""http_status": 400, "#, ""));
        let v = judge(&c_lenient, &obs, &gate_ctx(true, DenyStyle::Result));
        assert_eq!(v.status, Status::Pass, "{v:?}");
        let v = judge(&c, &obs, &gate_ctx(false, DenyStyle::Result));
        assert_eq!(v.status, Status::Pass, "{v:?}");
        // Without the style it is not a refusal at all.
        let v = judge(&c, &obs, &gate_ctx(false, DenyStyle::Error));
        assert!(checks(&v, Status::Fail).contains(&"outcome"), "{v:?}");
    }

    #[test]
    fn a_should_case_never_fails_a_default_run_and_strict_fails_every_warning() {
        let level = |l: &str| {
            case(&DENIED_CALL.replace(
                r#""title": "t","#,
                &format!(r#""title": "t", "level": "{l}","#),
            ))
        };
        let mut ran = answered(
            200,
            vec![json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}})],
        );
        ran.sent.denied_ids = vec![json!(1)];
        let strict = |mut c: Context| {
            c.strict = true;
            c
        };
        // The denied tool ran: a must case fails, a should case warns, unless --strict.
        let v = judge(
            &level("must"),
            &ran,
            &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
        );
        assert!(checks(&v, Status::Fail).contains(&"canary"), "{v:?}");
        let v = judge(
            &level("should"),
            &ran,
            &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
        );
        assert_eq!(v.status, Status::Warn, "{v:?}");
        assert!(checks(&v, Status::Warn).contains(&"canary"), "{v:?}");
        let v = judge(
            &level("should"),
            &ran,
            &strict(ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error)),
        );
        assert!(checks(&v, Status::Fail).contains(&"canary"), "{v:?}");
        // An info case's warning fails under --strict too, like a leak's and a 2026 code's.
        let v = judge(
            &level("info"),
            &ran,
            &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
        );
        assert_eq!(v.status, Status::Warn, "{v:?}");
        let v = judge(
            &level("info"),
            &ran,
            &strict(ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error)),
        );
        assert_eq!(v.status, Status::Fail, "{v:?}");
        let legacy_code = answered(
            200,
            vec![json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32010, "message": "no"}})],
        );
        let modern = case(&DENIED_CALL.replace("-32001", "-32010"));
        let v = judge(
            &modern,
            &legacy_code,
            &ctx(crate::versions::MODERN_FIRST, DenyStyle::Error),
        );
        assert_eq!(v.status, Status::Warn, "{v:?}");
        let v = judge(
            &modern,
            &legacy_code,
            &strict(ctx(crate::versions::MODERN_FIRST, DenyStyle::Error)),
        );
        assert_eq!(v.status, Status::Fail, "{v:?}");
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
        let v = judge(
            &c,
            &refusal(),
            &ctx(crate::versions::MODERN_FIRST, DenyStyle::Error),
        );
        assert_eq!(v.status, Status::Pass, "{v:?}");
        // With the header sent, -32020 is judged as any other code.
        let mut sent = refusal();
        sent.sent.mcp_method_header = true;
        let v = judge(
            &c,
            &sent,
            &ctx(crate::versions::MODERN_FIRST, DenyStyle::Error),
        );
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
        obs.answer.trailing_answers = vec![crate::transport::TrailingAnswer {
            status: 400,
            messages: Vec::new(),
        }];
        let v = judge(
            &c,
            &obs,
            &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
        );
        assert!(checks(&v, Status::Fail).contains(&"framing"), "{v:?}");
        assert!(!checks(&v, Status::Fail).contains(&"canary"), "{v:?}");
        obs.answer.trailing_answers[0].status = 200;
        obs.answer.trailing_answers[0].messages =
            vec![json!({"jsonrpc": "2.0", "id": 7, "result": {"content": []}})];
        let v = judge(
            &c,
            &obs,
            &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
        );
        assert!(checks(&v, Status::Fail).contains(&"canary"), "{v:?}");
    }

    /// The false-failure classes of a too narrow acceptable set: each allowed answer passed
    /// as must with a warning, and the answers that are wrong still fail.
    #[test]
    fn what_is_only_preferred_warns_and_what_is_wrong_still_fails() {
        let put = case(
            r#"{"title": "t", "requirements": ["MCP-HTTP-EP-02"], "transports": ["http"],
            "request": {"method": "PUT", "body": {"json": {"jsonrpc": "2.0", "id": 1,
                "method": "tools/call", "params": {"name": "{{denied_tool}}", "arguments": {}}}}},
            "expect": {"outcome": "reject", "http_status": ["4xx"]},
            "prefer": {"http_status": 405}}"#,
        );
        let status = |code: u16| {
            let mut obs = answered(code, Vec::new());
            obs.answer.messages.clear();
            obs
        };
        let server = ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error);
        let v = judge(&put, &status(405), &server);
        assert_eq!(v.status, Status::Pass, "{v:?}");
        let v = judge(&put, &status(404), &server);
        assert_eq!(v.status, Status::Warn, "{v:?}");
        assert_eq!(checks(&v, Status::Warn), ["http_status"]);
        assert!(v.findings[0].message.starts_with("preferred: "), "{v:?}");
        // Under --strict the preferred set is the set.
        let strict = Context {
            strict: true,
            ..ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error)
        };
        assert_eq!(judge(&put, &status(404), &strict).status, Status::Fail);
        // A 2xx is no refusal at all.
        let mut ran = answered(
            200,
            vec![json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}})],
        );
        ran.sent.denied_ids = vec![json!(1)];
        assert_eq!(judge(&put, &ran, &server).status, Status::Fail);
    }

    #[test]
    fn a_connection_closed_before_any_answer_is_an_outcome_only_where_listed() {
        let oversize = |outcome: &str| {
            case(&format!(
                r#"{{"title": "t", "requirements": ["JSON-SIZE-01"], "transports": ["http"],
                "request": {{"body": {{"json": {{"jsonrpc": "2.0", "id": 1, "method": "ping"}}}}}},
                "expect": {{"outcome": {outcome}, "http_status": [413, 400], "alive": true}},
                "prefer": {{"outcome": "reject"}}}}"#
            ))
        };
        let mut closed = Observation::new(TransportKind::Http);
        closed.answer.ending = Ending::Closed;
        closed.after.alive = Some(true);
        let server = ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error);
        let v = judge(&oversize(r#"["reject", "closed"]"#), &closed, &server);
        assert_eq!(v.observed, Observed::Outcome(Outcome::Closed));
        assert_eq!(v.status, Status::Warn, "{v:?}");
        assert_eq!(checks(&v, Status::Warn), ["outcome"]);
        // Not listed: no answer, a failure.
        let v = judge(&oversize(r#""reject""#), &closed, &server);
        assert!(matches!(v.observed, Observed::NoAnswer(_)), "{v:?}");
        assert_eq!(v.status, Status::Fail);
        // Listed, but the server died of it: still a failure.
        closed.after.alive = Some(false);
        let v = judge(&oversize(r#"["reject", "closed"]"#), &closed, &server);
        assert!(checks(&v, Status::Fail).contains(&"alive"), "{v:?}");
    }

    #[test]
    fn exposure_fails_everywhere_and_an_echo_of_the_input_is_a_note_on_a_server() {
        let c = case(
            r#"{"title": "t", "requirements": ["JSON-TEXT-01"],
            "request": {"body": {"text": "{\"jsonrpc\": \"2.0\", \"id\": 1,"}},
            "expect": {"outcome": "reject", "id": ["echo", "null", "absent"]}}"#,
        );
        let refusal = |message: &str| {
            let mut obs = answered(
                400,
                vec![
                    json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": message}}),
                ],
            );
            obs.sent.extent = Some(crate::transport::Extent {
                lines: 1,
                bytes: 30,
            });
            obs
        };
        let server = ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error);
        let echo = refusal("Parse error: EOF while parsing an object at line 1 column 30");
        let v = judge(&c, &echo, &server);
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert_eq!(
            checks(&v, Status::Pass),
            ["leak"],
            "a note says what was seen"
        );
        // Where error texts are specified (the reference gate, --strict) it fails.
        let strict = Context {
            strict: true,
            ..ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error)
        };
        assert_eq!(judge(&c, &echo, &strict).status, Status::Fail);
        // A path and a stack frame fail a default run on a plain server.
        let trace = refusal("SyntaxError: Unexpected end of JSON input\n    at JSON.parse (<anonymous>)\n    at parse (/app/node_modules/body-parser/lib/types/json.js:92:19)");
        let v = judge(&c, &trace, &server);
        assert_eq!(checks(&v, Status::Fail), ["leak"], "{v:?}");
        assert!(v.findings[0].message.contains("CWE-209"), "{v:?}");
        // An exception class alone names the kind of error, nothing of the program: a note on
        // a server, a failure where error texts are specified.
        let named = refusal("TypeError: argument string is required");
        let v = judge(&c, &named, &server);
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert_eq!(checks(&v, Status::Pass), ["leak"], "{v:?}");
        assert_eq!(judge(&c, &named, &strict).status, Status::Fail);
        // An offset past the client's body is internal detail: a warning on a server.
        let past = refusal("expected value at line 40 column 2");
        assert_eq!(judge(&c, &past, &server).status, Status::Warn);
    }

    #[test]
    fn the_deny_style_hint_is_given_for_the_denied_call_only() {
        let c = case(DENIED_CALL);
        let is_error = || {
            answered(
                200,
                vec![
                    json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": true}}),
                ],
            )
        };
        let hinted = |obs: &Observation| {
            judge(
                &c,
                obs,
                &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
            )
            .findings
            .iter()
            .any(|f| f.check == Check::Outcome && f.message.contains("--deny-style result"))
        };
        let mut denied = is_error();
        denied.sent.denied_ids = vec![json!(1)];
        assert!(hinted(&denied));
        // The same answer to a call of another tool is that tool failing (a validation error).
        assert!(!hinted(&is_error()));
    }

    /// Through a gate, a series' steps may each reach the witness once where the case lets
    /// them (`"either"`), never more; under the default for a refusal, none may.
    #[test]
    fn a_series_through_a_gate_is_judged_by_what_its_steps_forwarded() {
        let body = |forwarded: &str| {
            case(&format!(
                r#"{{"title": "t", "requirements": ["MCP-LIFE-01"], "transports": ["http"],
                "series": {{"count": 3}},
                "request": {{"body": {{"json": {{"jsonrpc": "2.0", "id": 1,
                    "method": "resources/read", "params": {{"uri": "test://x/{{{{fresh}}}}"}}}}}}}},
                "expect": {{"outcome": "reject"{forwarded}}}}}"#
            ))
        };
        // The steps' messages differ (their `{{fresh}}`); `seq` past `distinct` repeats the last.
        let message = |seq: u64, distinct: u64| {
            let raw = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{{"uri":"test://x/{}"}}}}"#,
                seq.min(distinct - 1)
            );
            crate::record::Event::Message {
                seq,
                transport: "http".into(),
                raw_len: raw.len() as u64,
                raw,
                headers: Vec::new(),
            }
        };
        let mut gate = ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error);
        gate.profile = Profile::Gate;
        let judged = |c: &Case, forwarded: u64, distinct: u64| {
            let mut obs = answered(
                200,
                vec![
                    json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "no"}}),
                ],
            );
            obs.sent.method = Some("resources/read".into());
            obs.after.witness = Some((0..forwarded).map(|n| message(n, distinct)).collect());
            obs.answer.series = Some(Box::new(crate::transport::SeriesSeen {
                count: 3,
                sent: 3,
                ..crate::transport::SeriesSeen::default()
            }));
            checks(&judge(c, &obs, &gate), Status::Fail)
        };
        let either = body(r#", "forwarded": "either""#);
        assert!(judged(&either, 0, 1).is_empty());
        assert!(judged(&either, 3, 3).is_empty(), "once a step");
        assert_eq!(
            judged(&either, 4, 4),
            ["forwarded"],
            "more than once a step"
        );
        assert_eq!(
            judged(&either, 2, 1),
            ["forwarded"],
            "one step's message twice, though fewer than the steps"
        );
        let refused = body("");
        assert!(judged(&refused, 0, 1).is_empty());
        assert_eq!(
            judged(&refused, 1, 1),
            ["forwarded"],
            "a refusal forwards nothing"
        );
    }

    /// `close_each`: a session its client ended must be gone (404), and every DELETE accepted
    /// (2xx; 405 is a refusal the protocol allows).
    #[test]
    fn sessions_ended_each_step_must_be_gone_and_each_delete_accepted() {
        let c = case(
            r#"{"title": "t", "requirements": ["MCP-DOS-05"], "level": "should",
            "transports": ["http"], "series": {"count": 3, "close_each": true},
            "request": {"body": {"json": {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "g", "version": "1"}}}}},
            "expect": {"outcome": "accept", "http_status": 200}}"#,
        );
        let judged = |deletes: &[(u16, u32)], first: u16| {
            let mut obs = answered(
                200,
                vec![
                    json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25",
                    "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}}}),
                ],
            );
            obs.sent.method = Some("initialize".into());
            obs.answer.series = Some(Box::new(crate::transport::SeriesSeen {
                count: 3,
                sent: 3,
                deletes: deletes.iter().copied().collect(),
                first_session_answer: Some(first),
                ..crate::transport::SeriesSeen::default()
            }));
            let v = judge(
                &c,
                &obs,
                &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
            );
            checks(&v, Status::Warn)
        };
        assert!(judged(&[(200, 3)], 404).is_empty());
        assert!(
            judged(&[(405, 3)], 200).is_empty(),
            "every DELETE refused: not judged"
        );
        assert_eq!(
            judged(&[(204, 2), (405, 1)], 404),
            ["series"],
            "some refused"
        );
        assert_eq!(
            judged(&[(200, 3)], 200),
            ["series"],
            "still served after DELETE"
        );
        assert!(
            judged(&[(200, 3)], 400).is_empty(),
            "ended, refused with another status: headers/session-id-unknown judges that"
        );
        assert!(
            judged(&[(200, 3)], 429).is_empty(),
            "cannot tell: not held against it"
        );
        assert!(
            judged(&[(200, 3)], 0).is_empty(),
            "cannot tell: not held against it"
        );
        assert_eq!(
            judged(&[(200, 2), (500, 1)], 404),
            ["series"],
            "a DELETE refused"
        );
        assert_eq!(
            judged(&[(200, 2), (0, 1)], 404),
            ["series"],
            "a DELETE unanswered"
        );
    }

    /// `cpu_ratio`: CPU a step against the baseline's, each side a clock tick in its favour
    /// and the baseline at least 100 µs a step; a baseline refused where the case was answered
    /// is not compared.
    #[test]
    fn cpu_is_judged_against_the_baseline() {
        let c = case(
            r#"{"title": "t", "requirements": ["MCP-DOS-07"], "level": "should",
            "transports": ["http"],
            "series": {"count": 50, "baseline": {"body": {"json": {"jsonrpc": "2.0", "id": 1,
                "method": "ping"}}}},
            "request": {"body": {"json": {"jsonrpc": "2.0", "id": 1, "method": "ping"}}},
            "expect": {"outcome": "accept", "series": {"cpu_ratio": 10}}}"#,
        );
        let judged = |case_ms: u64, base_ms: u64, base_answer: &str| {
            let obs_answer = answered(200, vec![json!({"jsonrpc": "2.0", "id": 1, "result": {}})]);
            let mut obs = obs_answer.clone();
            let at = |cpu_ms| crate::transport::procfs::ProcSample {
                cpu_ms,
                ..Default::default()
            };
            obs.answer.series = Some(Box::new(crate::transport::SeriesSeen {
                count: 50,
                sent: 50,
                watched: true,
                before: Some(at(1000)),
                after: Some(at(1000 + case_ms)),
                kinds: vec![crate::transport::StepKind {
                    key: "HTTP 200, result, answered".into(),
                    step: 0,
                    count: 50,
                    capped: false,
                    observation: Box::new(obs_answer),
                }],
                baseline: Some(crate::transport::BaselineSeen {
                    sent: 50,
                    cpu_ms: Some(base_ms),
                    answer: base_answer.into(),
                    ..Default::default()
                }),
                ..crate::transport::SeriesSeen::default()
            }));
            let v = judge(
                &c,
                &obs,
                &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
            );
            checks(&v, Status::Warn)
        };
        let ok = "HTTP 200, result, answered";
        // 50 steps: a baseline of 0 ms counts as 200 µs a step (its tick), so up to 2,000 µs a
        // step (100 ms, and a tick more) passes.
        assert!(judged(100, 0, ok).is_empty());
        assert!(
            judged(110, 0, ok).is_empty(),
            "one tick in the case's favour"
        );
        assert_eq!(judged(130, 0, ok), ["cpu"]);
        // A baseline of 100 ms is 2,200 µs a step counted: 22,000 µs a step is the bound.
        assert!(judged(1100, 100, ok).is_empty());
        assert_eq!(judged(1500, 100, ok), ["cpu"]);
        // A plain request refused cheaply is no yardstick.
        assert!(judged(1500, 0, "HTTP 413, no message, answered").is_empty());
    }
}
