//! Who the caller is, for gates that decide per principal (`--identity`, `--principal`,
//! `--granted-principal`): where a gate reads the caller's identity (a header, a query
//! parameter, a bearer token (the token itself, or the subject of one the runner mints), or a
//! member of a tool call's arguments), the principal the run acts as, and what each
//! `identity/` case presents instead (an unknown principal, none, spellings of a principal the
//! gate grants the denied tool, or that principal in a second place).
//!
//! A leaf beside the case model: it knows case files and JSON values, nothing of transports.

use crate::case::{BodySpec, Caller, CaseSpec};
use serde_json::Value;

/// An `--identity` that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    #[error("`{0}`: an identity place is header:NAME, query:NAME, bearer or argument:NAME")]
    Place(String),
    #[error("--identity needs --principal (the caller the run acts as)")]
    NoPrincipal,
    #[error("--identity names the same place twice")]
    Repeated,
}

/// Where a gate reads who the caller is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// An HTTP request header (every request of the run carries it).
    Header(String),
    /// A parameter of the request target's query (every HTTP request carries it).
    Query(String),
    /// The bearer token (`Authorization: Bearer`, every HTTP request carries it): the token is
    /// the principal's own (an opaque token that names the caller), or, when the runner may
    /// mint tokens (`--auth-issuer-key`), one it mints whose subject (`sub`) is the principal.
    Bearer,
    /// A member of every tool call's arguments (a meta-tool's own arguments, when there is one).
    Argument(String),
}

impl std::str::FromStr for Place {
    type Err = IdentityError;
    fn from_str(s: &str) -> Result<Place, IdentityError> {
        match s.split_once(':') {
            Some(("header", n)) if !n.is_empty() && n.bytes().all(is_token_byte) => {
                Ok(Place::Header(n.to_ascii_lowercase()))
            }
            Some(("query", n)) if !n.is_empty() && n.bytes().all(is_query_name_byte) => {
                Ok(Place::Query(n.to_string()))
            }
            Some(("argument", n)) if !n.is_empty() => Ok(Place::Argument(n.to_string())),
            None if s == "bearer" => Ok(Place::Bearer),
            _ => Err(IdentityError::Place(s.to_string())),
        }
    }
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-_.!#$%&'*+^`|~".contains(&b)
}

/// A query parameter name written as it is (nothing that would need percent-encoding).
fn is_query_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-_.~".contains(&b)
}

/// `s` percent-encoded for a query value (RFC 3986 unreserved bytes kept).
fn query_value(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// How the run tells the gate who calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The first is where the run's principal goes; any other is a place the gate must not
    /// trust over it (the `granted-principal-in-a-second-place` case writes there).
    places: Vec<Place>,
    principal: String,
    granted: Option<String>,
    /// For a bearer place with a token issuer: the token minted for each principal a request
    /// can present (by the principal's spelling), filled by [`Identity::mint_bearer_tokens`].
    minted: std::collections::BTreeMap<String, String>,
}

/// The principal no gate knows, for `caller: unknown`.
pub(crate) const UNKNOWN_PRINCIPAL: &str = "gauntlet-unknown-principal";

impl Identity {
    pub fn new(
        places: Vec<Place>,
        principal: Option<String>,
        granted: Option<String>,
    ) -> Result<Option<Identity>, IdentityError> {
        if places.is_empty() {
            return Ok(None);
        }
        let principal = principal.ok_or(IdentityError::NoPrincipal)?;
        for (i, p) in places.iter().enumerate() {
            if places[..i].contains(p) {
                return Err(IdentityError::Repeated);
            }
        }
        Ok(Some(Identity {
            places,
            principal,
            granted,
            minted: std::collections::BTreeMap::new(),
        }))
    }

    /// Whether a principal is presented as an opaque bearer token: then the principals' names
    /// are credentials.
    fn opaque_bearer(&self) -> bool {
        self.uses_bearer() && self.minted.is_empty()
    }

    /// The values that are credentials, never to be shown or to reach a downstream: the
    /// minted tokens, and under an opaque bearer place the principals themselves.
    pub(crate) fn secrets(&self) -> Vec<String> {
        let mut out: Vec<String> = self.minted.values().cloned().collect();
        if self.opaque_bearer() {
            out.push(self.principal.clone());
            out.extend(self.granted.clone());
        }
        out
    }

