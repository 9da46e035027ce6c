//! Protocol eras. Legacy versions (2025-11-25 and earlier) agree on a version with `initialize`
//! and keep it in a session; modern ones (2026-07-28 on) name it in every request's
//! `params._meta`, and over HTTP mirror the version, the method and the called name into
//! headers that must equal the body. The gate decides the era from the canonical message alone,
//! checks the binding before any policy, and never lets a request's claim choose weaker rules.

use crate::canonical::{Canonical, Json, Message};
use base64::Engine as _;

/// A protocol version: a `YYYY-MM-DD` name, ordered as the names sort. The gate's one version
/// type: what it speaks, what a session agreed and what a downstream answered are all one;
/// text from the wire (a header, a `_meta` claim, a requested version) is parsed into one at the
/// edge, and text that is not a version is never one the gate speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    year: u16,
    month: u8,
    day: u8,
}

impl Version {
    pub const fn new(year: u16, month: u8, day: u8) -> Version {
        Version { year, month, day }
    }

    /// `YYYY-MM-DD`, digits and dashes only (a name that sorts as a date, not checked as one).
    pub fn parse(text: &str) -> Option<Version> {
        let b = text.as_bytes();
        let shaped = b.len() == 10
            && b.iter().enumerate().all(|(i, c)| match i {
                4 | 7 => *c == b'-',
                _ => c.is_ascii_digit(),
            });
        if !shaped {
            return None;
        }
        Some(Version {
            year: text[0..4].parse().ok()?,
            month: text[5..7].parse().ok()?,
            day: text[8..10].parse().ok()?,
        })
    }

    /// At or after 2026-07-28: no handshake, the version named in every request.
    pub fn is_modern(self) -> bool {
        self >= MODERN_FIRST
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

impl serde::Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Version {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Version, D::Error> {
        let text = String::deserialize(d)?;
        Version::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("`{text}` is not a protocol version (YYYY-MM-DD)"))
        })
    }
}

/// The first version without a handshake.
pub(crate) const MODERN_FIRST: Version = Version::new(2026, 7, 28);
/// Versions the gate speaks unless configured otherwise, oldest first.
pub(crate) const DEFAULT_VERSIONS: &[Version] = &[
    Version::new(2025, 6, 18),
    Version::new(2025, 11, 25),
    MODERN_FIRST,
];
/// Every published version with a handshake, oldest first (the gate speaks only some of them).
pub(crate) const KNOWN_LEGACY: &[Version] = &[
    Version::new(2024, 11, 5),
    Version::new(2025, 3, 26),
    Version::new(2025, 6, 18),
    Version::new(2025, 11, 25),
];

/// Whether a legacy session that agreed `negotiated` takes a request whose
/// `MCP-Protocol-Version` header says `header`: the agreed version, or an older published one
/// (the specification says a client SHOULD send the agreed one, and SDK clients send older ones
/// for requests they build by hand). The header is validated, never trusted: the gate forwards
/// under the agreed version and its own headers, and its rules do not depend on the header.
pub(crate) fn session_accepts_header(negotiated: Version, header: &str) -> bool {
    Version::parse(header)
        .is_some_and(|h| h == negotiated || (KNOWN_LEGACY.contains(&h) && h < negotiated))
}

pub(crate) const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub(crate) const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// 2026-07-28 error codes.
pub(crate) const HEADER_MISMATCH: i64 = -32020;
pub(crate) const UNSUPPORTED_VERSION: i64 = -32022;

/// Methods whose `Mcp-Name` header mirrors `params.name` (or `params.uri`).
pub(crate) const NAMED_METHODS: &[&str] = &["tools/call", "resources/read", "prompts/get"];

/// Text that names a modern version (`YYYY-MM-DD` at or after 2026-07-28).
pub(crate) fn is_modern(version: &str) -> bool {
    Version::parse(version).is_some_and(Version::is_modern)
}

fn params(message: &Message) -> Option<&Vec<(String, Json)>> {
    match message {
        Message::Request { params, .. } | Message::Notification { params, .. } => params.as_ref(),
    }
}

fn param<'a>(message: &'a Message, key: &str) -> Option<&'a Json> {
    params(message)?
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

/// What a message's `_meta` claims about its era.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Claim {
    /// No `_meta` version: a legacy message.
    Legacy,
    /// A `_meta` version that is a string.
    Modern(String),
    /// A `_meta` version of another JSON type: a malformed modern message.
    Malformed,
}

/// The era a canonical message claims.
pub(crate) fn claim(c: &Canonical) -> Claim {
    match param(c.message(), "_meta").and_then(|m| m.get(META_VERSION)) {
        None => Claim::Legacy,
        Some(Json::String(v)) => Claim::Modern(v.clone()),
        Some(_) => Claim::Malformed,
    }
}

