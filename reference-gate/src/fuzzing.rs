//! Fuzz target bodies, as plain functions (feature `fuzzing`): `fuzz/` calls them under
//! libFuzzer, and the suite's tests replay every saved input through them on stable.
//!
//! Each `check_*` function returns the first broken property as a [`Finding`]; the `fuzz_*`
//! wrappers panic on it, which is what a fuzzer needs. The properties:
//!
//! - [`check_canonical_bytes`]: any bytes; the parser never panics, and what it accepts has
//!   forwarding bytes that parse back to the same message and re-canonicalize to themselves.
//! - [`check_smuggle`]: a [`Smuggle`], a denied call inside a wrapper; the proxy forwards
//!   nothing at all (every shape holds a denied or unknown tool somewhere a reader may look).
//! - [`check_roundtrip`]: an [`AllowedCall`] in a random valid spelling; forwarded exactly once,
//!   as canonical bytes that mean the intended message.
//!
//! The differential target (the gate against each downstream personality's reading) needs the
//! witness's readers, so its body lives with the suite (`mcp_gauntlet::fuzz::targets`).

use crate::canonical::{self, Json, Limits, Message};
use crate::config::ErrorCodes;
use crate::forward::{ForwardError, ForwardFuture, Forwarder};
use crate::policy::{Effect, Rule, RuleEngine};
use crate::proxy::{Credentials, Proxy};
use crate::trace::Tracer;
use arbitrary::{Arbitrary, Unstructured};
use std::sync::{Arc, Mutex};

/// The tool every shape hides; the policy denies it.
pub const DENIED: &str = "delete_everything";
/// The tools the policy allows.
pub const ALLOWED: [&str; 2] = ["echo", "add"];
/// The server id the fuzz proxy forwards to.
pub const SERVER: &str = "witness";

/// A broken property, with the input's forwarded bytes when they matter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub property: &'static str,
    pub detail: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.property, self.detail)
    }
}

fn finding(property: &'static str, detail: impl Into<String>) -> Finding {
    Finding {
        property,
        detail: detail.into(),
    }
}

// ---------------------------------------------------------------------------------------------
// The proxy under fuzzing: the real one, with a recording forwarder and the witness policy.

/// A forwarder that records what it is given and answers every request with an empty result.
#[derive(Default)]
pub struct RecordingForwarder {
    sent: Mutex<Vec<Vec<u8>>>,
}

impl RecordingForwarder {
    pub fn take(&self) -> Vec<Vec<u8>> {
        self.sent
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default()
    }
}

impl Forwarder for RecordingForwarder {
    fn forward<'a>(
        &'a self,
        _server_id: &'a str,
        canonical: &'a [u8],
        expects_answer: bool,
    ) -> ForwardFuture<'a> {
        Box::pin(async move {
            if let Ok(mut s) = self.sent.lock() {
                s.push(canonical.to_vec());
            }
            if !expects_answer {
                return Ok(Vec::new());
            }
            let id = canonical::parse(canonical, &Limits::default())
                .ok()
                .and_then(|c| c.message().id().map(|i| i.to_canonical()))
                .ok_or(ForwardError::BadAnswer)?;
            let mut out = br#"{"jsonrpc":"2.0","id":"#.to_vec();
            out.extend_from_slice(&id);
            out.extend_from_slice(br#","result":{"content":[]}}"#);
            Ok(out)
        })
    }
}

/// The witness policy: deny the canary, allow echo and add, deny everything else.
pub fn witness_policy() -> RuleEngine {
    let mut rules = vec![Rule::tool(Effect::Deny, "*", DENIED)];
    for t in ALLOWED {
        rules.push(Rule::tool(Effect::Allow, SERVER, t));
    }
    RuleEngine { rules }
}

/// A proxy with the witness policy in front of a [`RecordingForwarder`].
pub fn fuzz_proxy() -> (Proxy, Arc<RecordingForwarder>) {
    let fwd = Arc::new(RecordingForwarder::default());
    let proxy = Proxy::new(
        Arc::new(witness_policy()),
        fwd.clone(),
        Limits::default(),
        ErrorCodes::default(),
        Tracer::none(),
    );
    (proxy, fwd)
}

thread_local! {
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
}

/// Run `raw` through `proxy` and return what reached the forwarder.
pub fn forwarded_by(proxy: &Proxy, fwd: &RecordingForwarder, raw: &[u8]) -> Vec<Vec<u8>> {
    fwd.take();
    RUNTIME.with(|rt| {
        rt.block_on(proxy.handle(SERVER, raw, &Credentials::default()));
    });
    fwd.take()
}

