//! A case's meaning beyond its syntax: what it is, what it sends, its body, what it expects,
//! which versions and profiles its keys apply to, and its placeholders. The first problem found
//! is the error, naming the file (and line and column where known).

use super::{
    is_placeholder, line_col, requirements, AliveProbe, BodySpec, CaseError, CaseSpec, CodePattern,
    Discover, Expect, HoldSpec, MappingNeed, OneOrMany, Outcome, Profile, RequestSpec, SeriesSpec,
    SessionMode, SseStream, TransportKind, Trickle, MAX_BODY_LEN,
};
use crate::versions::Version;
use base64::Engine as _;

fn invalid(path: &str, message: impl Into<String>) -> CaseError {
    CaseError::Invalid {
        path: path.to_string(),
        message: message.into(),
    }
}

/// A case's meaning beyond its syntax, in the order a reader checks it: what it is, what it
/// sends, its body, what it expects, which versions and profiles its keys apply to, and its
/// placeholders. The first problem is the error.
pub(super) fn validate(path: &str, text: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    validate_metadata(path, text, spec)?;
    validate_request(path, spec)?;
    validate_body(path, &spec.request)?;
    validate_expectations(path, spec)?;
    validate_version_keys(path, spec)?;
    validate_placeholders(path, text)?;
    validate_mapping(path, text, spec)?;
    validate_probe(path, spec)
}

/// A probe that goes through to the downstream needs what it probes: a process or session the
/// runner opened (`session: initialized`), kept open after the case (no `close_input`), and an
/// alive check at all (`alive` not false): otherwise it could never run, or always fail.
fn validate_probe(path: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    if spec.alive_probe != AliveProbe::Downstream {
        return Ok(());
    }
    let sets = [
        Some(&spec.expect),
        spec.strict.as_ref(),
        spec.gate.as_ref(),
        spec.prefer.as_ref(),
        spec.modern.as_ref(),
    ];
    let alive_off = sets.into_iter().flatten().any(|e| e.alive == Some(false));
    if spec.session == SessionMode::None || spec.request.close_input || alive_off {
        return Err(invalid(
            path,
            "`alive_probe: downstream` needs `session: initialized`, no `close_input`, and `alive` not false",
        ));
    }
    Ok(())
}

/// The meta-tool's placeholders are known only under a meta-tool mapping: a case that uses them
/// says it is written for one (`"mapping": "meta-tool"`).
fn validate_mapping(path: &str, text: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    let uses_meta = ["{{meta_tool", "{{meta_arguments"]
        .iter()
        .any(|p| text.contains(p));
    if uses_meta && spec.mapping != Some(MappingNeed::MetaTool) {
        return Err(invalid(
            path,
            "the meta-tool placeholders need `\"mapping\": \"meta-tool\"`",
        ));
    }
    Ok(())
}

/// Title, cited requirement IDs (known ones, reported where they are written), transports,
/// profiles, version range and timeout.
fn validate_metadata(path: &str, text: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    if spec.title.trim().is_empty() {
        return Err(invalid(path, "`title` is empty"));
    }
    if spec.stateful && spec.stateless {
        return Err(invalid(
            path,
            "`stateful` and `stateless` together: the case would apply to no HTTP target",
        ));
    }
    if spec.requirements.is_empty() {
        return Err(invalid(
            path,
            "`requirements` is empty: cite at least one ID",
        ));
    }
    let reqs = requirements();
    for id in &spec.requirements {
        if !reqs.contains_key(id) {
            let at = text.find(&format!("\"{id}\"")).unwrap_or(0);
            let (line, column) = line_col(text, at);
            return Err(CaseError::UnknownRequirement {
                path: path.to_string(),
                id: id.clone(),
                line,
                column,
            });
        }
    }
    validate_advisories(path, text, spec)?;
    if spec.transports.as_ref().is_some_and(Vec::is_empty) {
        return Err(invalid(path, "`transports` is empty"));
    }
    if spec.profiles.as_ref().is_some_and(Vec::is_empty) {
        return Err(invalid(path, "`profiles` is empty"));
    }
    if spec.timeout_ms.is_some_and(|t| t == 0 || t > 600_000) {
        return Err(invalid(path, "`timeout_ms` must be 1..=600000"));
    }
    validate_clients(path, text, spec)?;
    if spec.sse.is_some() && spec.transports.as_deref() != Some(&[TransportKind::Sse]) {
        return Err(invalid(
            path,
            "`sse` says what becomes of an HTTP+SSE stream: its `transports` are `[\"sse\"]`",
        ));
    }
    let elsewhere = [spec.prefer.as_ref(), spec.strict.as_ref()]
        .into_iter()
        .flatten()
        .any(|e| e.endpoint_same_origin.is_some());
    let endpoint = spec.expect.endpoint_same_origin;
    if elsewhere
        || endpoint == Some(false)
        || (endpoint.is_some() && spec.transports.as_deref() != Some(&[TransportKind::Sse]))
    {
        return Err(invalid(
            path,
            "`endpoint_same_origin` is `true` in `expect` only, and judges an HTTP+SSE stream's endpoint event: its `transports` are `[\"sse\"]`",
        ));
    }
    if let Some(sse) = &spec.sse {
        let unread = sse.stream == SseStream::Unread;
        if sse
            .posts
            .is_some_and(|n| !unread || !(1..=5000).contains(&n))
        {
            return Err(invalid(
                path,
                "`sse.posts` (1..=5000) goes with `\"stream\": \"unread\"`",
            ));
        }
    }
    validate_series(path, text, spec)
}

