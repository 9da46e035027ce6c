//! Policy: the [`Engine`] trait and the rule engine read from the gate's config.
//!
//! The engine sees an [`AgentActionRequest`] built from the canonical tool call and is asked
//! exactly once per `tools/call`. The proxy treats any engine error, timeout or panic as a
//! denial.

use crate::canonical::{Id, Json};
use std::time::SystemTime;

/// What the engine decides on.
#[derive(Debug, Clone)]
pub struct AgentActionRequest {
    /// The administrator-configured server id the call is for.
    pub server_id: String,
    pub tool: String,
    /// The canonical arguments object.
    pub arguments: Json,
    /// Who is asking, when the front could establish it.
    pub principal: Option<String>,
    /// The scopes the caller's access token grants; `None` when the front checks no token
    /// scopes (no authentication, or token digests).
    pub scopes: Option<Vec<String>>,
    /// The gate's own clock, never the client's.
    pub timestamp: SystemTime,
    /// Correlation only: not part of the action's scope.
    pub request_id: Id,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny,
}

/// An engine that could not decide. Its text never reaches a client.
#[derive(Debug, thiserror::Error)]
#[error("policy engine failure: {0}")]
pub struct EngineError(pub String);

/// What an action other than a tool call is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    /// A resource, by its normalized URI (read, subscribe, listing) or URI template (listing).
    Resource,
    /// A prompt, by name (get, listing, completion).
    Prompt,
    /// Any other client method, by name (`logging/setLevel`, `completion/complete`, ...), and
    /// client notifications the gate does not handle itself.
    Method,
    /// A request the server sends the client (`sampling/createMessage`, `elicitation/create`,
    /// `roots/list`), by method.
    ServerRequest,
}

/// An action other than a tool call, for [`Engine::decide_action`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    pub kind: ActionKind,
    /// The URI, name or method the action is about.
    pub subject: String,
    /// The scopes the caller's access token grants (see [`AgentActionRequest::scopes`]); `None`
    /// for actions no client token stands behind (requests the server sends).
    pub scopes: Option<Vec<String>>,
}

/// A policy engine.
pub trait Engine: Send + Sync + 'static {
    fn decide(&self, request: &AgentActionRequest) -> Result<Decision, EngineError>;

    /// Everything that is not a tool call: resources, prompts, other methods, server-to-client
    /// requests. The default denies, so an engine that knows only tools lets nothing else pass.
    fn decide_action(&self, _server_id: &str, _action: &Action) -> Result<Decision, EngineError> {
        Ok(Decision::Deny)
    }

    /// For an action the engine denied: the scope a token would need for it to be allowed
    /// (the answer is then 403 `insufficient_scope` naming it), or `None` when no scope would
    /// help. `kind` is `None` for a tool. Default: none.
    fn missing_scope(
        &self,
        _server_id: &str,
        _kind: Option<ActionKind>,
        _subject: &str,
        _held: Option<&[String]>,
    ) -> Option<String> {
        None
    }

    /// Whether `tool` on `server_id` may be listed to clients (`tools/list` filtering). The
    /// default lists nothing; listing never grants a call, which is decided on its own.
    fn visible(&self, _server_id: &str, _tool: &str) -> bool {
        false
    }

    /// Whether `decide` is pure, bounded computation that cannot block (no I/O, no locks held
    /// across calls), so the proxy may call it on its own thread instead of handing it to a
    /// blocking thread under a deadline. A panic still denies. Default: no.
    fn runs_inline(&self) -> bool {
        false
    }
}

/// `allow` or `deny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    Allow,
    Deny,
}

/// One rule: an effect for a server id and exactly one subject — a tool name, a resource URI, a
/// prompt name, a method, or a server-to-client request method. Patterns may use `*` for any
/// run of characters. A `deny` pattern matches ignoring ASCII case (a downstream may fold case
/// where the gate does not); an `allow` pattern matches exactly. An `allow` rule with a `scope`
/// allows only callers whose access token grants that scope.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub effect: Effect,
    #[serde(default = "any")]
    pub server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_request: Option<String>,
    /// `allow` only: the OAuth scope the caller's token must grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl Rule {
    /// A rule about a tool (the only kind before resources and prompts were policed).
    pub fn tool(effect: Effect, server: &str, tool: &str) -> Rule {
        Rule {
            effect,
            server: server.into(),
            tool: Some(tool.into()),
            resource: None,
            prompt: None,
            method: None,
            server_request: None,
            scope: None,
        }
    }

    /// The rule's subject pattern for `kind` (`None` for a tool rule), or for a tool.
    fn subject(&self, kind: Option<ActionKind>) -> Option<&str> {
        match kind {
            None => self.tool.as_deref(),
            Some(ActionKind::Resource) => self.resource.as_deref(),
            Some(ActionKind::Prompt) => self.prompt.as_deref(),
            Some(ActionKind::Method) => self.method.as_deref(),
            Some(ActionKind::ServerRequest) => self.server_request.as_deref(),
        }
    }

    fn subjects(&self) -> usize {
        [
            &self.tool,
            &self.resource,
            &self.prompt,
            &self.method,
            &self.server_request,
        ]
        .iter()
        .filter(|s| s.is_some())
        .count()
    }
}

