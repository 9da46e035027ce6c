//! A case body that is text (or raw bytes, a repeated unit, a nest) and calls a tool, written
//! into a meta-tool's arguments where the text allows it: the call's `"name"` string becomes
//! the meta-tool's name, and its `"arguments"` value is wrapped as
//! `{{meta_arguments_open}}"{{meta_tool_key}}":NAME,"{{meta_arguments_key}}":VALUE}`.
//!
//! The rewrite is a splice on the case's template, before placeholders are replaced: every byte
//! the case is about (invalid UTF-8, a bare `Infinity`, a missing brace, the whitespace between
//! tokens, a UTF-16 encoding) stays as written, only moved inside the wrapper. It happens only
//! where a member `"name"` holding a tool placeholder is next to a member `"arguments"` whose
//! value ends (strings and brackets balanced), in either order (the name keeps its place:
//! after the arguments when it came after them); and only when the text spells `tools/call`
//! no more times than it has such pairs, in one encoding only. `can_send` then checks every
//! call a reader finds, before and after. Anything else (a duplicated `"name"`, a call spelled literally,
//! an unterminated value, single quotes) is left to [`super::CallMapping::can_send`], which
//! finds the calls it cannot spell and sets the case aside, as before.
//!
//! A repeated unit or a nest is rewritten only in its prefix and suffix: the rewrite is found on
//! the body built with one and with two repetitions, and must be the same in both.

use crate::case::{BodySpec, NestSpec, RepeatSpec};
use base64::Engine as _;

/// What a meta-tool makes of a body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum MetaText {
    /// The body spells no tool call.
    Unchanged,
    /// The body with each call written into the meta-tool's arguments.
    Rewritten(BodySpec),
    /// The body spells a call that cannot be rewritten.
    Cannot,
}

/// `spec` with its tool calls written into the meta-tool's arguments (placeholders for its
/// name and members).
pub(crate) fn wrap_calls(spec: &BodySpec) -> MetaText {
    match spec {
        BodySpec::Json(_) => MetaText::Unchanged,
        BodySpec::Text(t) => match rewrite(Encoding::Bytes, t.as_bytes()) {
            Found::None => MetaText::Unchanged,
            Found::Cannot => MetaText::Cannot,
            // Only ASCII is inserted, and only between whole tokens.
            Found::Rewritten(bytes) => String::from_utf8(bytes)
                .map_or(MetaText::Cannot, |t| MetaText::Rewritten(BodySpec::Text(t))),
        },
        BodySpec::Base64(b) => wrap_base64(b),
        BodySpec::Repeat(r) => wrap_repeat(r),
        BodySpec::Nest(n) => wrap_nest(n),
    }
}

fn wrap_base64(b: &str) -> MetaText {
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(b) else {
        return MetaText::Cannot;
    };
    // The width its calls are spelled in (bytes, UTF-16 or UTF-32, read from any starting
    // byte: one byte order read from an odd one is the other): exactly one may spell any.
    let widths: std::collections::BTreeSet<usize> = Encoding::ALL
        .into_iter()
        .filter(|e| e.spells_a_call(&bytes))
        .map(Encoding::width)
        .collect();
    let [width] = widths.into_iter().collect::<Vec<_>>()[..] else {
        return if Encoding::ALL.iter().any(|e| e.spells_a_call(&bytes)) {
            MetaText::Cannot
        } else {
            MetaText::Unchanged
        };
    };
    for encoding in Encoding::ALL.into_iter().filter(|e| e.width() == width) {
        match rewrite(encoding, &bytes) {
            Found::None => continue,
            Found::Cannot => return MetaText::Cannot,
            Found::Rewritten(out) => {
                return MetaText::Rewritten(BodySpec::Base64(
                    base64::engine::general_purpose::STANDARD.encode(out),
                ))
            }
        }
    }
    MetaText::Cannot
}

