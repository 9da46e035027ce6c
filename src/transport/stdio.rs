//! A stdio MCP server as a child process: newline framing with a line cap, stderr drained (and
//! its tail kept), the process killed when the handle is dropped.

use super::TransportError;
use crate::case::Body;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::Instant;

/// Longest stdout line kept; the rest of a longer line is read and dropped.
pub(crate) const MAX_LINE: usize = 16 * 1024 * 1024;
/// How much of stderr is kept (the tail).
const STDERR_KEEP: usize = 64 * 1024;
/// How long a write waits for the writes before it when no deadline was given.
pub(crate) const WRITE_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// How to start the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StdioCommand {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl StdioCommand {
    /// Split one command string as a POSIX shell splits words.
    pub fn parse(command: &str) -> Result<StdioCommand, TransportError> {
        let words = shell_words::split(command)
            .map_err(|_| TransportError::BadTarget(command.to_string()))?;
        let mut words = words.into_iter();
        let program = words
            .next()
            .ok_or_else(|| TransportError::BadTarget(command.to_string()))?;
        Ok(StdioCommand {
            program,
            args: words.collect(),
            env: Vec::new(),
        })
    }

    /// Whether its program can be found: a path to a file, or a name on `PATH` (what spawning
    /// it would find), checked without starting anything.
    pub(crate) fn program_found(&self) -> bool {
        let program = std::path::Path::new(&self.program);
        if self.program.contains('/') {
            return program.is_file();
        }
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
    }
}

/// A line read from the server's stdout.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Line {
    /// A whole line, newline removed (and a CR before it, if any, kept: the verdict judges it).
    Text(Vec<u8>),
    /// A line longer than [`MAX_LINE`]: its first bytes.
    TooLong(Vec<u8>),
    /// End of output; any unterminated tail is returned as `Text` first.
    Eof,
}

/// A running stdio server.
pub(crate) struct StdioProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    stderr: Arc<Mutex<Vec<u8>>>,
    writer: Option<tokio::task::JoinHandle<std::io::Result<ChildStdin>>>,
    /// How long a new write or the close of stdin waits for the writes before it (see
    /// [`StdioProcess::bound_writes`]).
    write_deadline: Option<Instant>,
}

impl StdioProcess {
    pub fn spawn(cmd: &StdioCommand) -> Result<StdioProcess, TransportError> {
        let mut command = Command::new(&cmd.program);
        command
            .args(&cmd.args)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(TransportError::Spawn)?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or(TransportError::ClosedWithoutResponse)?;
        let stderr_buf = Arc::new(Mutex::new(Vec::new()));
        if let Some(mut stderr) = child.stderr.take() {
            let keep = stderr_buf.clone();
            tokio::spawn(async move {
                let mut chunk = vec![0u8; 8192];
                while let Ok(n) = stderr.read(&mut chunk).await {
                    if n == 0 {
                        break;
                    }
                    let mut k = crate::sync::lock(&keep);
                    k.extend_from_slice(&chunk[..n]);
                    let over = k.len().saturating_sub(STDERR_KEEP);
                    k.drain(..over);
                }
            });
        }
        Ok(StdioProcess {
            child,
            stdin,
            stdout: BufReader::with_capacity(64 * 1024, stdout),
            stderr: stderr_buf,
            writer: None,
            write_deadline: None,
        })
    }

    /// Waits for earlier writes end at `deadline` (the case's): a server that stops reading its
    /// input then loses it (its stdin is closed) instead of holding the runner. Without it,
    /// [`WRITE_WAIT`] from each wait.
    pub(crate) fn bound_writes(&mut self, deadline: Instant) {
        self.write_deadline = Some(deadline);
    }

    /// The earlier write's stdin once it is done, or none: it failed, or it was still under way
    /// at the write deadline (then it is abandoned and the input closed).
    async fn after_writes(&mut self) -> Option<ChildStdin> {
        let Some(mut prev) = self.writer.take() else {
            return self.stdin.take();
        };
        let deadline = self
            .write_deadline
            .unwrap_or_else(|| Instant::now() + WRITE_WAIT);
        match tokio::time::timeout_at(deadline, &mut prev).await {
            Ok(done) => done.ok().and_then(Result::ok),
            Err(_) => {
                prev.abort();
                None
            }
        }
    }

