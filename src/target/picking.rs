//! Version picking: which versions a target's lanes speak (from a probe, or as given), and the
//! HTTP+SSE lanes found beside a Streamable HTTP endpoint.

use super::*;
use crate::settings::Speaking;

/// The versions `spec` means for the opened target, and whether it keeps no sessions: every
/// known version it accepts (the default), the newest of them, or the ones given. The target is
/// probed on its first lane (`exchange::probe`), and what was found is said on stderr; a target
/// that answers no probe gets the newest legacy version, with a note.
pub(crate) fn pick_versions(opened: &Opened, spec: &Spec, settings: &Speaking) -> Picked {
    if opened
        .lanes
        .iter()
        .all(|l| l.id.transport == TransportKind::Sse)
    {
        return sse_only(opened, settings);
    }
    let first = opened
        .lanes
        .iter()
        .find(|l| l.id.transport != TransportKind::Sse);
    // Given versions over stdio need no probe: statelessness is an HTTP matter.
    let needs_probe = !matches!(spec, Spec::These(_))
        || first.is_some_and(|l| l.id.transport == TransportKind::Http);
    let probe = first.filter(|_| needs_probe).map(|lane| {
        opened
            .rt
            .block_on(exchange::probe(&lane.endpoint, settings))
    });
    if let Some(p) = &probe {
        eprintln!("versions: {}", p.summary());
    }
    // The HTTP+SSE lanes beside: what their stream speaks, on the same line's terms.
    if let Some(lane) = opened
        .lanes
        .iter()
        .find(|l| l.id.transport == TransportKind::Sse && !l.embedded)
    {
        let sse = settings.speaking(crate::versions::SSE);
        let p = opened
            .rt
            .block_on(exchange::probe_sse(&lane.endpoint, &sse));
        eprintln!("versions: [sse] {}", p.sse_summary());
    }
    let accepted = probe
        .as_ref()
        .map(|p| p.accepted.clone())
        .unwrap_or_default();
    // A target that speaks no MCP is refused by the runner; the fallback is not worth a note.
    let speaks_nothing = !matches!(spec, Spec::These(_))
        && probe.as_ref().is_some_and(exchange::Probe::speaks_nothing);
    let fallback = || {
        if speaks_nothing {
            return vec![crate::versions::NEWEST_LEGACY];
        }
        eprintln!(
            "note: the target answered neither server/discover nor initialize; using {}",
            crate::versions::NEWEST_LEGACY
        );
        vec![crate::versions::NEWEST_LEGACY]
    };
    let versions = match spec {
        Spec::These(v) => v.clone(),
        Spec::Accepted if accepted.is_empty() => fallback(),
        Spec::Accepted => accepted,
        Spec::Newest => match accepted.into_iter().max() {
            Some(v) => vec![v],
            None => fallback(),
        },
    };
    let stateless = probe.as_ref().is_some_and(exchange::Probe::is_stateless);
    if stateless {
        eprintln!(
            "note: the target issues no Mcp-Session-Id (stateless); cases about sessions do not apply to it and are shown as ignored"
        );
    }
    let nothing_spoken =
        probe
            .as_ref()
            .filter(|_| speaks_nothing)
            .map(|p| match p.first_refusal() {
                Some(why) => format!("{why}; {}", p.summary()),
                None => p.summary(),
            });
    Picked {
        versions,
        stateless,
        nothing_spoken,
        servers: probe
            .as_ref()
            .map_or_else(Vec::new, exchange::Probe::servers),
        batch_era: probe.as_ref().is_some_and(|p| p.batch_era),
    }
}

/// A target of HTTP+SSE lanes only: its lanes speak 2024-11-05 whatever `--spec` says; the
/// probe (a stream, `initialize`) only tells whether it speaks MCP there at all.
pub(super) fn sse_only(opened: &Opened, settings: &Speaking) -> Picked {
    let Some(first) = opened.lanes.first() else {
        return Picked {
            versions: Vec::new(),
            stateless: false,
            nothing_spoken: None,
            servers: Vec::new(),
            batch_era: false,
        };
    };
    let sse = settings.speaking(crate::versions::SSE);
    let probe = opened
        .rt
        .block_on(exchange::probe_sse(&first.endpoint, &sse));
    eprintln!("versions: [sse] {}", probe.sse_summary());
    Picked {
        versions: vec![crate::versions::SSE],
        stateless: false,
        nothing_spoken: probe.speaks_nothing().then(|| match probe.first_refusal() {
            Some(why) => format!("{why}; {}", probe.summary()),
            None => probe.summary(),
        }),
        servers: probe.initialized_by.clone(),
        batch_era: false,
    }
}

