//! The strict canonical parser: exactly one JSON-RPC message in, one canonical message out.
//!
//! Written by hand for this job: it refuses everything two readers could read differently —
//! duplicate member names at any depth (compared after unescaping), invalid UTF-8, a BOM, lone
//! surrogates, trailing bytes, JSON extensions — and enforces its limits while reading. What it
//! accepts re-serializes deterministically ([`Canonical::forwarding_bytes`]): the bytes the policy
//! decided on are the only bytes that go downstream.
//!
//! Canonical form: no insignificant whitespace; strings with minimal escaping (`"`, `\`, and
//! control characters; everything else as UTF-8); numbers in their original lexical form (never
//! re-computed, so a value cannot change on the way through); envelope members in the order
//! `jsonrpc`, `id`, `method`, `params`; `tools/call` params in the order `name`, `arguments`,
//! `_meta`; every other object's members sorted by their UTF-8 bytes.
//!
//! Its parts: `grammar.rs` (the JSON grammar and the canonical writer), `envelope.rs` (a
//! client's message: envelope, id, tool-call params) and `reply.rs` (the downstream's replies).

mod envelope;
mod grammar;
mod reply;

use envelope::*;
use grammar::*;
pub(crate) use reply::parse_incoming;
pub use reply::{CanonicalReply, Incoming, Outcome, Reply};
use std::fmt;

/// Hard limits, enforced while reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest message in bytes.
    pub max_bytes: usize,
    /// Deepest nesting of arrays and objects.
    pub max_depth: usize,
    /// Most members in one object.
    pub max_members: usize,
    /// Most elements in one array.
    pub max_elements: usize,
    /// Longest string, in bytes after unescaping.
    pub max_string: usize,
    /// Longest number literal.
    pub max_number: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: 1024 * 1024,
            max_depth: 64,
            max_members: 1024,
            max_elements: 16 * 1024,
            max_string: 512 * 1024,
            max_number: 64,
        }
    }
}

/// Why input was refused. Deliberately opaque: only the kind is public, and nothing of it ever
/// reaches a client (the client sees the fixed malformed answer).
#[derive(Clone, PartialEq, Eq)]
pub struct Malformed {
    kind: MalformedKind,
}

/// The classes of refusal, for tests and traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MalformedKind {
    /// Not JSON: grammar, trailing bytes, extensions.
    Syntax,
    /// Not UTF-8, a BOM, a lone surrogate, a raw control character.
    Encoding,
    /// The same member name twice in one object (after unescaping).
    DuplicateMember,
    /// A limit was exceeded.
    Limit,
    /// Valid JSON, but not one JSON-RPC request or notification as MCP allows.
    Envelope,
    /// A `tools/call` whose params are not a plain name, an object of arguments and optional `_meta`.
    ToolCall,
}

impl Malformed {
    fn new(kind: MalformedKind) -> Malformed {
        Malformed { kind }
    }

    pub fn kind(&self) -> MalformedKind {
        self.kind
    }
}

impl fmt::Debug for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Malformed({:?})", self.kind)
    }
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed message ({:?})", self.kind)
    }
}

impl std::error::Error for Malformed {}

/// A parsed JSON value. Numbers keep their lexical form; objects keep members in input order
/// (duplicates were refused), and are ordered canonically only when written.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    /// Canonical bytes of this value (objects' members sorted by their UTF-8 bytes).
    pub(crate) fn to_canonical(&self) -> Vec<u8> {
        let mut out = Vec::new();
        write_value(&mut out, self);
        out
    }
}

/// A JSON-RPC id as MCP allows it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Id {
    Str(String),
    Int(i64),
}

impl Id {
    fn to_json(&self) -> Json {
        match self {
            Id::Str(s) => Json::String(s.clone()),
            Id::Int(i) => Json::Number(i.to_string()),
        }
    }

    /// The id as JSON text.
    pub(crate) fn to_canonical(&self) -> Vec<u8> {
        self.to_json().to_canonical()
    }
}