/// Forwarded bytes must be canonical: they parse, and re-canonicalize to themselves.
fn check_canonical_forwarding(bytes: &[u8]) -> Result<(), Finding> {
    match canonical::parse(bytes, &Limits::default()) {
        Ok(c) if c.forwarding_bytes() == bytes => Ok(()),
        Ok(_) => Err(finding(
            "forwarded-not-canonical",
            String::from_utf8_lossy(bytes),
        )),
        Err(e) => Err(finding(
            "forwarded-unparseable",
            format!("{:?}: {}", e.kind(), String::from_utf8_lossy(bytes)),
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// canonical_bytes

/// Whether two JSON values are equal with object members in any order (the strict parser
/// refuses duplicate names, so a member found by name is the only one). Allocates nothing: it
/// runs on every input the canonical_bytes target accepts.
fn same_json(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Json::Object(x), Json::Object(y)) => same_members(x, y),
        (Json::Array(_) | Json::Object(_), _) | (_, Json::Array(_) | Json::Object(_)) => false,
        (a, b) => a == b,
    }
}

/// Whether two objects' members are the same, in any order.
fn same_members(x: &[(String, Json)], y: &[(String, Json)]) -> bool {
    x.len() == y.len()
        && x.iter().all(|(k, v)| {
            y.iter()
                .find(|(n, _)| n == k)
                .is_some_and(|(_, w)| same_json(v, w))
        })
}

/// Whether two messages are the same request or notification: id, method, and params with
/// members in any order.
fn same_message(a: &Message, b: &Message) -> bool {
    a.id() == b.id()
        && a.method() == b.method()
        && match (a.params(), b.params()) {
            (None, None) => true,
            (Some(x), Some(y)) => same_members(x, y),
            _ => false,
        }
}

/// Any bytes: no panic; accepted input round-trips through its canonical bytes.
pub fn check_canonical_bytes(data: &[u8]) -> Result<(), Finding> {
    let limits = Limits {
        max_bytes: 64 * 1024,
        ..Limits::default()
    };
    let Ok(first) = canonical::parse(data, &limits) else {
        return Ok(());
    };
    let bytes = first.forwarding_bytes();
    let second = canonical::parse(bytes, &limits).map_err(|e| {
        finding(
            "canonical-bytes-refused",
            format!("{:?}: {}", e.kind(), String::from_utf8_lossy(bytes)),
        )
    })?;
    if !same_message(first.message(), second.message()) {
        return Err(finding(
            "canonical-bytes-changed-the-message",
            String::from_utf8_lossy(bytes),
        ));
    }
    if second.forwarding_bytes() != bytes {
        return Err(finding(
            "canonicalization-not-idempotent",
            format!(
                "{} -> {}",
                String::from_utf8_lossy(bytes),
                String::from_utf8_lossy(second.forwarding_bytes())
            ),
        ));
    }
    // Whatever we forward, a plain JSON reader reads too.
    if serde_json::from_slice::<serde_json::Value>(bytes).is_err() {
        return Err(finding(
            "canonical-bytes-not-json",
            String::from_utf8_lossy(bytes),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The smuggling model

/// A denied call hidden in one of the smuggling families of `cases/smuggling/`.
#[derive(Debug, Clone, PartialEq, Eq, Arbitrary)]
pub struct Smuggle {
    pub shape: Shape,
    pub name: NameSpelling,
    pub id: IdSpelling,
    pub space: Space,
    pub encoding: Encoding,
}

/// Where the denied call sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub enum Shape {
    Plain,
    /// No id: a notification that still names the denied tool.
    Notification,
    /// Inside a batch array, beside an allowed call.
    Batch {
        denied_first: bool,
        nested: bool,
    },
    /// `name` twice: the denied one and an allowed one.
    DuplicateName {
        denied_last: bool,
        via_escape: bool,
    },
    /// `params` twice.
    DuplicateParams {
        denied_last: bool,
    },
    /// `method` twice: `ping` and `tools/call`.
    DuplicateMethod {
        call_last: bool,
    },
    /// A look-alike of `name` beside it holding the other tool.
    LookAlikeName {
        variant: LookAlike,
        denied_in_variant: bool,
    },
    /// A look-alike of `method` beside it.
    LookAlikeMethod {
        variant: LookAlike,
    },
    /// An allowed call, then the denied call, in one body.
    Concatenated {
        separator: Separator,
    },
    /// A comment inside the denied call.
    Comment {
        block: bool,
    },
    /// A trailing comma inside the denied call.
    TrailingComma,
    /// An unknown top-level member beside the denied call.
    UnknownMember,
    /// The whole call as a JSON string.
    Stringified,
}

/// Spellings of a member name that a careless reader may take for the real one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub enum LookAlike {
    Capitalized,
    Upper,
    /// The first letter upper case, the rest as `\uXXXX` escapes of the real letters.
    CapitalizedEscaped,
    Cyrillic,
    TrailingSpace,
}

/// How the two values of a concatenation are separated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub enum Separator {
    Nothing,
    Newline,
    Space,
    CrLf,
}

/// Spellings of the denied tool's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub enum NameSpelling {
    Plain,
    /// One character as a `\uXXXX` escape (index modulo the length).
    Escaped(u8),
    AllEscaped,
    Upper,
    TrailingSpace,
    LeadingTab,
    NulSuffix,
    ZeroWidth(u8),
    CyrillicE,
    Fullwidth,
}

/// Spellings of the id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub enum IdSpelling {
    Int(u16),
    Str(u8),
    Exponent,
    NegativeZero,
    Fraction,
    Null,
    TooBig,
    LeadingZero,
}

/// Insignificant whitespace between tokens (and a few things that are not whitespace in JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub enum Space {
    None,
    Spaces,
    Tabs,
    Newlines,
    CrLf,
    NoBreakSpace,
    FormFeed,
}

