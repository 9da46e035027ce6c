//! The leak oracle: internal detail that must not reach a client (REQUIREMENTS.md FC-NOLEAK,
//! GATE-ERR-01): stack traces, file paths, parser offsets, exception class names, HTML error
//! pages, and any secret the user passed with `--header`.

use regex::RegexSet;
use std::sync::OnceLock;

/// Pattern names, in the order of [`patterns`].
const NAMES: &[&str] = &[
    "a Python stack trace",
    "a Rust panic",
    "a JavaScript stack frame",
    "a source file and line",
    "a file-system path",
    "a parser offset",
    "an exception class name",
    "an HTML error page",
    "a Java or .NET exception",
    "a Go runtime trace",
];

fn patterns() -> &'static RegexSet {
    static SET: OnceLock<RegexSet> = OnceLock::new();
    SET.get_or_init(|| {
        RegexSet::new([
            r"Traceback \(most recent call last\)|File \x22[^\x22]+\x22, line \d+",
            r"panicked at |RUST_BACKTRACE",
            r"\bat [\w$.<>\[\] ]+ \(?[^\s()]+:\d+:\d+\)?",
            r"\.(rs|py|js|mjs|cjs|ts|go|java|rb|cs|php):\d+",
            r"(^|[\s\x22'(=:])(/(usr|home|srv|var|opt|app|root|tmp|etc|Users)/[^\s\x22']+|[A-Za-z]:\\[^\s\x22']+)",
            r"(?i)\bline \d+,? column \d+|\bat line \d+|\bat position \d+|\bat offset \d+|\bcolumn \d+ of line",
            r"\b[A-Z][A-Za-z]+(Error|Exception): ",
            r"(?i)<!doctype html|<html[\s>]",
            r"\b(java|javax|System|Microsoft)\.[A-Za-z.]+(Exception|Error)\b",
            r"goroutine \d+ \[|runtime\.gopanic",
        ])
        .unwrap_or_else(|_| RegexSet::empty())
    })
}

/// What leaked, if anything: a short description per hit, never the leaked text itself for
/// secrets.
pub fn find_leaks(text: &str, secrets: &[String]) -> Vec<String> {
    let mut hits: Vec<String> = patterns()
        .matches(text)
        .into_iter()
        .map(|i| {
            NAMES
                .get(i)
                .copied()
                .unwrap_or("internal detail")
                .to_string()
        })
        .collect();
    if secrets
        .iter()
        .any(|s| s.len() >= 4 && text.contains(s.as_str()))
    {
        hits.push("a credential passed with --header".into());
    }
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_classes_it_names() {
        for (text, what) in [
            ("Traceback (most recent call last):", "a Python stack trace"),
            ("thread 'main' panicked at src/x.rs:3:5", "a Rust panic"),
            (
                "    at Object.parse (/app/node_modules/x/index.js:12:7)",
                "a JavaScript stack frame",
            ),
            ("expected value at line 1 column 34", "a parser offset"),
            ("SyntaxError: Unexpected token", "an exception class name"),
            ("<!DOCTYPE html><title>500</title>", "an HTML error page"),
            ("open /etc/mcp/policy.json failed", "a file-system path"),
        ] {
            assert!(find_leaks(text, &[]).iter().any(|h| h == what), "{text}");
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
                find_leaks(text, &[]).is_empty(),
                "{text}: {:?}",
                find_leaks(text, &[])
            );
        }
        assert_eq!(
            find_leaks("token abc123xyz", &["abc123xyz".into()]).len(),
            1
        );
    }
}