/// Largest id magnitude: 2^53 - 1.
pub(crate) const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// A canonical MCP message from a client.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request {
        id: Id,
        method: String,
        params: Option<Vec<(String, Json)>>,
    },
    Notification {
        method: String,
        params: Option<Vec<(String, Json)>>,
    },
}

impl Message {
    pub fn method(&self) -> &str {
        match self {
            Message::Request { method, .. } | Message::Notification { method, .. } => method,
        }
    }

    pub fn params(&self) -> Option<&Vec<(String, Json)>> {
        match self {
            Message::Request { params, .. } | Message::Notification { params, .. } => {
                params.as_ref()
            }
        }
    }

    /// One member of `params`.
    pub fn param(&self, key: &str) -> Option<&Json> {
        self.params()?
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    pub fn id(&self) -> Option<&Id> {
        match self {
            Message::Request { id, .. } => Some(id),
            Message::Notification { .. } => None,
        }
    }
}

/// A `tools/call` request after canonicalization: what the policy sees.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CanonicalToolCall {
    pub id: Id,
    pub name: String,
    /// The arguments object (empty when absent).
    pub arguments: Json,
}

/// One accepted message with its canonical bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Canonical {
    message: Message,
    bytes: Vec<u8>,
}

impl Canonical {
    /// A message the gate builds from parts it validated (a mapped id, a normalized URI).
    pub(crate) fn new(message: Message) -> Canonical {
        let bytes = write_message(&message);
        Canonical { message, bytes }
    }

    pub fn message(&self) -> &Message {
        &self.message
    }

    /// The deterministic re-serialization: the only bytes that may go downstream.
    pub fn forwarding_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The tool call, when this is a `tools/call` request.
    pub(crate) fn tool_call(&self) -> Option<CanonicalToolCall> {
        match &self.message {
            Message::Request { id, method, params } if method == "tools/call" => {
                let params = params.as_ref()?;
                let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v);
                Some(CanonicalToolCall {
                    id: id.clone(),
                    name: get("name")?.as_str()?.to_string(),
                    arguments: get("arguments")
                        .cloned()
                        .unwrap_or(Json::Object(Vec::new())),
                })
            }
            _ => None,
        }
    }
}

/// Parse exactly one client message.
pub fn parse(bytes: &[u8], limits: &Limits) -> Result<Canonical, Malformed> {
    parse_with(bytes, limits, Leniency::STRICT)
}

pub(crate) use crate::faults::Leniency;

/// The fault-injection parser (see `faults::Faults`). Never used by a correct gate, and not
/// compiled without the `faults` feature.
#[cfg(feature = "faults")]
pub fn parse_leniently(
    bytes: &[u8],
    limits: &Limits,
    leniency: Leniency,
) -> Result<Canonical, Malformed> {
    parse_with(bytes, limits, leniency)
}

fn parse_value(bytes: &[u8], limits: &Limits, len: Leniency) -> Result<Json, Malformed> {
    if bytes.len() > limits.max_bytes {
        return Err(Malformed::new(MalformedKind::Limit));
    }
    #[cfg(feature = "faults")]
    let repaired;
    #[cfg(feature = "faults")]
    let text = if len.lenient_grammar() {
        repaired = loosen(&String::from_utf8_lossy(bytes));
        repaired.trim_start_matches('\u{feff}')
    } else {
        strict_text(bytes)?
    };
    #[cfg(not(feature = "faults"))]
    let text = strict_text(bytes)?;
    let mut p = Parser::new(text, limits, len);
    p.ws();
    let value = p.value()?;
    p.ws();
    if !p.at_end() && !len.first_value_only() {
        return Err(Malformed::new(MalformedKind::Syntax));
    }
    Ok(value)
}

/// UTF-8 first: every later step works on text that is known to be valid.
fn strict_text(bytes: &[u8]) -> Result<&str, Malformed> {
    let text = std::str::from_utf8(bytes).map_err(|_| Malformed::new(MalformedKind::Encoding))?;
    if text.starts_with('\u{feff}') {
        return Err(Malformed::new(MalformedKind::Encoding));
    }
    Ok(text)
}