/// Whether a modern message declares its client capabilities (an object).
pub(crate) fn has_capabilities(c: &Canonical) -> bool {
    matches!(
        param(c.message(), "_meta").and_then(|m| m.get(META_CAPABILITIES)),
        Some(Json::Object(_))
    )
}

/// The name a named method's `Mcp-Name` must equal.
fn named_value(message: &Message) -> Option<&str> {
    let name = if message.method() == "resources/read" {
        param(message, "uri")
    } else {
        param(message, "name")
    };
    name.and_then(Json::as_str)
}

/// How a request's headers failed to match its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mismatch {
    /// `MCP-Protocol-Version` missing, repeated, or not the `_meta` version.
    Version,
    /// `Mcp-Method` missing, repeated, or not the method.
    Method,
    /// `Mcp-Name` missing, repeated, undecodable or not the name; or present on a method that
    /// names nothing.
    Name,
}

/// The request headers the binding reads: every value of a (lower-case) name, as raw bytes.
pub(crate) trait HeaderSource {
    fn values(&self, name: &str) -> Vec<&[u8]>;
}

impl HeaderSource for [(&str, &[u8])] {
    fn values(&self, name: &str) -> Vec<&[u8]> {
        self.iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
            .collect()
    }
}

/// Exactly one value, visible ASCII (and inner spaces) only.
fn one<'a>(headers: &'a (impl HeaderSource + ?Sized), name: &str) -> Option<&'a str> {
    let values = headers.values(name);
    match values.as_slice() {
        [v] if v.iter().all(|b| (0x20..=0x7e).contains(b)) => std::str::from_utf8(v).ok(),
        _ => None,
    }
}

/// A header value in the 2026-07-28 value encoding: `=?base64?…?=` decoded, anything else as is.
pub(crate) fn decode_value(v: &str) -> Option<String> {
    match v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(payload) => base64::engine::general_purpose::STANDARD
            .decode(payload)
            .ok()
            .and_then(|b| String::from_utf8(b).ok()),
        None => Some(v.to_string()),
    }
}

/// A value as a header: plain when it is visible ASCII without edge spaces and does not look
/// like the sentinel, else the sentinel encoding.
pub(crate) fn encode_value(v: &str) -> String {
    let looks_encoded = v.starts_with("=?base64?") && v.ends_with("?=");
    let plain = !v.is_empty()
        && v.bytes().all(|b| (0x20..=0x7e).contains(&b))
        && !v.starts_with(' ')
        && !v.ends_with(' ')
        && !looks_encoded;
    if plain {
        v.to_string()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(v.as_bytes())
        )
    }
}

/// Check a modern message's headers against its body: the version equals the `_meta` version,
/// `Mcp-Method` the method, and `Mcp-Name` (decoded) the name of a named method; a message
/// that names nothing carries no `Mcp-Name`. Each header exactly once.
pub(crate) fn check_binding(
    c: &Canonical,
    headers: &(impl HeaderSource + ?Sized),
) -> Result<(), Mismatch> {
    let Claim::Modern(version) = claim(c) else {
        return Err(Mismatch::Version);
    };
    if one(headers, "mcp-protocol-version") != Some(version.as_str()) {
        return Err(Mismatch::Version);
    }
    let message = c.message();
    if one(headers, "mcp-method") != Some(message.method()) {
        return Err(Mismatch::Method);
    }
    let named = NAMED_METHODS.contains(&message.method());
    let present = !headers.values("mcp-name").is_empty();
    if !named {
        return if present { Err(Mismatch::Name) } else { Ok(()) };
    }
    let header = one(headers, "mcp-name").and_then(decode_value);
    match (header.as_deref(), named_value(message)) {
        (Some(h), Some(b)) if h == b => Ok(()),
        _ => Err(Mismatch::Name),
    }
}

/// How the HTTP front admits a parsed message: `None` for a legacy one (its session and
/// negotiated version decide), or, for a modern one (a `_meta` version in the body, or a modern
/// `MCP-Protocol-Version` header), whether its headers bind to its body. Over HTTP a version
/// claim in either place makes the request modern, so it cannot pick the era with weaker rules.
pub(crate) fn admit(
    c: &Canonical,
    headers: &(impl HeaderSource + ?Sized),
) -> Option<Result<(), Mismatch>> {
    let header_modern = headers
        .values("mcp-protocol-version")
        .iter()
        .any(|v| std::str::from_utf8(v).is_ok_and(|v| is_modern(v.trim())));
    if claim(c) == Claim::Legacy && !header_modern {
        return None;
    }
    Some(check_binding(c, headers))
}