/// What a series' expectation may say: no one forwarded message (each step sends its own), and
/// a CPU ratio only to a baseline it has.
fn validate_series_expect(
    path: &str,
    spec: &CaseSpec,
    series: &SeriesSpec,
) -> Result<(), CaseError> {
    if spec.expect.forwarded_json.is_some() {
        return Err(invalid(
            path,
            "`forwarded_json` names one message; a series sends a new one each step (use `forwarded`)",
        ));
    }
    let ratio = spec.expect.series.as_ref().and_then(|e| e.cpu_ratio);
    if ratio.is_some() != series.baseline.is_some()
        || ratio.is_some_and(|r| !(2..=1000).contains(&r))
    {
        return Err(invalid(
            path,
            "`expect.series.cpu_ratio` (2..=1000) and `series.baseline` go together: the ratio is to the baseline's CPU",
        ));
    }
    let streams = spec.expect.series.as_ref().and_then(|e| e.open_streams);
    if streams.is_some() && series.hold.is_none() {
        return Err(invalid(
            path,
            "`expect.series.open_streams` counts the event streams of held connections: it needs `series.hold`",
        ));
    }
    Ok(())
}

/// Whether the case names its transports, and each is one over HTTP connections (Streamable
/// HTTP, or HTTP+SSE's POSTs).
fn over_http_only(spec: &CaseSpec) -> bool {
    spec.transports.as_deref().is_some_and(|t| {
        !t.is_empty()
            && t.iter()
                .all(|t| matches!(t, TransportKind::Http | TransportKind::Sse))
    })
}

/// A series: over HTTP (each step a request of its own), within its bounds, its per-step
/// placeholders only where steps are.
fn validate_series(path: &str, text: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    let Some(series) = &spec.series else {
        return if ["{{step}}", "{{fresh}}", "{{template_prefix}}"]
            .iter()
            .any(|p| text.contains(p))
        {
            Err(invalid(
                path,
                "`{{step}}`, `{{fresh}}` and `{{template_prefix}}` are a series step's: they need `series`",
            ))
        } else if spec.expect.series.is_some() {
            Err(invalid(path, "`expect.series` needs `series`"))
        } else {
            Ok(())
        };
    };
    if !(1..=20_000).contains(&series.count) || series.warmup >= series.count {
        return Err(invalid(
            path,
            "`series.count` must be 1..=20000 and `series.warmup` below it",
        ));
    }
    if !(1..=16).contains(&series.connections) {
        return Err(invalid(path, "`series.connections` must be 1..=16"));
    }
    if series.rate.is_some_and(|r| !(1..=100_000).contains(&r))
        || series
            .budget_ms
            .is_some_and(|b| !(1..=600_000).contains(&b))
    {
        return Err(invalid(
            path,
            "`series.rate` must be 1..=100000 steps a second and `series.budget_ms` 1..=600000",
        ));
    }
    validate_series_transports(path, spec, series)?;
    if spec.request.raw_http.is_some()
        || spec.clients.is_some()
        || series
            .baseline
            .as_ref()
            .is_some_and(|b| b.raw_http.is_some())
    {
        return Err(invalid(
            path,
            "a series sends a request the runner builds, from one client",
        ));
    }
    if text.contains("{{template_prefix}}") && series.discover != Some(Discover::ResourceTemplate) {
        return Err(invalid(
            path,
            "`{{template_prefix}}` is learned from the server: it needs `\"discover\": \"resource-template\"`",
        ));
    }
    validate_series_expect(path, spec, series)?;
    if let Some(hold) = &series.hold {
        validate_hold(path, spec, series, hold)?;
    }
    if series
        .cap
        .as_ref()
        .is_some_and(|c| c.as_slice().iter().any(|s| !s.is_valid()))
    {
        return Err(invalid(path, "`series.cap` holds an invalid HTTP status"));
    }
    Ok(())
}

