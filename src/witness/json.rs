//! How the witness reads a message body: strictly (one JSON value, UTF-8, no duplicate keys, depth
//! bounded), or, in the deliberately broken `lax-json` mode, the way careless servers do.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// Why a body is not JSON (answered with -32700; the detail never reaches a client unless the
/// witness runs in the broken `leaky` mode).
#[derive(Debug, Clone, thiserror::Error)]
#[error("not JSON: {detail}")]
pub struct NotJson {
    pub detail: String,
}

/// A JSON value that refuses duplicate member names at any depth.
struct NoDuplicates(Value);

impl<'de> Deserialize<'de> for NoDuplicates {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NoDupVisitor)
    }
}

struct NoDupVisitor;

impl<'de> Visitor<'de> for NoDupVisitor {
    type Value = NoDuplicates;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates(Value::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates(Value::from(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<NoDuplicates, E> {
        serde_json::Number::from_f64(v)
            .map(|n| NoDuplicates(Value::Number(n)))
            .ok_or_else(|| E::custom("number out of range"))
    }
    fn visit_str<E>(self, v: &str) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates(Value::String(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates(Value::String(v)))
    }
    fn visit_unit<E>(self) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates(Value::Null))
    }
    fn visit_none<E>(self) -> Result<NoDuplicates, E> {
        Ok(NoDuplicates(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NoDuplicates, A::Error> {
        let mut out = Vec::new();
        while let Some(NoDuplicates(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(NoDuplicates(Value::Array(out)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NoDuplicates, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom("duplicate member name"));
            }
            let NoDuplicates(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(NoDuplicates(Value::Object(out)))
    }
}

/// Strict reading: exactly one JSON value in UTF-8, no BOM, no duplicate member names (compared
/// after unescaping), no lone surrogates, nesting at most 128 deep, nothing after the value.
pub fn parse_strict(bytes: &[u8]) -> Result<Value, NotJson> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let NoDuplicates(v) = NoDuplicates::deserialize(&mut de).map_err(|e| NotJson {
        detail: e.to_string(),
    })?;
    de.end().map_err(|e| NotJson {
        detail: e.to_string(),
    })?;
    Ok(v)
}

/// The deliberately careless reading of the `lax-json` broken mode: invalid UTF-8 replaced, BOM
/// skipped, comments and trailing commas removed, single quotes taken as double, `NaN` and
/// `Infinity` read as numbers, duplicate keys last-wins, and every value of a concatenated stream
/// returned. It exists so the tests can show which cases catch such a server.
pub fn parse_lax(bytes: &[u8]) -> Result<Vec<Value>, NotJson> {
    let text = String::from_utf8_lossy(bytes);
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
pub fn nesting_depth(bytes: &[u8]) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn lax_reads_what_careless_servers_read() {
        let v = parse_lax(b"{'a':1,/*c*/ \"a\":2,}{\"b\":3}").unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0]["a"], 2);
        assert_eq!(nesting_depth(b"[[\"[[\"]]"), 2);
    }
}
