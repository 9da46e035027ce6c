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

/// Envelope members a client message may carry.
const ENVELOPE: &[&str] = &["jsonrpc", "id", "method", "params"];
/// `tools/call` params members: the call, and a 2026-07-28 retry's answers to the server's input
/// requests with the state the server gave it.
const TOOL_PARAMS: &[&str] = &[
    "name",
    "arguments",
    "_meta",
    "inputResponses",
    "requestState",
];
/// Member names that a case- or Unicode-folded variant may not imitate.
const PROTECTED: &[&str] = &[
    "jsonrpc",
    "id",
    "method",
    "params",
    "result",
    "error",
    "name",
    "arguments",
    "_meta",
    "task",
    "inputResponses",
    "requestState",
];

/// Parse exactly one client message.
pub fn parse(bytes: &[u8], limits: &Limits) -> Result<Canonical, Malformed> {
    parse_with(bytes, limits, Leniency::STRICT)
}

#[cfg(feature = "faults")]
/// The lenient-grammar fault's pre-pass: comments and trailing commas outside strings removed.
fn loosen(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let (mut i, mut in_str) = (0, false);
    while i < chars.len() {
        let c = chars[i];
        if in_str {
            out.push(c);
            if c == '\\' && i + 1 < chars.len() {
                out.push(chars[i + 1]);
                i += 1;
            } else if c == '"' {
                in_str = false;
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            i += 2;
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                i += 1;
            }
            i += 2;
            continue;
        } else if c == ','
            && matches!(
                chars[i + 1..].iter().find(|c| !c.is_whitespace()),
                Some('}') | Some(']')
            )
        {
            // a trailing comma: dropped
        } else {
            if c == '"' {
                in_str = true;
            }
            out.push(c);
        }
        i += 1;
    }
    out
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
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
        limits,
        depth: 0,
        len,
    };
    p.ws();
    let value = p.value()?;
    p.ws();
    if p.i != p.s.len() && !len.first_value_only() {
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

/// A JSON-RPC response after canonicalization: exactly one of a result object and an error.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub id: Id,
    pub outcome: Outcome,
}

/// What a response carries.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The result object's members.
    Result(Vec<(String, Json)>),
    /// An error: an integer code, a message, and the optional `data`.
    Error {
        code: i64,
        message: String,
        data: Option<Json>,
    },
}

/// One accepted response with its canonical bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct CanonicalReply {
    reply: Reply,
    bytes: Vec<u8>,
}

impl CanonicalReply {
    /// The response, canonically written.
    pub fn new(reply: Reply) -> CanonicalReply {
        let bytes = write_reply(&reply);
        CanonicalReply { reply, bytes }
    }

    pub fn reply(&self) -> &Reply {
        &self.reply
    }

    /// The deterministic re-serialization: the only bytes that may be relayed.
    pub fn forwarding_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The same response under another id (the gate maps ids between its two sides).
    pub(crate) fn with_id(&self, id: Id) -> CanonicalReply {
        CanonicalReply::new(Reply {
            id,
            outcome: self.reply.outcome.clone(),
        })
    }
}

/// Anything one peer may send the other: a request or notification, or a response.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Message(Canonical),
    Reply(CanonicalReply),
}

/// Parse exactly one message of either kind, with the same grammar, limits and envelope rules
/// as [`parse`] (a response's envelope is `jsonrpc`, `id` and one of `result`/`error`).
pub(crate) fn parse_incoming(bytes: &[u8], limits: &Limits) -> Result<Incoming, Malformed> {
    let value = parse_value(bytes, limits, Leniency::STRICT)?;
    let is_reply = matches!(&value, Json::Object(m)
        if !m.iter().any(|(k, _)| k == "method")
            && m.iter().any(|(k, _)| k == "result" || k == "error"));
    if is_reply {
        return Ok(Incoming::Reply(CanonicalReply::new(reply_envelope(value)?)));
    }
    Ok(Incoming::Message(Canonical::new(envelope(
        value,
        Leniency::STRICT,
    )?)))
}