/// How the text is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub enum Encoding {
    Utf8,
    Bom,
    Utf16Le,
    Utf16Be,
    /// One byte of the name replaced by 0xFF.
    InvalidByteInName,
}

impl Smuggle {
    /// The plainest smuggle: the denied call as it is.
    pub fn plain() -> Smuggle {
        Smuggle {
            shape: Shape::Plain,
            name: NameSpelling::Plain,
            id: IdSpelling::Int(7),
            space: Space::None,
            encoding: Encoding::Utf8,
        }
    }

    /// Decode a model from fuzzer bytes (never fails: missing bytes give the first variants).
    pub fn from_bytes(data: &[u8]) -> Smuggle {
        Smuggle::arbitrary(&mut Unstructured::new(data)).unwrap_or_else(|_| Smuggle::plain())
    }

    /// Simpler variants of this model, one field simplified at a time, for shrinking.
    pub fn simpler(&self) -> Vec<Smuggle> {
        let base = Smuggle::plain();
        let mut out = Vec::new();
        let mut push = |s: Smuggle| {
            if s != *self && !out.contains(&s) {
                out.push(s);
            }
        };
        push(Smuggle {
            encoding: base.encoding,
            ..self.clone()
        });
        push(Smuggle {
            space: base.space,
            ..self.clone()
        });
        push(Smuggle {
            id: base.id,
            ..self.clone()
        });
        push(Smuggle {
            name: base.name,
            ..self.clone()
        });
        push(Smuggle {
            shape: base.shape,
            ..self.clone()
        });
        out
    }

    /// The bytes this model stands for.
    pub fn to_bytes(&self) -> Vec<u8> {
        let ws = self.space.text();
        let denied = self.name.literal();
        let id = self.id.literal();
        let allowed = "\"echo\"".to_string();
        // Members are written as given: raw key text, raw value text, duplicates and all.
        let obj = |members: &[(&str, String)]| -> String {
            let inner: Vec<String> = members
                .iter()
                .map(|(k, v)| format!("{ws}{k}{ws}:{ws}{v}"))
                .collect();
            format!("{{{}{ws}}}", inner.join(","))
        };
        // An envelope: `jsonrpc`, the id when there is one, then `rest`.
        let message = |id: Option<&str>, rest: &[(&str, String)]| {
            let mut members = vec![("\"jsonrpc\"", "\"2.0\"".to_string())];
            members.extend(id.map(|i| ("\"id\"", i.to_string())));
            members.extend_from_slice(rest);
            obj(&members)
        };
        let params = |name: &str| obj(&[("\"name\"", name.into()), ("\"arguments\"", "{}".into())]);
        let tools_call = ("\"method\"", "\"tools/call\"".to_string());
        let call = |name: &str, id: &str| {
            message(
                Some(id),
                &[tools_call.clone(), ("\"params\"", params(name))],
            )
        };
        // The denied and the allowed value, the denied one second when `denied_last`.
        let pair = |denied_last: bool| {
            if denied_last {
                (allowed.clone(), denied.clone())
            } else {
                (denied.clone(), allowed.clone())
            }
        };
        let text = match self.shape {
            Shape::Plain => call(&denied, &id),
            Shape::Notification => message(None, &[tools_call, ("\"params\"", params(&denied))]),
            Shape::Batch {
                denied_first,
                nested,
            } => {
                let (d, a) = (call(&denied, &id), call(&allowed, "8"));
                let (x, y) = if denied_first { (d, a) } else { (a, d) };
                let inner = format!("[{ws}{x},{ws}{y}{ws}]");
                if nested {
                    format!("[{inner}]")
                } else {
                    inner
                }
            }
            Shape::DuplicateName {
                denied_last,
                via_escape,
            } => {
                let key2 = if via_escape {
                    "\"n\\u0061me\""
                } else {
                    "\"name\""
                };
                let (first, second) = pair(denied_last);
                let p = obj(&[
                    ("\"name\"", first),
                    (key2, second),
                    ("\"arguments\"", "{}".into()),
                ]);
                message(Some(&id), &[tools_call, ("\"params\"", p)])
            }
            Shape::DuplicateParams { denied_last } => {
                let (first, second) = pair(denied_last);
                message(
                    Some(&id),
                    &[
                        tools_call,
                        ("\"params\"", params(&first)),
                        ("\"params\"", params(&second)),
                    ],
                )
            }
            Shape::DuplicateMethod { call_last } => {
                let (m1, m2) = if call_last {
                    ("\"ping\"", "\"tools/call\"")
                } else {
                    ("\"tools/call\"", "\"ping\"")
                };
                message(
                    Some(&id),
                    &[
                        ("\"method\"", m1.into()),
                        ("\"method\"", m2.into()),
                        ("\"params\"", params(&denied)),
                    ],
                )
            }
            Shape::LookAlikeName {
                variant,
                denied_in_variant,
            } => {
                let key = variant.spell("name");
                let (plain, alike) = pair(denied_in_variant);
                let p = obj(&[
                    ("\"name\"", plain),
                    (&key, alike),
                    ("\"arguments\"", "{}".into()),
                ]);
                message(Some(&id), &[tools_call, ("\"params\"", p)])
            }
            Shape::LookAlikeMethod { variant } => {
                let key = variant.spell("method");
                message(
                    Some(&id),
                    &[
                        ("\"method\"", "\"ping\"".into()),
                        (&key, "\"tools/call\"".into()),
                        ("\"params\"", params(&denied)),
                    ],
                )
            }
            Shape::Concatenated { separator } => {
                let sep = match separator {
                    Separator::Nothing => "",
                    Separator::Newline => "\n",
                    Separator::Space => " ",
                    Separator::CrLf => "\r\n",
                };
                format!("{}{sep}{}", call(&allowed, "8"), call(&denied, &id))
            }
            Shape::Comment { block } => {
                let c = if block { "/* x */" } else { "// x\n" };
                let full = call(&denied, &id);
                // After the opening brace.
                format!("{{{c}{}", &full[1..])
            }
            Shape::TrailingComma => {
                let full = call(&denied, &id);
                let cut = full.len() - 1 - ws.len();
                format!("{},{}", &full[..cut], &full[cut..])
            }
            Shape::UnknownMember => message(
                Some(&id),
                &[
                    tools_call,
                    ("\"x-gate\"", "\"bypass\"".into()),
                    ("\"params\"", params(&denied)),
                ],
            ),
            Shape::Stringified => {
                let inner = call(&denied, &id);
                serde_json::to_string(&inner).unwrap_or_default()
            }
        };
        self.encoding.encode(&text, &denied)
    }
}

