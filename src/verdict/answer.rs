//! The oracles of the answer itself: outcome (reject, accept, silent), HTTP status, the Bearer
//! challenge, error code, and the response id.

use super::{is_error_result, list, show_bytes, Check, Judge, Observed, Status};
use crate::case::{CodePattern, IdRule, OneOrMany, Outcome, Profile};
use crate::settings::DenyStyle;
use serde_json::Value;

/// The note a trial carries when the target refused a call of the denied tool as a tool it
/// does not have: refused, and whether such a tool would have run is not checked.
pub const UNKNOWN_DENIED_TOOL: &str = "refused as a tool the target does not have (it has no tool of the denied tool's name): nothing could run, and whether it would is not checked here";

/// The note a trial carries when the target answered a call of the allowed tool as a tool it
/// does not have: it answered, and what the tool would have answered is not checked.
pub const UNKNOWN_ALLOWED_TOOL: &str = "answered as a tool the target does not have (it has no tool of the allowed tool's name): it answered, and what the tool would answer is not checked here";

/// Whether answer `r` says `tool` is not a tool the target has ("Tool delete_everything not
/// found", "Unknown tool: delete_everything"), in whatever form it comes: an error, an `isError`
/// result, or a result that says so in its text without the flag.
pub(super) fn says_unknown_tool(r: &Value, tool: &str) -> bool {
    let text = r.to_string().to_ascii_lowercase();
    text.contains(&tool.to_ascii_lowercase()) && UNKNOWN_PHRASES.iter().any(|p| text.contains(p))
}

/// How targets say a tool does not exist, lower case.
const UNKNOWN_PHRASES: &[&str] = &[
    "not found",
    "unknown tool",
    "no such tool",
    "does not exist",
    "doesn't exist",
    "not exist",
    "tool not available",
    "invalid tool",
];

