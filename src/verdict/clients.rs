//! The `crossed` oracle of a `clients` case: every client gets its own answer and nothing of
//! another's (MCP-HTTP-SSE-01: each message goes out on exactly one stream, the one of the
//! request it answers; GATE-FWD-02: a gate's downstream ids cannot collide between clients).
//! Clients mark what they send with `{{client}}`; an echoing tool carries the mark back, so a
//! mark in the wrong client's answer is an answer that crossed (CVE-2026-25536).

use super::{is_response, is_success, show_bytes, Check, Judge, Status};
use crate::transport::{Ending, Observation};
use serde_json::Value;

/// One client's view: its number (1-based), its answer's text and messages, how it ended.
struct Seen<'a> {
    client: usize,
    text: &'a str,
    /// What a message shows of its answer: the body's first bytes.
    shown: &'a [u8],
    messages: &'a [Value],
    ending: &'a Ending,
}

fn views<'a>(obs: &'a Observation, others: &'a [crate::transport::ClientAnswer]) -> Vec<Seen<'a>> {
    let mut out = vec![Seen {
        client: 1,
        text: &obs.answer.scan_text,
        shown: &obs.answer.prefix,
        messages: &obs.answer.messages,
        ending: &obs.answer.ending,
    }];
    out.extend(
        others
            .iter()
            .enumerate()
            .filter(|(_, a)| a.setup_error.is_none())
            .map(|(i, a)| Seen {
                client: i + 2,
                text: &a.text,
                shown: a.text.as_bytes(),
                messages: &a.messages,
                ending: &a.ending,
            }),
    );
    out
}

/// Every answer that holds another client's mark.
fn crossings(views: &[Seen], marks: &[String]) -> Vec<String> {
    let n = marks.len();
    let mut crossed = Vec::new();
    for v in views {
        for (j, mark) in marks.iter().enumerate() {
            if j + 1 != v.client && v.text.contains(mark.as_str()) {
                crossed.push(format!(
                    "client {} of {n} got client {}'s answer: {}",
                    v.client,
                    j + 1,
                    show_bytes(v.shown, 160)
                ));
            }
        }
    }
    crossed
}

/// Whether the tool echoes what it is sent (the first client's result shows it), and the
/// further clients left without an answer, or with a result that is not their own.
fn unanswered(views: &[Seen], marks: &[String]) -> (bool, Vec<String>) {
    let n = marks.len();
    let own_mark = |v: &Seen| v.text.contains(marks[v.client - 1].as_str());
    let success = |v: &Seen| v.messages.iter().any(|m| is_response(m) && is_success(m));
    let echoes = views.first().is_some_and(|v| success(v) && own_mark(v));
    let mut lost = Vec::new();
    for v in views.iter().skip(1) {
        if !v.messages.iter().any(is_response) {
            let how = match v.ending {
                Ending::TimedOut => "nothing before the deadline".to_string(),
                Ending::Unreachable(e) => format!("could not connect: {e}"),
                Ending::Closed => "the connection closed".to_string(),
                Ending::Answered => {
                    format!("no JSON-RPC response: {}", show_bytes(v.shown, 120))
                }
            };
            lost.push(format!("client {} of {n} got no answer ({how})", v.client));
        } else if echoes && success(v) && !own_mark(v) {
            lost.push(format!(
                "client {} of {n} got a result without what it sent: {}",
                v.client,
                show_bytes(v.shown, 160)
            ));
        }
    }
    (echoes, lost)
}

