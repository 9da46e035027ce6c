//! What the case did to the endpoint: still alive after it, and what it cost (body bytes taken
//! before the answer over HTTP, peak memory growth over stdio).

use super::{Check, Judge, Status};
use crate::case::TransportKind;

impl Judge<'_> {
    /// The endpoint is alive after the case, unless the case lets it end.
    pub(super) fn alive(&mut self) {
        // Probed only where the case needs the endpoint alive (`Judging::observe`).
        if self.obs.after.alive == Some(false) {
            let message = format!(
                "the endpoint is not alive after the case: {}",
                self.obs.after.alive_detail.clone().unwrap_or_default()
            );
            self.add(Check::Alive, self.level_status.max(Status::Fail), message);
        }
    }

    /// HTTP+SSE, `endpoint_same_origin`: where the stream's `endpoint` event sends the client
    /// (MCP-SSE-07). `true` when it named another origin: that is then the case's one finding,
    /// nothing having been sent.
    pub(super) fn endpoint_elsewhere(&mut self) -> bool {
        if self.expect.endpoint_same_origin != Some(true) {
            return false;
        }
        let Some(sse) = self.obs.answer.sse.as_ref() else {
            return false;
        };
        // The query holds the session's id, new on every run: the report shows what precedes it.
        let endpoint = match sse.endpoint.split_once('?') {
            Some((at, _)) => format!("{at}?…"),
            None => sse.endpoint.clone(),
        };
        if sse.elsewhere {
            self.add(
                Check::Endpoint,
                self.level_status,
                format!("the stream's endpoint event names another origin ({endpoint}): a client that follows it posts every message, its session id included, to another host (MCP-SSE-07); the runner posted nothing there"),
            );
            return true;
        }
        self.add(
            Check::Endpoint,
            Status::Pass,
            format!("the endpoint event names the stream's own origin ({endpoint})"),
        );
        false
    }

    /// HTTP+SSE, `sse.stream: unread`: a server that accepted every POST while the client read
    /// none of their answers queues them without bound (MCP-SSE-05); one that refused one, left
    /// one waiting or ended the session bounds it. A case whose time ran out first is not judged.
    pub(super) fn unread_queue(&mut self) {
        let Some(u) = self.obs.answer.sse.as_ref().and_then(|s| s.unread.as_ref()) else {
            return;
        };
        let kib = u.bytes / 1024;
        let (status, mut message) = match &u.stopped_by {
            Some(how) => (
                Status::Pass,
                format!(
                    "with the stream unread, {} POSTs of {kib} KiB were accepted, then one was {how}: the server bounds what it queues",
                    u.accepted
                ),
            ),
            None if u.cut => (
                Status::Warn,
                format!(
                    "the case's time ran out after {} of {} POSTs, all accepted: whether the server bounds what it queues was not seen",
                    u.accepted, u.asked
                ),
            ),
            None => (
                self.level_status,
                format!(
                    "with the stream unread, all {} POSTs of {kib} KiB were accepted (202) and the session kept: the server queues their answers (about {} MiB) for a client that reads none, without bound (MCP-SSE-05)",
                    u.accepted,
                    u64::from(u.accepted) * (u.bytes as u64) / (1024 * 1024)
                ),
            ),
        };
        message.push_str(&match u.memory_kib {
            Some((before, after)) => format!(
                "; the server's resident memory went from {:.1} MiB to {:.1} MiB meanwhile",
                before as f64 / 1024.0,
                after as f64 / 1024.0
            ),
            None => "; the server's memory was not observed (run it with --serve, or give --pid)"
                .to_string(),
        });
        self.add(Check::Resources, status, message);
    }

    /// What an input cost the server before it refused it: body bytes taken before the answer
    /// (HTTP), peak memory growth (stdio, /proc VmHWM).
    pub(super) fn resources(&mut self) {
        const MIB: f64 = 1024.0 * 1024.0;
        let obs = self.obs;
        // Over HTTP+SSE an accepted POST is not the answer, but it is what the body cost.
        let post = obs.answer.http.as_ref().or(obs
            .answer
            .sse
            .as_ref()
            .and_then(|s| s.post.as_ref()));
        if let (Some(max), Some(h)) = (self.expect.max_body_sent, post) {
            if h.body_sent > max {
                self.add(
                    Check::Resources,
                    self.level_status,
                    format!(
                        "the server took {:.1} MiB of the body before answering (after {} ms); at most {:.1} MiB expected: it reads a body it will refuse",
                        h.body_sent as f64 / MIB,
                        h.answered_after.as_millis(),
                        max as f64 / MIB
                    ),
                );
            }
        }
        if let Some(max) = self.expect.max_memory_growth_kib {
            match obs.after.memory_growth_kib {
                Some(grew) if grew > max => self.add(
                    Check::Resources,
                    self.level_status,
                    format!(
                        "the server's peak memory grew by {:.1} MiB over the case; at most {:.1} MiB expected: it buffers an input it should bound",
                        grew as f64 / 1024.0,
                        max as f64 / 1024.0
                    ),
                ),
                Some(_) => {}
                None if obs.transport == TransportKind::Stdio => self.add(
                    Check::Resources,
                    Status::Pass,
                    "peak memory not measured (/proc did not tell, or the process had exited)"
                        .into(),
                ),
                None => {}
            }
        }
    }
}
