//! What one trial knows before its bytes go out, prepared once by [`Facts::of`]: the
//! placeholders in both spellings, the era the case speaks, the version its handshake asks
//! for, its HTTP method and the `_meta` it carries. The exchange reads them whichever transport
//! carries the case, and the judge reads the same values (`crate::trial` builds its context from
//! them), so no two readers decide one fact apart.

use super::{liveness_method, meta_placeholder, set_prompt_names, set_tool_names};
use crate::auth::TokenKind;
use crate::case::{Case, Placeholders, SessionMode};
use crate::settings::Speaking;
use crate::versions::{self, Version};
use serde_json::Value;

/// One trial's facts (see the module's doc).
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub(crate) case: &'a Case,
    /// The run's settings at the lane's version.
    pub(crate) settings: &'a Speaking,
    /// The placeholders known before any exchange, with the tools by their own names (as the
    /// witness behind a gate knows them; what the judge reads expectations with): tool names,
    /// the requested version, the code table, the meta-tool's members, the tokens.
    pub(crate) own: Placeholders,
    /// The same, with the tools as the client spells them through the call mapping: what goes
    /// on the wire in headers and in bodies that are text. The exchange adds what it learns.
    pub(crate) client: Placeholders,
    /// The modern version the case speaks, when the lane is modern and the case wants the
    /// runner's usual setup (`session: initialized`): then every request gets the per-request
    /// `_meta` and, over HTTP, the mirrored headers. `session: none` sends the case's bytes bare.
    pub(crate) modern: Option<Version>,
    /// The settings the case's handshake speaks: its own `handshake_version`, when it names one.
    pub(crate) handshake: Speaking,
    /// The HTTP method of the case's request (POST when it names none).
    pub(crate) method: hyper::Method,
    /// The `_meta` the case's request carries as the runner gives it: the modern lane's (added to
    /// a case with the usual setup), else the `{{meta}}` placeholder's where the case writes it.
    pub(crate) meta: Option<Value>,
}

impl<'a> Facts<'a> {
    /// Prepare `case`'s facts at `settings`.
    pub fn of(case: &'a Case, settings: &'a Speaking) -> Facts<'a> {
        let own = own_placeholders(settings);
        let mut client = own.clone();
        let m = &settings.mapping;
        set_tool_names(
            &mut client,
            &m.spelled(&settings.denied_tool),
            &m.spelled(&settings.allowed_tool),
        );
        set_prompt_names(&mut client, &m.spelled_prompt(crate::canary::DENIED_PROMPT));
        let modern = (settings.version.is_modern()
            && case.spec.session == SessionMode::Initialized)
            .then_some(settings.version);
        let handshake = match case.spec.handshake_version {
            Some(v) => settings.speaking(v),
            None => settings.clone(),
        };
        let meta = match modern {
            Some(version) => Some(versions::request_meta(version)),
            None => writes_meta(case).then(|| meta_placeholder(settings)),
        };
        Facts {
            case,
            settings,
            own,
            client,
            modern,
            handshake,
            method: case.spec.request.http_method(),
            meta,
        }
    }
}

/// Whether the case's body writes the `{{meta}}` placeholder.
fn writes_meta(case: &Case) -> bool {
    case.spec.request.body.as_ref().is_some_and(|b| {
        serde_json::to_string(b)
            .expect("a case body serializes")
            .contains("{{meta}}")
    })
}

/// The placeholders known before any exchange, with the tools by their own names.
fn own_placeholders(settings: &Speaking) -> Placeholders {
    let mut p = Placeholders::default();
    set_tool_names(&mut p, &settings.denied_tool, &settings.allowed_tool);
    set_prompt_names(&mut p, crate::canary::DENIED_PROMPT);
    if let Some(meta) = settings.mapping.meta() {
        p.set("meta_tool", meta.name())
            .set("meta_tool_key", meta.tool_key())
            .set("meta_arguments_key", meta.arguments_key())
            .set("meta_arguments_open", meta.arguments_opening());
    }
    p.set("allowed_arg", settings.allowed_arg.clone())
        .set("protocol_version", settings.version.to_string())
        .set("liveness_method", liveness_method(settings))
        .set("session_id", "")
        .set("session_param", "session_id")
        .set("meta", meta_placeholder(settings).to_string())
        .set(
            "code_malformed",
            settings.code_table().malformed.to_string(),
        )
        .set("code_denied", settings.code_table().denied.to_string())
        .set(
            "code_downstream",
            settings.code_table().downstream.to_string(),
        );
    // A raw request's header line carrying the good token (empty without one), so raw framing
    // cases reach an endpoint that wants a token.
    let mut auth_header = String::new();
    for (kind, token) in settings.auth_tokens.iter() {
        p.set(kind.placeholder(), token);
        if kind == TokenKind::Good {
            auth_header = format!("Authorization: Bearer {token}\r\n");
        }
    }
    p.set("auth_header", auth_header);
    if let Some(tool) = &settings.scoped_tool {
        p.set("scoped_tool", tool.clone());
    }
    p
}
