//! The smuggle target's model: a denied call inside one of the smuggling shapes, with its name,
//! id, whitespace and encoding spelled many ways; the proxy must forward nothing at all.

use super::*;

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

    /// The bytes this model stands for, with the witness's tools (`delete_everything` denied,
    /// `echo` allowed).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.to_bytes_named(DENIED, "echo")
    }

    /// The bytes this model stands for, calling the denied tool `denied` and the allowed one
    /// `allowed` (a gate's own names for them, e.g. `lab__delete_everything`).
    pub fn to_bytes_named(&self, denied: &str, allowed: &str) -> Vec<u8> {
        let w = Writer {
            ws: self.space.text(),
            denied: self.name.literal(denied),
            allowed: serde_json::to_string(allowed).expect("a string serializes"),
            id: self.id.literal(),
        };
        let (denied, id) = (&w.denied, &w.id);
        let text = match self.shape {
            Shape::Plain => w.call(denied, id),
            Shape::Notification => {
                w.message(None, &[tools_call(), ("\"params\"", w.params(denied))])
            }
            Shape::Batch {
                denied_first,
                nested,
            } => {
                let (d, a) = (w.call(denied, id), w.call(&w.allowed, "8"));
                let (x, y) = if denied_first { (d, a) } else { (a, d) };
                let ws = w.ws;
                let inner = format!("[{ws}{x},{ws}{y}{ws}]");
                if nested {
                    format!("[{inner}]")
                } else {
                    inner
                }
            }
            Shape::DuplicateName { .. }
            | Shape::DuplicateParams { .. }
            | Shape::DuplicateMethod { .. }
            | Shape::LookAlikeName { .. }
            | Shape::LookAlikeMethod { .. } => w.twice(self.shape),
            Shape::Concatenated { separator } => {
                let sep = match separator {
                    Separator::Nothing => "",
                    Separator::Newline => "\n",
                    Separator::Space => " ",
                    Separator::CrLf => "\r\n",
                };
                format!("{}{sep}{}", w.call(&w.allowed, "8"), w.call(denied, id))
            }
            Shape::Comment { block } => {
                let c = if block { "/* x */" } else { "// x\n" };
                let full = w.call(denied, id);
                // After the opening brace.
                format!("{{{c}{}", &full[1..])
            }
            Shape::TrailingComma => {
                let full = w.call(denied, id);
                let cut = full.len() - 1 - w.ws.len();
                format!("{},{}", &full[..cut], &full[cut..])
            }
            Shape::UnknownMember => w.message(
                Some(id),
                &[
                    tools_call(),
                    ("\"x-gate\"", "\"bypass\"".into()),
                    ("\"params\"", w.params(denied)),
                ],
            ),
            Shape::Stringified => {
                let inner = w.call(denied, id);
                serde_json::to_string(&inner).expect("a string serializes")
            }
        };
        self.encoding.encode(&text, denied)
    }
}

/// The `method` member of a tool call.
fn tools_call() -> (&'static str, String) {
    ("\"method\"", "\"tools/call\"".to_string())
}

/// Writes one model's text: its whitespace between every token, its spellings of the denied
/// name (a JSON literal), the allowed name and the id. Members are written as given: raw key
/// text, raw value text, duplicates and all.
struct Writer {
    ws: &'static str,
    denied: String,
    allowed: String,
    id: String,
}

impl Writer {
    fn obj(&self, members: &[(&str, String)]) -> String {
        let ws = self.ws;
        let inner: Vec<String> = members
            .iter()
            .map(|(k, v)| format!("{ws}{k}{ws}:{ws}{v}"))
            .collect();
        format!("{{{}{ws}}}", inner.join(","))
    }

    /// An envelope: `jsonrpc`, the id when there is one, then `rest`.
    fn message(&self, id: Option<&str>, rest: &[(&str, String)]) -> String {
        let mut members = vec![("\"jsonrpc\"", "\"2.0\"".to_string())];
        members.extend(id.map(|i| ("\"id\"", i.to_string())));
        members.extend_from_slice(rest);
        self.obj(&members)
    }