fn wrap_repeat(r: &RepeatSpec) -> MetaText {
    let middle = |k: usize| r.unit.repeat(k);
    match wrap_around(&r.prefix, &middle, &r.suffix) {
        Around::None => MetaText::Unchanged,
        Around::Cannot => MetaText::Cannot,
        Around::Rewritten(prefix, suffix) => MetaText::Rewritten(BodySpec::Repeat(RepeatSpec {
            prefix,
            suffix,
            ..r.clone()
        })),
    }
}

fn wrap_nest(n: &NestSpec) -> MetaText {
    let middle = |k: usize| format!("{}{}{}", n.open.repeat(k), n.inner, n.close.repeat(k));
    match wrap_around(&n.prefix, &middle, &n.suffix) {
        Around::None => MetaText::Unchanged,
        Around::Cannot => MetaText::Cannot,
        Around::Rewritten(prefix, suffix) => MetaText::Rewritten(BodySpec::Nest(NestSpec {
            prefix,
            suffix,
            ..n.clone()
        })),
    }
}

enum Around {
    None,
    Cannot,
    Rewritten(String, String),
}

/// A body `prefix + middle(k) + suffix` whose middle is repeated many times: rewritten in its
/// prefix and suffix only, the same way with one repetition and with two.
fn wrap_around(prefix: &str, middle: &dyn Fn(usize) -> String, suffix: &str) -> Around {
    if mentions(&units(middle(1).as_bytes())) > 0 {
        return Around::Cannot;
    }
    let mut found = Vec::new();
    for k in [1, 2] {
        let body = format!("{prefix}{}{suffix}", middle(k));
        let text = units(body.as_bytes());
        let (edits, rewritten) = plan(&text);
        let calls = mentions(&text);
        if calls == 0 || spells_meta_tool(&text) {
            found.push(None);
            continue;
        }
        if rewritten < calls {
            return Around::Cannot;
        }
        let (p, s) = (prefix.len(), body.len() - suffix.len());
        let mut before = Vec::new();
        let mut after = Vec::new();
        for e in edits {
            if e.end <= p {
                before.push(e);
            } else if e.start >= s {
                after.push(e.shifted(s));
            } else {
                return Around::Cannot;
            }
        }
        let prefix = apply(Encoding::Bytes, prefix.as_bytes(), &before);
        let suffix = apply(Encoding::Bytes, suffix.as_bytes(), &after);
        found.push(Some((prefix, suffix)));
    }
    match (found.pop(), found.pop()) {
        (Some(None), Some(None)) => Around::None,
        (Some(Some(two)), Some(Some(one))) if one == two => {
            match (String::from_utf8(one.0), String::from_utf8(one.1)) {
                (Ok(p), Ok(s)) => Around::Rewritten(p, s),
                _ => Around::Cannot,
            }
        }
        _ => Around::Cannot,
    }
}

/// How the body's characters are laid out in bytes: UTF-8 or anything byte-wise (one unit a
/// byte: invalid sequences are units of their own), or UTF-16 or UTF-32 of either order.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Encoding {
    Bytes,
    Utf16 { le: bool },
    Utf32 { le: bool },
}

impl Encoding {
    const ALL: [Encoding; 5] = [
        Encoding::Bytes,
        Encoding::Utf16 { le: true },
        Encoding::Utf16 { le: false },
        Encoding::Utf32 { le: true },
        Encoding::Utf32 { le: false },
    ];

    fn width(self) -> usize {
        match self {
            Encoding::Bytes => 1,
            Encoding::Utf16 { .. } => 2,
            Encoding::Utf32 { .. } => 4,
        }
    }