fn reply_envelope(value: Json) -> Result<Reply, Malformed> {
    let Json::Object(members) = value else {
        return Err(env_err());
    };
    for (k, _) in &members {
        if !["jsonrpc", "id", "result", "error"].contains(&k.as_str()) {
            return Err(env_err());
        }
    }
    let get = |k: &str| members.iter().find(|(n, _)| n == k).map(|(_, v)| v);
    if get("jsonrpc") != Some(&Json::String("2.0".into())) {
        return Err(env_err());
    }
    let id = match get("id") {
        Some(Json::String(s)) => Id::Str(s.clone()),
        Some(Json::Number(n)) => Id::Int(integer_id(n)?),
        _ => return Err(env_err()),
    };
    let outcome = match (get("result"), get("error")) {
        (Some(Json::Object(r)), None) => Outcome::Result(r.clone()),
        (None, Some(Json::Object(e))) => {
            for (k, _) in e {
                if !["code", "message", "data"].contains(&k.as_str()) {
                    return Err(env_err());
                }
            }
            let e = Json::Object(e.clone());
            let code = match e.get("code") {
                Some(Json::Number(n)) => integer_id(n)?,
                _ => return Err(env_err()),
            };
            let Some(Json::String(message)) = e.get("message") else {
                return Err(env_err());
            };
            Outcome::Error {
                code,
                message: message.clone(),
                data: e.get("data").cloned(),
            }
        }
        _ => return Err(env_err()),
    };
    Ok(Reply { id, outcome })
}

