//! The leak oracle: internal detail that must not reach a client (REQUIREMENTS.md FC-NOLEAK,
//! GATE-ERR-01, CWE-209): stack traces, file paths, exception class names, HTML error pages,
//! parser positions, and any secret the user passed with `--header`.
//!
//! Not every hit weighs the same (REQUIREMENTS.md A26). What tells an attacker about the
//! program (a stack trace, a source line, a path, a qualified Java or .NET exception, a
//! credential) is information exposure and fails on any target. What only points back into the
//! client's own input (a parser position inside the body the client sent, a validation
//! library's text about it), or only names the kind of error (`TypeError: argument string is
//! required`: an exception class alone, no frame, no path), is info on a server and fails only
//! where error texts are specified (the reference gate's table, and `--strict`); beside a frame
//! or a path, those fail as exposure anyway. The rest (an HTML error page, a parser position
//! that points past the body) warns on a server and fails on a gate, as before.

use crate::transport::Extent;
use std::sync::OnceLock;

/// How much a kind of detail weighs (see the module's text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Weight {
    /// About the client's own input: info on a server.
    Echo,
    /// The kind of error only (an exception class name): info on a server.
    Name,
    /// Internal detail that is not yet exposure: warns on a server.
    Detail,
    /// Information exposure (CWE-209): fails on every target.
    Exposure,
}

/// Each kind of internal detail the oracle knows: its name, its weight, and the pattern that
/// finds it. Parser positions are judged apart ([`parser_positions`]).
const PATTERNS: &[(&str, Weight, &str)] = &[
    (
        "a Python stack trace",
        Weight::Exposure,
        r"Traceback \(most recent call last\)|File \x22[^\x22]+\x22, line \d+",
    ),
    (
        "a Rust panic",
        Weight::Exposure,
        r"panicked at |RUST_BACKTRACE",
    ),
    (
        "a JavaScript stack frame",
        Weight::Exposure,
        r"\bat [\w$.<>\[\] ]+ \(?[^\s()]+:\d+:\d+\)?",
    ),
    (
        "a source file and line",
        Weight::Exposure,
        r"\.(rs|py|js|mjs|cjs|ts|go|java|rb|cs|php):\d+",
    ),
    (
        "a file-system path",
        Weight::Exposure,
        r"(^|[\s\x22'(=:])(/(usr|home|srv|var|opt|app|root|tmp|etc|Users)/[^\s\x22']+|[A-Za-z]:\\[^\s\x22']+)",
    ),
    (
        "an exception class name",
        Weight::Name,
        r"\b[A-Z][A-Za-z]+(Error|Exception): ",
    ),
    (
        "an HTML error page",
        Weight::Detail,
        r"(?i)<!doctype html|<html[\s>]",
    ),
    (
        "a Java or .NET exception",
        Weight::Exposure,
        r"\b(java|javax|System|Microsoft)\.[A-Za-z.]+(Exception|Error)\b",
    ),
    (
        "a Go runtime trace",
        Weight::Exposure,
        r"goroutine \d+ \[|runtime\.gopanic",
    ),
    (
        "a pydantic validation text",
        Weight::Echo,
        r"validation errors? for [A-Za-z_]|input_value=|input_type=|errors\.pydantic\.dev",
    ),
    (
        "an Express/Node error page",
        Weight::Exposure,
        r"(?i)<pre>[A-Za-z]*Error\b|&nbsp;(&nbsp;)*at |<br> *&nbsp;",
    ),
];

/// A parser position: a line (first or second group) or a byte offset (third).
const POSITION: &str = r"(?i)\bline (\d+),? column \d+|\bcolumn \d+ of line (\d+)|\bat line (\d+)|\bat (?:position|offset) (\d+)";

fn patterns() -> &'static [regex::Regex] {
    static SET: OnceLock<Vec<regex::Regex>> = OnceLock::new();
    SET.get_or_init(|| {
        // The patterns are constants: one that does not compile is a bug the unit test below
        // catches, never an empty oracle at run time.
        PATTERNS
            .iter()
            .map(|(name, _, p)| compile(name, p))
            .collect()
    })
}

fn compile(name: &str, pattern: &str) -> regex::Regex {
    regex::Regex::new(pattern)
        .unwrap_or_else(|e| panic!("leak pattern for {name} does not compile: {e}"))
}

fn position() -> &'static regex::Regex {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    RE.get_or_init(|| compile("a parser offset", POSITION))
}