fn parse_with(bytes: &[u8], limits: &Limits, len: Leniency) -> Result<Canonical, Malformed> {
    let value = parse_value(bytes, limits, len)?;
    let message = envelope(value, len)?;
    Ok(Canonical::new(message))
}

#[cfg(test)]
mod tests {

    #[test]
    fn names_that_fold_to_a_protected_one_imitate_it() {
        for name in [
            "Name",
            "ARGUMENTS",
            "argument\u{17f}",
            "\u{130}d",
            "\u{131}D",
            "_Meta",
            "tas\u{212a}",
        ] {
            assert!(imitates_protected(name), "{name:?}");
        }
        for name in [
            "name",
            "arguments",
            "names",
            "nam",
            "",
            "n\u{e1}me",
            "\u{212a}",
        ] {
            assert!(!imitates_protected(name), "{name:?}");
        }
    }
    use super::*;

    fn ok(s: &str) -> Canonical {
        parse(s.as_bytes(), &Limits::default()).unwrap_or_else(|e| panic!("{s}: {e:?}"))
    }

    fn kind(s: &[u8]) -> MalformedKind {
        parse(s, &Limits::default())
            .expect_err(&String::from_utf8_lossy(s))
            .kind()
    }

    #[test]
    fn canonical_bytes_are_fixed_whatever_the_spelling() {
        let want = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":"hi/é","b":[1,2.50,-3e2]}}}"#;
        for input in [
            want,
            " {\r\n\"params\" : {\"arguments\":{\"b\":[1, 2.50, -3e2],\"a\":\"h\\u0069\\/\\u00e9\"},\"name\":\"ec\\u0068o\"},\t\"method\":\"tools\\/call\",\"id\":1,\"jsonrpc\":\"2.0\"} ",
        ] {
            let c = ok(input);
            assert_eq!(String::from_utf8_lossy(c.forwarding_bytes()), want);
            // Canonical bytes are a fixed point.
            assert_eq!(ok(want).forwarding_bytes(), c.forwarding_bytes());
        }
        let call = ok(want).tool_call().unwrap();
        assert_eq!((call.id, call.name.as_str()), (Id::Int(1), "echo"));
    }