fn write_reply(r: &Reply) -> Vec<u8> {
    let mut out = br#"{"jsonrpc":"2.0","id":"#.to_vec();
    write_value(&mut out, &r.id.to_json());
    match &r.outcome {
        Outcome::Result(members) => {
            out.extend_from_slice(b",\"result\":");
            write_members(&mut out, ordered(members, &[]).into_iter());
        }
        Outcome::Error {
            code,
            message,
            data,
        } => {
            out.extend_from_slice(format!(r#","error":{{"code":{code},"message":"#).as_bytes());
            write_string(&mut out, message);
            if let Some(d) = data {
                out.extend_from_slice(b",\"data\":");
                write_value(&mut out, d);
            }
            out.push(b'}');
        }
    }
    out.push(b'}');
    out
}

fn env_err() -> Malformed {
    Malformed::new(MalformedKind::Envelope)
}

/// Folded form of a member name for look-alike checks: ASCII case and the Unicode characters
/// that case-fold onto ASCII letters (U+017F long s, U+212A Kelvin sign, U+0130/U+0131 dotted I).
/// Whether `name`, folded (ASCII case, and the non-ASCII letters that some readers fold to
/// ASCII ones: long s, Kelvin sign, dotted and dotless i), is the ASCII name `ascii`. Compares
/// char by char, allocating nothing: it runs for every member of every `params`.
fn folds_to(name: &str, ascii: &str) -> bool {
    // Every char is at least one byte: a shorter name cannot fold to `ascii`.
    if name.len() < ascii.len() {
        return false;
    }
    let mut want = ascii.bytes();
    for c in name.chars() {
        let folded = match c {
            '\u{17f}' => 's',
            '\u{212a}' => 'k',
            '\u{130}' | '\u{131}' => 'i',
            c => c.to_ascii_lowercase(),
        };
        match want.next() {
            Some(b) if u32::from(folded) == u32::from(b.to_ascii_lowercase()) => {}
            _ => return false,
        }
    }
    want.next().is_none()
}

fn imitates_protected(name: &str) -> bool {
    PROTECTED.iter().any(|p| *p != name && folds_to(name, p))
}

/// The lax-envelope fault's pre-pass: unknown members dropped, non-object params dropped, a null
/// id removed (a notification then), any other id type turned into a string.
#[cfg(feature = "faults")]
fn loosen_envelope(members: &mut Vec<(String, Json)>) {
    members.retain(|(k, _)| ENVELOPE.contains(&k.as_str()));
    if let Some(at) = members
        .iter()
        .position(|(k, v)| k == "params" && !matches!(v, Json::Object(_)))
    {
        members.remove(at);
    }
    match members.iter().position(|(k, _)| k == "id") {
        Some(at) if members[at].1 == Json::Null => {
            members.remove(at);
        }
        Some(at)
            if !matches!(&members[at].1, Json::String(_))
                && !matches!(&members[at].1, Json::Number(n) if integer_id(n).is_ok()) =>
        {
            let text = String::from_utf8_lossy(&members[at].1.to_canonical()).into_owned();
            members[at].1 = Json::String(text);
        }
        _ => {}
    }
}

/// The JSON-RPC envelope rules in the order the specification states them, one early refusal
/// per rule; a `tools/call` is checked further by [`tool_call_params`].
fn envelope(value: Json, len: Leniency) -> Result<Message, Malformed> {
    let Json::Object(members) = value else {
        return Err(env_err());
    };
    #[cfg(feature = "faults")]
    let members = {
        let mut members = members;
        if len.lax_envelope() {
            loosen_envelope(&mut members);
        }
        members
    };
    for (k, _) in &members {
        if !ENVELOPE.contains(&k.as_str()) {
            return Err(env_err());
        }
    }
    let get = |k: &str| members.iter().find(|(n, _)| n == k).map(|(_, v)| v);
    if get("jsonrpc") != Some(&Json::String("2.0".into())) {
        return Err(env_err());
    }
    let method = match get("method") {
        Some(Json::String(m)) if !m.is_empty() => m.clone(),
        _ => return Err(env_err()),
    };
    match get("params") {
        None => {}
        Some(Json::Object(p))
            if !len.lax_envelope() && p.iter().any(|(k, _)| imitates_protected(k)) =>
        {
            return Err(env_err());
        }
        Some(Json::Object(_)) => {}
        Some(_) => return Err(env_err()),
    }
    let id = match get("id") {
        None => None,
        Some(Json::String(s)) => Some(Id::Str(s.clone())),
        Some(Json::Number(n)) => Some(Id::Int(integer_id(n)?)),
        Some(_) => return Err(env_err()),
    };
    // Move params out (no copy of a possibly large arguments tree).
    let params = members
        .into_iter()
        .find(|(k, _)| k == "params")
        .and_then(|(_, v)| match v {
            Json::Object(p) => Some(p),
            _ => None,
        });
    if method == "tools/call" {
        tool_call_params(id.is_some(), params.as_ref(), len)?;
    }
    Ok(match id {
        Some(id) => Message::Request { id, method, params },
        None => Message::Notification { method, params },
    })
}

/// A `tools/call` must be a request; its params a plain name, an object of arguments, and
/// optionally `_meta` and a multi-round-trip retry's `inputResponses` (an object) and
/// `requestState` (a string); nothing else.
fn tool_call_params(
    is_request: bool,
    params: Option<&Vec<(String, Json)>>,
    len: Leniency,
) -> Result<(), Malformed> {
    if !is_request && !len.lax_envelope() {
        return Err(env_err());
    }
    let tool = || Malformed::new(MalformedKind::ToolCall);
    let Some(p) = params else {
        // The careless gate lets a call it cannot read through; the proxy decides what then.
        return if len.lax_envelope() {
            Ok(())
        } else {
            Err(tool())
        };
    };
    for (k, _) in p {
        if !TOOL_PARAMS.contains(&k.as_str()) && !len.lax_envelope() {
            return Err(tool());
        }
    }
    let get = |k: &str| p.iter().find(|(n, _)| n == k).map(|(_, v)| v);
    match get("name") {
        Some(Json::String(n)) if len.any_tool_name() || plain_tool_name(n) => {}
        _ => return Err(tool()),
    }
    match get("arguments") {
        None | Some(Json::Object(_)) => {}
        Some(_) if len.lax_envelope() => {}
        Some(_) => return Err(tool()),
    }
    match (get("_meta"), get("inputResponses"), get("requestState")) {
        (
            None | Some(Json::Object(_)),
            None | Some(Json::Object(_)),
            None | Some(Json::String(_)),
        ) => Ok(()),
        _ => Err(tool()),
    }
}

/// An id number: an integer literal (no fraction, no exponent, no `-0`) within ±(2^53−1).
fn integer_id(n: &str) -> Result<i64, Malformed> {
    if n.contains(['.', 'e', 'E']) || n == "-0" {
        return Err(env_err());
    }
    let v: i64 = n.parse().map_err(|_| env_err())?;
    if !(-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&v) {
        return Err(env_err());
    }
    Ok(v)
}

/// A plain tool name (MCP 2025-11-25 guidance): 1–128 characters of `A-Z a-z 0-9 _ - .`.
pub(crate) fn plain_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    limits: &'a Limits,
    depth: usize,
    /// Fault injection only: how loosely to read.
    len: Leniency,
}

impl Parser<'_> {
    fn syntax<T>(&self) -> Result<T, Malformed> {
        Err(Malformed::new(MalformedKind::Syntax))
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn literal(&mut self, word: &[u8], v: Json) -> Result<Json, Malformed> {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(v)
        } else {
            self.syntax()
        }
    }

    fn value(&mut self) -> Result<Json, Malformed> {
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => Ok(Json::String(self.string()?)),
            Some(b't') => self.literal(b"true", Json::Bool(true)),
            Some(b'f') => self.literal(b"false", Json::Bool(false)),
            Some(b'n') => self.literal(b"null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => self.syntax(),
        }
    }

    fn enter(&mut self) -> Result<(), Malformed> {
        self.depth += 1;
        if self.depth > self.limits.max_depth {
            return Err(Malformed::new(MalformedKind::Limit));
        }
        Ok(())
    }

    fn object(&mut self) -> Result<Json, Malformed> {
        self.enter()?;
        self.i += 1;
        let mut members: Vec<(String, Json)> = Vec::new();
        let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            self.depth -= 1;
            return Ok(Json::Object(members));
        }
        loop {
            self.ws();
            if self.peek() != Some(b'"') {
                return self.syntax();
            }
            let key = self.string()?;
            // Small objects: a scan; larger ones: a set, so a wide object stays linear.
            let duplicate = if members.len() < 16 {
                members.iter().any(|(k, _)| *k == key)
            } else {
                if seen.is_empty() {
                    seen.extend(members.iter().map(|(k, _)| k.clone()));
                }
                !seen.insert(key.clone())
            };
            if duplicate {
                if !self.len.last_duplicate_wins() {
                    return Err(Malformed::new(MalformedKind::DuplicateMember));
                }
                if let Some(at) = members.iter().position(|(k, _)| *k == key) {
                    members.remove(at);
                }
            }
            self.ws();
            if self.peek() != Some(b':') {
                return self.syntax();
            }
            self.i += 1;
            self.ws();
            let v = self.value()?;
            members.push((key, v));
            if members.len() > self.limits.max_members {
                return Err(Malformed::new(MalformedKind::Limit));
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    self.depth -= 1;
                    return Ok(Json::Object(members));
                }
                _ => return self.syntax(),
            }
        }
    }

    fn array(&mut self) -> Result<Json, Malformed> {
        self.enter()?;
        self.i += 1;
        let mut items = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            self.depth -= 1;
            return Ok(Json::Array(items));
        }
        loop {
            self.ws();
            items.push(self.value()?);
            if items.len() > self.limits.max_elements {
                return Err(Malformed::new(MalformedKind::Limit));
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    self.depth -= 1;
                    return Ok(Json::Array(items));
                }
                _ => return self.syntax(),
            }
        }
    }

    fn number(&mut self) -> Result<Json, Malformed> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                while let Some(b'0'..=b'9') = self.peek() {
                    self.i += 1;
                }
            }
            _ => return self.syntax(),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return self.syntax();
            }
            while let Some(b'0'..=b'9') = self.peek() {
                self.i += 1;
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return self.syntax();
            }
            while let Some(b'0'..=b'9') = self.peek() {
                self.i += 1;
            }
        }
        if self.i - start > self.limits.max_number {
            return Err(Malformed::new(MalformedKind::Limit));
        }
        // The input is valid UTF-8 and the number is ASCII.
        let text = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
        // Only IEEE-754 doubles are read alike everywhere (JSON-NUM-02, I-JSON): a number that
        // overflows one (`1e400`) is Infinity to one reader and an error to another, so it is
        // refused rather than forwarded. (Found by the canonical_bytes fuzz target.)
        if !text.parse::<f64>().is_ok_and(f64::is_finite) {
            return Err(Malformed::new(MalformedKind::Limit));
        }
        Ok(Json::Number(text))
    }

    fn hex4(&mut self) -> Result<u32, Malformed> {
        let h = self
            .s
            .get(self.i..self.i + 4)
            .ok_or(Malformed::new(MalformedKind::Syntax))?;
        let mut v = 0u32;
        for &c in h {
            let d = (c as char)
                .to_digit(16)
                .ok_or(Malformed::new(MalformedKind::Syntax))?;
            v = v * 16 + d;
        }
        self.i += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, Malformed> {
        self.i += 1; // the opening quote
        let mut out = String::new();
        loop {
            let start = self.i;
            // Copy a run of plain bytes at once (the input is known-good UTF-8).
            while let Some(&b) = self.s.get(self.i) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.i += 1;
            }
            out.push_str(
                std::str::from_utf8(&self.s[start..self.i])
                    .map_err(|_| Malformed::new(MalformedKind::Encoding))?,
            );
            if out.len() > self.limits.max_string {
                return Err(Malformed::new(MalformedKind::Limit));
            }
            match self.peek() {
                None => return self.syntax(),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b) if b < 0x20 && self.len.lenient_grammar() => {
                    out.push(b as char);
                    self.i += 1;
                }
                Some(b) if b < 0x20 => return Err(Malformed::new(MalformedKind::Encoding)),
                Some(_) => {
                    // A backslash escape.
                    self.i += 1;
                    let Some(e) = self.peek() else {
                        return self.syntax();
                    };
                    self.i += 1;
                    match e {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let c = match hi {
                                0xD800..=0xDBFF => {
                                    if !self.s[self.i..].starts_with(b"\\u") {
                                        if self.len.lenient_grammar() {
                                            out.push('\u{fffd}');
                                            continue;
                                        }
                                        return Err(Malformed::new(MalformedKind::Encoding));
                                    }
                                    self.i += 2;
                                    let lo = self.hex4()?;
                                    if !(0xDC00..=0xDFFF).contains(&lo) {
                                        return Err(Malformed::new(MalformedKind::Encoding));
                                    }
                                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                                }
                                0xDC00..=0xDFFF if self.len.lenient_grammar() => 0xFFFD,
                                0xDC00..=0xDFFF => {
                                    return Err(Malformed::new(MalformedKind::Encoding))
                                }
                                c => c,
                            };
                            out.push(
                                char::from_u32(c).ok_or(Malformed::new(MalformedKind::Encoding))?,
                            );
                        }
                        _ => return self.syntax(),
                    }
                }
            }
        }
    }
}