/// A series names its transports: HTTP, and stdio where each step is a line to one process;
/// what is HTTP's (held connections, sessions closed, status caps, headers) or ends a stdio
/// process's input is not for stdio.
fn validate_series_transports(
    path: &str,
    spec: &CaseSpec,
    series: &SeriesSpec,
) -> Result<(), CaseError> {
    let transports = spec.transports.as_deref().unwrap_or_default();
    let over_stdio = transports.contains(&TransportKind::Stdio);
    if transports.is_empty() {
        return Err(invalid(
            path,
            "a series names its transports: `http`, and `stdio` where each step is a line to one process",
        ));
    }
    if over_stdio
        && (series.hold.is_some()
            || series.close_each
            || series.close_sessions
            || series.cap.is_some()
            || !spec.request.headers.is_empty()
            || spec.request.raw_line
            || spec.request.close_input
            || spec.request.chunked
            || spec.request.content_encoding.is_some()
            || spec.request.path.is_some())
    {
        return Err(invalid(
            path,
            "over stdio a series writes each step as a line to one process that stays open: `hold`, `close_each`, `close_sessions`, `cap` and request `headers`, `path`, `chunked` and `content_encoding` are HTTP's, and `raw_line` and `close_input` are not for it",
        ));
    }
    Ok(())
}

/// Held connections (`series.hold`): at most 1000 of them, held 0.1 to 60 s, a byte every 10
/// ms to 10 s; the request is the steps' own, so what only a stepped series has (a cap, a
/// warm-up, sessions closed, a baseline, discovery, a rate) is not for them.
fn validate_hold(
    path: &str,
    spec: &CaseSpec,
    series: &SeriesSpec,
    hold: &HoldSpec,
) -> Result<(), CaseError> {
    if hold.trickle == Trickle::Body && (spec.request.body.is_none() || spec.request.chunked) {
        return Err(invalid(
            path,
            "`hold.trickle: body` trickles a body of the case's own, sent with its length (not chunked)",
        ));
    }
    if hold.in_turn && hold.trickle != Trickle::Idle {
        return Err(invalid(
            path,
            "`hold.in_turn` waits for each answer before the next request: only a whole request (`trickle: idle`) is answered",
        ));
    }
    if series.count > 1000
        || !(100..=60_000).contains(&hold.for_ms)
        || !(10..=10_000).contains(&hold.every_ms)
    {
        return Err(invalid(
            path,
            "`series.hold` holds at most 1000 connections (`count`), for 100..=60000 ms, a byte every 10..=10000 ms",
        ));
    }
    if series.budget_ms.is_some_and(|b| b < hold.for_ms + 10_000) {
        return Err(invalid(
            path,
            "`series.budget_ms` leaves the hold and the request sent after it at least 10 s: at least `hold.for_ms` + 10000",
        ));
    }
    if series.warmup > 0
        || series.cap.is_some()
        || series.close_sessions
        || series.close_each
        || series.discover.is_some()
        || series.baseline.is_some()
        || series.rate.is_some()
        || series.connections != 1
    {
        return Err(invalid(
            path,
            "`series.hold` takes only `count` (the connections held) and `budget_ms` beside it",
        ));
    }
    Ok(())
}

/// Concurrent clients: 2 to 16, over HTTP, each with a mark of its own in what it sends.
fn validate_clients(path: &str, text: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    let Some(n) = spec.clients else {
        return if text.contains("{{client}}") {
            Err(invalid(
                path,
                "`{{client}}` is a client's mark: it needs `clients`",
            ))
        } else {
            Ok(())
        };
    };
    if !(2..=16).contains(&n) {
        return Err(invalid(path, "`clients` must be 2..=16"));
    }
    if !over_http_only(spec) {
        return Err(invalid(
            path,
            "a `clients` case needs `\"transports\"` of `http`, `sse` or both (a stdio process has one client)",
        ));
    }
    if spec.request.raw_http.is_some() || spec.caller.is_some() {
        return Err(invalid(
            path,
            "a `clients` case sends a request the runner builds, as the run's principal",
        ));
    }
    if !text.contains("{{client}}") {
        return Err(invalid(
            path,
            "a `clients` case writes `{{client}}` in its request: without a mark, crossed answers cannot be told apart",
        ));
    }
    Ok(())
}