/// One kind of detail found: what it is, how much it weighs, and the text that matched (at
/// most 60 characters of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hit {
    pub kind: &'static str,
    pub weight: Weight,
    pub shown: String,
}

impl std::fmt::Display for Hit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.shown.is_empty() {
            f.write_str(self.kind)
        } else {
            write!(f, "{} (`{}`)", self.kind, self.shown)
        }
    }
}

fn shown(text: &str) -> String {
    text.trim()
        .chars()
        .take(60)
        .collect::<String>()
        .escape_debug()
        .to_string()
}

/// Parser positions in `text`: an echo when every one of them lies inside the body the client
/// sent (`extent`), internal detail when one points past it. Of a body whose size the runner
/// does not know (a raw request, a body too large to hold) only its first line is known to exist.
fn parser_positions(text: &str, extent: Option<Extent>) -> Option<Hit> {
    let extent = extent.unwrap_or(Extent { lines: 1, bytes: 0 });
    let mut first = None;
    let mut inside = true;
    for c in position().captures_iter(text) {
        first.get_or_insert_with(|| c.get(0).map_or("", |m| m.as_str()).to_string());
        let number = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<usize>().ok());
        let within = match (number(1).or(number(2)).or(number(3)), number(4)) {
            (Some(line), _) => line <= extent.lines,
            (None, Some(offset)) => offset <= extent.bytes,
            (None, None) => false,
        };
        inside &= within;
    }
    let matched = first?;
    Some(Hit {
        kind: if inside {
            "a parser position inside the client's own body"
        } else {
            "a parser offset"
        },
        weight: if inside { Weight::Echo } else { Weight::Detail },
        shown: shown(&matched),
    })
}

/// What leaked, if anything: each kind found once, with its weight and the text that matched;
/// secrets are named, never shown. `extent` is the size of the body the client sent.
pub(crate) fn find_leaks(text: &str, secrets: &[String], extent: Option<Extent>) -> Vec<Hit> {
    let mut hits: Vec<Hit> = patterns()
        .iter()
        .zip(PATTERNS)
        .filter_map(|(re, (kind, weight, _))| {
            let m = re.find(text)?;
            Some(Hit {
                kind,
                weight: *weight,
                shown: shown(m.as_str()),
            })
        })
        .collect();
    hits.extend(parser_positions(text, extent));
    if secrets
        .iter()
        .any(|s| s.len() >= 4 && text.contains(s.as_str()))
    {
        hits.push(Hit {
            kind: "a credential passed with --header",
            weight: Weight::Exposure,
            shown: String::new(),
        });
    }
    hits
}

