//! Test-only helpers shared by the unit tests of several modules.

/// The rows of the shared `Accept` table (`reference-gate/fixtures/accept-headers.json`): an
/// `Accept` value, whether it admits `application/json`, whether it admits
/// `text/event-stream`. The gate's front is tested against the same file.
pub(crate) fn accept_rows() -> Vec<(String, bool, bool)> {
    let table: serde_json::Value = serde_json::from_str(include_str!(
        "../reference-gate/fixtures/accept-headers.json"
    ))
    .expect("the table is JSON");
    let rows: Vec<(String, bool, bool)> = table["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            let flag = |k: &str| r[k].as_bool().expect("a boolean");
            (
                r["accept"].as_str().expect("accept").to_string(),
                flag("json"),
                flag("sse"),
            )
        })
        .collect();
    assert!(rows.len() >= 20, "the Accept table lost rows");
    rows
}

/// A trial's record on `[http]`, with one failed `outcome` finding saying `message`, an
/// explanation, an advisory, and 1.5 s spent.
pub(crate) fn record(
    id: &str,
    verdict: crate::report::TrialVerdict,
    message: &str,
) -> crate::report::Record {
    crate::report::Record {
        id: id.to_string(),
        transport: crate::case::TransportKind::Http,
        profile: crate::case::Profile::Server,
        title: "t".to_string(),
        requirements: vec![],
        advisories: vec!["CVE-2026-0001".to_string()],
        level: crate::case::Level::Must,
        verdict,
        observed: None,
        http_status: None,
        error_code: None,
        elapsed_ms: 1500,
        findings: vec![crate::verdict::Finding {
            check: crate::verdict::Check::Outcome,
            status: crate::verdict::Status::Fail,
            message: message.to_string(),
        }],
        downstream: None,
        version: "2025-11-25".to_string(),
        lane_version: None,
        explanation: Some(format!("explained: {message}")),
    }
}