impl LookAlike {
    fn spell(self, name: &str) -> String {
        let s = match self {
            LookAlike::Capitalized => {
                let mut c = name.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            }
            LookAlike::Upper => name.to_ascii_uppercase(),
            LookAlike::CapitalizedEscaped => {
                let mut c = name.chars();
                let first = c.next().map(|f| f.to_ascii_uppercase()).unwrap_or('X');
                let rest: String = c.map(|ch| format!("\\u{:04x}", u32::from(ch))).collect();
                format!("{first}{rest}")
            }
            LookAlike::Cyrillic => name.replacen('a', "\u{430}", 1).replacen('e', "\u{435}", 1),
            LookAlike::TrailingSpace => format!("{name} "),
        };
        format!("\"{s}\"")
    }
}

impl NameSpelling {
    fn literal(self) -> String {
        let chars: Vec<char> = DENIED.chars().collect();
        let s: String = match self {
            NameSpelling::Plain => DENIED.into(),
            NameSpelling::Escaped(i) => {
                let k = usize::from(i) % chars.len();
                chars
                    .iter()
                    .enumerate()
                    .map(|(j, c)| {
                        if j == k {
                            format!("\\u{:04x}", u32::from(*c))
                        } else {
                            c.to_string()
                        }
                    })
                    .collect()
            }
            NameSpelling::AllEscaped => chars
                .iter()
                .map(|c| format!("\\u{:04X}", u32::from(*c)))
                .collect(),
            NameSpelling::Upper => DENIED.to_ascii_uppercase(),
            NameSpelling::TrailingSpace => format!("{DENIED} "),
            NameSpelling::LeadingTab => format!("\\t{DENIED}"),
            NameSpelling::NulSuffix => format!("{DENIED}\\u0000"),
            NameSpelling::ZeroWidth(i) => {
                let k = 1 + usize::from(i) % (chars.len() - 1);
                let mut s: String = chars[..k].iter().collect();
                s.push('\u{200b}');
                s.extend(&chars[k..]);
                s
            }
            NameSpelling::CyrillicE => DENIED.replacen('e', "\u{435}", 1),
            NameSpelling::Fullwidth => DENIED
                .chars()
                .map(|c| {
                    if c.is_ascii_lowercase() {
                        char::from_u32(u32::from(c) - 0x61 + 0xFF41).unwrap_or(c)
                    } else {
                        c
                    }
                })
                .collect(),
        };
        format!("\"{s}\"")
    }
}

impl IdSpelling {
    fn literal(self) -> String {
        match self {
            IdSpelling::Int(n) => n.to_string(),
            IdSpelling::Str(n) => format!("\"r{n}\""),
            IdSpelling::Exponent => "7e0".into(),
            IdSpelling::NegativeZero => "-0".into(),
            IdSpelling::Fraction => "7.0".into(),
            IdSpelling::Null => "null".into(),
            IdSpelling::TooBig => "9007199254740993".into(),
            IdSpelling::LeadingZero => "007".into(),
        }
    }
}