impl Judge<'_> {
    /// A gate that refuses tool calls with an `isError: true` result (`--deny-style result`)
    /// said no: such an answer counts as a refusal. What was observed then, and whether it was
    /// such a refusal.
    pub(super) fn deny_style(&mut self, observed: Observed) -> (Observed, bool) {
        if observed == Observed::Outcome(Outcome::Accept) && self.unknown_denied_tool() {
            self.add(Check::Outcome, Status::Pass, UNKNOWN_DENIED_TOOL.into());
            return (Observed::Outcome(Outcome::Reject), true);
        }
        let result_refusal = self.ctx.deny_style == DenyStyle::Result
            && observed == Observed::Outcome(Outcome::Accept)
            && !self.resp.is_empty()
            && self
                .resp
                .iter()
                .all(|r| r.get("error").is_some() || is_error_result(r));
        if !result_refusal {
            return self.empty_refusal(observed);
        }
        self.add(
            Check::Outcome,
            Status::Pass,
            "refused with a tool result marked isError (--deny-style result)".into(),
        );
        (Observed::Outcome(Outcome::Reject), true)
    }

    /// Whether every answer is an error or an `isError` tool result that names the denied tool
    /// as one the target does not have ("Tool delete_everything not found", "Unknown tool:
    /// delete_everything"): it refused the call, and nothing could run.
    fn unknown_denied_tool(&self) -> bool {
        self.names_unknown("denied_tool")
    }

    /// Whether every answer is an error or an `isError` tool result that names the tool of the
    /// placeholder `which` (`denied_tool`, `allowed_tool`) as one the target does not have.
    fn names_unknown(&self, which: &str) -> bool {
        let Some(tool) = self.ctx.placeholders.get(which).filter(|t| !t.is_empty()) else {
            return false;
        };
        let refuses = |r: &&Value| {
            (r.get("error").is_some() || is_error_result(r)) && says_unknown_tool(r, tool)
        };
        !self.resp.is_empty() && self.resp.iter().all(refuses)
    }

    /// Judged fail-closed, a `resources/read` or `prompts/get` answered with an empty result
    /// (no `contents`, no `messages`) served nothing: a refusal in all but form (a warning: MCP
    /// answers a resource it will not read with an error, -32002, and an unknown prompt with
    /// -32602). What was observed then, and whether it was such a refusal.
    fn empty_refusal(&mut self, observed: Observed) -> (Observed, bool) {
        let empty = |r: &&Value| {
            let result = r.get("result");
            let none = |key: &str| {
                result
                    .and_then(|x| x.get(key))
                    .and_then(Value::as_array)
                    .is_some_and(Vec::is_empty)
            };
            r.get("error").is_some() || none("contents") || none("messages")
        };
        let wants_refusal = self
            .expect
            .outcome
            .as_ref()
            .is_some_and(|o| !o.as_slice().contains(&Outcome::Accept));
        let refused = self.fail_closed
            && wants_refusal
            && observed == Observed::Outcome(Outcome::Accept)
            && matches!(
                self.obs.sent.method.as_deref(),
                Some("resources/read" | "prompts/get")
            )
            && !self.resp.is_empty()
            && self.resp.iter().all(empty);
        if !refused {
            return (observed, false);
        }
        self.add(
            Check::Outcome,
            Status::Warn,
            "preferred: a JSON-RPC error (-32002 for a resource, -32602 for a prompt); it answered an empty result, which serves nothing".into(),
        );
        (Observed::Outcome(Outcome::Reject), true)
    }

    /// 2026-07-28 over HTTP: a body the runner could read no method in went out without
    /// `Mcp-Method`, and a server may refuse it for that alone (400 -32020) before reading it.
    pub(super) fn binding_refusal(&mut self) -> bool {
        let obs = self.obs;
        let binding_refusal = self.ctx.version.is_modern()
            && obs.answer.http.as_ref().is_some_and(|h| h.status == 400)
            && !obs.sent.mcp_method_header
            && self.first_error_code == Some(crate::versions::HEADER_MISMATCH);
        if binding_refusal {
            self.add(
                Check::Outcome,
                Status::Pass,
                "refused with 400 -32020: the request carried no Mcp-Method header (the runner read no method in the body to mirror)".into(),
            );
        }
        binding_refusal
    }

    /// A request sent without a session (`"session": "none"`) that is not an `initialize`,
    /// refused with HTTP 400 or 404 and a JSON-RPC error: a server that keeps sessions may say
    /// "no valid session" before it reads the body, and MCP does not order those checks, so the
    /// error's code is not judged (unless the reading narrows: the reference gate's table and
    /// `--strict` want the case's code).
    pub(super) fn session_refusal(&mut self, observed: &Observed) -> bool {
        let obs = self.obs;
        let session_refusal = !self.strict
            && self.case.spec.session == crate::case::SessionMode::None
            && *observed == Observed::Outcome(Outcome::Reject)
            && obs.sent.method.as_deref() != Some("initialize")
            && obs
                .answer
                .http
                .as_ref()
                .is_some_and(|h| matches!(h.status, 400 | 404))
            && self.first_error_code.is_some();
        if session_refusal && self.expect.error_code.is_some() {
            self.add(
                Check::ErrorCode,
                Status::Pass,
                "refused for want of a session (any code: MCP does not order the session check before reading the body)".into(),
            );
        }
        session_refusal
    }

    /// The outcome is one the case accepts (not judged after a binding refusal).
    pub(super) fn outcome(&mut self, observed: &Observed, binding_refusal: bool) {
        let Some(want) = self.expect.outcome.clone().filter(|_| !binding_refusal) else {
            return;
        };
        let ok = matches!(observed, Observed::Outcome(o) if want.as_slice().contains(o));
        if ok {
            return;
        }
        // A call of the allowed tool the target does not have: answered, as a tool it does not
        // know. Whether it would have run is not checked; that it answered at all is.
        if want.as_slice().contains(&Outcome::Accept) && self.names_unknown("allowed_tool") {
            self.add(Check::Outcome, Status::Pass, UNKNOWN_ALLOWED_TOOL.into());
            return;
        }
        let names: Vec<&str> = want.as_slice().iter().map(|o| o.as_str()).collect();
        // The hint is for a refusal of the denied tool: an isError answer to any other call is
        // that tool failing (a validation error, say), which no deny style makes a refusal.
        let denied_call_results = self.resp.iter().all(|r| {
            is_error_result(r)
                && r.get("id")
                    .is_some_and(|id| self.obs.sent.denied_ids.contains(id))
        });
        let hint = if *observed == Observed::Outcome(Outcome::Accept)
            && !self.resp.is_empty()
            && denied_call_results
        {
            " (a tool result marked isError: if that is how the target refuses, say --deny-style result)"
        } else {
            ""
        };
        self.add(
            Check::Outcome,
            self.level_status,
            format!("expected {}; observed {observed}{hint}", names.join(" or ")),
        );
    }

    /// The HTTP status is one the case accepts (not judged after a binding refusal). Judged
    /// fail-closed, a refusal may also come as any 4xx, or as a 2xx carrying a JSON-RPC error.
    pub(super) fn http_status(&mut self, observed: &Observed, binding_refusal: bool) {
        if let (Some(want), Some(h), false) = (
            &self.expect.http_status,
            &self.obs.answer.http,
            binding_refusal,
        ) {
            let any_refusal = self.fail_closed
                && *observed == Observed::Outcome(Outcome::Reject)
                && ((400..500).contains(&h.status)
                    || ((200..300).contains(&h.status) && !self.resp.is_empty()));
            if !any_refusal && !want.as_slice().iter().any(|p| p.matches(h.status)) {
                let message = format!(
                    "expected HTTP {}; observed HTTP {}",
                    list(want.as_slice()),
                    h.status
                );
                self.add(Check::HttpStatus, self.level_status, message);
            }
        }
    }

    /// The `WWW-Authenticate: Bearer` challenge the case expects.
    pub(super) fn challenge(&mut self) {
        if let (Some(want), Some(h)) = (&self.expect.challenge, &self.obs.answer.http) {
            if let Some(problem) = challenge_problem(want, &h.headers) {
                self.add(Check::Challenge, self.level_status, problem);
            }
        }
    }

    /// The first error's code is one the case names (not judged when a refusal of another
    /// form — a binding refusal, an `isError` result — was accepted).
    pub(super) fn error_code(&mut self, observed: &Observed, other_refusal: bool) {
        // Judged fail-closed, any code says no: the table is the gate's own.
        let Some(want) = self
            .expect
            .error_code
            .clone()
            .filter(|_| !other_refusal && !self.fail_closed)
        else {
            return;
        };
        let codes: Vec<i64> = want
            .as_slice()
            .iter()
            .filter_map(|c| match c {
                CodePattern::Code(c) => Some(*c),
                CodePattern::Placeholder(p) => self.ctx.codes.by_placeholder(p),
            })
            .collect();
        match self.first_error_code {
            Some(c) if !codes.contains(&c) => {
                self.add(
                    Check::ErrorCode,
                    self.level_status,
                    format!("expected error code {}; observed {c}", list(&codes)),
                );
            }
            None if self.strict && *observed == Observed::Outcome(Outcome::Reject) => {
                self.add(
                    Check::ErrorCode,
                    self.level_status,
                    format!(
                        "expected a JSON-RPC error with code {}; the refusal carried none",
                        list(&codes)
                    ),
                );
            }
            _ => {}
        }
    }

    /// Each response's id follows one of the case's rules (the first one that does not is
    /// reported). A refusal that is a tool result (`--deny-style result`) answers the request,
    /// so it carries the request's id whatever the case says of errors; judged fail-closed, a
    /// refusal may carry any sane id (the request's, null or none). What succeeds keeps the
    /// case's rule. Unless the reading narrows, an error may echo an id the body let a server
    /// detect (JSON-RPC 2.0 section 5 asks for null only when it could not be detected).
    pub(super) fn ids(&mut self, observed: &Observed, result_refusal: bool) {
        let Some(mut rules) = self.expect.id.clone() else {
            return;
        };
        let detectable = self
            .obs
            .sent
            .detectable_id
            .as_ref()
            .filter(|_| !self.strict && *observed == Observed::Outcome(Outcome::Reject));
        let mut repaired_echo = false;
        let mut lenient_echo = false;
        let refused = *observed == Observed::Outcome(Outcome::Reject);
        // Judged fail-closed, a refusal (an error, or a tool result under `--deny-style result`)
        // may answer the id its gate found in a body the runner cannot read: one a plain reader
        // detects, or one a reader that repairs what is not JSON finds (a warning: a parse
        // error with a null id is preferred).
        let repaired = self
            .obs
            .sent
            .repaired_id
            .as_ref()
            .filter(|_| self.fail_closed && refused);
        if self.fail_closed && refused {
            rules = OneOrMany::Many(vec![IdRule::Echo, IdRule::NullOrAbsent]);
        } else if result_refusal && !rules.as_slice().contains(&IdRule::Echo) {
            let mut with_echo = rules.as_slice().to_vec();
            with_echo.push(IdRule::Echo);
            rules = OneOrMany::Many(with_echo);
        }
        let obs = self.obs;
        // The id a lenient reader sees in a body the runner cannot read as sent (not UTF-8,
        // not JSON as sent): a target that read it so answers that id. That it read such a
        // body at all is the outcome's or the error code's finding; the id is a warning (a
        // parse error with a null id is preferred), never a second failure of the same cause.
        let lenient = obs
            .sent
            .detectable_id
            .as_ref()
            .map(|d| &d.id)
            .or(obs.sent.repaired_id.as_ref())
            .filter(|_| obs.sent.id.is_none());
        // Held to an error table or `--strict`, a body that is not JSON is a parse error with a
        // null id: the id rule stands.
        let lenient_ok = lenient.filter(|_| !self.strict);
        for r in self.resp.clone() {
            let id = r.get("id");
            if lenient_ok.is_some_and(|l| id == Some(l)) {
                lenient_echo = true;
                continue;
            }
            let may_echo =
                r.get("error").is_some() || result_refusal || (self.fail_closed && refused);
            let echoes_detectable = may_echo
                && detectable.is_some_and(|d| id == Some(&d.id))
                && !(rules.as_slice().contains(&IdRule::Echo) && obs.sent.id.is_some());
            let echoes_repaired = may_echo && repaired.is_some_and(|x| id == Some(x));
            repaired_echo |= echoes_detectable && detectable.is_some_and(|d| !d.json);
            lenient_echo |= echoes_repaired;
            let ok = echoes_detectable
                || echoes_repaired
                || rules.as_slice().iter().any(|rule| match rule {
                    // The same number written otherwise (-0.0 as 0) is the request's id; the shape
                    // check warns of the spelling.
                    IdRule::Echo => obs.sent.id.as_ref().is_some_and(|sent| {
                        id == Some(sent) || id.is_some_and(|id| super::shape::same_number(id, sent))
                    }),
                    IdRule::Null => id == Some(&Value::Null),
                    IdRule::Absent => id.is_none(),
                    IdRule::NullOrAbsent => id.is_none_or(Value::is_null),
                });
            if !ok {
                let names: Vec<&str> = rules.as_slice().iter().map(|r| r.as_str()).collect();
                let message = format!(
                    "expected the response id to be {} (request id {}); observed {}",
                    names.join(" or "),
                    match (&obs.sent.id, lenient) {
                        (Some(sent), _) => sent.to_string(),
                        (None, Some(l)) => format!("unreadable as sent, {l} to a lenient reader"),
                        (None, None) => "none".into(),
                    },
                    id.map_or("no id".into(), Value::to_string)
                );
                self.add(Check::Id, self.level_status, message);
                return;
            }
        }
        self.id_preferences(lenient_echo, repaired_echo);
    }

    /// The warnings of an id that is allowed but not the one preferred: the id a lenient or a
    /// repairing reader finds in a body that is not JSON, or not UTF-8, as sent.
    fn id_preferences(&mut self, lenient_echo: bool, repaired_echo: bool) {
        if lenient_echo {
            self.add(
                Check::Id,
                Status::Warn,
                "preferred: a parse error with a null id (the body is not JSON as sent; the answer carries the id a reader that repairs it finds, so the target read it so)".into(),
            );
        }
        if repaired_echo {
            self.add(
                Check::Id,
                Status::Warn,
                "preferred: a null id (the body is not UTF-8; the error echoes the id a decoder that replaces invalid bytes finds in it)".into(),
            );
        }
    }
}