impl Judge<'_> {
    /// Each client's answer holds no other client's mark; each got an answer; a result carries
    /// the client's own mark wherever the first client's result shows the tool echoes it.
    pub(super) fn crossed(&mut self) {
        let Some(seen) = &self.obs.answer.clients else {
            return;
        };
        let n = seen.marks.len();
        let views = views(self.obs, &seen.others);
        let crossed = crossings(&views, &seen.marks);
        let (echoes, lost) = unanswered(&views, &seen.marks);
        let refused: Vec<String> = seen
            .others
            .iter()
            .enumerate()
            .filter_map(|(i, a)| {
                a.setup_error
                    .as_ref()
                    .map(|e| format!("client {}: {e}", i + 2))
            })
            .collect();
        if !refused.is_empty() {
            // Not a violation (a server may cap its sessions), but those clients tested nothing.
            self.add(
                Check::Crossed,
                Status::Pass,
                format!(
                    "{} of {n} clients could not open a session, so sent nothing: {}",
                    refused.len(),
                    refused.join("; ")
                ),
            );
        }
        if crossed.is_empty() && lost.is_empty() {
            if !echoes {
                self.add(
                    Check::Crossed,
                    Status::Pass,
                    "the first client's result does not carry its mark (the tool does not echo what it is sent): only marks in the wrong answer were looked for".into(),
                );
            }
            return;
        }
        let status = self.level_status.max(Status::Fail);
        let mut all = crossed;
        all.extend(lost);
        self.add(
            Check::Crossed,
            status,
            format!(
                "{n} clients sent the same request at once, each with its own mark; answers crossed or went missing: {}",
                all.join("; ")
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::ctx;
    use super::super::{judge, Status, Verdict};
    use crate::case::{parse_case, Case, Source, TransportKind};
    use crate::settings::DenyStyle;
    use crate::transport::{ClientAnswer, ClientsSeen, Ending, HttpSeen, Observation};
    use serde_json::{json, Value};

    const CASE: &str = r#"{"title": "t", "requirements": ["MCP-HTTP-SSE-01"],
        "transports": ["http"], "clients": 3,
        "request": {"body": {"json": {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "{{client}}"}}}}},
        "expect": {"outcome": "accept", "id": "echo"}}"#;

    fn echo(text: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": text}]}})
    }

    fn answer(text: &str) -> ClientAnswer {
        let m = echo(text);
        ClientAnswer {
            setup_error: None,
            ending: Ending::Answered,
            status: Some(200),
            text: m.to_string(),
            messages: vec![m],
        }
    }

    /// The first client got `first`; the others got `others`.
    fn verdict(first: &str, others: Vec<ClientAnswer>) -> Verdict {
        let case = Case {
            id: "t/case".into(),
            spec: parse_case("t/case.json", CASE).expect("case parses"),
            source: Source::Embedded,
        };
        let mut obs = Observation::new(TransportKind::Http);
        obs.answer.http = Some(HttpSeen {
            status: 200,
            content_type: Some("application/json".into()),
            body_len: 10,
            ..HttpSeen::default()
        });
        let m = echo(first);
        obs.answer.scan_text = m.to_string();
        obs.answer.prefix = m.to_string().into_bytes();
        obs.answer.messages = vec![m];
        obs.sent.readable = true;
        obs.sent.id = Some(json!(1));
        obs.sent.expects_response = true;
        obs.answer.clients = Some(ClientsSeen {
            marks: vec![
                "mark-1-of-3".into(),
                "mark-2-of-3".into(),
                "mark-3-of-3".into(),
            ],
            others,
        });
        judge(
            &case,
            &obs,
            &ctx(crate::versions::NEWEST_LEGACY, DenyStyle::Error),
        )
    }

    fn crossed(v: &Verdict) -> Vec<Status> {
        v.findings
            .iter()
            .filter(|f| f.check == super::Check::Crossed)
            .map(|f| f.status)
            .collect()
    }

    #[test]
    fn each_client_with_its_own_answer_passes() {
        let v = verdict(
            "mark-1-of-3",
            vec![answer("mark-2-of-3"), answer("mark-3-of-3")],
        );
        assert_eq!(v.status, Status::Pass);
        assert!(crossed(&v).is_empty());
    }

    #[test]
    fn an_answer_with_another_clients_mark_fails_wherever_it_lands() {
        // The first client's own answer is right; two others swapped theirs.
        let v = verdict(
            "mark-1-of-3",
            vec![answer("mark-3-of-3"), answer("mark-2-of-3")],
        );
        assert_eq!(crossed(&v), vec![Status::Fail]);
        // The first client got another's: crossed, though its outcome is an accept.
        let v = verdict(
            "mark-2-of-3",
            vec![answer("mark-1-of-3"), answer("mark-3-of-3")],
        );
        assert_eq!(crossed(&v), vec![Status::Fail]);
        assert_eq!(v.status, Status::Fail);
    }

    #[test]
    fn a_client_left_without_an_answer_fails_and_one_refused_a_session_is_only_noted() {
        let lost = ClientAnswer {
            setup_error: None,
            ending: Ending::TimedOut,
            status: Some(200),
            messages: Vec::new(),
            text: String::new(),
        };
        let v = verdict("mark-1-of-3", vec![answer("mark-2-of-3"), lost]);
        assert_eq!(crossed(&v), vec![Status::Fail]);
        let refused = ClientAnswer {
            setup_error: Some("initialize answered HTTP 503".into()),
            ending: Ending::Closed,
            status: None,
            messages: Vec::new(),
            text: String::new(),
        };
        let v = verdict("mark-1-of-3", vec![refused, answer("mark-3-of-3")]);
        assert_eq!(crossed(&v), vec![Status::Pass]);
        assert_eq!(v.status, Status::Pass);
    }

    #[test]
    fn a_result_without_the_clients_own_text_fails_only_where_the_tool_echoes() {
        // The tool echoes (client 1's result carries its mark): client 2's blank result is not its own.
        let v = verdict(
            "mark-1-of-3",
            vec![answer("something"), answer("mark-3-of-3")],
        );
        assert_eq!(crossed(&v), vec![Status::Fail]);
        // A tool that does not echo: nothing to tell answers apart by but the marks, noted.
        let v = verdict("done", vec![answer("done"), answer("done")]);
        assert_eq!(crossed(&v), vec![Status::Pass]);
        assert_eq!(v.status, Status::Pass);
    }
}