impl Space {
    fn text(self) -> &'static str {
        match self {
            Space::None => "",
            Space::Spaces => "  ",
            Space::Tabs => "\t",
            Space::Newlines => "\n",
            Space::CrLf => "\r\n",
            Space::NoBreakSpace => "\u{a0}",
            Space::FormFeed => "\u{c}",
        }
    }
}

impl Encoding {
    fn encode(self, text: &str, denied_literal: &str) -> Vec<u8> {
        match self {
            Encoding::Utf8 => text.as_bytes().to_vec(),
            Encoding::Bom => [b"\xef\xbb\xbf".as_slice(), text.as_bytes()].concat(),
            Encoding::Utf16Le => text.encode_utf16().flat_map(u16::to_le_bytes).collect(),
            Encoding::Utf16Be => text.encode_utf16().flat_map(u16::to_be_bytes).collect(),
            Encoding::InvalidByteInName => {
                let mut bytes = text.as_bytes().to_vec();
                if let Some(at) = text.find(denied_literal) {
                    // The byte after the opening quote's first letter.
                    let k = at + 2;
                    if k < bytes.len() {
                        bytes[k] = 0xFF;
                    }
                }
                bytes
            }
        }
    }
}

/// A smuggled denied call is never forwarded: the proxy forwards nothing for any shape, and
/// anything it did forward would have to be canonical.
pub fn check_smuggle_with(
    proxy: &Proxy,
    fwd: &RecordingForwarder,
    model: &Smuggle,
) -> Result<(), Finding> {
    let raw = model.to_bytes();
    let sent = forwarded_by(proxy, fwd, &raw);
    for bytes in &sent {
        check_canonical_forwarding(bytes)?;
    }
    if let Some(bytes) = sent.first() {
        return Err(finding(
            "smuggled-call-forwarded",
            format!(
                "{model:?} was forwarded as {}",
                String::from_utf8_lossy(bytes)
            ),
        ));
    }
    Ok(())
}

/// [`check_smuggle_with`] on the reference gate, from fuzzer bytes.
pub fn check_smuggle(data: &[u8]) -> Result<(), Finding> {
    let (proxy, fwd) = fuzz_proxy();
    check_smuggle_with(&proxy, &fwd, &Smuggle::from_bytes(data))
}

// ---------------------------------------------------------------------------------------------
// proxy_roundtrip

/// An allowed call in a random valid spelling.
#[derive(Debug, Clone, Arbitrary)]
pub struct AllowedCall {
    pub tool: AllowedTool,
    pub id: ValidId,
    /// Member order: a permutation index of the four envelope members.
    pub order: u8,
    pub space: ValidSpace,
    /// Escape every character of member names as `\uXXXX`.
    pub escape_names: bool,
    pub meta: bool,
}

#[derive(Debug, Clone, Arbitrary)]
pub enum AllowedTool {
    Echo(String),
    Add(i32, i32),
}

#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum ValidId {
    Int(i32),
    Str(u32),
}

#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum ValidSpace {
    None,
    Space,
    Tab,
    Newline,
    CrLf,
}

impl AllowedCall {
    /// The message as a value, and one valid spelling of it.
    pub fn render(&self) -> (serde_json::Value, Vec<u8>) {
        use serde_json::json;
        let ws = match self.space {
            ValidSpace::None => "",
            ValidSpace::Space => " ",
            ValidSpace::Tab => "\t",
            ValidSpace::Newline => "\n",
            ValidSpace::CrLf => "\r\n",
        };
        let id = match self.id {
            ValidId::Int(n) => json!(n),
            ValidId::Str(n) => json!(format!("req-{n}")),
        };
        let (name, args) = match &self.tool {
            AllowedTool::Echo(t) => ("echo", json!({ "text": t })),
            AllowedTool::Add(a, b) => ("add", json!({ "a": a, "b": b })),
        };
        let mut params = json!({ "name": name, "arguments": args });
        if self.meta {
            params["_meta"] = json!({ "progressToken": 1 });
        }
        let value = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let key = |k: &str| -> String {
            if self.escape_names {
                let e: String = k
                    .chars()
                    .map(|c| format!("\\u{:04x}", u32::from(c)))
                    .collect();
                format!("\"{e}\"")
            } else {
                format!("\"{k}\"")
            }
        };
        let write = |v: &serde_json::Value| -> String {
            fn go(v: &serde_json::Value, ws: &str, key: &dyn Fn(&str) -> String) -> String {
                match v {
                    serde_json::Value::Object(m) => {
                        let inner: Vec<String> = m
                            .iter()
                            .map(|(k, v)| format!("{ws}{}{ws}:{ws}{}", key(k), go(v, ws, key)))
                            .collect();
                        format!("{{{}{ws}}}", inner.join(","))
                    }
                    other => other.to_string(),
                }
            }
            go(v, ws, &key)
        };
        let mut members: Vec<(&str, String)> = ["jsonrpc", "id", "method", "params"]
            .iter()
            .map(|k| (*k, write(&value[*k])))
            .collect();
        // A permutation from the order index (Lehmer code over four members).
        let mut n = usize::from(self.order) % 24;
        let mut ordered = Vec::new();
        for radix in (1..=4).rev() {
            ordered.push(members.remove(n % radix));
            n /= radix;
        }
        let inner: Vec<String> = ordered
            .iter()
            .map(|(k, v)| format!("{ws}{}{ws}:{ws}{v}", key(k)))
            .collect();
        (value, format!("{{{}{ws}}}", inner.join(",")).into_bytes())
    }
}

