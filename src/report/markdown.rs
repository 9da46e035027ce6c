//! The Markdown summary of a run (`run --summary-md FILE`, appended, so that
//! `$GITHUB_STEP_SUMMARY` can take it): counts, whether the run was complete, the advisories
//! reproduced, the failures and warnings by case family with counts and the checks that failed,
//! and each family's trials with their first finding, folded. What a target answered is quoted
//! here, so every text from a trial is escaped (no HTML, no Markdown structure) and cut short.

use super::{
    advisories_seen, failed_checks, failing, headline, kind_of, Record, RunInfo, TrialVerdict,
};
use std::collections::BTreeMap;

/// Trials listed per family (the rest are counted): a summary is read, and GitHub keeps at most
/// 1 MiB of a step's summary.
const PER_FAMILY: usize = 25;
/// Characters of a finding shown.
const FIRST_LINE: usize = 200;

/// `text` as inert Markdown: HTML and the characters that make Markdown structure escaped, the
/// characters GitHub would turn into a link or a mention (`:` of a scheme, `www.`, `@`) or math
/// (`$`) written as character references, line breaks flattened, control and bidirectional
/// formatting characters replaced, at most `max` characters.
fn inert(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut last = '\0';
    for (i, c) in text.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            ':' => out.push_str("&#58;"),
            '@' => out.push_str("&#64;"),
            '$' => out.push_str("&#36;"),
            '.' if out.ends_with("www") || out.ends_with("WWW") => out.push_str("&#46;"),
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() || is_format(c) => out.push('?'),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '#' | '~' => {
                out.push('\\');
                out.push(c);
            }
            // A line of only `-` or `=` under text would make it a heading.
            '-' | '=' | '+' if last == '\0' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
        last = c;
    }
    out
}

/// Text for HTML context (inside `<summary>`, where Markdown is not read): only `&`, `<` and
/// `>` escaped.
fn html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A code span's text: backticks cannot end it early.
fn code(text: &str) -> String {
    html(&text.replace('`', "'"))
}

/// Unicode format characters that reorder or hide text (bidirectional controls, zero-width
/// characters, the byte order mark).
fn is_format(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}' | '\u{061c}')
}

/// A record's headline finding as `[check] message`.
fn first_line(r: &Record) -> String {
    headline(r).map_or_else(
        || r.verdict.to_string(),
        |f| format!("[{}] {}", f.check.as_str(), f.message),
    )
}

/// The run's Markdown summary. `not_run` is the run's trials left not run by a target that died
/// (why, how many), as [`crate::run::RunOutcome::not_run`] holds them.
pub(crate) fn step_summary(
    info: &RunInfo,
    records: &[Record],
    not_run: &[(String, usize)],
) -> String {
    let count = |v: TrialVerdict| records.iter().filter(|r| r.verdict == v).count();
    let failed = count(TrialVerdict::Fail) + count(TrialVerdict::Stale);
    let mut out = format!("## mcp-gauntlet: {}\n\n", inert(&info.target, FIRST_LINE));
    let verdict = if failed > 0 {
        format!("**✗ {failed} failed**")
    } else {
        "**✓ nothing failed**".to_string()
    };
    out.push_str(&format!(
        "{verdict} · {} passed · {} warned · {} known · {} not applicable or not run · {} trials ({}, {})\n\n",
        count(TrialVerdict::Pass),
        count(TrialVerdict::Warn),
        count(TrialVerdict::Known),
        count(TrialVerdict::Skip),
        records.len(),
        info.profile,
        inert(&info.spec.replace(',', ", "), FIRST_LINE),
    ));
    for (why, n) in not_run {
        out.push_str(&format!(
            "> **Incomplete:** {n} trial{} {}, which was not brought back.\n\n",
            if *n == 1 { " was" } else { "s were" },
            inert(why, 2 * FIRST_LINE)
        ));
    }
    advisories(&mut out, records, &info.subject);
    families(&mut out, records);
    out
}