fn write_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
        return;
    }
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            c if (c as u32) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

fn write_value(out: &mut Vec<u8>, v: &Json) {
    match v {
        Json::Null => out.extend_from_slice(b"null"),
        Json::Bool(true) => out.extend_from_slice(b"true"),
        Json::Bool(false) => out.extend_from_slice(b"false"),
        Json::Number(n) => out.extend_from_slice(n.as_bytes()),
        Json::String(s) => write_string(out, s),
        Json::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Json::Object(members) => {
            let mut sorted: Vec<&(String, Json)> = members.iter().collect();
            sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            write_members(out, sorted.into_iter());
        }
    }
}

fn write_members<'a>(out: &mut Vec<u8>, members: impl Iterator<Item = &'a (String, Json)>) {
    out.push(b'{');
    for (i, (k, v)) in members.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(out, k);
        out.push(b':');
        write_value(out, v);
    }
    out.push(b'}');
}

/// Members of `obj` with `first` (in that order) leading and the rest sorted.
fn ordered<'a>(obj: &'a [(String, Json)], first: &[&str]) -> Vec<&'a (String, Json)> {
    let mut out: Vec<&(String, Json)> = first
        .iter()
        .filter_map(|f| obj.iter().find(|(k, _)| k == f))
        .collect();
    let mut rest: Vec<&(String, Json)> = obj
        .iter()
        .filter(|(k, _)| !first.contains(&k.as_str()))
        .collect();
    rest.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.extend(rest);
    out
}

fn write_message(m: &Message) -> Vec<u8> {
    let mut env: Vec<(String, Json)> = vec![("jsonrpc".into(), Json::String("2.0".into()))];
    if let Some(id) = m.id() {
        env.push(("id".into(), id.to_json()));
    }
    env.push(("method".into(), Json::String(m.method().into())));
    let params = match m {
        Message::Request { params, .. } | Message::Notification { params, .. } => params,
    };
    let mut out = Vec::new();
    out.push(b'{');
    for (i, (k, v)) in env.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(&mut out, k);
        out.push(b':');
        write_value(&mut out, v);
    }
    if let Some(p) = params {
        out.extend_from_slice(b",\"params\":");
        let first: &[&str] = if m.method() == "tools/call" {
            TOOL_PARAMS
        } else {
            &[]
        };
        write_members(&mut out, ordered(p, first).into_iter());
    }
    out.push(b'}');
    out
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