/// An allowed call is forwarded exactly once, canonical, meaning what was sent.
pub fn check_roundtrip_with(
    proxy: &Proxy,
    fwd: &RecordingForwarder,
    call: &AllowedCall,
) -> Result<(), Finding> {
    let (value, raw) = call.render();
    let sent = forwarded_by(proxy, fwd, &raw);
    let [bytes] = sent.as_slice() else {
        return Err(finding(
            "allowed-call-not-forwarded-once",
            format!(
                "{} forwarded {} times",
                String::from_utf8_lossy(&raw),
                sent.len()
            ),
        ));
    };
    check_canonical_forwarding(bytes)?;
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(v) if v == value => Ok(()),
        _ => Err(finding(
            "allowed-call-changed",
            format!(
                "{} forwarded as {}",
                String::from_utf8_lossy(&raw),
                String::from_utf8_lossy(bytes)
            ),
        )),
    }
}

/// [`check_roundtrip_with`] on the reference gate, from fuzzer bytes.
pub fn check_roundtrip(data: &[u8]) -> Result<(), Finding> {
    let Ok(call) = AllowedCall::arbitrary(&mut Unstructured::new(data)) else {
        return Ok(());
    };
    let (proxy, fwd) = fuzz_proxy();
    check_roundtrip_with(&proxy, &fwd, &call)
}

// ---------------------------------------------------------------------------------------------
// binding: 2026-07-28 header/body binding in front of the policy

/// A tool a message or a header can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub enum Tool {
    Denied,
    Echo,
    Add,
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::Denied => DENIED,
            Tool::Echo => ALLOWED[0],
            Tool::Add => ALLOWED[1],
        }
    }
}

/// How `Mcp-Name` is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub enum NameHeader {
    /// Plain, naming this tool.
    Plain(Tool),
    /// The base64 sentinel of this tool's name.
    Sentinel(Tool),
    /// Upper case of this tool's name.
    Upper(Tool),
    /// With a leading tab inside the value (visible after trimming? it must not match).
    Padded(Tool),
    /// Twice: these two tools.
    Twice(Tool, Tool),
    /// A sentinel whose payload is not base64.
    BadSentinel,
    Missing,
}

/// How `Mcp-Method` is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub enum MethodHeader {
    Right,
    ToolsList,
    Upper,
    Twice,
    Missing,
}

/// A protocol version, as a header or in `_meta`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub enum VersionClaim {
    Modern,
    Legacy,
    Future,
    Missing,
    /// `_meta` only: the version as a number; as a header: two values.
    Odd,
}

/// A `tools/call` and the 2026-07-28 headers sent with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Arbitrary)]
pub struct Binding {
    pub body: Tool,
    pub name: NameHeader,
    pub method: MethodHeader,
    pub header_version: VersionClaim,
    pub meta_version: VersionClaim,
}

impl Binding {
    pub fn from_bytes(data: &[u8]) -> Binding {
        Binding::arbitrary(&mut Unstructured::new(data)).unwrap_or(Binding {
            body: Tool::Denied,
            name: NameHeader::Plain(Tool::Denied),
            method: MethodHeader::Right,
            header_version: VersionClaim::Modern,
            meta_version: VersionClaim::Modern,
        })
    }

    /// Every model.
    pub fn all() -> Vec<Binding> {
        let tools = [Tool::Denied, Tool::Echo, Tool::Add];
        let mut names = Vec::new();
        for t in tools {
            names.extend([
                NameHeader::Plain(t),
                NameHeader::Sentinel(t),
                NameHeader::Upper(t),
                NameHeader::Padded(t),
            ]);
            for u in tools {
                names.push(NameHeader::Twice(t, u));
            }
        }
        names.extend([NameHeader::BadSentinel, NameHeader::Missing]);
        let methods = [
            MethodHeader::Right,
            MethodHeader::ToolsList,
            MethodHeader::Upper,
            MethodHeader::Twice,
            MethodHeader::Missing,
        ];
        let versions = [
            VersionClaim::Modern,
            VersionClaim::Legacy,
            VersionClaim::Future,
            VersionClaim::Missing,
            VersionClaim::Odd,
        ];
        let mut out = Vec::new();
        for body in tools {
            for name in &names {
                for method in methods {
                    for header_version in versions {
                        for meta_version in versions {
                            out.push(Binding {
                                body,
                                name: *name,
                                method,
                                header_version,
                                meta_version,
                            });
                        }
                    }
                }
            }
        }
        out
    }