    /// The body's units, if its length fits the width.
    fn units(self, bytes: &[u8]) -> Option<Vec<u32>> {
        let w = self.width();
        if bytes.len() % w != 0 {
            return None;
        }
        Some(
            bytes
                .chunks_exact(w)
                .map(|c| match (self, c) {
                    (Encoding::Utf16 { le: true }, [a, b]) => {
                        u32::from(u16::from_le_bytes([*a, *b]))
                    }
                    (Encoding::Utf16 { le: false }, [a, b]) => {
                        u32::from(u16::from_be_bytes([*a, *b]))
                    }
                    (Encoding::Utf32 { le: true }, [a, b, c, d]) => {
                        u32::from_le_bytes([*a, *b, *c, *d])
                    }
                    (Encoding::Utf32 { le: false }, [a, b, c, d]) => {
                        u32::from_be_bytes([*a, *b, *c, *d])
                    }
                    (_, c) => u32::from(c[0]),
                })
                .collect(),
        )
    }

    /// Whether `bytes` spell `tools/call` in this encoding, read from any starting byte.
    fn spells_a_call(self, bytes: &[u8]) -> bool {
        let w = self.width();
        (0..w.min(bytes.len())).any(|from| {
            let rest = &bytes[from..];
            let whole = &rest[..rest.len() - rest.len() % w];
            self.units(whole).is_some_and(|u| mentions(&u) > 0)
        })
    }

    /// ASCII text in this encoding.
    fn encode(self, ascii: &str, out: &mut Vec<u8>) {
        let units: Vec<u32> = ascii.bytes().map(u32::from).collect();
        self.encode_units(&units, out);
    }

    /// Units back to the bytes they were read from.
    fn encode_units(self, units: &[u32], out: &mut Vec<u8>) {
        for u in units {
            match self {
                // A unit read from a byte is a byte.
                Encoding::Bytes => out.push(*u as u8),
                Encoding::Utf16 { le } => {
                    let u = *u as u16;
                    out.extend(if le { u.to_le_bytes() } else { u.to_be_bytes() });
                }
                Encoding::Utf32 { le } => {
                    out.extend(if le { u.to_le_bytes() } else { u.to_be_bytes() });
                }
            }
        }
    }
}

fn units(bytes: &[u8]) -> Vec<u32> {
    bytes.iter().map(|b| u32::from(*b)).collect()
}

enum Found {
    None,
    Cannot,
    Rewritten(Vec<u8>),
}

/// `bytes` read as `encoding`, with its calls rewritten.
fn rewrite(encoding: Encoding, bytes: &[u8]) -> Found {
    let Some(text) = encoding.units(bytes) else {
        return Found::None;
    };
    if mentions(&text) == 0 || spells_meta_tool(&text) {
        return Found::None;
    }
    match plan(&text) {
        (edits, n) if n >= mentions(&text) => Found::Rewritten(apply(encoding, bytes, &edits)),
        _ => Found::Cannot,
    }
}

/// One change to the text: units `start..end` replaced by `with`.
#[derive(Debug, Clone, PartialEq)]
struct Edit {
    start: usize,
    end: usize,
    with: Vec<Piece>,
}

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    /// Text to insert.
    Ascii(&'static str),
    /// Units of the text itself (the call's name, as spelled).
    Copy(Vec<u32>),
}

impl Edit {
    fn shifted(self, by: usize) -> Edit {
        Edit {
            start: self.start - by,
            end: self.end - by,
            with: self.with,
        }
    }
}

/// `bytes` (whose units are `text`) with `edits` (in order, apart) made.
fn apply(encoding: Encoding, bytes: &[u8], edits: &[Edit]) -> Vec<u8> {
    let w = encoding.width();
    let mut out = Vec::with_capacity(bytes.len() + 128);
    let mut at = 0;
    for e in edits {
        out.extend_from_slice(&bytes[at * w..e.start * w]);
        for piece in &e.with {
            match piece {
                Piece::Ascii(s) => encoding.encode(s, &mut out),
                Piece::Copy(units) => encoding.encode_units(units, &mut out),
            }
        }
        at = e.end;
    }
    out.extend_from_slice(&bytes[at * w..]);
    out
}

fn is(u: u32, c: u8) -> bool {
    u == u32::from(c)
}