/// The advisories line: which were reproduced (on their own package), which weaknesses are
/// as in another package's advisory, and by which cases.
fn advisories(out: &mut String, records: &[Record], subject: &crate::advisory::Subject) {
    let seen = advisories_seen(records);
    if seen.is_empty() {
        return;
    }
    let shown: Vec<_> = seen
        .iter()
        .filter(|(_, s)| !s.by.is_empty())
        .filter_map(|(id, s)| Some((crate::advisory::find(id)?, s)))
        .collect();
    let reproduced = shown.iter().filter(|(a, _)| subject.is(a)).count();
    let tested = seen.values().filter(|s| s.tested).count();
    if shown.is_empty() {
        out.push_str(&format!(
            "**Advisories:** none reproduced ({tested} tested, {} not tested on this target).\n\n",
            seen.len() - tested
        ));
        return;
    }
    out.push_str(&format!(
        "**Advisories reproduced: {reproduced}**, weaknesses as in another package's: {} ({tested} tested, {} not tested on this target)\n\n",
        shown.len() - reproduced,
        seen.len() - tested
    ));
    for (a, s) in shown {
        let cases: Vec<String> =
            s.by.iter()
                .map(|(case, lanes)| {
                    let lanes: Vec<&str> = lanes.iter().map(String::as_str).collect();
                    format!(
                        "`{}` ({})",
                        code(case),
                        inert(&lanes.join(", "), FIRST_LINE)
                    )
                })
                .collect();
        let (how, by) = if subject.is(a) {
            ("", "Reproduced by")
        } else {
            ("as in ", "The same weakness shown by")
        };
        out.push_str(&format!(
            "- {how}[{}]({}): {} Affects {}. {by} {}.\n",
            inert(&a.ids(), FIRST_LINE),
            a.url.replace(['(', ')', ' '], ""),
            inert(&a.summary, 2 * FIRST_LINE),
            inert(&a.affects(), FIRST_LINE),
            cases.join(", ")
        ));
    }
    out.push('\n');
}

