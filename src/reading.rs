//! How a server may read a message body: strictly (one JSON value, UTF-8, no duplicate keys,
//! depth bounded), or the way careless servers do. A [`Personality`] picks one of the readings
//! real downstream servers have. A leaf: the witness reads with it (strictly, or in its
//! `lax-json` mode and personality lanes), and the transport and the fuzzer use it to know every
//! way a body can be read, so a gate can be judged against the servers it will sit in front of.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// Why a body is not JSON (answered with -32700; the detail never reaches a client unless the
/// witness runs in the broken `leaky` mode).
#[derive(Debug, Clone, thiserror::Error)]
#[error("not JSON: {detail}")]
pub(crate) struct NotJson {
    pub detail: String,
}

/// How a witness reads ambiguous JSON (DESIGN.md section 4). Under every personality the witness
/// is otherwise the same correct server; only the reading of the bytes differs.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Personality {
    /// Refuses what the gate should refuse (duplicates, extensions, invalid UTF-8, trailing bytes).
    #[default]
    Strict,
    /// Duplicate member names: the last one wins (serde_json, Python's json, JavaScript).
    LastWins,
    /// Duplicate member names: the first one wins (some streaming and C readers).
    FirstWins,
    /// UTF-16 and UTF-32 decoded, comments, trailing commas, single quotes, NaN/Infinity,
    /// invalid UTF-8 replaced, and
    /// every value of a concatenation run.
    Lenient,
    /// Envelope and params member names matched ignoring case (ASCII and the Unicode folds
    /// `ſ`→`s`, `K`→`k`), the last one winning, as Go's encoding/json does.
    CaseInsensitive,
}

impl Personality {
    pub const ALL: [Personality; 5] = [
        Personality::Strict,
        Personality::LastWins,
        Personality::FirstWins,
        Personality::Lenient,
        Personality::CaseInsensitive,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Personality::Strict => "strict",
            Personality::LastWins => "last-wins",
            Personality::FirstWins => "first-wins",
            Personality::Lenient => "lenient",
            Personality::CaseInsensitive => "case-insensitive",
        }
    }
}

/// Read a body as `personality` does: the messages it finds (more than one only for a lenient
/// reader given a concatenation), or why it is not JSON.
pub fn read(personality: Personality, bytes: &[u8]) -> Result<Vec<Value>, NotJson> {
    let whole = |r: Result<Value, serde_json::Error>| {
        r.map(|v| vec![v]).map_err(|e| NotJson {
            detail: e.to_string(),
        })
    };
    match personality {
        Personality::Strict => parse_strict(bytes).map(|v| vec![v]),
        Personality::LastWins => whole(serde_json::from_slice::<Value>(bytes)),
        Personality::FirstWins => {
            whole(serde_json::from_slice::<Read<KeepFirst>>(bytes).map(|Read(v, _)| v))
        }
        Personality::Lenient => parse_lax(bytes),
        Personality::CaseInsensitive => {
            let mut v = whole(serde_json::from_slice::<Value>(bytes))?;
            for m in &mut v {
                if let Value::Object(obj) = m {
                    let mut folded = fold_names(std::mem::take(obj));
                    if let Some(Value::Object(p)) = folded.get_mut("params") {
                        *p = fold_names(std::mem::take(p));
                    }
                    *obj = folded;
                }
            }
            Ok(v)
        }
    }
}

/// Member names folded to lower case the way case-insensitive decoders match them; for two names
/// that fold alike, the last wins.
fn fold_names(obj: Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in obj {
        let folded: String = k
            .chars()
            .map(|c| match c {
                '\u{17f}' => 's',
                '\u{212a}' => 'k',
                c => c.to_ascii_lowercase(),
            })
            .collect();
        // The protocol's own camel-case names keep their spelling.
        let name = match folded.as_str() {
            "protocolversion" => "protocolVersion".to_string(),
            "clientinfo" => "clientInfo".to_string(),
            _ => folded,
        };
        out.remove(&name);
        out.insert(name, v);
    }
    out
}

/// What a reader does with a second member of the same name.
trait OnDuplicate {
    /// `Err` refuses the document; `Ok` keeps the map as the rule wants it.
    fn insert(map: &mut Map<String, Value>, key: String, value: Value) -> Result<(), ()>;
}