    /// Where the caller is said and as whom, in words (an opaque token's principal unnamed).
    pub(crate) fn describe(&self) -> String {
        let places: Vec<String> = self
            .places
            .iter()
            .map(|p| match p {
                Place::Header(n) => format!("header {n}"),
                Place::Query(n) => format!("query parameter {n}"),
                Place::Bearer if self.minted.is_empty() => "bearer token".to_string(),
                Place::Bearer => "bearer token subject".to_string(),
                Place::Argument(n) => format!("argument {n}"),
            })
            .collect();
        let opaque = self.opaque_bearer();
        let mut out = if opaque {
            format!("caller given in the {}", places[0])
        } else {
            format!("caller `{}` in the {}", self.principal, places[0])
        };
        if places.len() > 1 {
            out.push_str(&format!(" (also read: {})", places[1..].join(", ")));
        }
        match &self.granted {
            Some(_) if opaque => out.push_str(", another principal granted the denied tool"),
            Some(g) => out.push_str(&format!(", `{g}` granted the denied tool")),
            None => {}
        }
        out
    }

    /// Whether the gate reads the caller from the bearer token.
    pub fn uses_bearer(&self) -> bool {
        self.places.contains(&Place::Bearer)
    }

    /// With a bearer place, mint (with `mint`, a token issuer) a token for every principal a
    /// request can present, whose subject is that principal: the gate then reads the caller
    /// from the token's `sub`, as an OAuth-protected gate does.
    pub fn mint_bearer_tokens<E>(
        &mut self,
        mint: impl Fn(&str) -> Result<String, E>,
    ) -> Result<(), E> {
        if !self.uses_bearer() {
            return Ok(());
        }
        let callers = [
            None,
            Some(Caller::Unknown),
            Some(Caller::GrantedOtherCase),
            Some(Caller::GrantedPadded),
            Some(Caller::GrantedFullwidth),
            Some(Caller::GrantedInASecondPlace),
        ];
        let mut minted = std::collections::BTreeMap::new();
        for caller in callers {
            for (_, value) in self.presented(caller) {
                if let std::collections::btree_map::Entry::Vacant(slot) = minted.entry(value) {
                    let token = mint(slot.key())?;
                    slot.insert(token);
                }
            }
        }
        self.minted = minted;
        Ok(())
    }

    /// What a request presents at each place: the run's principal at the first, unless the
    /// case's `caller` says otherwise (`None` when the case needs a granted principal the run
    /// was not given).
    pub(crate) fn presented(&self, caller: Option<Caller>) -> Vec<(&Place, String)> {
        let first = &self.places[0];
        let granted = self.granted.clone().unwrap_or_default();
        match caller {
            None => vec![(first, self.principal.clone())],
            Some(Caller::Unknown) => vec![(first, UNKNOWN_PRINCIPAL.to_string())],
            Some(Caller::Missing) => Vec::new(),
            Some(Caller::GrantedOtherCase) => vec![(first, other_case(&granted))],
            Some(Caller::GrantedPadded) => vec![(first, format!(" {granted} "))],
            Some(Caller::GrantedFullwidth) => vec![(first, fullwidth(&granted))],
            Some(Caller::GrantedInASecondPlace) => std::iter::once((first, self.principal.clone()))
                .chain(self.places[1..].iter().map(|p| (p, granted.clone())))
                .collect(),
        }
    }

    /// The header names among the places (`authorization` for a bearer place).
    pub(crate) fn header_names(&self) -> impl Iterator<Item = &str> {
        self.places.iter().filter_map(|p| match p {
            Place::Header(n) => Some(n.as_str()),
            Place::Bearer => Some("authorization"),
            Place::Query(_) | Place::Argument(_) => None,
        })
    }

    /// The argument names among the places.
    pub(crate) fn argument_names(&self) -> Vec<String> {
        self.places
            .iter()
            .filter_map(|p| match p {
                Place::Argument(n) => Some(n.clone()),
                Place::Header(_) | Place::Query(_) | Place::Bearer => None,
            })
            .collect()
    }

