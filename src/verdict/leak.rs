//! The leak oracle: internal detail that must not reach a client (REQUIREMENTS.md FC-NOLEAK,
//! GATE-ERR-01): stack traces, file paths, parser offsets, exception class names, HTML error
//! pages, and any secret the user passed with `--header`.

use std::sync::OnceLock;

/// Each kind of internal detail the oracle knows: its name, and the pattern that finds it.
const PATTERNS: &[(&str, &str)] = &[
    (
        "a Python stack trace",
        r"Traceback \(most recent call last\)|File \x22[^\x22]+\x22, line \d+",
    ),
    ("a Rust panic", r"panicked at |RUST_BACKTRACE"),
    (
        "a JavaScript stack frame",
        r"\bat [\w$.<>\[\] ]+ \(?[^\s()]+:\d+:\d+\)?",
    ),
    (
        "a source file and line",
        r"\.(rs|py|js|mjs|cjs|ts|go|java|rb|cs|php):\d+",
    ),
    (
        "a file-system path",
        r"(^|[\s\x22'(=:])(/(usr|home|srv|var|opt|app|root|tmp|etc|Users)/[^\s\x22']+|[A-Za-z]:\\[^\s\x22']+)",
    ),
    (
        "a parser offset",
        r"(?i)\bline \d+,? column \d+|\bat line \d+|\bat position \d+|\bat offset \d+|\bcolumn \d+ of line",
    ),
    (
        "an exception class name",
        r"\b[A-Z][A-Za-z]+(Error|Exception): ",
    ),
    ("an HTML error page", r"(?i)<!doctype html|<html[\s>]"),
    (
        "a Java or .NET exception",
        r"\b(java|javax|System|Microsoft)\.[A-Za-z.]+(Exception|Error)\b",
    ),
    ("a Go runtime trace", r"goroutine \d+ \[|runtime\.gopanic"),
    (
        "a pydantic validation text",
        r"validation errors? for [A-Za-z_]|input_value=|input_type=|errors\.pydantic\.dev",
    ),
    (
        "an Express/Node error page",
        r"(?i)<pre>[A-Za-z]*Error\b|&nbsp;(&nbsp;)*at |<br> *&nbsp;",
    ),
];

fn patterns() -> &'static [regex::Regex] {
    static SET: OnceLock<Vec<regex::Regex>> = OnceLock::new();
    SET.get_or_init(|| {
        // The patterns are constants: one that does not compile is a bug the unit test below
        // catches, never an empty oracle at run time.
        PATTERNS
            .iter()
            .map(|(name, p)| {
                regex::Regex::new(p)
                    .unwrap_or_else(|e| panic!("leak pattern for {name} does not compile: {e}"))
            })
            .collect()
    })
}

/// What leaked, if anything: for each kind found, its name and the text that matched (at most
/// 60 characters of it), so a reader sees why; secrets are named, never shown.
pub fn find_leaks(text: &str, secrets: &[String]) -> Vec<String> {
    let mut hits: Vec<String> = patterns()
        .iter()
        .zip(PATTERNS)
        .filter_map(|(re, (name, _))| {
            let m = re.find(text)?;
            let shown: String = m.as_str().trim().chars().take(60).collect();
            Some(format!("{name} (`{}`)", shown.escape_debug()))
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

impl super::Judge<'_> {
    /// Leaks: only what the endpoint said about errors (and any output that is not a message,
    /// and the HTTP headers), not results it was asked to echo. A leak warns under the server
    /// profile and fails under `--strict` and the gate profile.
    pub(super) fn leaks(&mut self) {
        let obs = self.obs;
        let mut leak_text = String::new();
        for r in &self.resp {
            if let Some(e) = r.get("error") {
                leak_text.push_str(&e.to_string());
                leak_text.push('\n');
            }
        }
        for g in &obs.garbage {
            leak_text.push_str(&String::from_utf8_lossy(g));
            leak_text.push('\n');
        }
        if let Some(h) = &obs.http {
            for (k, v) in &h.headers {
                leak_text.push_str(&format!("{k}: {v}\n"));
            }
        }
        let leaks = find_leaks(&leak_text, &self.ctx.secrets);
        if !leaks.is_empty() && self.expect.leak != Some(true) {
            let status = if self.ctx.profile == crate::case::Profile::Gate || self.ctx.strict {
                super::Status::Fail
            } else {
                super::Status::Warn
            };
            self.add(
                super::Check::Leak,
                status,
                format!("the answer exposes {}", leaks.join(", ")),
            );
        }
    }
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
            (
                "1 validation error for call_toolArguments\ntext\n  Field required [type=missing, input_value={}, input_type=dict]",
                "a pydantic validation text",
            ),
            (
                "For further information visit https://errors.pydantic.dev/2.11/v/missing",
                "a pydantic validation text",
            ),
            (
                "invalid type: string \"x\", expected u32 at line 1 column 7",
                "a parser offset",
            ),
            (
                "<pre>SyntaxError: Unexpected token } in JSON at position 12<br> &nbsp; &nbsp;at JSON.parse (&lt;anonymous&gt;)</pre>",
                "an Express/Node error page",
            ),
        ] {
            let found = find_leaks(text, &[]);
            assert!(found.iter().any(|h| h.starts_with(what)), "{text}: {found:?}");
        }
        // Every pattern compiles.
        assert_eq!(patterns().len(), PATTERNS.len());
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
