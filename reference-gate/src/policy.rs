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

/// A policy engine.
pub trait Engine: Send + Sync + 'static {
    fn decide(&self, request: &AgentActionRequest) -> Result<Decision, EngineError>;

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

/// One rule: an effect for a server id and a tool name (`*` matches any).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub effect: Effect,
    #[serde(default = "any")]
    pub server: String,
    pub tool: String,
}

fn any() -> String {
    "*".into()
}

/// Default deny; a matching `deny` rule beats any `allow`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct RuleEngine {
    pub rules: Vec<Rule>,
}

impl RuleEngine {
    fn matching(&self, server: &str, tool: &str) -> impl Iterator<Item = &Rule> {
        let server = server.to_string();
        let tool = tool.to_string();
        self.rules.iter().filter(move |r| {
            (r.server == "*" || r.server == server) && (r.tool == "*" || r.tool == tool)
        })
    }

    fn allows(&self, server: &str, tool: &str) -> bool {
        let mut allowed = false;
        for r in self.matching(server, tool) {
            match r.effect {
                Effect::Deny => return false,
                Effect::Allow => allowed = true,
            }
        }
        allowed
    }
}

impl Engine for RuleEngine {
    fn decide(&self, request: &AgentActionRequest) -> Result<Decision, EngineError> {
        Ok(if self.allows(&request.server_id, &request.tool) {
            Decision::Allow
        } else {
            Decision::Deny
        })
    }

    fn visible(&self, server_id: &str, tool: &str) -> bool {
        self.allows(server_id, tool)
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
            timestamp: SystemTime::now(),
            request_id: Id::Int(1),
        };
        e.decide(&req).unwrap()
    }

    #[test]
    fn default_deny_and_deny_wins() {
        let e = RuleEngine {
            rules: vec![
                Rule {
                    effect: Effect::Allow,
                    server: "*".into(),
                    tool: "*".into(),
                },
                Rule {
                    effect: Effect::Deny,
                    server: "witness".into(),
                    tool: "delete_everything".into(),
                },
            ],
        };
        assert_eq!(ask(&e, "echo"), Decision::Allow);
        assert_eq!(ask(&e, "delete_everything"), Decision::Deny);
        assert_eq!(ask(&RuleEngine::default(), "echo"), Decision::Deny);
    }
}