/// What [`pick_versions`] decided.
#[derive(Debug, Clone)]
pub(crate) struct Picked {
    pub versions: Vec<Version>,
    /// The HTTP target keeps no sessions.
    pub stateless: bool,
    /// The probe's summary when the target answered it in no way MCP does (no version accepted
    /// or countered, no `serverInfo`, no `server/discover`) and the versions were not named, so
    /// the ones tried are a guess: the run cannot test this target.
    pub nothing_spoken: Option<String>,
    /// The `serverInfo` names the probe was answered with (who the target says it is).
    pub servers: Vec<String>,
    /// The HTTP target agrees to 2025-03-26, where batches are legal.
    pub batch_era: bool,
}

/// Repeat the opened lanes once per version (lanes in front of lenient downstream
/// personalities only for the newest, as their family does not depend on the version).
pub(crate) fn with_versions(lanes: Vec<Lane>, picked: &Picked) -> Vec<Lane> {
    let versions = &picked.versions;
    let several = versions.len() > 1;
    let newest = versions.iter().max();
    let (sse, lanes): (Vec<Lane>, Vec<Lane>) = lanes
        .into_iter()
        .partition(|l| l.id.transport == TransportKind::Sse);
    let mut out = Vec::new();
    for v in versions.iter().filter(|_| !lanes.is_empty()) {
        for lane in &lanes {
            if lane.id.downstream.is_some() && Some(v) != newest {
                continue;
            }
            let mut lane = lane.clone();
            lane.id.version = *v;
            lane.stateless = picked.stateless && lane.id.transport == TransportKind::Http;
            lane.batch_era = picked.batch_era && lane.id.transport == TransportKind::Http;
            lane.id.version_in_name = several;
            out.push(lane);
        }
    }
    // HTTP+SSE lanes speak their transport's version, once.
    out.extend(sse);
    out
}

/// The lanes of an HTTP target with its HTTP+SSE stream found (`at`): a lane whose URL opens
/// such a stream becomes a lane of that transport; else one is added beside it when the target
/// serves a stream at the path `at` names. Each finding is said on stderr.
pub(super) fn find_sse(
    rt: &Runtime,
    lanes: Vec<Lane>,
    at: &SseAt,
    settings: &Speaking,
) -> Vec<Lane> {
    // A stream whose endpoint names another origin is one too: its endpoint is then judged.
    let speaks = |url: &HttpUrl| {
        let deadline = tokio::time::Instant::now() + SSE_DETECT;
        let opened = rt.block_on(exchange::SseSession::open(url, settings, deadline));
        matches!(opened, Ok(_) | Err(exchange::SseOpenError::OtherOrigin(_)))
    };
    let mut out = Vec::new();
    for lane in lanes {
        let Endpoint::Http(url) = lane.endpoint.clone() else {
            out.push(lane);
            continue;
        };
        match at {
            SseAt::Only => out.push(over_sse(lane, url)),
            SseAt::Beside(_) if speaks(&url) => {
                eprintln!(
                    "transport: {} opens an HTTP+SSE stream (2024-11-05): tested over that transport",
                    url.to_url()
                );
                out.push(over_sse(lane, url));
            }
            SseAt::Beside(path) => {
                let beside = path.as_deref().filter(|p| *p != "none").map(|p| {
                    let mut u = url.clone();
                    u.path = if p.starts_with('/') {
                        p.to_string()
                    } else {
                        format!("/{p}")
                    };
                    u
                });
                let sse = beside.filter(|u| speaks(u)).map(|u| {
                    eprintln!(
                        "transport: {} also serves HTTP+SSE (2024-11-05) at {}: tested over both transports",
                        url.to_url(),
                        u.to_url()
                    );
                    over_sse(lane.clone(), u)
                });
                out.push(lane);
                out.extend(sse);
            }
        }
    }
    out
}

/// How long the runner waits for a URL's GET to open an HTTP+SSE stream with its `endpoint`.
pub(super) const SSE_DETECT: Duration = Duration::from_secs(2);

/// `lane` made a lane of the HTTP+SSE transport at `url`: it speaks 2024-11-05, and says so in
/// its name.
pub(crate) fn over_sse(mut lane: Lane, url: HttpUrl) -> Lane {
    lane.endpoint = Endpoint::Sse(url);
    lane.id.transport = TransportKind::Sse;
    lane.id.version = crate::versions::SSE;
    lane.id.version_in_name = true;
    lane.copies = None;
    lane
}