impl super::Judge<'_> {
    /// Leaks: only what the endpoint said about errors (and any output that is not a message,
    /// and the HTTP headers), not results it was asked to echo. Exposure fails on every
    /// target; other internal detail warns on a server and fails on a gate and under
    /// `--strict`; an echo of the client's own input is a note on a server and a third-party
    /// gate warns of it, and it fails where error texts are specified (`strict` here: the
    /// reference gate's table, or `--strict`).
    pub(super) fn leaks(&mut self) {
        let obs = self.obs;
        let mut leak_text = String::new();
        for r in &self.resp {
            if let Some(e) = r.get("error") {
                leak_text.push_str(&e.to_string());
                leak_text.push('\n');
            }
        }
        for g in &obs.answer.garbage {
            leak_text.push_str(&String::from_utf8_lossy(g));
            leak_text.push('\n');
        }
        if let Some(h) = &obs.answer.http {
            for (k, v) in &h.headers {
                leak_text.push_str(&format!("{k}: {v}\n"));
            }
        }
        if self.expect.leak == Some(true) {
            return;
        }
        let hits = find_leaks(&leak_text, &self.ctx.secrets, obs.sent.extent);
        let (gate, strict) = (self.ctx.profile == crate::case::Profile::Gate, self.strict);
        let status_of = move |w: Weight| match w {
            Weight::Exposure => super::Status::Fail,
            Weight::Detail if gate || strict => super::Status::Fail,
            Weight::Detail => super::Status::Warn,
            Weight::Echo | Weight::Name if strict => super::Status::Fail,
            Weight::Echo | Weight::Name if gate => super::Status::Warn,
            Weight::Echo | Weight::Name => super::Status::Pass,
        };
        // One finding per status, worst first: each names every kind that weighs that much.
        let mut statuses: Vec<super::Status> = hits.iter().map(|h| status_of(h.weight)).collect();
        statuses.sort_by(|a, b| b.cmp(a));
        statuses.dedup();
        for status in statuses {
            let group: Vec<&Hit> = hits
                .iter()
                .filter(|h| status_of(h.weight) == status)
                .collect();
            let names = group
                .iter()
                .map(|h| h.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            let message = if status == super::Status::Pass {
                let why = if group.iter().all(|h| h.weight == Weight::Name) {
                    "it names the kind of error, nothing of where in the program"
                } else if group.iter().any(|h| h.weight == Weight::Name) {
                    "it names the kind of error and points back into the client's own input"
                } else {
                    "it only points back into the client's own input"
                };
                format!("the answer carries {names}: {why} (info)")
            } else if group.iter().any(|h| h.weight == Weight::Exposure) {
                format!("the answer exposes {names} (information exposure, CWE-209)")
            } else {
                format!("the answer exposes {names}")
            };
            self.add(super::Check::Leak, status, message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str, extent: Option<Extent>) -> Vec<(&'static str, Weight)> {
        find_leaks(text, &[], extent)
            .into_iter()
            .map(|h| (h.kind, h.weight))
            .collect()
    }

    #[test]
    fn finds_the_classes_it_names() {
        for (text, what, weight) in [
            ("Traceback (most recent call last):", "a Python stack trace", Weight::Exposure),
            ("thread 'main' panicked at src/x.rs:3:5", "a Rust panic", Weight::Exposure),
            (
                "    at Object.parse (/app/node_modules/x/index.js:12:7)",
                "a JavaScript stack frame",
                Weight::Exposure,
            ),
            ("SyntaxError: Unexpected token", "an exception class name", Weight::Name),
            ("<!DOCTYPE html><title>500</title>", "an HTML error page", Weight::Detail),
            ("open /etc/mcp/policy.json failed", "a file-system path", Weight::Exposure),
            (
                "1 validation error for call_toolArguments\ntext\n  Field required [type=missing, input_value={}, input_type=dict]",
                "a pydantic validation text",
                Weight::Echo,
            ),
            (
                "For further information visit https://errors.pydantic.dev/2.11/v/missing",
                "a pydantic validation text",
                Weight::Echo,
            ),
            (
                "<pre>SyntaxError: Unexpected token } in JSON at position 12<br> &nbsp; &nbsp;at JSON.parse (&lt;anonymous&gt;)</pre>",
                "an Express/Node error page",
                Weight::Exposure,
            ),
        ] {
            let found = kinds(text, None);
            assert!(found.contains(&(what, weight)), "{text}: {found:?}");
        }
        // Every pattern compiles.
        assert_eq!(patterns().len(), PATTERNS.len());
        assert_eq!(
            find_leaks("token abc123xyz", &["abc123xyz".into()], None)[0].weight,
            Weight::Exposure
        );
    }

    #[test]
    fn a_parser_position_inside_the_clients_body_is_an_echo() {
        let one_line = Some(Extent {
            lines: 1,
            bytes: 40,
        });
        let inside = (
            "a parser position inside the client's own body",
            Weight::Echo,
        );
        let outside = ("a parser offset", Weight::Detail);
        for (text, extent, want) in [
            ("expected value at line 1 column 34", one_line, inside),
            (
                "invalid type: string \"x\", expected u32 at line 1 column 7",
                one_line,
                inside,
            ),
            ("Unexpected token in JSON at position 12", one_line, inside),
            // Past the client's body: the parser read something else.
            ("expected value at line 2 column 1", one_line, outside),
            (
                "Unexpected token in JSON at position 900",
                one_line,
                outside,
            ),
            ("line 1 column 2; at line 7", one_line, outside),
            // A two-line body (CR LF only) has a second line.
            (
                "EOF while parsing at line 2 column 0",
                Some(Extent { lines: 2, bytes: 2 }),
                inside,
            ),
            // A body the runner could not hold: only its first line is known to exist.
            ("expected value at line 1 column 34", None, inside),
            ("expected value at line 3 column 1", None, outside),
            ("Unexpected token in JSON at position 12", None, outside),
        ] {
            assert_eq!(kinds(text, extent), vec![want], "{text}");
        }
    }

    #[test]
    fn ordinary_refusals_are_clean() {
        for text in [
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Unknown tool: delete_everything"}}"#,
            "Bad Request: unsupported protocol version",
            "content-type: application/json\nmcp-session-id: 0f3a",
        ] {
            assert!(
                kinds(text, None).is_empty(),
                "{text}: {:?}",
                kinds(text, None)
            );
        }
    }
}
