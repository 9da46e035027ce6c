//! The witness's record: every message it received and every tool it ran, in memory and,
//! optionally, as JSON lines in a log file that another process (the runner) reads. A leaf: the
//! witness writes it, the transport reads it into an Observation, the verdict judges its events.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One thing the witness saw or did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A message arrived (an HTTP request body or a stdio line), before any parsing.
    Message {
        seq: u64,
        transport: String,
        /// The bytes, as lossy UTF-8, cut at 4 KiB.
        raw: String,
        raw_len: u64,
        /// HTTP request headers, lower-cased names (empty on stdio).
        #[serde(default)]
        headers: Vec<(String, String)>,
    },
    /// A tool ran.
    Tool {
        seq: u64,
        tool: String,
        canary: bool,
    },
}

const RAW_KEEP: usize = 4096;

/// Shared, append-only record.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    inner: Arc<Mutex<RecorderInner>>,
}

#[derive(Debug, Default)]
struct RecorderInner {
    events: Vec<Event>,
    seq: u64,
    log: Option<std::fs::File>,
    /// Keep no events in memory: a witness run as its own process, which nobody reads in
    /// memory (its log, if any, is its record), so that what it holds does not grow with every
    /// request it is sent.
    log_only: bool,
}

impl Recorder {
    /// A recorder that also appends every event to `path` (created or truncated).
    pub fn with_log(path: &Path) -> std::io::Result<Recorder> {
        let file = std::fs::File::create(path)?;
        let rec = Recorder::default();
        crate::sync::lock(&rec.inner).log = Some(file);
        Ok(rec)
    }

    /// A recorder for a witness run as its own process: every event to `path`, when given,
    /// and none kept in memory.
    pub fn log_only(path: Option<&Path>) -> std::io::Result<Recorder> {
        let rec = match path {
            Some(path) => Recorder::with_log(path)?,
            None => Recorder::default(),
        };
        crate::sync::lock(&rec.inner).log_only = true;
        Ok(rec)
    }

    fn push(&self, make: impl FnOnce(u64) -> Event) {
        let mut inner = crate::sync::lock(&self.inner);
        inner.seq += 1;
        let ev = make(inner.seq);
        if let Some(log) = inner.log.as_mut() {
            // The log is written before the witness answers, so a reader that saw the answer
            // sees the event.
            if let Ok(line) = serde_json::to_string(&ev) {
                let _ = writeln!(log, "{line}");
                let _ = log.flush();
            }
        }
        if !inner.log_only {
            inner.events.push(ev);
        }
    }

    pub fn message(&self, transport: &str, raw: &[u8], headers: Vec<(String, String)>) {
        let keep = &raw[..raw.len().min(RAW_KEEP)];
        self.push(|seq| Event::Message {
            seq,
            transport: transport.to_string(),
            raw: String::from_utf8_lossy(keep).into_owned(),
            raw_len: raw.len() as u64,
            headers,
        });
    }

    pub fn tool(&self, tool: &str, canary: bool) {
        self.push(|seq| Event::Tool {
            seq,
            tool: tool.to_string(),
            canary,
        });
    }

    /// Number of events so far (a mark for [`Recorder::since`]).
    pub fn len(&self) -> usize {
        crate::sync::lock(&self.inner).events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Events after `mark`.
    pub fn since(&self, mark: usize) -> Vec<Event> {
        crate::sync::lock(&self.inner)
            .events
            .get(mark..)
            .unwrap_or_default()
            .to_vec()
    }
}

/// Reads a witness log written by another process.
#[derive(Debug, Clone)]
pub struct LogReader {
    path: PathBuf,
}

impl LogReader {
    pub fn new(path: impl Into<PathBuf>) -> LogReader {
        LogReader { path: path.into() }
    }

    /// All events in the log; lines that do not parse are skipped (a line being written).
    pub(crate) fn events(&self) -> Vec<Event> {
        let Ok(text) = std::fs::read_to_string(&self.path) else {
            return Vec::new();
        };
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

/// Where the runner reads what a witness did: in-process memory or a log file.
#[derive(Debug, Clone)]
pub enum WitnessView {
    Memory(Recorder),
    Log(LogReader),
}

impl WitnessView {
    pub fn mark(&self) -> usize {
        match self {
            WitnessView::Memory(r) => r.len(),
            WitnessView::Log(l) => l.events().len(),
        }
    }

    pub fn since(&self, mark: usize) -> Vec<Event> {
        match self {
            WitnessView::Memory(r) => r.since(mark),
            WitnessView::Log(l) => l.events().get(mark..).unwrap_or_default().to_vec(),
        }
    }
}