    /// The headers a request of `caller` carries.
    pub fn headers(&self, caller: Option<Caller>) -> Vec<(String, String)> {
        self.presented(caller)
            .into_iter()
            .filter_map(|(p, v)| match p {
                Place::Header(n) => Some((n.clone(), v)),
                Place::Bearer => {
                    let token = self.minted.get(&v).cloned().unwrap_or(v);
                    Some(("authorization".to_string(), format!("Bearer {token}")))
                }
                Place::Query(_) | Place::Argument(_) => None,
            })
            .collect()
    }

    /// The request target `path` (which may hold a query already) with `caller`'s identity
    /// query parameters added.
    pub fn path(&self, path: &str, caller: Option<Caller>) -> String {
        let mut out = path.to_string();
        for (p, v) in self.presented(caller) {
            if let Place::Query(n) = p {
                out.push(if out.contains('?') { '&' } else { '?' });
                out.push_str(n);
                out.push('=');
                out.push_str(&query_value(&v));
            }
        }
        out
    }

    /// Put `caller`'s identity arguments into every `tools/call` of `message` (one message or
    /// a batch), beside the call's own arguments.
    pub(crate) fn add_arguments(&self, message: &mut Value, caller: Option<Caller>) {
        let presented: Vec<(String, String)> = self
            .presented(caller)
            .into_iter()
            .filter_map(|(p, v)| match p {
                Place::Argument(n) => Some((n.clone(), v)),
                Place::Header(_) | Place::Query(_) | Place::Bearer => None,
            })
            .collect();
        if presented.is_empty() {
            return;
        }
        let add = |m: &mut Value| {
            if m.get("method").and_then(Value::as_str) != Some("tools/call") {
                return;
            }
            if let Some(Value::Object(args)) = m.pointer_mut("/params/arguments") {
                for (n, v) in &presented {
                    args.insert(n.clone(), Value::String(v.clone()));
                }
            }
        };
        match message {
            Value::Array(items) => items.iter_mut().for_each(add),
            one => add(one),
        }
    }

    /// Whether `case` can be sent as this identity: a case about the caller needs what it
    /// presents (a granted principal, a second place), and through an identity argument a body
    /// that is text must make no tool call (only JSON bodies get the argument).
    pub(crate) fn can_send(this: Option<&Identity>, case: &CaseSpec) -> bool {
        let Some(id) = this else {
            return case.caller.is_none();
        };
        let needs_granted = !matches!(case.caller, None | Some(Caller::Unknown | Caller::Missing));
        if needs_granted && id.granted.is_none() {
            return false;
        }
        if case.caller == Some(Caller::GrantedInASecondPlace) && id.places.len() < 2 {
            return false;
        }
        // A header's value is read without its surrounding spaces (RFC 9110), and so is a
        // token after `Bearer`: ` bob ` there is `bob`, the granted principal itself.
        let trimmed_first = match &id.places[0] {
            Place::Header(_) => true,
            Place::Bearer => id.minted.is_empty(),
            Place::Query(_) | Place::Argument(_) => false,
        };
        if case.caller == Some(Caller::GrantedPadded) && trimmed_first {
            return false;
        }
        // A raw request carries no identity but a minted bearer token (`{{auth_header}}`, the
        // principal's when the gate reads the token's subject): without one it would be
        // refused as nobody, whatever it tests.
        let minted_only = !id.minted.is_empty() && id.places.iter().all(|p| *p == Place::Bearer);
        if case.request.raw_http.is_some() && !minted_only {
            return false;
        }
        if id.argument_names().is_empty() {
            return true;
        }
        if case.request.raw_http.is_some() {
            return false;
        }
        match &case.request.body {
            None | Some(BodySpec::Json(_)) => true,
            Some(other) => {
                let text = serde_json::to_string(other)
                    .expect("a body spec serializes: strings and numbers");
                !text.contains("tools/call") && !text.contains("tools\\\\/call")
            }
        }
    }
}

/// `s` with its letters' case swapped (all upper, or all lower when it is upper already).
fn other_case(s: &str) -> String {
    let upper = s.to_uppercase();
    if upper == s {
        s.to_lowercase()
    } else {
        upper
    }
}