    fn params(&self, name: &str) -> String {
        self.obj(&[("\"name\"", name.into()), ("\"arguments\"", "{}".into())])
    }

    fn call(&self, name: &str, id: &str) -> String {
        self.message(Some(id), &[tools_call(), ("\"params\"", self.params(name))])
    }

    /// The denied and the allowed value, the denied one second when `denied_last`.
    fn pair(&self, denied_last: bool) -> (String, String) {
        if denied_last {
            (self.allowed.clone(), self.denied.clone())
        } else {
            (self.denied.clone(), self.allowed.clone())
        }
    }

    /// The shapes that say one thing twice: a member repeated, or beside a look-alike of it.
    fn twice(&self, shape: Shape) -> String {
        let id = Some(self.id.as_str());
        match shape {
            Shape::DuplicateName {
                denied_last,
                via_escape,
            } => {
                let key2 = if via_escape {
                    "\"n\\u0061me\""
                } else {
                    "\"name\""
                };
                let (first, second) = self.pair(denied_last);
                let p = self.obj(&[
                    ("\"name\"", first),
                    (key2, second),
                    ("\"arguments\"", "{}".into()),
                ]);
                self.message(id, &[tools_call(), ("\"params\"", p)])
            }
            Shape::DuplicateParams { denied_last } => {
                let (first, second) = self.pair(denied_last);
                let (p1, p2) = (self.params(&first), self.params(&second));
                self.message(id, &[tools_call(), ("\"params\"", p1), ("\"params\"", p2)])
            }
            Shape::DuplicateMethod { call_last } => {
                let (m1, m2) = if call_last {
                    ("\"ping\"", "\"tools/call\"")
                } else {
                    ("\"tools/call\"", "\"ping\"")
                };
                let p = self.params(&self.denied);
                let members = [
                    ("\"method\"", m1.into()),
                    ("\"method\"", m2.into()),
                    ("\"params\"", p),
                ];
                self.message(id, &members)
            }
            Shape::LookAlikeName {
                variant,
                denied_in_variant,
            } => {
                let key = variant.spell("name");
                let (plain, alike) = self.pair(denied_in_variant);
                let p = self.obj(&[
                    ("\"name\"", plain),
                    (&key, alike),
                    ("\"arguments\"", "{}".into()),
                ]);
                self.message(id, &[tools_call(), ("\"params\"", p)])
            }
            Shape::LookAlikeMethod { variant } => {
                let key = variant.spell("method");
                let members = [
                    ("\"method\"", "\"ping\"".into()),
                    (&key, "\"tools/call\"".into()),
                    ("\"params\"", self.params(&self.denied)),
                ];
                self.message(id, &members)
            }
            _ => self.call(&self.denied, &self.id),
        }
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
    /// The denied tool `name` spelled this way, as a JSON string.
    fn literal(self, name: &str) -> String {
        let chars: Vec<char> = name.chars().collect();
        if chars.len() < 2 {
            return serde_json::to_string(name).expect("a string serializes");
        }
        let s: String = match self {
            NameSpelling::Plain => name.into(),
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
            NameSpelling::Upper => name.to_ascii_uppercase(),
            NameSpelling::TrailingSpace => format!("{name} "),
            NameSpelling::LeadingTab => format!("\\t{name}"),
            NameSpelling::NulSuffix => format!("{name}\\u0000"),
            NameSpelling::ZeroWidth(i) => {
                let k = 1 + usize::from(i) % (chars.len() - 1);
                let mut s: String = chars[..k].iter().collect();
                s.push('\u{200b}');
                s.extend(&chars[k..]);
                s
            }
            NameSpelling::CyrillicE => name.replacen('e', "\u{435}", 1),
            NameSpelling::Fullwidth => name
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
