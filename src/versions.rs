//! MCP protocol versions as the suite knows them: which exist, which era each belongs to, and the
//! per-request metadata a modern (2026-07-28 and later) request carries in its body and, over
//! HTTP, mirrors into headers.
//!
//! Legacy versions (2025-11-25 and earlier) agree on a version once, with `initialize`, and HTTP
//! keeps it in a session. Modern versions have no handshake and no session: every request names
//! its version and the client's capabilities in `params._meta`, and over HTTP the
//! `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers must equal the body.

use base64::Engine as _;
use serde_json::{json, Map, Value};

/// An MCP protocol version: a `YYYY-MM-DD` date, ordered as dates are, read and written (and
/// serialized) as that string. The suite's face of the gate's [`reference_gate::Version`], so
/// that version text has one parser in the workspace (`Version::parse`); what a server or a
/// client sent on the wire stays text until it is read with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version(reference_gate::Version);

/// Text that is not a version (`YYYY-MM-DD`, digits and dashes only).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a version (YYYY-MM-DD)")]
pub struct NotAVersion(pub String);

impl Version {
    pub const fn new(year: u16, month: u8, day: u8) -> Version {
        Version(reference_gate::Version::new(year, month, day))
    }

    /// `YYYY-MM-DD`, digits and dashes only (not checked as a calendar date: a version is a
    /// name that sorts as one).
    pub fn parse(text: &str) -> Option<Version> {
        reference_gate::Version::parse(text).map(Version)
    }

    /// Of the modern era (2026-07-28 and later): no handshake, no session, every request
    /// names its version.
    pub(crate) fn is_modern(self) -> bool {
        self >= MODERN_FIRST
    }

    /// Of a version whose JSON-RPC takes batch arrays (2025-03-26 and before: 2025-03-26
    /// requires a receiver to take them, 2024-11-05 follows JSON-RPC 2.0; 2025-06-18 removed
    /// them).
    pub(crate) fn has_batches(self) -> bool {
        self <= Version::new(2025, 3, 26)
    }

    /// One of the versions the suite runs ([`KNOWN`]).
    pub(crate) fn is_known(self) -> bool {
        KNOWN.contains(&self)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for Version {
    type Err = NotAVersion;
    fn from_str(s: &str) -> Result<Version, NotAVersion> {
        Version::parse(s).ok_or_else(|| NotAVersion(s.to_string()))
    }
}

impl PartialEq<str> for Version {
    fn eq(&self, other: &str) -> bool {
        Version::parse(other) == Some(*self)
    }
}

impl PartialEq<&str> for Version {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

impl serde::Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Version {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Version, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// In a case file's schema: the string it is written as.
impl schemars::JsonSchema for Version {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Version".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$",
            "description": "A protocol version, YYYY-MM-DD"
        })
    }
}

/// Every published MCP protocol version, oldest first: what a server may answer `initialize`
/// with (the suite runs the newer ones, [`KNOWN`]).
pub(crate) const PUBLISHED: &[Version] = &[
    Version::new(2024, 11, 5),
    Version::new(2025, 3, 26),
    Version::new(2025, 6, 18),
    NEWEST_LEGACY,
    MODERN_FIRST,
];

/// Versions the suite runs, oldest first (`--spec all`).
pub const KNOWN: &[Version] = &[Version::new(2025, 6, 18), NEWEST_LEGACY, MODERN_FIRST];
/// The version of the HTTP+SSE transport (a GET event stream, POSTs to the URL it names): its
/// lanes speak it, and only it.
pub const SSE: Version = Version::new(2024, 11, 5);
/// The first version without a handshake.
pub(crate) const MODERN_FIRST: Version = Version::new(2026, 7, 28);
/// The newest version the suite knows.
pub(crate) const NEWEST: Version = MODERN_FIRST;
/// The legacy version the runner asks for in `initialize` when it probes a target.
pub(crate) const NEWEST_LEGACY: Version = Version::new(2025, 11, 25);

/// The known versions as the text they are written as (`2025-06-18, 2025-11-25, …`).
pub(crate) fn known_list() -> String {
    list(KNOWN, ", ")
}

/// Versions as text, `sep` between them.
pub fn list(versions: &[Version], sep: &str) -> String {
    versions
        .iter()
        .map(Version::to_string)
        .collect::<Vec<_>>()
        .join(sep)
}

/// `_meta` keys of the per-request protocol fields.
pub(crate) const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub(crate) const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub(crate) const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";

/// The 2026-07-28 error codes (reserved sub-range -32020..=-32099).
pub(crate) const HEADER_MISMATCH: i64 = -32020;
pub(crate) const MISSING_CAPABILITY: i64 = -32021;
pub(crate) const UNSUPPORTED_VERSION: i64 = -32022;

/// Methods whose `Mcp-Name` header mirrors `params.name` or `params.uri`.
pub(crate) const NAMED_METHODS: &[&str] = &["tools/call", "resources/read", "prompts/get"];

/// Whether version text (as a message or a header carries it) names a modern version.
pub(crate) fn is_modern(version: &str) -> bool {
    Version::parse(version).is_some_and(Version::is_modern)
}

/// Which versions a run uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// Every known version the target accepts, found by probing it (`accepted`, the default;
    /// `all` means the same): an attacker picks the weakest version a server takes, so each
    /// one is tested, and none it does not offer.
    Accepted,
    /// The newest version the target accepts, found by probing it.
    Newest,
    /// These (one or more, comma-separated on the command line), each with its own lanes,
    /// whatever the target offers.
    These(Vec<Version>),
}

