//! A live trial counter for a quiet run on a terminal: one line on stderr, redrawn in place
//! (`312/3768 trials, 14 s`), cleared when the run ends. Nothing is drawn unless both stdout and
//! stderr are terminals, so logs and pipes get no control characters.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the line is redrawn.
const EVERY: Duration = Duration::from_millis(250);

/// The counter's text after `elapsed`, `done` of `total` trials finished.
pub fn line(done: usize, total: usize, elapsed: Duration) -> String {
    let s = elapsed.as_secs();
    let time = if s >= 60 {
        format!("{} min {:02} s", s / 60, s % 60)
    } else {
        format!("{s} s")
    };
    format!("{done}/{total} trials, {time}")
}

/// The drawing thread; dropping it stops the thread and clears the line.
pub(crate) struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// Starts drawing `done` (trials finished, counted by the runner) against `total`, when
    /// stdout and stderr are both terminals; `None` otherwise.
    pub(crate) fn on_terminal(total: usize, done: Arc<AtomicUsize>) -> Option<Progress> {
        if !(std::io::stdout().is_terminal() && std::io::stderr().is_terminal()) {
            return None;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let start = Instant::now();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                let text = line(done.load(Ordering::Relaxed), total, start.elapsed());
                // `\r` and erase-line: the counter redraws itself in place.
                let _ = write!(std::io::stderr(), "\r\x1b[2K{text}");
                std::thread::sleep(EVERY);
            }
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        });
        Some(Progress {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_reads_as_trials_and_time() {
        assert_eq!(line(0, 10, Duration::from_millis(900)), "0/10 trials, 0 s");
        assert_eq!(
            line(312, 3768, Duration::from_secs(14)),
            "312/3768 trials, 14 s"
        );
        assert_eq!(
            line(3768, 3768, Duration::from_secs(125)),
            "3768/3768 trials, 2 min 05 s"
        );
    }
}