fn matches(text: &[u32], at: usize, word: &str) -> bool {
    text.len() >= at + word.len()
        && text[at..at + word.len()]
            .iter()
            .zip(word.bytes())
            .all(|(u, b)| is(*u, b))
}

/// Whether the text already spells its calls through the meta-tool (a case written for one).
fn spells_meta_tool(text: &[u32]) -> bool {
    (0..text.len()).any(|i| matches(text, i, "{{meta_tool"))
}

/// How many times the text spells the `tools/call` method (`/` escaped or not).
fn mentions(text: &[u32]) -> usize {
    (0..text.len())
        .filter(|i| matches(text, *i, "tools/call") || matches(text, *i, "tools\\/call"))
        .count()
}

fn skip_ws(text: &[u32], mut i: usize) -> usize {
    while i < text.len() && [b' ', b'\t', b'\r', b'\n'].iter().any(|c| is(text[i], *c)) {
        i += 1;
    }
    i
}

/// The end (one past the closing quote) of the string token starting at `i`.
fn string_end(text: &[u32], i: usize) -> Option<usize> {
    if i >= text.len() || !is(text[i], b'"') {
        return None;
    }
    let mut j = i + 1;
    while j < text.len() {
        if is(text[j], b'\\') {
            j += 2;
        } else if is(text[j], b'"') {
            return Some(j + 1);
        } else {
            j += 1;
        }
    }
    None
}

/// The end of a placeholder (`{{name}}`) starting at `i`: a token of the template, not two
/// braces.
fn placeholder_end(text: &[u32], i: usize) -> Option<usize> {
    if !matches(text, i, "{{") {
        return None;
    }
    let mut j = i + 2;
    while j < text.len()
        && char::from_u32(text[j]).is_some_and(|c| c.is_ascii_lowercase() || c == '_')
    {
        j += 1;
    }
    (j > i + 2 && matches(text, j, "}}")).then_some(j + 2)
}

/// The end of the JSON value (as a careless reader delimits it) starting at `i`: a string, a
/// bracketed value with its strings and brackets balanced, or a bare token.
fn value_end(text: &[u32], i: usize) -> Option<usize> {
    let first = *text.get(i)?;
    if is(first, b'"') {
        return string_end(text, i);
    }
    if let Some(end) = placeholder_end(text, i) {
        return Some(end);
    }
    if is(first, b'{') || is(first, b'[') {
        let mut depth = 0usize;
        let mut j = i;
        while j < text.len() {
            let u = text[j];
            if is(u, b'"') {
                j = string_end(text, j)?;
                continue;
            }
            if let Some(end) = placeholder_end(text, j) {
                j = end;
                continue;
            }
            if is(u, b'{') || is(u, b'[') {
                depth += 1;
            } else if is(u, b'}') || is(u, b']') {
                depth -= 1;
                if depth == 0 {
                    return Some(j + 1);
                }
            }
            j += 1;
        }
        return None;
    }
    let end = (i..text.len()).find(|j| {
        [b',', b'}', b']', b' ', b'\t', b'\r', b'\n']
            .iter()
            .any(|c| is(text[*j], *c))
    })?;
    (end > i).then_some(end)
}

/// The tool placeholders a call's name may hold.
const TOOL_PLACEHOLDERS: [&str; 3] = [
    "{{denied_tool}}",
    "{{allowed_tool}}",
    "{{denied_tool_escaped}}",
];

/// The string token at `i` if it holds a tool placeholder: its end.
fn tool_name_end(text: &[u32], i: usize) -> Option<usize> {
    let end = string_end(text, i)?;
    let name: String = text[i..end]
        .iter()
        .filter_map(|u| char::from_u32(*u))
        .collect();
    TOOL_PLACEHOLDERS
        .iter()
        .any(|p| name.contains(p))
        .then_some(end)
}