    /// Write `body` in the background (the server may stop reading; that must not block the
    /// reader). Writes queue behind any earlier write, each wait bounded (`bound_writes`).
    pub async fn send(&mut self, body: Body) {
        let stdin = self.after_writes().await;
        let Some(mut stdin) = stdin else {
            return;
        };
        self.writer = Some(tokio::spawn(async move {
            for chunk in body.chunks() {
                stdin.write_all(&chunk).await?;
            }
            stdin.flush().await?;
            Ok(stdin)
        }));
    }

    /// Close the server's stdin once pending writes are done (or abandoned at the write
    /// deadline).
    pub async fn close_input(&mut self) {
        // Dropping the returned stdin closes it.
        drop(self.after_writes().await);
        self.stdin = None;
    }

    /// Read one line before `deadline`.
    pub async fn read_line(&mut self, deadline: Instant) -> Result<Line, TransportError> {
        let mut line = Vec::new();
        let mut too_long = false;
        loop {
            let buf = match tokio::time::timeout_at(deadline, self.stdout.fill_buf()).await {
                Err(_) => return Err(TransportError::Timeout("stdout line")),
                Ok(Err(e)) => return Err(TransportError::Io(e)),
                Ok(Ok(b)) => b,
            };
            if buf.is_empty() {
                return Ok(if line.is_empty() && !too_long {
                    Line::Eof
                } else if too_long {
                    Line::TooLong(line)
                } else {
                    Line::Text(line)
                });
            }
            let end = buf.iter().position(|&b| b == b'\n');
            let take = end.unwrap_or(buf.len());
            let room = MAX_LINE.saturating_sub(line.len());
            if take > room {
                too_long = true;
            }
            line.extend_from_slice(&buf[..take.min(room)]);
            let consumed = end.map_or(take, |e| e + 1);
            self.stdout.consume(consumed);
            if end.is_some() {
                return Ok(if too_long {
                    Line::TooLong(line)
                } else {
                    Line::Text(line)
                });
            }
        }
    }

    /// Whether the process has exited, and how.
    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    pub(crate) fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Wait (bounded) for the process to exit.
    pub(crate) async fn wait_exit(
        &mut self,
        deadline: Instant,
    ) -> Option<std::process::ExitStatus> {
        tokio::time::timeout_at(deadline, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// The tail of what the server wrote to stderr.
    pub(crate) fn stderr_tail(&self) -> Vec<u8> {
        crate::sync::lock(&self.stderr).clone()
    }

    /// Kill the process and reap it.
    pub async fn kill(mut self) {
        if let Some(w) = self.writer.take() {
            w.abort();
        }
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), self.child.wait()).await;
    }
}

/// A process's peak resident memory so far (VmHWM from /proc, KiB); `None` where /proc does
/// not tell (it exited, or not Linux). Its own children are not counted.
pub(crate) fn peak_memory_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Watches a process's peak memory every 20 ms until dropped, so a peak is seen even when the
/// process exits (or crashes) before the case ends.
pub(crate) struct MemoryWatch {
    before: Option<u64>,
    peak: Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl MemoryWatch {
    pub fn start(pid: u32) -> MemoryWatch {
        let peak = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let before = peak_memory_kib(pid);
        let seen = peak.clone();
        let task = tokio::spawn(async move {
            while let Some(kib) = peak_memory_kib(pid) {
                seen.fetch_max(kib, std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        });
        MemoryWatch { before, peak, task }
    }

    /// How much the peak grew since the watch started (KiB), when both ends were read.
    pub(crate) fn growth_kib(&self, pid: Option<u32>) -> Option<u64> {
        if let Some(kib) = pid.and_then(peak_memory_kib) {
            self.peak
                .fetch_max(kib, std::sync::atomic::Ordering::Relaxed);
        }
        let peak = self.peak.load(std::sync::atomic::Ordering::Relaxed);
        let before = self.before?;
        (peak > 0).then(|| peak.saturating_sub(before))
    }
}

impl Drop for MemoryWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