impl std::str::FromStr for Spec {
    type Err = String;
    fn from_str(s: &str) -> Result<Spec, String> {
        match s {
            "accepted" | "all" => Ok(Spec::Accepted),
            "newest" => Ok(Spec::Newest),
            list => {
                let mut out = Vec::new();
                for v in list.split(',').map(str::trim) {
                    let Some(v) = Version::parse(v) else {
                        return Err(format!(
                            "`{v}` is not a version (YYYY-MM-DD), `accepted`, `all` or `newest`; known: {}",
                            known_list()
                        ));
                    };
                    if !out.contains(&v) {
                        out.push(v);
                    }
                }
                out.sort();
                Ok(Spec::These(out))
            }
        }
    }
}

/// The `_meta` a modern request carries.
pub(crate) fn request_meta(version: Version) -> Value {
    json!({
        META_VERSION: version,
        META_CAPABILITIES: {},
        META_CLIENT_INFO: {"name": "mcp-gauntlet", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// Give a request (or each request in an array) the modern `_meta`: `params` is created when
/// absent; a `_meta` object the case wrote keeps its members and gains the missing protocol
/// fields; a `params` or `_meta` that is not an object is left as the case wrote it. Responses
/// and non-objects are left alone.
pub(crate) fn add_meta(message: &mut Value, version: Version) {
    add_meta_value(message, &request_meta(version));
}

/// [`add_meta`] with a given `_meta` value.
pub(crate) fn add_meta_value(message: &mut Value, meta: &Value) {
    match message {
        Value::Array(items) => items.iter_mut().for_each(|m| add_meta_value(m, meta)),
        Value::Object(o) if o.get("method").is_some_and(Value::is_string) => {
            let params = o
                .entry("params")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(p) = params {
                match (p.get_mut("_meta"), meta) {
                    // The case's own `_meta` keeps its members; the protocol's missing ones join.
                    (Some(Value::Object(own)), Value::Object(add)) => {
                        for (k, v) in add {
                            if !own.contains_key(k) {
                                own.insert(k.clone(), v.clone());
                            }
                        }
                    }
                    (Some(_), _) => {}
                    (None, _) => {
                        p.insert("_meta".into(), meta.clone());
                    }
                }
            }
        }
        _ => {}
    }
}

/// The version a message names in `params._meta`, if it names one (as any JSON value).
pub(crate) fn meta_version(message: &Value) -> Option<&Value> {
    message.get("params")?.get("_meta")?.get(META_VERSION)
}

/// The headers a conforming modern client sends for `message`: `Mcp-Method` always (when the
/// method is a string), `Mcp-Name` for the named methods, the sentinel encoding when the name
/// is not a plain header value.
pub(crate) fn mirrored_headers(message: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return out;
    };
    // Method names are plain ASCII; only names and parameter values use the sentinel encoding.
    out.push(("mcp-method".to_string(), method.to_string()));
    if NAMED_METHODS.contains(&method) {
        let params = message.get("params");
        let name = params
            .and_then(|p| p.get("name").or_else(|| p.get("uri")))
            .and_then(Value::as_str);
        if let Some(name) = name {
            out.push(("mcp-name".to_string(), header_value(name)));
        }
    }
    out
}

/// A header value as the 2026-07-28 value encoding says: as-is when it is visible ASCII with
/// inner spaces only and does not look like the sentinel, else `=?base64?…?=`.
pub(crate) fn header_value(v: &str) -> String {
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

/// Decode a header value that may use the sentinel encoding. `None` when the sentinel's payload
/// is not base64 of UTF-8.
pub(crate) fn decode_header_value(v: &str) -> Option<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eras() {
        assert!(!is_modern("2025-11-25"));
        assert!(is_modern("2026-07-28"));
        assert!(is_modern("2099-01-01"));
        assert!(!is_modern("2026-07-28 "));
        assert!(!is_modern("latest"));
        assert!(SSE.has_batches() && Version::new(2025, 3, 26).has_batches());
        assert!(!Version::new(2025, 6, 18).has_batches() && !MODERN_FIRST.has_batches());
    }

    #[test]
    fn a_version_reads_and_writes_as_its_text_and_sorts_as_a_date() {
        for text in ["2025-06-18", "2025-11-25", "2026-07-28", "0001-00-09"] {
            let v: Version = text.parse().expect("a version");
            assert_eq!(v.to_string(), text);
            assert_eq!(serde_json::to_value(v).expect("serializes"), json!(text));
            assert_eq!(serde_json::from_value::<Version>(json!(text)).ok(), Some(v));
        }
        for text in [
            "2025-6-18",
            "2025-06-18 ",
            "latest",
            "",
            "2025/06/18",
            "２０２５-06-18",
        ] {
            assert_eq!(Version::parse(text), None, "{text}");
            assert!(serde_json::from_value::<Version>(json!(text)).is_err());
        }
        assert!(Version::new(2025, 6, 18) < NEWEST_LEGACY && NEWEST_LEGACY < MODERN_FIRST);
        assert!(Version::new(2099, 1, 1).is_modern() && !NEWEST_LEGACY.is_modern());
        assert!(KNOWN.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(known_list(), "2025-06-18, 2025-11-25, 2026-07-28");
    }

    #[test]
    fn meta_is_added_once_and_never_over_the_case() {
        let mut m =
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}});
        add_meta(&mut m, MODERN_FIRST);
        assert_eq!(meta_version(&m), Some(&json!("2026-07-28")));
        let mut own = json!({"jsonrpc": "2.0", "id": 1, "method": "ping",
            "params": {"_meta": {"x": 1, META_VERSION: "2099-01-01"}}});
        add_meta(&mut own, MODERN_FIRST);
        assert_eq!(meta_version(&own), Some(&json!("2099-01-01")));
        assert_eq!(own["params"]["_meta"]["x"], 1);
        assert!(own["params"]["_meta"][META_CAPABILITIES].is_object());
        let mut odd = json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": 5}});
        add_meta(&mut odd, MODERN_FIRST);
        assert_eq!(odd["params"]["_meta"], 5);
        let mut batch = json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"result": {}}]);
        add_meta(&mut batch, MODERN_FIRST);
        assert!(meta_version(&batch[0]).is_some());
        assert!(batch[1].get("params").is_none());
    }

    #[test]
    fn names_use_the_sentinel_when_not_plain() {
        assert_eq!(header_value("echo"), "echo");
        let enc = header_value("délete");
        assert!(enc.starts_with("=?base64?"));
        assert_eq!(decode_header_value(&enc).as_deref(), Some("délete"));
        assert!(header_value(" padded").starts_with("=?base64?"));
        assert!(header_value("=?base64?x?=").starts_with("=?base64?"));
        assert_eq!(decode_header_value("=?base64?!!?="), None);
        let m = json!({"method": "tools/call", "params": {"name": "echo"}});
        assert_eq!(
            mirrored_headers(&m),
            vec![
                ("mcp-method".to_string(), "tools/call".to_string()),
                ("mcp-name".to_string(), "echo".to_string())
            ]
        );
    }
}
