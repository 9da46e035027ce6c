//! Decision traces: one JSON line per policy decision (decision id, time, server, tool,
//! principal, verdict), a tool call's, a resource's, a prompt's, a method's, a server request's
//! and a filtered list's. Never arguments, credentials or raw bytes.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// One decision.
#[derive(Debug, serde::Serialize)]
pub struct Trace<'a> {
    pub decision_id: &'a str,
    pub server: &'a str,
    /// What was decided on: the tool, or for other kinds the resource URI (normalized), the
    /// prompt, or the method.
    pub tool: &'a str,
    /// Absent for a tool call; `resource`, `prompt`, `method`, `server_request` (a request of
    /// the downstream's to the client) or `list` (a list answer filtered, `tool` its method).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'a str>,
    pub principal: Option<&'a str>,
    /// `allow` or `deny`; `filter` for a list.
    pub verdict: &'a str,
    /// For a list: how many items the client was shown, and how many the policy hid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shown: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden: Option<usize>,
}

/// At most 256 bytes of `s` (on a character boundary): what a trace line keeps of a subject the
/// client or the downstream chose.
pub(crate) fn bounded(s: &str) -> &str {
    let mut end = s.len().min(256);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[derive(Debug, serde::Serialize)]
struct Line<'a> {
    time_ms: u128,
    #[serde(flatten)]
    trace: &'a Trace<'a>,
}

/// Where traces go: a file, stderr, or nowhere.
#[derive(Clone, Default)]
pub struct Tracer {
    sink: Option<Arc<Mutex<Box<dyn Write + Send>>>>,
}

impl Tracer {
    pub fn none() -> Tracer {
        Tracer { sink: None }
    }

    pub fn stderr() -> Tracer {
        Tracer::to(Box::new(std::io::stderr()))
    }

    pub fn to(w: Box<dyn Write + Send>) -> Tracer {
        Tracer {
            sink: Some(Arc::new(Mutex::new(w))),
        }
    }

    pub fn file(path: &str) -> std::io::Result<Tracer> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Tracer::to(Box::new(f)))
    }

    pub fn record(&self, trace: &Trace<'_>) {
        let Some(sink) = &self.sink else { return };
        let time_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        if let (Ok(line), Ok(mut w)) =
            (serde_json::to_string(&Line { time_ms, trace }), sink.lock())
        {
            let _ = writeln!(w, "{line}");
            let _ = w.flush();
        }
    }
}