/// The failures and warnings by family: a table of counts, the checks that failed, and each
/// family's trials folded under it.
fn families(out: &mut String, records: &[Record]) {
    let mut by: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    for r in records.iter().filter(|r| {
        matches!(
            r.verdict,
            TrialVerdict::Fail | TrialVerdict::Stale | TrialVerdict::Warn
        )
    }) {
        by.entry(r.id.split('/').next().unwrap_or(&r.id))
            .or_default()
            .push(r);
    }
    if by.is_empty() {
        return;
    }
    out.push_str("### By family\n\n| family | failed | warned |\n|---|--:|--:|\n");
    for (family, rs) in &by {
        let f = rs.iter().filter(|r| failing(r)).count();
        out.push_str(&format!(
            "| {} | {f} | {} |\n",
            inert(family, FIRST_LINE),
            rs.len() - f
        ));
    }
    let checks = failed_checks(by.values().flatten().copied());
    if !checks.is_empty() {
        let shown: Vec<String> = checks.iter().map(|(c, n)| format!("{c} {n}")).collect();
        out.push_str(&format!(
            "\nFailed checks (trials): {}\n",
            shown.join(" · ")
        ));
    }
    out.push('\n');
    for (family, rs) in &by {
        let f = rs.iter().filter(|r| failing(r)).count();
        out.push_str(&format!(
            "<details><summary><b>{}</b>: {f} failed, {} warned</summary>\n\n",
            html(family),
            rs.len() - f
        ));
        // Failures first, then warnings, each in the run's order.
        let mut listed: Vec<&&Record> = rs.iter().filter(|r| failing(r)).collect();
        listed.extend(rs.iter().filter(|r| !failing(r)));
        for r in listed.iter().take(PER_FAMILY) {
            out.push_str(&format!(
                "- {} `[{}] {}`: {}\n",
                r.verdict.as_str().to_uppercase(),
                code(&kind_of(r)),
                code(&r.id),
                inert(&first_line(r), FIRST_LINE)
            ));
        }
        if listed.len() > PER_FAMILY {
            out.push_str(&format!(
                "- … and {} more (see the JUnit or JSON report)\n",
                listed.len() - PER_FAMILY
            ));
        }
        out.push_str("\n</details>\n\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Profile;
    use crate::report::RunProfile;
    use crate::testing::record;

    fn info(target: &str) -> RunInfo {
        RunInfo {
            target: target.to_string(),
            profile: RunProfile::One(Profile::Server),
            spec: "2025-06-18,2025-11-25".to_string(),
            strict: false,
            spelling: None,
            subject: Default::default(),
        }
    }

    /// What a hostile server said is quoted inert: no HTML element, no link, no table cell
    /// break, no line break that would start a heading, and cut short.
    #[test]
    fn answers_are_quoted_inert() {
        let nasty = "<img src=x onerror=alert(1)> [click](http://evil.example) | cell\n# heading `code` **bold**";
        let long = "x".repeat(5000);
        let records = vec![
            record("batch/a", TrialVerdict::Fail, nasty),
            record("batch/b", TrialVerdict::Fail, &long),
        ];
        let md = step_summary(&info("http://127.0.0.1:1/mcp<script>"), &records, &[]);
        assert!(!md.contains("<img") && !md.contains("<script>"), "{md}");
        assert!(md.contains("&lt;img src=x onerror=alert(1)&gt;"), "{md}");
        assert!(
            md.contains(
                "\\[click\\](http&#58;//evil.example) \\| cell \\# heading \\`code\\` \\*\\*bold\\*\\*"
            ),
            "{md}"
        );
        // Nothing GitHub would autolink, mention, typeset or reorder.
        let more = "see www.evil.example or mail a@b.example, $x^2$ \u{202e}txet";
        let other = step_summary(
            &info("t"),
            &[record("batch/c", TrialVerdict::Fail, more)],
            &[],
        );
        assert!(
            other.contains("www&#46;evil.example or mail a&#64;b.example, &#36;x^2&#36; ?txet"),
            "{other}"
        );
        assert!(!md.lines().any(|l| l.starts_with("# heading")), "{md}");
        let cut = md
            .lines()
            .find(|l| l.contains("batch/b"))
            .expect("batch/b is listed");
        assert!(cut.ends_with('…') && cut.len() < 400, "{cut}");
    }

    /// The counts, the families with their numbers, the checks, each failure under its family
    /// (failures before warnings), a long family cut with a count of the rest, and the trials a
    /// dead target left.
    #[test]
    fn families_are_counted_and_listed() {
        let mut records: Vec<Record> = (0..30)
            .map(|i| record(&format!("nesting/n{i:02}"), TrialVerdict::Fail, "deep"))
            .collect();
        records.push(record("batch/w", TrialVerdict::Warn, "soft"));
        records.push(record("batch/f", TrialVerdict::Fail, "hard"));
        records.push(record("batch/p", TrialVerdict::Pass, "fine"));
        records.push(record("batch/s", TrialVerdict::Skip, "n/a"));
        let not_run = [(
            "not run: the target died after [http] nesting/n29".to_string(),
            7,
        )];
        let md = step_summary(&info("http://127.0.0.1:1/mcp"), &records, &not_run);
        assert!(md.contains("**✗ 31 failed** · 1 passed · 1 warned · 0 known · 1 not applicable or not run · 34 trials (server, 2025-06-18, 2025-11-25)"), "{md}");
        assert!(
            md.contains("| batch | 1 | 1 |\n| nesting | 30 | 0 |\n"),
            "{md}"
        );
        assert!(md.contains("Failed checks (trials): outcome 31"), "{md}");
        assert!(md.contains("> **Incomplete:** 7 trials were not run&#58; the target died after \\[http\\] nesting/n29, which was not brought back."), "{md}");
        let batch = md.split("<b>batch</b>").nth(1).expect("batch folded");
        let (f, w) = (
            batch.find("FAIL `[http] batch/f`").expect("f"),
            batch.find("WARN `[http] batch/w`").expect("w"),
        );
        assert!(f < w);
        assert!(
            md.contains("- … and 5 more (see the JUnit or JSON report)"),
            "{md}"
        );
        assert!(md.contains("**Advisories:**") || !md.contains("CVE-2026-0001"));
    }

    #[test]
    fn nothing_failed_says_so_and_lists_no_family() {
        let records = vec![record("batch/p", TrialVerdict::Pass, "fine")];
        let md = step_summary(&info("stdio: server"), &records, &[]);
        assert!(md.contains("**✓ nothing failed**"), "{md}");
        assert!(!md.contains("### By family"), "{md}");
    }
}
