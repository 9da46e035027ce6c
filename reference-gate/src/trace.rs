//! Decision traces: one JSON line per policy decision (decision id, time, server, tool,
//! principal, verdict). Never arguments, credentials or raw bytes.

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
    /// Absent for a tool call; `resource`, `prompt` or `method` otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'a str>,
    pub principal: Option<&'a str>,
    pub verdict: &'a str,
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