/// Refuses duplicate member names at any depth (the strict reading).
struct Refuse;
impl OnDuplicate for Refuse {
    fn insert(map: &mut Map<String, Value>, key: String, value: Value) -> Result<(), ()> {
        if map.contains_key(&key) {
            return Err(());
        }
        map.insert(key, value);
        Ok(())
    }
}

/// The first of duplicate member names wins.
struct KeepFirst;
impl OnDuplicate for KeepFirst {
    fn insert(map: &mut Map<String, Value>, key: String, value: Value) -> Result<(), ()> {
        map.entry(key).or_insert(value);
        Ok(())
    }
}

/// A JSON value read with the duplicate rule `R` applied at every depth.
struct Read<R>(Value, std::marker::PhantomData<R>);

impl<R> Read<R> {
    fn of(v: Value) -> Self {
        Read(v, std::marker::PhantomData)
    }
}

impl<'de, R: OnDuplicate> Deserialize<'de> for Read<R> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ReadVisitor::<R>(std::marker::PhantomData))
    }
}

struct ReadVisitor<R>(std::marker::PhantomData<R>);

impl<'de, R: OnDuplicate> Visitor<'de> for ReadVisitor<R> {
    type Value = Read<R>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Read<R>, E> {
        Ok(Read::of(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Read<R>, E> {
        Ok(Read::of(Value::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Read<R>, E> {
        Ok(Read::of(Value::from(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Read<R>, E> {
        serde_json::Number::from_f64(v)
            .map(|n| Read::of(Value::Number(n)))
            .ok_or_else(|| E::custom("number out of range"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Read<R>, E> {
        Ok(Read::of(Value::String(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Read<R>, E> {
        Ok(Read::of(Value::String(v)))
    }
    fn visit_unit<E>(self) -> Result<Read<R>, E> {
        Ok(Read::of(Value::Null))
    }
    fn visit_none<E>(self) -> Result<Read<R>, E> {
        Ok(Read::of(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Read<R>, A::Error> {
        let mut out = Vec::new();
        while let Some(Read::<R>(v, _)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Read::of(Value::Array(out)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Read<R>, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let Read::<R>(v, _) = map.next_value()?;
            R::insert(&mut out, key, v).map_err(|()| de::Error::custom("duplicate member name"))?;
        }
        Ok(Read::of(Value::Object(out)))
    }
}

/// Every message some reading of `bytes` finds, each passed to `visit`: every personality's
/// reading of the whole text (a BOM skipped) and, when it has several lines, of each line; the
/// items of a batch one by one. What a server of any kind may take from the bytes.
pub(crate) fn each_message_read(bytes: &[u8], mut visit: impl FnMut(&Value)) {
    let stripped = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
    let pieces = std::iter::once(stripped).chain(
        stripped
            .split(|b| *b == b'\n')
            .filter(|_| stripped.contains(&b'\n')),
    );
    for piece in pieces {
        for p in Personality::ALL {
            for v in read(p, piece).unwrap_or_default() {
                match &v {
                    Value::Array(items) => items.iter().for_each(&mut visit),
                    one => visit(one),
                }
            }
        }
    }
}

/// An id a server could find in a body it then refused.
#[derive(Debug, Clone, PartialEq)]
pub struct DetectedId {
    pub id: Value,
    /// The body is JSON (RFC 8259; duplicate names allowed). When false, it is JSON only once
    /// its invalid UTF-8 is replaced, as decoders that repair encodings do.
    pub json: bool,
}

/// The id of the request in `bytes` when every reading of it that finds anything finds one
/// request object (a string `method`) with the same id, a string or an integer, and at least one
/// reading does. JSON-RPC 2.0 section 5 asks for a null id only when the id could not be
/// detected; such an id could, so an error may echo it. Readings are the plain JSON ones
/// (duplicate names resolved either way, names folded), of the bytes or, when they are not
/// UTF-8, of the bytes with invalid sequences replaced. Syntax a lenient reader repairs (a
/// comment, a trailing comma, `NaN`), a batch, a concatenation, readings that disagree (a
/// duplicated `id`), a fraction or any other type: none.
pub(crate) fn detectable_id(bytes: &[u8]) -> Option<DetectedId> {
    // An escaped lone surrogate (`"\ud800"`) is JSON by its grammar (RFC 8259 section 8.2 only
    // says what it decodes to is unpredictable); the readers here refuse it, so it is read as
    // U+FFFD.
    let json = ids_read(bytes).or_else(|| ids_read(&replace_lone_surrogate_escapes(bytes)?));
    if json.is_some() || std::str::from_utf8(bytes).is_ok() {
        return json.map(|id| DetectedId { id, json: true });
    }
    let repaired = String::from_utf8_lossy(bytes);
    ids_read(repaired.as_bytes()).map(|id| DetectedId { id, json: false })
}

/// The id a reader that repairs what is not JSON finds in `bytes` (UTF-16 and UTF-32 decoded,
/// `NaN`, comments, invalid UTF-8 replaced: the lenient personality): where no plain reading
/// finds one ([`detectable_id`]), a gate that read such a body so and refused it answers with
/// this id.
pub(crate) fn repaired_id(bytes: &[u8]) -> Option<Value> {
    let values = read(Personality::Lenient, bytes).ok()?;
    let [Value::Object(o)] = values.as_slice() else {
        return None;
    };
    let id = o.get("id")?;
    (id.is_string() || id.is_i64() || id.is_u64()).then(|| id.clone())
}

/// Whether the plain JSON readings of `bytes` (duplicate names resolved either way, names
/// folded, strictly) read it differently: a body whose meaning depends on its reader, the
/// smuggling differential. A body some of them cannot read at all is not counted.
pub fn ambiguous(bytes: &[u8]) -> bool {
    let mut seen: Option<Vec<Value>> = None;
    let mut differ = false;
    for p in [
        Personality::LastWins,
        Personality::FirstWins,
        Personality::CaseInsensitive,
    ] {
        let Ok(v) = read(p, bytes) else {
            return false;
        };
        match &seen {
            Some(s) => differ |= *s != v,
            None => seen = Some(v),
        }
    }
    // A strict reader refuses duplicates (and nothing else the others read): that is a
    // difference too when the others agree.
    differ || read(Personality::Strict, bytes).is_err()
}

/// The one id every plain JSON reading of `bytes` that succeeds gives one request object.
fn ids_read(bytes: &[u8]) -> Option<Value> {
    let mut found: Option<Value> = None;
    for p in Personality::ALL
        .into_iter()
        .filter(|p| *p != Personality::Lenient)
    {
        let Ok(values) = read(p, bytes) else {
            continue;
        };
        let [Value::Object(o)] = values.as_slice() else {
            return None;
        };
        let id = o.get("id")?;
        let valid = id.is_string() || id.is_i64() || id.is_u64();
        if !valid || !o.get("method").is_some_and(Value::is_string) {
            return None;
        }
        match &found {
            Some(f) if f != id => return None,
            _ => found = Some(id.clone()),
        }
    }
    found
}

/// The text of `bytes` when they are UTF-16 or UTF-32, told by a byte order mark or by the
/// zero bytes around the first characters (RFC 4627 section 3; Python's `json.loads` on bytes
/// still decodes them so). Invalid units are replaced.
fn wide_text(bytes: &[u8]) -> Option<String> {
    let unit = |b: &[u8], big: bool, width: usize| -> u32 {
        let mut v = 0u32;
        for i in 0..width {
            let byte = u32::from(b[if big { i } else { width - 1 - i }]);
            v = (v << 8) | byte;
        }
        v
    };
    let (width, big, skip) = match bytes {
        [0, 0, 0xfe, 0xff, ..] => (4, true, 4),
        [0xff, 0xfe, 0, 0, ..] => (4, false, 4),
        [0xfe, 0xff, ..] => (2, true, 2),
        [0xff, 0xfe, ..] => (2, false, 2),
        [0, 0, 0, a, ..] if *a != 0 => (4, true, 0),
        [a, 0, 0, 0, ..] if *a != 0 => (4, false, 0),
        [0, a, 0, b, ..] if *a != 0 && *b != 0 => (2, true, 0),
        [a, 0, b, 0, ..] if *a != 0 && *b != 0 => (2, false, 0),
        _ => return None,
    };
    let units = bytes[skip..]
        .chunks_exact(width)
        .map(|c| unit(c, big, width));
    if width == 4 {
        return Some(
            units
                .map(|u| char::from_u32(u).unwrap_or(char::REPLACEMENT_CHARACTER))
                .collect(),
        );
    }
    let wide: Vec<u16> = units.map(|u| u as u16).collect();
    Some(String::from_utf16_lossy(&wide))
}

/// Strict reading: exactly one JSON value in UTF-8, no BOM, no duplicate member names (compared
/// after unescaping), no lone surrogates, nesting at most 128 deep, nothing after the value.
pub(crate) fn parse_strict(bytes: &[u8]) -> Result<Value, NotJson> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let Read::<Refuse>(v, _) = Read::deserialize(&mut de).map_err(|e| NotJson {
        detail: e.to_string(),
    })?;
    de.end().map_err(|e| NotJson {
        detail: e.to_string(),
    })?;
    Ok(v)
}

/// The deliberately careless reading of the `lax-json` broken mode: UTF-16 and UTF-32 decoded,
/// invalid UTF-8 replaced, BOM
/// skipped, comments and trailing commas removed, single quotes taken as double, `NaN` and
/// `Infinity` read as numbers, duplicate keys last-wins, and every value of a concatenated stream
/// returned. It exists so the tests can show which cases catch such a server.
pub(crate) fn parse_lax(bytes: &[u8]) -> Result<Vec<Value>, NotJson> {
    let text = match wide_text(bytes) {
        Some(t) => std::borrow::Cow::Owned(t),
        None => String::from_utf8_lossy(bytes),
    };
    let text = text.trim_start_matches('\u{feff}');
    let cleaned = loosen(text);
    let mut out = Vec::new();
    for v in serde_json::Deserializer::from_str(&cleaned).into_iter::<Value>() {
        match v {
            Ok(v) => out.push(v),
            Err(e) if out.is_empty() => {
                return Err(NotJson {
                    detail: e.to_string(),
                })
            }
            // Trailing garbage after a value is ignored, as a streaming decoder would.
            Err(_) => break,
        }
    }
    if out.is_empty() {
        return Err(NotJson {
            detail: "empty".into(),
        });
    }
    Ok(out)
}

/// Rewrite the common JSON extensions into JSON (outside strings, approximately).
fn loosen(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut quote: Option<char> = None;
    while i < chars.len() {
        let c = chars[i];
        if let Some(q) = quote {
            if c == '\\' && i + 1 < chars.len() {
                out.push(c);
                out.push(chars[i + 1]);
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
                out.push('"');
            } else if c == '"' {
                out.push_str("\\\"");
            } else if c < ' ' {
                out.push(' ');
            } else {
                out.push(c);
            }
            i += 1;
            continue;
        }
        match c {
            '"' | '\'' => {
                quote = Some(c);
                out.push('"');
            }
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                i += 2;
                while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                    i += 1;
                }
                i += 2;
                continue;
            }
            ',' => {
                let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
                if !matches!(next, Some('}') | Some(']')) {
                    out.push(',');
                }
            }
            'N' if text_at(&chars, i, "NaN") => {
                out.push('0');
                i += 3;
                continue;
            }
            'I' if text_at(&chars, i, "Infinity") => {
                out.push_str("1e308");
                i += 8;
                continue;
            }
            '+' => {}
            _ => out.push(c),
        }
        i += 1;
    }
    out
}

fn text_at(chars: &[char], i: usize, word: &str) -> bool {
    word.chars()
        .enumerate()
        .all(|(k, w)| chars.get(i + k) == Some(&w))
}

/// Deepest nesting of arrays and objects in `bytes`, counted outside strings.
pub(crate) fn nesting_depth(bytes: &[u8]) -> usize {
    let (mut depth, mut max, mut in_str, mut esc) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// One JSON value from an answer's bytes. JSON allows an escaped lone surrogate (`"\ud800"`),
/// which serde_json refuses: such a text is read with the escape replaced by U+FFFD, so an
/// answer that echoes one is still a JSON-RPC answer. Raw invalid UTF-8 is still not JSON.
pub(crate) fn answer_json(bytes: &[u8]) -> Option<Value> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) => Some(v),
        Err(_) => serde_json::from_slice(&replace_lone_surrogate_escapes(bytes)?).ok(),
    }
}

/// `bytes` with every `\uD800`–`\uDFFF` escape that is not half of a pair replaced by
/// `\uFFFD`; `None` when there is none.
pub(crate) fn replace_lone_surrogate_escapes(bytes: &[u8]) -> Option<Vec<u8>> {
    let hex = |b: &[u8]| -> Option<u16> {
        let s = std::str::from_utf8(b).ok()?;
        u16::from_str_radix(s, 16).ok()
    };
    let escape_at = |i: usize| -> Option<u16> {
        (bytes.get(i) == Some(&b'\\') && bytes.get(i + 1) == Some(&b'u'))
            .then(|| hex(bytes.get(i + 2..i + 6)?))
            .flatten()
    };
    let mut out = Vec::with_capacity(bytes.len());
    let mut changed = false;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            if let Some(u) = escape_at(i) {
                let pair = (0xD800..0xDC00).contains(&u)
                    && escape_at(i + 6).is_some_and(|l| (0xDC00..0xE000).contains(&l));
                if pair {
                    out.extend_from_slice(&bytes[i..i + 12]);
                    i += 12;
                } else if (0xD800..0xE000).contains(&u) {
                    out.extend_from_slice(b"\\uFFFD");
                    changed = true;
                    i += 6;
                } else {
                    out.extend_from_slice(&bytes[i..i + 6]);
                    i += 6;
                }
                continue;
            }
            // Any other escape: copy it whole, so `\\u…` is not taken for a `\u` escape.
            out.extend_from_slice(&bytes[i..(i + 2).min(bytes.len())]);
            i += 2;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_lone_surrogates_are_json() {
        let echoed =
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a\ud800b"}]}}"#;
        assert!(serde_json::from_slice::<Value>(echoed).is_err());
        let v = answer_json(echoed).expect("valid JSON");
        assert_eq!(v["result"]["content"][0]["text"], "a\u{fffd}b");
        // Pairs, escaped backslashes and raw invalid UTF-8 are left as they are.
        let pair = br#"{"t":"\ud83d\ude00 \\ud800"}"#;
        assert_eq!(answer_json(pair).expect("pair")["t"], "\u{1f600} \\ud800");
        assert!(answer_json(b"{\"t\":\"\xed\xa0\x80\"}").is_none());
    }

    #[test]
    fn lone_surrogates_are_json_repairs_are_not_and_readers_may_disagree() {
        // An escaped lone surrogate is JSON by its grammar: its id is detectable.
        let lone = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x\ud800"}}"#;
        assert_eq!(
            detectable_id(lone),
            Some(DetectedId {
                id: Value::from(7),
                json: true
            })
        );
        // UTF-16, NaN elsewhere: only a repairing reader finds the id.
        let utf16: Vec<u8> = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        assert_eq!(repaired_id(&utf16), Some(Value::from(1)));
        let nan =
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"n":NaN}}}"#;
        assert_eq!(repaired_id(nan), Some(Value::from(1)));
        // Duplicate and case-folded names are read differently; a plain body is not.
        assert!(ambiguous(br#"{"method":"ping","method":"tools/call"}"#));
        assert!(ambiguous(br#"{"params":{"name":"echo","Name":"x"}}"#));
        assert!(!ambiguous(br#"{"params":{"name":"echo"}}"#));
        // A body they cannot all read is another matter (an encoding, a grammar error).
        assert!(!ambiguous(&utf16));
    }

    #[test]
    fn an_id_is_detectable_only_where_every_reading_agrees() {
        let call = |rest: &str| {
            format!("{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\"{rest}}}")
        };
        // Duplicate names elsewhere, names in another case: the id is still 7.
        let json = |id: i64| {
            Some(DetectedId {
                id: Value::from(id),
                json: true,
            })
        };
        for body in [
            call(",\"params\":{\"name\":\"a\",\"name\":\"b\"}"),
            call(",\"params\":{\"Name\":\"a\",\"name\":\"b\"}"),
            format!("{} ", call("")),
        ] {
            assert_eq!(detectable_id(body.as_bytes()), json(7), "{body}");
        }
        // JSON once its invalid UTF-8 is replaced.
        let repaired = Some(DetectedId {
            id: Value::from(7),
            json: false,
        });
        let mut utf8 = call(",\"params\":{\"x\":\"?\"}").into_bytes();
        let at = utf8.iter().position(|b| *b == b'?').unwrap_or(0);
        utf8[at] = 0xff;
        assert_eq!(detectable_id(&utf8), repaired);
        // Syntax only a lenient reader repairs: a NaN id would be read as 0.
        for body in [
            call(",\"params\":{},"),
            call("/* c */"),
            "{\"jsonrpc\":\"2.0\",\"id\":NaN,\"method\":\"ping\"}".into(),
        ] {
            assert_eq!(detectable_id(body.as_bytes()), None, "{body}");
        }
        for body in [
            // Readings disagree, or there is no one request.
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"ping\"}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
            "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
            // Not an id a request may carry, or not a request.
            "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}",
            "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}",
            "{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"ping\"}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
            "{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,",
        ] {
            assert_eq!(detectable_id(body.as_bytes()), None, "{body}");
        }
    }

    #[test]
    fn strict_refuses_what_the_gate_must_refuse() {
        for bad in [
            &b"{\"a\":1,\"a\":2}"[..],
            b"{\"x\":{\"name\":1,\"n\\u0061me\":2}}",
            b"\xef\xbb\xbf{}",
            b"{\"a\":\"\xff\"}",
            b"{\"a\":\"\\ud800\"}",
            b"{} x",
            b"{}{}",
            b"{\"a\":1,}",
            b"{\"a\":NaN}",
            b"// c\n{}",
            b"",
        ] {
            assert!(
                parse_strict(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(parse_strict(deep.as_bytes()).is_err());
        assert!(parse_strict(b" {\"a\":[1,{\"b\":null}]} \r\n").is_ok());
    }

    #[test]
    fn personalities_read_ambiguous_bytes_differently() {
        let dup = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"delete_everything","arguments":{}}}"#;
        let name = |p: Personality, b: &[u8]| {
            read(p, b).ok().and_then(|v| {
                v.last()?
                    .pointer("/params/name")?
                    .as_str()
                    .map(String::from)
            })
        };
        assert_eq!(name(Personality::Strict, dup), None);
        assert_eq!(
            name(Personality::LastWins, dup).as_deref(),
            Some("delete_everything")
        );
        assert_eq!(name(Personality::FirstWins, dup).as_deref(), Some("echo"));
        assert_eq!(
            name(Personality::Lenient, dup).as_deref(),
            Some("delete_everything")
        );
        let case = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","NAME":"delete_everything","arguments":{}}}"#;
        assert_eq!(name(Personality::LastWins, case).as_deref(), Some("echo"));
        assert_eq!(
            name(Personality::CaseInsensitive, case).as_deref(),
            Some("delete_everything")
        );
        let kelvin = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"na\u{17f}e\":1,\"\u{212a}ey\":2}}";
        let v = read(Personality::CaseInsensitive, kelvin.as_bytes()).unwrap();
        assert!(v[0]["params"].get("nase").is_some() && v[0]["params"].get("key").is_some());
        let comment = b"{\"jsonrpc\":\"2.0\",/*x*/\"id\":1,\"method\":\"ping\"}";
        assert!(read(Personality::LastWins, comment).is_err());
        assert!(read(Personality::Lenient, comment).is_ok());
    }

    #[test]
    fn lax_reads_what_careless_servers_read() {
        let v = parse_lax(b"{'a':1,/*c*/ \"a\":2,}{\"b\":3}").unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0]["a"], 2);
        assert_eq!(nesting_depth(b"[[\"[[\"]]"), 2);
        // UTF-16 and UTF-32, with or without a byte order mark, as Python's json.loads reads
        // bytes; the strict reading refuses them all.
        let text = "{\"id\":1}";
        let le16: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
        let be16: Vec<u8> = text.encode_utf16().flat_map(u16::to_be_bytes).collect();
        let le32: Vec<u8> = text
            .chars()
            .flat_map(|c| u32::from(c).to_le_bytes())
            .collect();
        let be32: Vec<u8> = text
            .chars()
            .flat_map(|c| u32::from(c).to_be_bytes())
            .collect();
        for wide in [
            le16.clone(),
            [&[0xff, 0xfe][..], &le16].concat(),
            be16.clone(),
            [&[0xfe, 0xff][..], &be16].concat(),
            le32,
            be32,
        ] {
            assert_eq!(
                parse_lax(&wide).map(|v| v[0]["id"].clone()).ok(),
                Some(Value::from(1))
            );
            assert!(parse_strict(&wide).is_err());
        }
    }
}