/// The member key `key` (quoted) at `i`, followed by its colon: where its value starts.
fn member(text: &[u32], i: usize, key: &str) -> Option<usize> {
    let quoted = format!("\"{key}\"");
    if !matches(text, i, &quoted) {
        return None;
    }
    let colon = skip_ws(text, i + quoted.len());
    (colon < text.len() && is(text[colon], b':')).then(|| skip_ws(text, colon + 1))
}

/// After the value ending at `end`: a comma, then the member key `key`; where its value starts.
fn next_member(text: &[u32], end: usize, key: &str) -> Option<usize> {
    let comma = skip_ws(text, end);
    if comma >= text.len() || !is(text[comma], b',') {
        return None;
    }
    member(text, skip_ws(text, comma + 1), key)
}

/// The edits for `"name":NAME,"arguments":VALUE` at `i`, and where to go on.
fn name_first(text: &[u32], i: usize) -> Option<(Vec<Edit>, usize)> {
    let name = member(text, i, "name")?;
    let name_end = tool_name_end(text, name)?;
    let value = next_member(text, name_end, "arguments")?;
    let value_end = value_end(text, value)?;
    let spelled = text[name..name_end].to_vec();
    Some((
        vec![
            Edit {
                start: name,
                end: name_end,
                with: vec![Piece::Ascii("\"{{meta_tool}}\"")],
            },
            Edit {
                start: value,
                end: value,
                with: vec![
                    Piece::Ascii("{{meta_arguments_open}}\"{{meta_tool_key}}\":"),
                    Piece::Copy(spelled),
                    Piece::Ascii(",\"{{meta_arguments_key}}\":"),
                ],
            },
            Edit {
                start: value_end,
                end: value_end,
                with: vec![Piece::Ascii("}")],
            },
        ],
        value_end,
    ))
}

/// The edits for `"arguments":VALUE,"name":NAME` at `i` (the name stays after the arguments),
/// and where to go on.
fn arguments_first(text: &[u32], i: usize) -> Option<(Vec<Edit>, usize)> {
    let value = member(text, i, "arguments")?;
    let value_end = value_end(text, value)?;
    let name = next_member(text, value_end, "name")?;
    let name_end = tool_name_end(text, name)?;
    let spelled = text[name..name_end].to_vec();
    Some((
        vec![
            Edit {
                start: value,
                end: value,
                with: vec![Piece::Ascii(
                    "{{meta_arguments_open}}\"{{meta_arguments_key}}\":",
                )],
            },
            Edit {
                start: value_end,
                end: value_end,
                with: vec![
                    Piece::Ascii(",\"{{meta_tool_key}}\":"),
                    Piece::Copy(spelled),
                    Piece::Ascii("}"),
                ],
            },
            Edit {
                start: name,
                end: name_end,
                with: vec![Piece::Ascii("\"{{meta_tool}}\"")],
            },
        ],
        name_end,
    ))
}

