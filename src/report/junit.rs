//! JUnit XML (`run --junit FILE`), built from quick-junit's model (the one nextest writes its
//! reports with): one `testsuite` per lane, one `testcase` per trial. A failed trial (or a stale
//! baseline entry) is a `failure` whose message is its first finding and whose text is the
//! explanation; a trial that did not apply is `skipped`; a warned or known trial passes with its
//! first finding as output; the advisories a case reproduces are its properties.

use super::{kind_of, Record, RunInfo, TrialVerdict};
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use std::time::Duration;

/// Text XML 1.0 can carry, with nothing for quick-junit to strip: a tab becomes a space, a
/// carriage return goes, and every other control character (ESC included, so a hostile
/// answer's unterminated escape sequence cannot make the ANSI stripper swallow what follows it)
/// and the two noncharacters U+FFFE and U+FFFF become `?`.
fn text(s: &str) -> String {
    s.chars()
        .filter(|c| *c != '\r')
        .map(|c| match c {
            '\t' => ' ',
            '\n' => '\n',
            c if c.is_control() || c == '\u{fffe}' || c == '\u{ffff}' => '?',
            c => c,
        })
        .collect()
}

fn elapsed(r: &Record) -> Duration {
    Duration::from_millis(r.elapsed_ms)
}

/// A trial as a test case: its status, its advisories, its output.
fn testcase(lane: &str, r: &Record) -> TestCase {
    let first = r.findings.first().map_or(String::new(), |f| {
        text(&format!("[{}] {}", f.check.as_str(), f.message))
    });
    let status = match r.verdict {
        TrialVerdict::Fail | TrialVerdict::Stale => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            let body = r.explanation.as_deref().map_or_else(|| first.clone(), text);
            s.set_message(first.as_str())
                .set_type(r.verdict.as_str())
                .set_description(body);
            s
        }
        TrialVerdict::Skip => {
            let mut s = TestCaseStatus::skipped();
            s.set_message("not applicable to this target");
            s
        }
        TrialVerdict::Pass | TrialVerdict::Warn | TrialVerdict::Known => TestCaseStatus::success(),
    };
    let mut case = TestCase::new(text(&r.id), status);
    let family = r.id.split('/').next().unwrap_or("");
    case.set_classname(format!("mcp-gauntlet.{}.{family}", lane.replace('/', ".")))
        .set_time(elapsed(r))
        .add_properties(
            r.advisories
                .iter()
                .map(|a| Property::new("advisory", text(a))),
        );
    if matches!(r.verdict, TrialVerdict::Warn | TrialVerdict::Known) {
        case.set_system_out(format!("{}: {first}", r.verdict));
    }
    case
}

/// The JUnit XML of a run.
pub fn junit(info: &RunInfo, records: &[Record]) -> String {
    let mut lanes: Vec<String> = records.iter().map(kind_of).collect();
    lanes.sort();
    lanes.dedup();
    let mut report = Report::new("mcp-gauntlet");
    report.set_time(records.iter().map(elapsed).sum());
    for lane in lanes {
        let mut suite = TestSuite::new(text(&format!("[{lane}] {}", info.target)));
        let rs: Vec<&Record> = records.iter().filter(|r| kind_of(r) == lane).collect();
        suite.set_time(rs.iter().map(|r| elapsed(r)).sum());
        suite.add_test_cases(rs.iter().map(|r| testcase(&lane, r)));
        report.add_test_suite(suite);
    }
    report
        .to_string()
        .expect("a JUnit report serializes into memory (no I/O can fail)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::Profile;
    use crate::report::RunProfile;
    use crate::testing::record;

    /// What a hostile server answers ends up in the XML: markup, a CDATA end, control
    /// characters, ANSI escapes and the two noncharacters must leave it well-formed, and it reads
    /// back with the same trials, statuses and counts.
    #[test]
    fn hostile_answers_keep_the_xml_well_formed_and_readable() {
        let nasty = "<a href=\"x\">&amp;</a> ]]> \u{0}\u{1b}[31mred\u{7} \u{fffe}\u{ffff} 'q' \u{1b}]hidden?\ttab";
        let records = vec![
            record("batch/a", TrialVerdict::Fail, nasty),
            record("batch/b", TrialVerdict::Warn, nasty),
            record("batch/c", TrialVerdict::Skip, nasty),
            record("batch/d", TrialVerdict::Pass, nasty),
            record("baseline/e", TrialVerdict::Stale, nasty),
        ];
        let info = RunInfo {
            target: "http://127.0.0.1:1/mcp?<&>".to_string(),
            profile: RunProfile::One(Profile::Server),
            spec: "2025-11-25".to_string(),
            strict: false,
            spelling: None,
            subject: Default::default(),
        };
        let xml = junit(&info, &records);
        roxmltree::Document::parse(&xml).expect("well-formed XML");
        let back = Report::deserialize_from_str(&xml).expect("quick-junit reads it back");
        assert_eq!((back.tests, back.failures, back.skipped), (5, 2, 1));
        let cases: Vec<&TestCase> = back
            .test_suites
            .iter()
            .flat_map(|s| &s.test_cases)
            .collect();
        let failure = cases
            .iter()
            .find(|c| c.name.as_str() == "batch/a")
            .expect("batch/a");
        match &failure.status {
            TestCaseStatus::NonSuccess {
                kind: NonSuccessKind::Failure,
                message: Some(m),
                ty: Some(t),
                description: Some(d),
                ..
            } => {
                assert!(
                    m.starts_with("[outcome] <a href=\"x\">&amp;</a> ]]>"),
                    "{m:?}"
                );
                assert!(!m.contains('\u{0}') && !m.contains('\u{1b}') && !m.contains('\u{fffe}'));
                // An unterminated escape hides nothing after it.
                assert!(m.ends_with("'q' ?]hidden? tab"), "{m:?}");
                assert_eq!(t.as_str(), "fail");
                assert!(d.starts_with("explained: "));
            }
            other => panic!("not a failure: {other:?}"),
        }
        let warned = cases
            .iter()
            .find(|c| c.name.as_str() == "batch/b")
            .expect("b");
        assert!(matches!(warned.status, TestCaseStatus::Success { .. }));
        assert!(warned
            .system_out
            .as_ref()
            .is_some_and(|o| o.starts_with("warn: [outcome]")));
        assert_eq!(warned.properties[0].value.as_str(), "CVE-2026-0001");
        assert_eq!(warned.time, Some(Duration::from_millis(1500)));
    }
}