fn any() -> String {
    "*".into()
}

/// `*` matches any run of characters (none included); everything else itself, or, with `fold`,
/// itself ignoring ASCII case.
pub fn glob(pattern: &str, text: &str, fold: bool) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let eq = |a: u8, b: u8| {
        if fold {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && eq(p[pi], t[ti]) {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == b'*')
}

/// Default deny; a matching `deny` rule beats any `allow`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct RuleEngine {
    pub rules: Vec<Rule>,
}

/// A rule the engine cannot apply.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuleError {
    #[error(
        "policy rule {0} must name exactly one of tool, resource, prompt, method, server_request"
    )]
    Subjects(usize),
    #[error("policy rule {0}: only an allow rule can require a scope, and the scope cannot be empty or hold a space or quote")]
    Scope(usize),
}

/// How a subject fares under the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fate {
    Allowed,
    Denied,
    /// Denied, but an allow rule would match with this scope.
    NeedsScope(String),
}

impl RuleEngine {
    /// Every rule names exactly one subject; only allow rules name a scope.
    pub fn validate(&self) -> Result<(), RuleError> {
        if let Some(i) = self.rules.iter().position(|r| r.subjects() != 1) {
            return Err(RuleError::Subjects(i));
        }
        let bad_scope = |r: &Rule| match &r.scope {
            None => false,
            Some(s) => {
                r.effect == Effect::Deny
                    || s.is_empty()
                    || s.contains([' ', '"', '\\'])
                    || s.chars().any(char::is_control)
            }
        };
        match self.rules.iter().position(bad_scope) {
            Some(i) => Err(RuleError::Scope(i)),
            None => Ok(()),
        }
    }

    fn fate(
        &self,
        server: &str,
        kind: Option<ActionKind>,
        subject: &str,
        held: Option<&[String]>,
    ) -> Fate {
        let mut fate = Fate::Denied;
        for r in &self.rules {
            if !(r.server == "*" || r.server == server) {
                continue;
            }
            let Some(pattern) = r.subject(kind) else {
                continue;
            };
            match r.effect {
                Effect::Deny if glob(pattern, subject, true) => return Fate::Denied,
                Effect::Allow if glob(pattern, subject, false) => match &r.scope {
                    None => fate = Fate::Allowed,
                    Some(s) if held.is_some_and(|h| h.contains(s)) => fate = Fate::Allowed,
                    Some(s) if fate == Fate::Denied => fate = Fate::NeedsScope(s.clone()),
                    Some(_) => {}
                },
                _ => {}
            }
        }
        fate
    }

    fn allows(
        &self,
        server: &str,
        kind: Option<ActionKind>,
        subject: &str,
        held: Option<&[String]>,
    ) -> bool {
        self.fate(server, kind, subject, held) == Fate::Allowed
    }
}

impl Engine for RuleEngine {
    fn decide(&self, request: &AgentActionRequest) -> Result<Decision, EngineError> {
        let held = request.scopes.as_deref();
        Ok(
            if self.allows(&request.server_id, None, &request.tool, held) {
                Decision::Allow
            } else {
                Decision::Deny
            },
        )
    }

    fn decide_action(&self, server_id: &str, action: &Action) -> Result<Decision, EngineError> {
        let held = action.scopes.as_deref();
        Ok(
            if self.allows(server_id, Some(action.kind), &action.subject, held) {
                Decision::Allow
            } else {
                Decision::Deny
            },
        )
    }

    fn missing_scope(
        &self,
        server_id: &str,
        kind: Option<ActionKind>,
        subject: &str,
        held: Option<&[String]>,
    ) -> Option<String> {
        match self.fate(server_id, kind, subject, held) {
            Fate::NeedsScope(s) => Some(s),
            _ => None,
        }
    }

    /// Listing needs no scope: a scoped tool is listed (a call without the scope gets 403
    /// `insufficient_scope`, which tells the client what to ask for).
    fn visible(&self, server_id: &str, tool: &str) -> bool {
        self.fate(server_id, None, tool, None) != Fate::Denied
    }