/// The edits that rewrite every call the text spells the way it allows, and how many calls
/// they rewrite (reading stops where a string never ends).
fn plan(text: &[u32]) -> (Vec<Edit>, usize) {
    let mut edits = Vec::new();
    let mut calls = 0;
    let mut i = 0;
    while i < text.len() {
        if is(text[i], b'"') {
            if let Some((mut found, next)) =
                name_first(text, i).or_else(|| arguments_first(text, i))
            {
                edits.append(&mut found);
                calls += 1;
                i = next;
                continue;
            }
            match string_end(text, i) {
                Some(end) => i = end,
                None => break,
            }
        } else {
            i = placeholder_end(text, i).unwrap_or(i + 1);
        }
    }
    (edits, calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(t: &str) -> MetaText {
        wrap_calls(&BodySpec::Text(t.to_string()))
    }

    fn rewritten(t: &str) -> String {
        match text(t) {
            MetaText::Rewritten(BodySpec::Text(t)) => t,
            other => panic!("{t}: {other:?}"),
        }
    }

    const OPEN: &str = "{{meta_arguments_open}}";

    #[test]
    fn a_call_is_wrapped_with_every_other_byte_kept() {
        let call = r#"{"id":1,"method":"tools/call","params":{"_meta":{{meta}},"name":"{{denied_tool}}","arguments":{"n":Infinity}}} x"#;
        assert_eq!(
            rewritten(call),
            format!(
                r#"{{"id":1,"method":"tools/call","params":{{"_meta":{{{{meta}}}},"name":"{{{{meta_tool}}}}","arguments":{OPEN}"{{{{meta_tool_key}}}}":"{{{{denied_tool}}}}","{{{{meta_arguments_key}}}}":{{"n":Infinity}}}}}}}} x"#
            )
        );
        // Whitespace between the tokens stays where it was; a truncated body stays truncated.
        let spaced = "{\"method\" : \"tools/call\", \"params\" : { \"name\" :\t\"{{allowed_tool}}\" , \"arguments\" : { \"a\" : 1 } } }";
        assert!(rewritten(spaced).contains(&format!(
            "\"name\" :\t\"{{{{meta_tool}}}}\" , \"arguments\" : {OPEN}\"{{{{meta_tool_key}}}}\":\"{{{{allowed_tool}}}}\",\"{{{{meta_arguments_key}}}}\":{{ \"a\" : 1 }}}} }} }}"
        )));
        let cut = r#"{"method":"tools/call","params":{"name":"{{denied_tool}}","arguments":{}"#;
        assert!(rewritten(cut).ends_with(r#":{}}"#));
    }

    #[test]
    fn the_name_after_the_arguments_stays_after_them() {
        let call =
            r#"{"method":"tools/call","params":{"arguments":{"a":"x"},"name":"{{denied_tool}}"}}"#;
        assert_eq!(
            rewritten(call),
            format!(
                r#"{{"method":"tools/call","params":{{"arguments":{OPEN}"{{{{meta_arguments_key}}}}":{{"a":"x"}},"{{{{meta_tool_key}}}}":"{{{{denied_tool}}}}"}},"name":"{{{{meta_tool}}}}"}}}}"#
            )
        );
    }

    #[test]
    fn what_the_text_does_not_allow_is_not_rewritten() {
        // No call: nothing to do.
        assert_eq!(text(r#"{"method":"ping"}"#), MetaText::Unchanged);
        // A string that never ends inside the arguments; single quotes; a literal name.
        for t in [
            r#"{"method":"tools/call","params":{"name":"{{denied_tool}}","arguments":{"note":"abc}}}}"#,
            r#"{'method':'tools/call','params':{'name':'{{denied_tool}}','arguments':{}}}"#,
            r#"{"method":"tools/call","params":{"name":"add","arguments":{}}}"#,
        ] {
            assert_eq!(text(t), MetaText::Cannot, "{t}");
        }
        // Two calls, both rewritten; a duplicated name leaves one `name` as it was, for
        // `can_send` to find.
        let two = r#"{"method":"tools/call","params":{"name":"{{allowed_tool}}","arguments":{}}}{"method":"tools/call","params":{"name":"{{denied_tool}}","arguments":{}}}"#;
        assert_eq!(rewritten(two).matches("{{meta_tool}}").count(), 2);
        let dup = r#"{"method":"tools/call","params":{"name":"{{allowed_tool}}","name":"{{denied_tool}}","arguments":{}}}"#;
        assert!(rewritten(dup).contains(r#""name":"{{allowed_tool}}","name":"{{meta_tool}}""#));
    }

    #[test]
    fn bytes_and_other_encodings_keep_their_own() {
        let call = b"{\"method\":\"tools/call\",\"params\":{\"name\":\"{{denied_tool}}\",\"arguments\":{\"note\":\"a\xffb\"}}}";
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let decode = |m: MetaText| match m {
            MetaText::Rewritten(BodySpec::Base64(b)) => {
                base64::engine::general_purpose::STANDARD.decode(b).unwrap()
            }
            other => panic!("{other:?}"),
        };
        let out = decode(wrap_calls(&BodySpec::Base64(b64(call))));
        assert!(out.windows(3).any(|w| w == b"a\xffb"));
        assert!(out.windows(15).any(|w| w == &b"{{meta_tool}}\","[..15]));
        let utf16: Vec<u8> = String::from_utf8_lossy(call)
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        let out = decode(wrap_calls(&BodySpec::Base64(b64(&utf16))));
        let back: Vec<u16> = out
            .chunks_exact(2)
            .map(|p| u16::from_le_bytes([p[0], p[1]]))
            .collect();
        assert!(String::from_utf16(&back)
            .unwrap()
            .contains(r#""name":"{{meta_tool}}","arguments":{{meta_arguments_open}}"#));
    }

    #[test]
    fn utf32_a_nest_and_a_case_already_written_for_a_meta_tool() {
        let call =
            r#"{"method":"tools/call","params":{"name":"{{denied_tool}}","arguments":{"a":1}}}"#;
        let utf32: Vec<u8> = call
            .chars()
            .flat_map(|c| u32::from(c).to_be_bytes())
            .collect();
        let b64 = base64::engine::general_purpose::STANDARD.encode(&utf32);
        let MetaText::Rewritten(BodySpec::Base64(out)) = wrap_calls(&BodySpec::Base64(b64)) else {
            panic!()
        };
        let out = base64::engine::general_purpose::STANDARD
            .decode(out)
            .unwrap();
        let back: String = out
            .chunks_exact(4)
            .filter_map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
            .collect();
        assert!(
            back.ends_with(r#""{{meta_arguments_key}}":{"a":1}}}}"#),
            "{back}"
        );
        // The same call in UTF-8 beside it: two encodings spell calls, not rewritten.
        let mut mixed = call.as_bytes().to_vec();
        mixed.extend(&utf32);
        let b64 = base64::engine::general_purpose::STANDARD.encode(&mixed);
        assert_eq!(wrap_calls(&BodySpec::Base64(b64)), MetaText::Cannot);
        let n = NestSpec {
            prefix:
                r#"{"method":"tools/call","params":{"name":"{{allowed_tool}}","arguments":{"deep":"#
                    .into(),
            open: "[".into(),
            close: "]".into(),
            depth: 100_000,
            inner: "1".into(),
            suffix: "}}}".into(),
        };
        let MetaText::Rewritten(BodySpec::Nest(out)) = wrap_calls(&BodySpec::Nest(n.clone()))
        else {
            panic!()
        };
        assert_eq!((out.open, out.close, out.depth), (n.open, n.close, n.depth));
        assert_eq!(out.suffix, "}}}}");
        let meta = r#"{"method":"tools/call","params":{"name":"{{meta_tool}}","arguments":{{meta_arguments_open}}"{{meta_tool_key}}":"{{denied_tool}}","{{meta_arguments_key}}":{}}}}"#;
        assert_eq!(text(meta), MetaText::Unchanged);
    }

    #[test]
    fn a_repeated_unit_is_rewritten_around_it() {
        let r = RepeatSpec {
            prefix:
                r#"{"method":"tools/call","params":{"name":"{{denied_tool}}","arguments":{"note":""#
                    .into(),
            unit: "A".into(),
            count: 1 << 24,
            suffix: r#""}}}"#.into(),
        };
        let MetaText::Rewritten(BodySpec::Repeat(out)) = wrap_calls(&BodySpec::Repeat(r.clone()))
        else {
            panic!()
        };
        assert_eq!(out.count, r.count);
        assert!(out
            .prefix
            .ends_with(r#""{{meta_arguments_key}}":{"note":""#));
        assert_eq!(out.suffix, r#""}}}}"#);
        // A unit that spells a call is repeated with it: not rewritten.
        let calls = RepeatSpec {
            unit: r#"{"method":"tools/call"}"#.into(),
            ..r
        };
        assert_eq!(wrap_calls(&BodySpec::Repeat(calls)), MetaText::Cannot);
    }
}