/// Cited advisories: each well formed, in `cases/advisories.json`, and cited once.
fn validate_advisories(path: &str, text: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    let mut seen: Vec<&'static crate::advisory::Advisory> = Vec::new();
    for id in &spec.advisories {
        let at = text.find(&format!("\"{id}\"")).unwrap_or(0);
        let (line, column) = line_col(text, at);
        let (path, id) = (path.to_string(), id.clone());
        if crate::advisory::shape(&id).is_none() {
            return Err(CaseError::AdvisoryId {
                path,
                id,
                line,
                column,
            });
        }
        let Some(a) = crate::advisory::find(&id) else {
            return Err(CaseError::UnknownAdvisory {
                path,
                id,
                line,
                column,
            });
        };
        if seen.contains(&a) {
            return Err(invalid(
                &path,
                format!("`advisories`: `{id}` names {} again", a.id),
            ));
        }
        seen.push(a);
    }
    Ok(())
}

/// The request: `raw_http` alone or `method`/`path`/`headers` (the method is a token as the
/// case is read), each path rooted.
fn validate_request(path: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    let req = &spec.request;
    if req.raw_http.is_some() {
        if req.method.is_some() || req.path.is_some() || !req.headers.is_empty() {
            return Err(invalid(
                path,
                "`raw_http` replaces `method`, `path` and `headers`",
            ));
        }
        if req.body.is_some() || req.chunked || req.content_encoding.is_some() {
            return Err(invalid(
                path,
                "`raw_http` replaces `body`, `chunked` and `content_encoding`",
            ));
        }
        if spec.transports.as_deref() != Some(&[TransportKind::Http]) {
            return Err(invalid(
                path,
                "a `raw_http` case needs `\"transports\": [\"http\"]`",
            ));
        }
    }
    if req.content_encoding.is_some() && !over_http_only(spec) {
        return Err(invalid(
            path,
            "a `content_encoding` case needs `\"transports\": [\"http\"]` (or `[\"http\", \"sse\"]`)",
        ));
    }
    if let Some(p) = &req.path {
        // `{{path}}` or `{{path_upper}}` (the target's own path, as it is or in capitals) may
        // start it: a case adds a query or another spelling to it.
        let rooted = ["/", "{{path}}", "{{path_upper}}", "{{message_path}}"]
            .iter()
            .any(|start| p.starts_with(start));
        if !rooted || p.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(invalid(
                path,
                "`path` must start with `/`, `{{path}}`, `{{path_upper}}` or `{{message_path}}` and hold no spaces or controls",
            ));
        }
    }
    for name in req.headers.keys() {
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        {
            return Err(invalid(
                path,
                format!("header name `{name}` is not an HTTP token"),
            ));
        }
    }
    Ok(())
}

/// Bodies: base64 that decodes, generated bodies under 4 GiB.
fn validate_body(path: &str, req: &RequestSpec) -> Result<(), CaseError> {
    match &req.body {
        Some(BodySpec::Base64(b))
            if base64::engine::general_purpose::STANDARD.decode(b).is_err() =>
        {
            return Err(invalid(path, "`base64` body is not valid base64"));
        }
        Some(BodySpec::Repeat(r)) => {
            if r.unit.is_empty() {
                return Err(invalid(path, "`repeat.unit` is empty"));
            }
            let len = (r.unit.len() as u64).saturating_mul(r.count);
            if len > MAX_BODY_LEN {
                return Err(invalid(path, "`repeat` body is longer than 4 GiB"));
            }
        }
        Some(BodySpec::Nest(n)) => {
            let len = ((n.open.len() + n.close.len()) as u64).saturating_mul(n.depth);
            if len > MAX_BODY_LEN {
                return Err(invalid(path, "`nest` body is longer than 4 GiB"));
            }
        }
        _ => {}
    }
    Ok(())
}