/// `s` with its printable ASCII in fullwidth forms (NFKC folds them back).
fn fullwidth(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '!'..='~' => char::from_u32(c as u32 + 0xFEE0).unwrap_or(c),
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id(places: &[&str]) -> Identity {
        Identity::new(
            places.iter().map(|p| p.parse().unwrap()).collect(),
            Some("alice".into()),
            Some("bob".into()),
        )
        .unwrap()
        .unwrap()
    }

    #[test]
    fn each_caller_presents_its_identity() {
        let i = id(&["header:X-Agent-Id", "argument:agent_id"]);
        assert_eq!(i.headers(None), vec![("x-agent-id".into(), "alice".into())]);
        assert_eq!(
            i.headers(Some(Caller::GrantedOtherCase)),
            vec![("x-agent-id".into(), "BOB".into())]
        );
        assert_eq!(i.headers(Some(Caller::GrantedFullwidth))[0].1, "ｂｏｂ");
        assert!(i.headers(Some(Caller::Missing)).is_empty());
        let mut call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "x", "arguments": {"text": "hi"}}});
        i.add_arguments(&mut call, Some(Caller::GrantedInASecondPlace));
        assert_eq!(
            call["params"]["arguments"],
            json!({"text": "hi", "agent_id": "bob"})
        );
        assert_eq!(
            i.headers(Some(Caller::GrantedInASecondPlace)),
            vec![("x-agent-id".into(), "alice".into())]
        );
        assert!("cookie:x".parse::<Place>().is_err());
        assert!("header:bad name".parse::<Place>().is_err());
        assert_eq!(
            Identity::new(vec![Place::Argument("a".into())], None, None),
            Err(IdentityError::NoPrincipal)
        );
    }

    #[test]
    fn query_and_bearer_places_carry_each_callers_principal() {
        let i = id(&["query:agent", "bearer"]);
        assert_eq!(i.path("/mcp", None), "/mcp?agent=alice");
        assert_eq!(i.path("/mcp?x=1", None), "/mcp?x=1&agent=alice");
        assert_eq!(
            i.path("/mcp", Some(Caller::GrantedFullwidth)),
            "/mcp?agent=%EF%BD%82%EF%BD%8F%EF%BD%82"
        );
        assert_eq!(
            i.path("/mcp", Some(Caller::GrantedPadded)),
            "/mcp?agent=%20bob%20"
        );
        assert_eq!(i.path("/mcp", Some(Caller::Missing)), "/mcp");
        // The query is first: the second place, the bearer token, carries the granted one.
        assert_eq!(
            i.path("/mcp", Some(Caller::GrantedInASecondPlace)),
            "/mcp?agent=alice"
        );
        assert_eq!(
            i.headers(Some(Caller::GrantedInASecondPlace)),
            vec![("authorization".into(), "Bearer bob".into())]
        );
        assert!(i.headers(None).is_empty());
        assert_eq!(i.header_names().collect::<Vec<_>>(), vec!["authorization"]);

        // With an issuer, each principal's token is minted with it as subject.
        let mut b = id(&["bearer"]);
        b.mint_bearer_tokens(|sub| Ok::<_, ()>(format!("jwt-for-{sub}")))
            .unwrap();
        assert_eq!(
            b.headers(None),
            vec![("authorization".into(), "Bearer jwt-for-alice".into())]
        );
        assert_eq!(
            b.headers(Some(Caller::Unknown)),
            vec![(
                "authorization".into(),
                format!("Bearer jwt-for-{UNKNOWN_PRINCIPAL}")
            )]
        );
        assert_eq!(
            b.headers(Some(Caller::GrantedOtherCase)),
            vec![("authorization".into(), "Bearer jwt-for-BOB".into())]
        );
        assert!(b.headers(Some(Caller::Missing)).is_empty());

        assert_eq!("bearer".parse::<Place>(), Ok(Place::Bearer));
        assert!("query:a b".parse::<Place>().is_err());
        assert!("bearer:x".parse::<Place>().is_err());
        assert_eq!(
            Identity::new(
                vec![Place::Bearer, Place::Bearer],
                Some("alice".into()),
                None
            ),
            Err(IdentityError::Repeated)
        );
    }
}