    /// The body and the headers, as the HTTP front would see them.
    pub fn render(&self) -> (Vec<u8>, Vec<(&'static str, Vec<u8>)>) {
        use base64::Engine as _;
        let version = |v: VersionClaim| match v {
            VersionClaim::Modern => Some("2026-07-28"),
            VersionClaim::Legacy => Some("2025-11-25"),
            VersionClaim::Future => Some("2099-01-01"),
            VersionClaim::Missing | VersionClaim::Odd => None,
        };
        let mut meta = serde_json::json!({"io.modelcontextprotocol/clientCapabilities": {}});
        match (self.meta_version, version(self.meta_version)) {
            (VersionClaim::Odd, _) => meta[crate::era::META_VERSION] = serde_json::json!(20260728),
            (_, Some(v)) => meta[crate::era::META_VERSION] = serde_json::json!(v),
            (_, None) => {}
        }
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": self.body.name(), "arguments": {}, "_meta": meta}});
        let mut headers: Vec<(&'static str, Vec<u8>)> = Vec::new();
        match (self.header_version, version(self.header_version)) {
            (VersionClaim::Odd, _) => {
                headers.push(("mcp-protocol-version", b"2026-07-28".to_vec()));
                headers.push(("mcp-protocol-version", b"2025-11-25".to_vec()));
            }
            (_, Some(v)) => headers.push(("mcp-protocol-version", v.as_bytes().to_vec())),
            (_, None) => {}
        }
        match self.method {
            MethodHeader::Right => headers.push(("mcp-method", b"tools/call".to_vec())),
            MethodHeader::ToolsList => headers.push(("mcp-method", b"tools/list".to_vec())),
            MethodHeader::Upper => headers.push(("mcp-method", b"TOOLS/CALL".to_vec())),
            MethodHeader::Twice => {
                headers.push(("mcp-method", b"tools/call".to_vec()));
                headers.push(("mcp-method", b"tools/call".to_vec()));
            }
            MethodHeader::Missing => {}
        }
        let b64 = |t: Tool| {
            format!(
                "=?base64?{}?=",
                base64::engine::general_purpose::STANDARD.encode(t.name())
            )
        };
        match self.name {
            NameHeader::Plain(t) => headers.push(("mcp-name", t.name().as_bytes().to_vec())),
            NameHeader::Sentinel(t) => headers.push(("mcp-name", b64(t).into_bytes())),
            NameHeader::Upper(t) => {
                headers.push(("mcp-name", t.name().to_ascii_uppercase().into_bytes()))
            }
            NameHeader::Padded(t) => {
                headers.push(("mcp-name", format!("{}\t", t.name()).into_bytes()))
            }
            NameHeader::Twice(a, b) => {
                headers.push(("mcp-name", a.name().as_bytes().to_vec()));
                headers.push(("mcp-name", b.name().as_bytes().to_vec()));
            }
            NameHeader::BadSentinel => headers.push(("mcp-name", b"=?base64?!!?=".to_vec())),
            NameHeader::Missing => {}
        }
        (body.to_string().into_bytes(), headers)
    }

    /// The tools the request names anywhere: the body's, and every `Mcp-Name` (decoded).
    fn named(&self) -> Vec<Tool> {
        let mut out = vec![self.body];
        match self.name {
            NameHeader::Plain(t)
            | NameHeader::Sentinel(t)
            | NameHeader::Upper(t)
            | NameHeader::Padded(t) => out.push(t),
            NameHeader::Twice(a, b) => out.extend([a, b]),
            NameHeader::BadSentinel | NameHeader::Missing => {}
        }
        out
    }
}

/// A 2026-07-28 `tools/call` with headers in any state, through the HTTP front's admission
/// ([`crate::era::admit`]) and the real proxy. A legacy route needs a session, which this model
/// never has, so only admitted modern requests reach the proxy. Properties: a request that names
/// the denied tool in its body or in any header forwards nothing; whatever is forwarded had
/// every header equal to its body. Returns how many messages were forwarded.
pub fn check_binding_with(
    proxy: &Proxy,
    fwd: &RecordingForwarder,
    model: &Binding,
    admit: Admission,
) -> Result<usize, Finding> {
    let (body, headers) = model.render();
    let Ok(c) = proxy.parse(&body) else {
        return Ok(0);
    };
    let pairs: Vec<(&str, &[u8])> = headers.iter().map(|(k, v)| (*k, v.as_slice())).collect();
    if !admit(&c, pairs.as_slice()) {
        return Ok(0);
    }
    fwd.take();
    RUNTIME.with(|rt| {
        rt.block_on(proxy.handle_parsed(SERVER, &body, &c, &Credentials::default()));
    });
    let sent = fwd.take();
    for bytes in &sent {
        check_canonical_forwarding(bytes)?;
    }
    if sent.is_empty() {
        return Ok(0);
    }
    if model.named().contains(&Tool::Denied) {
        return Err(finding(
            "denied-name-forwarded",
            format!("{model:?} was forwarded"),
        ));
    }
    let bound = model.name == NameHeader::Plain(model.body)
        || model.name == NameHeader::Sentinel(model.body);
    let exact = bound
        && model.method == MethodHeader::Right
        && model.header_version == VersionClaim::Modern
        && model.meta_version == VersionClaim::Modern;
    if !exact {
        return Err(finding(
            "unbound-request-forwarded",
            format!("{model:?} was forwarded though its headers do not equal its body"),
        ));
    }
    Ok(sent.len())
}

/// Whether the HTTP front lets a parsed message with these headers through to the proxy.
pub type Admission = fn(&crate::canonical::Canonical, &[(&str, &[u8])]) -> bool;

/// The reference gate's admission: a modern request whose headers bind to its body.
pub fn gate_admission(c: &crate::canonical::Canonical, headers: &[(&str, &[u8])]) -> bool {
    crate::era::admit(c, headers) == Some(Ok(()))
}

/// [`check_binding_with`] on a model decoded from fuzzer bytes, with the gate's admission.
pub fn check_binding(data: &[u8]) -> Result<(), Finding> {
    let model = Binding::from_bytes(data);
    let (proxy, fwd) = fuzz_proxy();
    check_binding_with(&proxy, &fwd, &model, gate_admission).map(|_| ())
}

/// The fuzz targets' entry points: panic on a finding.
pub fn fuzz_canonical_bytes(data: &[u8]) {
    if let Err(f) = check_canonical_bytes(data) {
        panic!("{f}");
    }
}

pub fn fuzz_smuggle(data: &[u8]) {
    if let Err(f) = check_smuggle(data) {
        panic!("{f}");
    }
}

pub fn fuzz_roundtrip(data: &[u8]) {
    if let Err(f) = check_roundtrip(data) {
        panic!("{f}");
    }
}

pub fn fuzz_binding(data: &[u8]) {
    if let Err(f) = check_binding(data) {
        panic!("{f}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shape_renders_and_the_gate_forwards_none() {
        // Deterministic sweep over many decoded models.
        for seed in 0..2000u32 {
            let bytes: Vec<u8> = (0..32)
                .map(|i| (seed.wrapping_mul(2654435761).wrapping_add(i * 40503) >> 7) as u8)
                .collect();
            let m = Smuggle::from_bytes(&bytes);
            assert!(!m.to_bytes().is_empty());
            check_smuggle(&bytes).unwrap_or_else(|f| panic!("{m:?}: {f}"));
        }
    }

    #[test]
    fn every_binding_model_is_judged_and_only_exact_allowed_calls_pass() {
        // The model space is small enough to walk whole: every combination, not a sample.
        let all = Binding::all();
        assert_eq!(all.len(), 3 * 23 * 5 * 5 * 5);
        let (proxy, fwd) = fuzz_proxy();
        let (mut admitted, mut forwarded) = (0, 0);
        for m in &all {
            forwarded += check_binding_with(&proxy, &fwd, m, gate_admission)
                .unwrap_or_else(|f| panic!("{f}"));
            let (body, headers) = m.render();
            let c = proxy.parse(&body).unwrap();
            let pairs: Vec<(&str, &[u8])> =
                headers.iter().map(|(k, v)| (*k, v.as_slice())).collect();
            if gate_admission(&c, pairs.as_slice()) {
                admitted += 1;
            }
        }
        // Admitted: headers equal to the body (3 tools x plain or sentinel name x the three
        // string version claims). Forwarded: of those, only the allowed tools at 2026-07-28; the
        // denied tool is bound, then denied; 2025-11-25 and 2099-01-01 claims get -32022.
        assert_eq!(admitted, 3 * 2 * 3);
        assert_eq!(forwarded, 2 * 2);
    }

    #[test]
    fn the_plain_denied_call_is_json_naming_the_tool() {
        let b = Smuggle::plain().to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["params"]["name"], DENIED);
    }

    #[test]
    fn allowed_calls_round_trip() {
        for seed in 0..500u32 {
            let bytes: Vec<u8> = (0..48)
                .map(|i| (seed.wrapping_mul(2246822519).wrapping_add(i * 3266489917) >> 11) as u8)
                .collect();
            check_roundtrip(&bytes).unwrap_or_else(|f| panic!("{f}"));
        }
    }

    #[test]
    fn canonical_bytes_property_holds_on_samples() {
        for s in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#[..],
            br#"{ "method" : "tools/call", "params":{"arguments":{"b":[1,2.50e3,"\u00e9"],"a":null},"name":"echo"},"id":"x","jsonrpc":"2.0"}"#,
            b"\xff",
            b"[]",
        ] {
            check_canonical_bytes(s).unwrap();
        }
    }
}
