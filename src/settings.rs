//! What a run fixes before its first case: deadlines, the tools and canary, the gate's error
//! codes, credentials; and, in [`Speaking`], the version a lane speaks them in. A leaf both the
//! transport (what to send) and the verdict (how to judge) read; neither owns it.

use crate::case::Case;
use crate::versions::Version;
use std::sync::Arc;
use std::time::Duration;

/// A gate's error codes (DESIGN.md section 5): malformed input, a denied call, a failed
/// downstream. Cases name them as `{{code_malformed}}`, `{{code_denied}}` and
/// `{{code_downstream}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeTable {
    pub malformed: i64,
    pub denied: i64,
    pub downstream: i64,
}

impl CodeTable {
    /// The reference gate's codes for legacy versions.
    pub const LEGACY: CodeTable = CodeTable {
        malformed: -32600,
        denied: -32001,
        downstream: -32002,
    };
    /// Its codes for 2026-07-28 and later (outside -32000..-32099).
    pub const MODERN: CodeTable = CodeTable {
        malformed: -32600,
        denied: -31001,
        downstream: -31002,
    };

    /// The code a case's placeholder names (`{{code_denied}}`, ...), or `None`.
    pub(crate) fn by_placeholder(&self, placeholder: &str) -> Option<i64> {
        match placeholder {
            "{{code_malformed}}" => Some(self.malformed),
            "{{code_denied}}" => Some(self.denied),
            "{{code_downstream}}" => Some(self.downstream),
            _ => None,
        }
    }
}

impl std::str::FromStr for CodeTable {
    type Err = String;
    /// `MALFORMED,DENIED,DOWNSTREAM`, three JSON-RPC error codes (`-32600,-32001,-32002`).
    fn from_str(s: &str) -> Result<CodeTable, String> {
        let codes: Vec<i64> = s
            .split(',')
            .map(|c| c.trim().parse::<i64>())
            .collect::<Result<_, _>>()
            .map_err(|_| format!("`{s}`: expected three integers, MALFORMED,DENIED,DOWNSTREAM"))?;
        match codes[..] {
            [malformed, denied, downstream] => Ok(CodeTable {
                malformed,
                denied,
                downstream,
            }),
            _ => Err(format!(
                "`{s}`: expected three codes, MALFORMED,DENIED,DOWNSTREAM"
            )),
        }
    }
}

/// Settings that do not change from case to case.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Headers added to every HTTP request (`--header`); their values are secrets for the leak
    /// oracle and are redacted in output.
    pub extra_headers: Vec<(String, String)>,
    pub case_timeout: Duration,
    /// The run's end (`--total-timeout`): no case's deadline lies past it, so a case running
    /// when it comes is cut short there.
    pub run_deadline: Option<std::time::Instant>,
    pub probe_timeout: Duration,
    /// Every case's deadline (its own `timeout_ms` too) is multiplied by this (`--timeout-scale`;
    /// `case_timeout` and `probe_timeout` are given already scaled).
    pub timeout_scale: f64,
    /// stdio: the longest the runner keeps reading after the barrier's answer when the case's
    /// request has not been answered yet (servers that answer concurrently may answer the
    /// barrier first); the window itself is learned per target (`pacing`).
    pub settle: Duration,
    /// The downstream's tool that must never run, and a harmless one, by their own names (what
    /// the witness behind a gate knows them as).
    pub denied_tool: String,
    pub allowed_tool: String,
    /// The argument the allowed tool takes its text in (`--allowed-arg`; `text` for the
    /// witness's `echo`, `message` for the reference server's).
    pub allowed_arg: String,
    /// How the target spells a call of a tool (`--tool-name`, `--meta-tool`).
    pub mapping: crate::mapping::CallMapping,
    /// Who the run says is calling, and where (`--identity`, `--principal`).
    pub identity: Option<crate::identity::Identity>,
    /// A file the target appends to when its denied tool runs (`--canary-log`): its growth
    /// during a case is an execution.
    pub canary_log: Option<std::path::PathBuf>,
    /// The text the denied tool answers when it runs (`--canary-text`; empty: none).
    pub canary_text: String,
    /// How the target refuses a tool call (`--deny-style`), for the verdict.
    pub deny_style: DenyStyle,
    /// The gate's error codes for legacy versions…
    pub codes: CodeTable,
    /// …and for 2026-07-28 and later, where -32000..-32019 are legacy and -32020..-32099 the
    /// specification's own: a gate's codes lie outside the JSON-RPC reserved range.
    pub modern_codes: CodeTable,
    /// Whether the gate's error table is known: the embedded default (the reference gate), or
    /// a table given with `--gate-codes`. Only then are a gate's exact answers judged (each
    /// case's `gate`/`strict` set, its codes from the table); otherwise a gate is judged
    /// fail-closed: nothing forwarded, nothing run, alive, nothing leaked, and a refusal of
    /// some kind (`--strict` judges exactly too, with the reference table).
    pub exact_codes: bool,
    /// The tokens `auth/` cases name (`token_good`, `token_expired`, ...), from the run's auth
    /// inputs; secrets, like `extra_headers`.
    pub auth_tokens: crate::auth::AuthTokens,
    /// A tool the good token's scopes do not cover (`--auth-scoped-tool`).
    pub scoped_tool: Option<String>,
}