/// The headers a modern message carries downstream, derived from the canonical message itself.
pub(crate) fn downstream_headers(
    message: &serde_json::Value,
) -> Option<Vec<(&'static str, String)>> {
    let params = message.get("params")?;
    let version = params.get("_meta")?.get(META_VERSION)?.as_str()?;
    let method = message.get("method")?.as_str()?;
    let mut out = vec![
        ("mcp-protocol-version", version.to_string()),
        // Compared raw by `check_binding`: method names are never sentinel-encoded.
        ("mcp-method", method.to_string()),
    ];
    if NAMED_METHODS.contains(&method) {
        let key = if method == "resources/read" {
            "uri"
        } else {
            "name"
        };
        if let Some(name) = params.get(key).and_then(|n| n.as_str()) {
            out.push(("mcp-name", encode_value(name)));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::{parse, Limits};

    fn call(name: &str, version: &str) -> Canonical {
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{name}","arguments":{{}},"_meta":{{"{META_VERSION}":"{version}","{META_CAPABILITIES}":{{}}}}}}}}"#
        );
        parse(text.as_bytes(), &Limits::default()).expect("canonical")
    }

    /// The binding headers of a request: the version (when sent), the method, and each
    /// `Mcp-Name` given.
    fn headers<'a>(
        version: Option<&'a [u8]>,
        method: &'a [u8],
        names: &[&'a [u8]],
    ) -> Vec<(&'static str, &'a [u8])> {
        let mut out: Vec<(&'static str, &'a [u8])> = Vec::new();
        if let Some(v) = version {
            out.push(("mcp-protocol-version", v));
        }
        out.push(("mcp-method", method));
        out.extend(names.iter().map(|n| ("mcp-name", *n)));
        out
    }

    #[test]
    fn binding_holds_only_when_every_header_equals_the_body() {
        let c = call("delete_everything", "2026-07-28");
        let (v, m, name) = (
            Some(&b"2026-07-28"[..]),
            &b"tools/call"[..],
            &b"delete_everything"[..],
        );
        assert_eq!(check_binding(&c, headers(v, m, &[name]).as_slice()), Ok(()));
        let encoded = encode_value("delete_everything ");
        let cases = [
            (headers(None, m, &[name]), Mismatch::Version),
            (headers(Some(b"2025-11-25"), m, &[name]), Mismatch::Version),
            (headers(v, b"tools/list", &[name]), Mismatch::Method),
            (headers(v, b"Tools/Call", &[name]), Mismatch::Method),
            (headers(v, m, &[b"echo"]), Mismatch::Name),
            (headers(v, m, &[]), Mismatch::Name),
            (headers(v, m, &[b"echo", name]), Mismatch::Name),
            (headers(v, m, &[encoded.as_bytes()]), Mismatch::Name),
            (headers(v, m, &[b"=?base64?!!?="]), Mismatch::Name),
        ];
        for (headers, want) in cases {
            assert_eq!(
                check_binding(&c, headers.as_slice()),
                Err(want),
                "{headers:?}"
            );
        }
        let sentinel = encode_value("delete_everything");
        assert_eq!(sentinel, "delete_everything");
        let b64 = format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode("delete_everything")
        );
        let encoded_ok = headers(v, m, &[b64.as_bytes()]);
        assert_eq!(check_binding(&c, encoded_ok.as_slice()), Ok(()));
    }

    #[test]
    fn a_version_is_read_and_written_as_its_name() {
        for text in ["2024-11-05", "2025-06-18", "2026-07-28", "0000-00-00"] {
            let v = Version::parse(text).expect("a version");
            assert_eq!(v.to_string(), text);
            let json = serde_json::to_string(&v).expect("serializes");
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(serde_json::from_str::<Version>(&json).ok(), Some(v));
        }
        for text in [
            "2026-7-28",
            "2026-07-28 ",
            "x",
            "",
            "2026/07/28",
            "२०२६-07-28",
        ] {
            assert_eq!(Version::parse(text), None, "{text:?}");
            assert!(serde_json::from_str::<Version>(&format!("{text:?}")).is_err());
        }
        assert!(KNOWN_LEGACY.windows(2).all(|w| w[0] < w[1]));
        assert!(DEFAULT_VERSIONS.windows(2).all(|w| w[0] < w[1]));
        assert!(MODERN_FIRST.is_modern() && !KNOWN_LEGACY.iter().any(|v| v.is_modern()));
        let agreed = Version::new(2025, 11, 25);
        assert!(session_accepts_header(agreed, "2025-11-25"));
        assert!(session_accepts_header(agreed, "2025-06-18"));
        assert!(!session_accepts_header(agreed, "2026-07-28"));
        assert!(!session_accepts_header(agreed, "2025-01-01"));
        assert!(!session_accepts_header(agreed, "2025-11-25 "));
    }

    #[test]
    fn eras() {
        assert_eq!(
            claim(&call("echo", "2026-07-28")),
            Claim::Modern("2026-07-28".into())
        );
        assert!(is_modern("2026-07-28") && !is_modern("2025-11-25") && !is_modern("x"));
    }
}