/// `expect` (an outcome required) and its narrowings (`strict`, `gate`, `modern`), none empty.
fn validate_expectations(path: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    check_expect(path, "expect", &spec.expect)?;
    if spec.expect.outcome.is_none() {
        return Err(invalid(path, "`expect.outcome` is required"));
    }
    // `closed` is an HTTP connection's; a stdio case that meant it says `alive: false`.
    let lists_closed = |e: &Expect| {
        e.outcome
            .as_ref()
            .is_some_and(|o| o.as_slice().contains(&Outcome::Closed))
    };
    // A POST over HTTP+SSE is an HTTP connection too.
    let http_only = over_http_only(spec);
    let sets = std::iter::once(&spec.expect)
        .chain(spec.strict.iter())
        .chain(spec.prefer.iter())
        .chain(spec.gate.iter())
        .chain(spec.modern.iter());
    if !http_only && sets.into_iter().any(lists_closed) {
        return Err(invalid(
            path,
            "outcome `closed` is an HTTP connection's: the case must say `\"transports\": [\"http\"]` (or `[\"http\", \"sse\"]`)",
        ));
    }
    for (key, narrower) in [
        ("strict", &spec.strict),
        ("prefer", &spec.prefer),
        ("gate", &spec.gate),
        ("modern", &spec.modern),
    ] {
        if let Some(n) = narrower {
            check_expect(path, key, n)?;
            if *n == Expect::default() {
                return Err(invalid(path, format!("`{key}` is empty")));
            }
        }
    }
    Ok(())
}

/// Keys that only make sense for some versions or profiles: `handshake_version` (a legacy
/// session), `modern` (a case reaching 2026-07-28), `gate` (a case for the gate profile).
fn validate_version_keys(path: &str, spec: &CaseSpec) -> Result<(), CaseError> {
    if spec.handshake_version.is_some() {
        if spec.session == SessionMode::None {
            return Err(invalid(
                path,
                "`handshake_version` on a case without a session",
            ));
        }
        let reaches_modern = spec
            .versions
            .as_ref()
            .is_none_or(|r| r.to.is_none_or(Version::is_modern));
        if reaches_modern {
            return Err(invalid(
                path,
                "`handshake_version` on a case that applies to 2026-07-28 (no handshake there): give it `versions.to`",
            ));
        }
    }
    if spec.modern.is_some()
        && spec
            .versions
            .as_ref()
            .is_some_and(|r| r.to.is_some_and(|t| !t.is_modern()))
    {
        return Err(invalid(
            path,
            "`modern` set on a case that does not apply to 2026-07-28 or later",
        ));
    }
    if spec.gate.is_some()
        && spec
            .profiles
            .as_ref()
            .is_some_and(|p| !p.contains(&Profile::Gate))
    {
        return Err(invalid(
            path,
            "`gate` set on a case that does not apply to the gate profile",
        ));
    }
    Ok(())
}

/// Every `{{name}}` in the file must be a known placeholder.
fn validate_placeholders(path: &str, text: &str) -> Result<(), CaseError> {
    let mut rest = text;
    let mut offset = 0;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        if let Some(end) = after.find("}}") {
            let name = &after[..end];
            if !is_placeholder(name) {
                let (line, column) = line_col(text, offset + start);
                return Err(CaseError::UnknownPlaceholder {
                    path: path.to_string(),
                    name: name.to_string(),
                    line,
                    column,
                });
            }
        }
        offset += start + 2;
        rest = after;
    }
    Ok(())
}

fn check_expect(path: &str, key: &str, e: &Expect) -> Result<(), CaseError> {
    fn nonempty<T>(v: &Option<OneOrMany<T>>) -> bool {
        v.as_ref().is_none_or(|v| !v.as_slice().is_empty())
    }
    if !nonempty(&e.outcome)
        || !nonempty(&e.http_status)
        || !nonempty(&e.error_code)
        || !nonempty(&e.id)
    {
        return Err(invalid(
            path,
            format!("`{key}`: an acceptable set is empty"),
        ));
    }
    if let Some(s) = &e.http_status {
        if let Some(bad) = s.as_slice().iter().find(|p| !p.is_valid()) {
            return Err(invalid(
                path,
                format!("`{key}.http_status`: `{bad}` is not a status or a class like \"4xx\""),
            ));
        }
    }
    if let Some(codes) = &e.error_code {
        for c in codes.as_slice() {
            if let CodePattern::Placeholder(p) = c {
                let known = [
                    "{{code_malformed}}",
                    "{{code_denied}}",
                    "{{code_downstream}}",
                ];
                if !known.contains(&p.as_str()) {
                    return Err(invalid(
                        path,
                        format!("`{key}.error_code`: `{p}` is neither an integer nor a code placeholder"),
                    ));
                }
            }
        }
    }
    if e.leak == Some(true) {
        return Err(invalid(
            path,
            format!("`{key}.leak`: only `false` is meaningful (a case cannot require a leak)"),
        ));
    }
    Ok(())
}
