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
