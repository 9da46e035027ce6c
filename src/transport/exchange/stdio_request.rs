//! The parts of a stdio exchange that a case and the runner's own probes share: a message
//! written as one line, and reading lines until one answers a given id. A leaf of `exchange/`:
//! it uses nothing of its siblings.

use super::*;

/// A message as one line of input.
pub(super) fn line_body(value: &Value) -> Body {
    let mut bytes = value.to_string().into_bytes();
    bytes.push(b'\n');
    Body::from_bytes(bytes)
}

/// Read lines until one answers `id`; other lines are returned as they came.
pub(super) async fn read_until_answer(
    proc: &mut StdioProcess,
    id: &str,
    deadline: Instant,
) -> (Option<Value>, Vec<Line>, Option<TransportError>) {
    let mut others = Vec::new();
    loop {
        match proc.read_line(deadline).await {
            Ok(Line::Eof) => return (None, others, None),
            Ok(Line::Text(t)) => {
                if let Ok(v) = serde_json::from_slice::<Value>(&t) {
                    if v.get("id") == Some(&json!(id))
                        && (v.get("result").is_some() || v.get("error").is_some())
                    {
                        return (Some(v), others, None);
                    }
                }
                others.push(Line::Text(t));
            }
            Ok(other) => others.push(other),
            Err(e) => return (None, others, Some(e)),
        }
    }
}