    #[test]
    fn refuses_each_input_class() {
        use MalformedKind::*;
        let denied = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_everything"}}"#;
        assert_eq!(kind(format!("[{denied}]").as_bytes()), Envelope);
        assert_eq!(
            kind(br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#),
            DuplicateMember
        );
        assert_eq!(kind(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","n\u0061me":"delete_everything"}}"#), DuplicateMember);
        assert_eq!(kind(b"\xef\xbb\xbf{}"), Encoding);
        assert_eq!(kind(b"{\"a\":\"\xff\"}"), Encoding);
        assert_eq!(kind(br#"{"a":"\ud800"}"#), Encoding);
        assert_eq!(kind(br#"{"a":"\udc00\ud800"}"#), Encoding);
        assert!(parse(format!("{denied} \r\n").as_bytes(), &Limits::default()).is_ok());
        assert_eq!(kind(format!("{denied}{denied}").as_bytes()), Syntax);
        assert_eq!(kind(b"{\"a\":1,}"), Syntax);
        assert_eq!(kind(b"{\"a\":NaN}"), Syntax);
        assert_eq!(kind(b"{\"a\":01}"), Syntax);
        assert_eq!(kind(b"{\"a\":\"\t\"}"), Encoding);
        assert_eq!(kind(b"\"foo\""), Envelope);
        for id in [
            "null",
            "1.5",
            "true",
            "1e2",
            "-0",
            "9007199254740992",
            "{}",
            "[]",
        ] {
            let m = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            assert_eq!(kind(m.as_bytes()), Envelope, "id {id}");
        }
        for env in [
            r#"{"jsonrpc":"2.0 ","id":1,"method":"ping"}"#,
            r#"{"id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}"#,
        ] {
            assert_eq!(kind(env.as_bytes()), Envelope, "{env}");
        }
        for name in [
            "\"delete_everything \"",
            "\"\"",
            "\"a\\u0000\"",
            "\"a\\u200bb\"",
            "\"d\u{435}lete\"",
            "1",
            "null",
        ] {
            let m = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":{name}}}}}"#
            );
            assert_eq!(kind(m.as_bytes()), ToolCall, "name {name}");
        }
        assert_eq!(
            kind(br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}"#),
            Envelope
        );
        assert_eq!(kind(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","Name":"x"}}"#), Envelope);
        assert_eq!(kind(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","param\u017f":1}}"#), Envelope);
        assert_eq!(kind(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":[]}}"#), ToolCall);
    }

    /// A 2026-07-28 retry carries the client's answers to the server's input requests and the
    /// state the server gave it: typed, forwarded canonically, never imitated.
    #[test]
    fn a_tool_call_retry_carries_input_responses_and_request_state() {
        use MalformedKind::{Envelope, ToolCall};
        let retry = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"requestState":"s-1","inputResponses":{"q":{"action":"accept"}},"arguments":{},"name":"echo"}}"#;
        let c = parse(retry, &Limits::default()).expect("a retry parses");
        assert_eq!(
            c.forwarding_bytes(),
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{},"inputResponses":{"q":{"action":"accept"}},"requestState":"s-1"}}"#
        );
        assert_eq!(c.tool_call().map(|t| t.name), Some("echo".to_string()));
        for bad in [
            r#""inputResponses":[]"#,
            r#""inputResponses":"x""#,
            r#""requestState":{}"#,
            r#""requestState":1"#,
        ] {
            let m = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo",{bad}}}}}"#
            );
            assert_eq!(kind(m.as_bytes()), ToolCall, "{bad}");
        }
        assert_eq!(kind(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","inputResponses":{},"InputResponses":{}}}"#), Envelope);
    }

    #[test]
    fn limits_hold_while_reading() {
        let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert_eq!(kind(deep.as_bytes()), MalformedKind::Limit);
        let small = Limits {
            max_bytes: 10,
            ..Limits::default()
        };
        assert_eq!(
            parse(b"{\"jsonrpc\":\"2.0\"}", &small).unwrap_err().kind(),
            MalformedKind::Limit
        );
        let long_number = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"n":{}}}}}"#,
            "1".repeat(100)
        );
        assert_eq!(kind(long_number.as_bytes()), MalformedKind::Limit);
    }

    #[test]
    fn escaped_denied_name_is_the_denied_name() {
        let c = ok(
            r#"{"jsonrpc":"2.0","id":"x","method":"tools\/c\u0061ll","params":{"name":"delete\u005feverything"}}"#,
        );
        let call = c.tool_call().unwrap();
        assert_eq!(call.name, "delete_everything");
        assert_eq!(
            String::from_utf8_lossy(c.forwarding_bytes()),
            r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"delete_everything"}}"#
        );
    }

    #[test]
    fn notifications_and_strings_round_trip() {
        let c = ok(r#"{"method":"notifications/initialized","jsonrpc":"2.0"}"#);
        assert!(c.message().id().is_none());
        let tricky =
            ok("{\"jsonrpc\":\"2.0\",\"id\":\"\\u0001\\\"\\\\\\n\u{1F600}\",\"method\":\"ping\"}");
        let again = ok(std::str::from_utf8(tricky.forwarding_bytes()).unwrap());
        assert_eq!(again.forwarding_bytes(), tricky.forwarding_bytes());
    }

    #[test]
    fn numbers_beyond_a_double_are_refused() {
        let l = Limits::default();
        let call = |n: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"add","arguments":{{"a":{n},"b":1}}}}}}"#
            )
        };
        for n in ["1e400", "-1e309", "292e88888888"] {
            assert_eq!(
                parse(call(n).as_bytes(), &l)
                    .map(|_| ())
                    .map_err(|e| e.kind()),
                Err(MalformedKind::Limit),
                "{n}"
            );
        }
        for n in ["1e308", "-2.5e-400", "0.1", "12345678901234567890"] {
            assert!(parse(call(n).as_bytes(), &l).is_ok(), "{n}");
        }
    }
}