impl Settings {
    /// How the run spoke to the target where it differs from a plain MCP server's defaults
    /// (tool names and arguments, the call mapping, the caller's identity, the refusal style),
    /// in words for reports and the matrix; `None` when it did not.
    pub fn spelling(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.denied_tool != crate::canary::CANARY_TOOL {
            parts.push(format!("denied tool `{}`", self.denied_tool));
        }
        if self.allowed_tool != "echo" || self.allowed_arg != "text" {
            parts.push(format!(
                "allowed tool `{}` taking `{}`",
                self.allowed_tool, self.allowed_arg
            ));
        }
        parts.extend(self.mapping.describe());
        parts.extend(
            self.identity
                .as_ref()
                .map(crate::identity::Identity::describe),
        );
        if self.deny_style == DenyStyle::Result {
            parts.push("refusals as isError tool results".to_string());
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// How long `case` may take: its own `timeout_ms` times `timeout_scale`, else
    /// `case_timeout` (scaled already).
    /// When a case started now must be over: its own deadline, or the run's end if sooner.
    pub(crate) fn case_ends(&self, case: &Case) -> tokio::time::Instant {
        let own = tokio::time::Instant::now() + self.case_deadline(case);
        self.run_deadline
            .map_or(own, |end| own.min(tokio::time::Instant::from_std(end)))
    }

    pub(crate) fn case_deadline(&self, case: &Case) -> Duration {
        case.spec.timeout_ms.map_or(self.case_timeout, |ms| {
            Duration::from_millis(ms).mul_f64(self.timeout_scale)
        })
    }

    /// Whether the run knows enough of the endpoint's authorization for a case that needs
    /// `need`.
    pub(crate) fn has_auth(&self, need: Option<crate::case::AuthNeed>) -> bool {
        use crate::auth::TokenKind;
        use crate::case::AuthNeed;
        let has = |kind| self.auth_tokens.has(kind);
        match need {
            None => true,
            Some(AuthNeed::Token) => has(TokenKind::Good),
            Some(AuthNeed::Jwt) => has(TokenKind::AlgNone),
            Some(AuthNeed::Issuer) => has(TokenKind::Expired),
            Some(AuthNeed::Scope) => has(TokenKind::Good) && self.scoped_tool.is_some(),
        }
    }
}

/// A run's settings as a lane (or one handshake, or one probe) speaks them: the settings,
/// shared, and the protocol version, what the runner asks for in `initialize` or names in a
/// modern request's `_meta`. The version spoken is held here only: `Settings` has none, and
/// another version of the same settings is another `Speaking`, not a copy of them.
#[derive(Debug, Clone)]
pub struct Speaking {
    settings: Arc<Settings>,
    pub version: Version,
}

impl Speaking {
    pub fn new(settings: Arc<Settings>, version: Version) -> Speaking {
        Speaking { settings, version }
    }

    /// The same settings in `version` (a case's own handshake version, a probe's).
    pub fn speaking(&self, version: Version) -> Speaking {
        Speaking {
            settings: self.settings.clone(),
            version,
        }
    }

    /// The settings, shared.
    pub fn shared(&self) -> &Arc<Settings> {
        &self.settings
    }

    /// The gate's error codes in force for the version spoken.
    pub(crate) fn code_table(&self) -> CodeTable {
        if self.version.is_modern() {
            self.modern_codes
        } else {
            self.codes
        }
    }
}

impl std::ops::Deref for Speaking {
    type Target = Settings;
    fn deref(&self) -> &Settings {
        &self.settings
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            extra_headers: Vec::new(),
            case_timeout: Duration::from_secs(10),
            run_deadline: None,
            probe_timeout: Duration::from_secs(5),
            timeout_scale: 1.0,
            settle: Duration::from_millis(5000),
            denied_tool: crate::canary::CANARY_TOOL.into(),
            allowed_tool: "echo".into(),
            allowed_arg: "text".into(),
            mapping: crate::mapping::CallMapping::default(),
            identity: None,
            canary_log: None,
            canary_text: crate::canary::CANARY_MARKER.into(),
            deny_style: DenyStyle::Error,
            codes: CodeTable::LEGACY,
            modern_codes: CodeTable::MODERN,
            exact_codes: false,
            auth_tokens: crate::auth::AuthTokens::default(),
            scoped_tool: None,
        }
    }
}

/// How a gate refuses a tool call: a JSON-RPC error (the default, and the protocol's way), or a
/// tool result with `isError: true`, which also runs nothing and which some gates send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DenyStyle {
    #[default]
    Error,
    Result,
}

impl std::str::FromStr for DenyStyle {
    type Err = String;
    fn from_str(s: &str) -> Result<DenyStyle, String> {
        match s {
            "error" => Ok(DenyStyle::Error),
            "result" => Ok(DenyStyle::Result),
            _ => Err("expected `error` or `result`".into()),
        }
    }
}