    /// A scan of the configured rules: bounded, no I/O.
    fn runs_inline(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(e: &RuleEngine, tool: &str) -> Decision {
        let req = AgentActionRequest {
            server_id: "witness".into(),
            tool: tool.into(),
            arguments: Json::Object(Vec::new()),
            principal: None,
            scopes: None,
            timestamp: SystemTime::now(),
            request_id: Id::Int(1),
        };
        e.decide(&req).unwrap()
    }

    #[test]
    fn default_deny_and_deny_wins() {
        let e = RuleEngine {
            rules: vec![
                Rule::tool(Effect::Allow, "*", "*"),
                Rule::tool(Effect::Deny, "witness", "delete_everything"),
            ],
        };
        assert_eq!(ask(&e, "echo"), Decision::Allow);
        assert_eq!(ask(&e, "delete_everything"), Decision::Deny);
        assert_eq!(ask(&RuleEngine::default(), "echo"), Decision::Deny);
        // A deny pattern folds case; an allow pattern does not.
        assert_eq!(ask(&e, "DELETE_everything"), Decision::Deny);
    }

    #[test]
    fn resources_prompts_and_methods_are_their_own_subjects() {
        let mut e: RuleEngine = serde_json::from_str(
            r#"{"rules":[{"effect":"allow","resource":"test://*"},
                        {"effect":"deny","resource":"test://secret/*"},
                        {"effect":"allow","prompt":"greet"},
                        {"effect":"allow","method":"logging/setLevel"}]}"#,
        )
        .unwrap();
        e.validate().unwrap();
        let ask_in = |e: &RuleEngine, kind, subject: &str| {
            let a = Action {
                kind,
                subject: subject.into(),
                scopes: None,
            };
            e.decide_action("s", &a).unwrap()
        };
        let ask = |kind, subject: &str| ask_in(&e, kind, subject);
        assert_eq!(
            ask(ActionKind::Resource, "test://static-text"),
            Decision::Allow
        );
        assert_eq!(
            ask(ActionKind::Resource, "test://SECRET/key"),
            Decision::Deny
        );
        assert_eq!(
            ask(ActionKind::Resource, "file:///etc/passwd"),
            Decision::Deny
        );
        assert_eq!(ask(ActionKind::Prompt, "greet"), Decision::Allow);
        assert_eq!(
            ask(ActionKind::Prompt, "test://static-text"),
            Decision::Deny
        );
        assert_eq!(ask(ActionKind::Method, "logging/setLevel"), Decision::Allow);
        assert_eq!(
            ask(ActionKind::ServerRequest, "sampling/createMessage"),
            Decision::Deny
        );
        // A tool rule says nothing about resources, and no rule may name two subjects.
        e.rules.push(Rule::tool(Effect::Allow, "*", "*"));
        assert_eq!(ask_in(&e, ActionKind::Method, "tools/call"), Decision::Deny);
        e.rules[0].prompt = Some("*".into());
        assert!(e.validate().is_err());
    }

    #[test]
    fn a_scoped_allow_rule_needs_its_scope() {
        let e: RuleEngine = serde_json::from_str(
            r#"{"rules":[{"effect":"allow","tool":"echo"},
                        {"effect":"allow","tool":"add","scope":"math"},
                        {"effect":"allow","resource":"test://*","scope":"read"},
                        {"effect":"deny","tool":"add-secret"},
                        {"effect":"allow","tool":"add*","scope":"math"}]}"#,
        )
        .unwrap();
        e.validate().unwrap();
        let call = |tool: &str, scopes: Option<Vec<String>>| {
            let req = AgentActionRequest {
                server_id: "s".into(),
                tool: tool.into(),
                arguments: Json::Object(Vec::new()),
                principal: None,
                scopes,
                timestamp: SystemTime::now(),
                request_id: Id::Int(1),
            };
            e.decide(&req).unwrap()
        };
        let math = Some(vec!["read".to_string(), "math".to_string()]);
        assert_eq!(call("add", math.clone()), Decision::Allow);
        assert_eq!(call("add", Some(vec!["read".into()])), Decision::Deny);
        assert_eq!(
            call("add", None),
            Decision::Deny,
            "no token scopes: fail closed"
        );
        assert_eq!(call("echo", None), Decision::Allow);
        assert_eq!(call("add-secret", math), Decision::Deny, "deny wins");
        assert_eq!(
            e.missing_scope("s", None, "add", Some(&[])),
            Some("math".into())
        );
        assert_eq!(e.missing_scope("s", None, "add-secret", None), None);
        assert_eq!(e.missing_scope("s", None, "nope", None), None);
        let read = Action {
            kind: ActionKind::Resource,
            subject: "test://x".into(),
            scopes: Some(vec!["read".into()]),
        };
        assert_eq!(e.decide_action("s", &read).unwrap(), Decision::Allow);
        assert!(e.visible("s", "add") && !e.visible("s", "add-secret"));
        let deny_with_scope: RuleEngine =
            serde_json::from_str(r#"{"rules":[{"effect":"deny","tool":"x","scope":"a"}]}"#)
                .unwrap();
        assert!(matches!(
            deny_with_scope.validate(),
            Err(RuleError::Scope(0))
        ));
    }

    #[test]
    fn globs() {
        assert!(glob("*", "", false) && glob("a*c", "abbc", false) && glob("a*", "a", false));
        assert!(
            !glob("a*c", "abd", false) && !glob("abc", "ABC", false) && glob("abc", "ABC", true)
        );
        assert!(glob("*b*", "aaabaaa", false) && !glob("*b*", "aaaa", false));
    }
}