/// What is wrong with the `Bearer` challenge among `headers`' `WWW-Authenticate` values, if
/// anything.
pub(super) fn challenge_problem(
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
pub(super) fn bearer_params(value: &str) -> Option<Vec<(String, String)>> {
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

/// The warning a server's trial carries when it repaired invalid UTF-8 and read the request.
pub const REPAIRED_UTF8: &str = "the target read the request despite its invalid UTF-8 (replaced with U+FFFD, or decoded as surrogates): REQUIREMENTS 13 A18 takes that as a lenient pass where it does not change which tool runs (nothing ran here that should not); refusing it as not UTF-8 (-32700, 400) is preferred, and --strict fails it";

impl Judge<'_> {
    /// REQUIREMENTS 13 A18: a server that replaces invalid UTF-8 (as the TypeScript SDK's HTTP
    /// reader and the Python SDK's stdio reader do) and then reads the request passes the
    /// lenient reading "unless it changes which tool runs". Where the body is JSON only once its
    /// invalid sequences are replaced, the answer shows the request was read so (a result, or an
    /// error other than a parse error, every one with the id found only so), and nothing else
    /// went wrong (no tool ran that should not, alive, nothing leaked), the answer's form
    /// (outcome, status, code, id) is a warning. Silence, a parse error, another id: judged as
    /// always. A gate must still refuse such bytes, and `--strict` holds a server to the refusal.
    pub(super) fn repair_leniency(&mut self, observed: &Observed) {
        let Some(found) = self.obs.sent.detectable_id.as_ref().filter(|d| !d.json) else {
            return;
        };
        if self.strict || self.ctx.profile != Profile::Server || self.resp.is_empty() {
            return;
        }
        let read = self.resp.iter().all(|r| {
            r.get("id") == Some(&found.id)
                && r.pointer("/error/code").and_then(Value::as_i64) != Some(-32700)
        });
        let answered = matches!(
            observed,
            Observed::Outcome(Outcome::Accept | Outcome::Reject)
        );
        if read
            && answered
            && self.harmless()
            && self.downgrade(&[
                Check::Outcome,
                Check::HttpStatus,
                Check::ErrorCode,
                Check::Id,
            ])
        {
            self.add(Check::Outcome, Status::Warn, REPAIRED_UTF8.into());
        }
    }
}
