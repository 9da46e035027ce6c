//! The strict JSON grammar (RFC 8259 with the gate's limits: no duplicate members, no lone
//! surrogates, bounded depth, sizes and numbers) and its canonical writer.

use super::*;

#[cfg(feature = "faults")]
/// The lenient-grammar fault's pre-pass: comments and trailing commas outside strings removed.
pub(super) fn loosen(text: &str) -> String {
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

pub(super) struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    limits: &'a Limits,
    depth: usize,
    /// Fault injection only: how loosely to read.
    len: Leniency,
}

impl<'a> Parser<'a> {
    /// A parser at the start of `text`.
    pub(super) fn new(text: &'a str, limits: &'a Limits, len: Leniency) -> Parser<'a> {
        Parser {
            s: text.as_bytes(),
            i: 0,
            limits,
            depth: 0,
            len,
        }
    }

    /// Whether every byte was read.
    pub(super) fn at_end(&self) -> bool {
        self.i == self.s.len()
    }

    pub(super) fn syntax<T>(&self) -> Result<T, Malformed> {
        Err(Malformed::new(MalformedKind::Syntax))
    }

    pub(super) fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
            self.i += 1;
        }
    }

    pub(super) fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    pub(super) fn literal(&mut self, word: &[u8], v: Json) -> Result<Json, Malformed> {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(v)
        } else {
            self.syntax()
        }
    }

    pub(super) fn value(&mut self) -> Result<Json, Malformed> {
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

    pub(super) fn enter(&mut self) -> Result<(), Malformed> {
        self.depth += 1;
        if self.depth > self.limits.max_depth {
            return Err(Malformed::new(MalformedKind::Limit));
        }
        Ok(())
    }

    pub(super) fn object(&mut self) -> Result<Json, Malformed> {
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

    pub(super) fn array(&mut self) -> Result<Json, Malformed> {
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

    pub(super) fn number(&mut self) -> Result<Json, Malformed> {
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

    pub(super) fn hex4(&mut self) -> Result<u32, Malformed> {
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

    pub(super) fn string(&mut self) -> Result<String, Malformed> {
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

pub(super) fn write_string(out: &mut Vec<u8>, s: &str) {
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

pub(super) fn write_value(out: &mut Vec<u8>, v: &Json) {
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

pub(super) fn write_members<'a>(
    out: &mut Vec<u8>,
    members: impl Iterator<Item = &'a (String, Json)>,
) {
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
