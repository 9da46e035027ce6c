//! The catalogue as data: it loads, cites known requirements, narrows with `strict`, and the
//! loader refuses bad files with the right kind of error at the right place.

use mcp_gauntlet::case::{
    self, parse_case, CaseError, Catalogue, CodePattern, OneOrMany, Profile, TransportKind,
};
use std::collections::{BTreeMap, BTreeSet};

#[test]
fn embedded_catalogue_loads_with_at_least_sixty_cases() {
    let cat = Catalogue::embedded().expect("every case file is valid");
    assert!(cat.cases.len() >= 60, "only {} cases", cat.cases.len());
    let mut families: BTreeMap<&str, usize> = BTreeMap::new();
    for c in &cat.cases {
        *families
            .entry(c.id.split('/').next().unwrap_or(""))
            .or_default() += 1;
        assert!(c.id.contains('/'), "{} is not in a family folder", c.id);
    }
    for family in [
        "batch",
        "primitive",
        "empty",
        "malformed",
        "encoding",
        "envelope",
        "oversize",
        "nesting",
        "headers",
        "stdio",
        "lifecycle",
    ] {
        assert!(families.contains_key(family), "no case in family {family}");
    }
    assert!(families["malformed"] >= 12);
}

#[test]
fn requirement_catalogue_holds_every_id_once() {
    let reqs = case::requirements();
    let modern = reqs.keys().filter(|k| k.starts_with("MCP26-")).count();
    // The project's own rows on what accumulates across requests (section 15: practice, each
    // naming the fix or advisory it comes from), which REQUIREMENTS.md does not list yet.
    let bounds = reqs.keys().filter(|k| k.starts_with("MCP-DOS-")).count();
    // The project's rows on the HTTP+SSE transport of 2024-11-05 (its text, or the practice
    // where it is silent), which REQUIREMENTS.md does not list row by row.
    let sse = reqs.keys().filter(|k| k.starts_with("MCP-SSE-")).count();
    assert!(sse >= 4);
    assert!(reqs
        .values()
        .filter(|r| r.id.starts_with("MCP-SSE-"))
        .all(|r| r.source.contains("2024-11-05") || r.source.contains("practice")));
    assert_eq!(
        reqs.len() - modern - bounds - sse,
        218,
        "REQUIREMENTS.md has 218 rows"
    );
    // Section 14 names the 2026-07-28 rows without listing them; they are catalogued here.
    assert!(modern >= 10);
    assert!(reqs
        .values()
        .filter(|r| r.id.starts_with("MCP26-"))
        .all(|r| r.section == "14"));
    assert!(bounds >= 4);
    assert!(reqs
        .values()
        .filter(|r| r.id.starts_with("MCP-DOS-"))
        .all(|r| r.section == "15" && r.source.contains("practice")));
    let id = regex::Regex::new(r"^[A-Z][A-Z0-9]*(-[A-Z0-9]+)+$").unwrap();
    for (k, r) in reqs {
        assert_eq!(k, &r.id);
        assert!(id.is_match(k), "{k}");
        assert!(
            !r.summary.is_empty() && !r.source.is_empty() && !r.level.is_empty(),
            "{k}"
        );
    }
}

fn set<T: Clone>(v: &Option<OneOrMany<T>>) -> Option<Vec<T>> {
    v.as_ref().map(|v| v.as_slice().to_vec())
}

/// `strict` narrows `expect`; it never allows what the lenient set refuses.
#[test]
fn strict_sets_are_subsets() {
    let cat = Catalogue::embedded().unwrap();
    for c in &cat.cases {
        let Some(strict) = &c.spec.strict else {
            continue;
        };
        let lenient = &c.spec.expect;
        if let (Some(s), Some(l)) = (set(&strict.outcome), set(&lenient.outcome)) {
            assert!(
                s.iter().all(|o| l.contains(o)),
                "{}: strict outcome widens",
                c.id
            );
        }
        if let (Some(s), Some(l)) = (set(&strict.error_code), set(&lenient.error_code)) {
            let ints = |v: &[CodePattern]| -> BTreeSet<i64> {
                v.iter()
                    .filter_map(|c| {
                        if let CodePattern::Code(c) = c {
                            Some(*c)
                        } else {
                            None
                        }
                    })
                    .collect()
            };
            assert!(
                ints(&s).is_subset(&ints(&l)),
                "{}: strict error_code widens",
                c.id
            );
        }
        if let (Some(s), Some(l)) = (set(&strict.http_status), set(&lenient.http_status)) {
            for p in &s {
                let code = match p {
                    case::StatusPattern::Code(c) => *c,
                    case::StatusPattern::Class(_) => continue,
                };
                assert!(
                    l.iter().any(|lp| lp.matches(code)),
                    "{}: strict status {code} widens",
                    c.id
                );
            }
        }
    }
}

/// No case is unreachable: each applies to some transport under some profile.
#[test]
fn every_case_is_reachable() {
    for c in &Catalogue::embedded().unwrap().cases {
        let reachable = TransportKind::ALL
            .iter()
            .any(|t| c.applies_to_transport(*t))
            && [Profile::Server, Profile::Gate]
                .iter()
                .any(|p| c.applies_to_profile(*p));
        assert!(reachable, "{} applies nowhere", c.id);
    }
}

const GOOD: &str = r#"{
  "title": "t",
  "requirements": ["MCP-MSG-01"],
  "request": {"body": {"json": {"jsonrpc": "2.0", "id": 1, "method": "ping"}}},
  "expect": {"outcome": "accept"}
}"#;

#[test]
fn loader_accepts_a_minimal_case() {
    parse_case("x.json", GOOD).expect("valid");
}

/// `alive_probe: downstream` is refused where it could never run or would always fail.
#[test]
fn a_probe_through_to_the_downstream_needs_a_session_and_an_alive_check() {
    let with = |extra: &str| {
        GOOD.replace(
            "\"title\": \"t\",",
            &format!("\"title\": \"t\",\n  \"alive_probe\": \"downstream\",{extra}"),
        )
    };
    parse_case("x.json", &with("")).expect("valid");
    let mut refused = vec![
        with(r#" "session": "none","#),
        with("").replace(
            r#""expect": {"outcome": "accept"}"#,
            r#""expect": {"outcome": "accept", "alive": false}"#,
        ),
    ];
    // `alive: false` in any expectation set: the probe would not run where that set applies.
    for set in ["strict", "gate", "prefer", "modern"] {
        refused.push(with(&format!(r#" "{set}": {{"alive": false}},"#)));
        parse_case("x.json", &with(&format!(r#" "{set}": {{"alive": true}},"#)))
            .unwrap_or_else(|e| panic!("{set}: {e:?}"));
    }
    for text in refused {
        assert!(
            matches!(parse_case("x.json", &text), Err(CaseError::Invalid { .. })),
            "{text}"
        );
    }
    let closed = with("").replace(
        r#""request": {"body""#,
        r#""request": {"close_input": true, "body""#,
    );
    assert!(matches!(
        parse_case("x.json", &closed),
        Err(CaseError::Invalid { .. })
    ));
}

#[test]
fn unknown_key_is_a_syntax_error_at_its_line() {
    let text = GOOD.replace(
        "\"title\": \"t\",",
        "\"title\": \"t\",\n  \"titel\": \"typo\",",
    );
    match parse_case("x.json", &text) {
        Err(CaseError::Syntax { line, .. }) => assert_eq!(line, 3),
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn unknown_requirement_is_reported_at_its_position() {
    let text = GOOD.replace("MCP-MSG-01", "MCP-MSG-99");
    match parse_case("x.json", &text) {
        Err(CaseError::UnknownRequirement {
            id, line, column, ..
        }) => {
            assert_eq!((id.as_str(), line, column), ("MCP-MSG-99", 3, 20));
        }
        other => panic!("expected an unknown requirement, got {other:?}"),
    }
}

#[test]
fn advisory_ids_are_checked_by_shape_and_against_the_catalogue() {
    let with = |ids: &str| {
        GOOD.replace(
            "\"requirements\": [\"MCP-MSG-01\"],",
            &format!("\"requirements\": [\"MCP-MSG-01\"],\n  \"advisories\": [{ids}],"),
        )
    };
    let case = parse_case("x.json", &with(r#""CVE-2026-34742""#)).expect("a known advisory");
    assert_eq!(case.advisories, ["CVE-2026-34742"]);
    parse_case("x.json", &with(r#""GHSA-xw59-hvm2-8pj6""#)).expect("cited by its alias");
    match parse_case("x.json", &with(r#""CVE-2026-1""#)) {
        Err(CaseError::AdvisoryId { id, line, .. }) => {
            assert_eq!((id.as_str(), line), ("CVE-2026-1", 4))
        }
        other => panic!("expected a malformed advisory id, got {other:?}"),
    }
    match parse_case("x.json", &with(r#""CVE-2099-0001""#)) {
        Err(CaseError::UnknownAdvisory { id, .. }) => assert_eq!(id, "CVE-2099-0001"),
        other => panic!("expected an unknown advisory, got {other:?}"),
    }
    assert!(
        matches!(
            parse_case(
                "x.json",
                &with(r#""CVE-2026-34742", "GHSA-xw59-hvm2-8pj6""#)
            ),
            Err(CaseError::Invalid { .. })
        ),
        "the same advisory twice, by id and alias"
    );
}

#[test]
fn a_content_coding_needs_http_and_a_body_the_runner_writes() {
    const GZIP: &str = r#"{"title": "t", "requirements": ["HTTP-ST-415"],
        "transports": ["http"], "request": {"content_encoding": "gzip",
            "body": {"json": {"jsonrpc": "2.0", "id": 1, "method": "ping"}}},
        "expect": {"outcome": "reject"}}"#;
    let case = parse_case("x.json", GZIP).expect("a gzip case");
    assert_eq!(
        case.request.content_encoding,
        Some(mcp_gauntlet::case::ContentCoding::Gzip)
    );
    let invalid = |text: &str, why: &str| {
        assert!(
            matches!(parse_case("x.json", text), Err(CaseError::Invalid { .. })),
            "{why}"
        )
    };
    invalid(
        &GZIP.replace(r#""transports": ["http"], "#, ""),
        "a coding on stdio too",
    );
    invalid(
        &GZIP.replace(
            r#""body": {"json": {"jsonrpc": "2.0", "id": 1, "method": "ping"}}"#,
            r#""raw_http": "POST /mcp HTTP/1.1\r\n\r\n""#,
        ),
        "a coding on a raw request",
    );
    assert!(
        parse_case("x.json", &GZIP.replace("\"gzip\"", "\"br\"")).is_err(),
        "a coding the runner cannot write"
    );
}

#[test]
fn concurrent_clients_need_http_a_mark_each_and_a_count_in_range() {
    const CLIENTS: &str = r#"{"title": "t", "requirements": ["MCP-HTTP-SSE-01"],
        "transports": ["http"], "clients": 4,
        "request": {"body": {"json": {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "{{allowed_tool}}", "arguments": {"text": "{{client}}"}}}}},
        "expect": {"outcome": "accept"}}"#;
    let case = parse_case("x.json", CLIENTS).expect("a clients case");
    assert_eq!(case.clients, Some(4));
    let invalid = |text: &str, why: &str| {
        assert!(
            matches!(parse_case("x.json", text), Err(CaseError::Invalid { .. })),
            "{why}"
        )
    };
    invalid(
        &CLIENTS.replace("\"clients\": 4", "\"clients\": 1"),
        "one client",
    );
    invalid(
        &CLIENTS.replace("\"clients\": 4", "\"clients\": 17"),
        "seventeen clients",
    );
    invalid(
        &CLIENTS.replace(
            "\"transports\": [\"http\"]",
            "\"transports\": [\"http\", \"stdio\"]",
        ),
        "a stdio process has one client",
    );
    invalid(
        &CLIENTS.replace("{{client}}", "hi"),
        "no mark to tell answers apart",
    );
    invalid(
        &CLIENTS.replace("\"clients\": 4,", ""),
        "a mark without clients",
    );
}

#[test]
fn unknown_placeholder_is_refused() {
    let text = GOOD.replace("\"ping\"", "\"{{denied_tol}}\"");
    assert!(matches!(
        parse_case("x.json", &text),
        Err(CaseError::UnknownPlaceholder { .. })
    ));
}

#[test]
fn structural_mistakes_are_invalid() {
    for (from, to) in [
        (
            r#""expect": {"outcome": "accept"}"#,
            r#""expect": {"http_status": 200}"#,
        ),
        (
            r#""expect": {"outcome": "accept"}"#,
            r#""expect": {"outcome": []}"#,
        ),
        (
            r#""expect": {"outcome": "accept"}"#,
            r#""expect": {"outcome": "accept", "http_status": "4x"}"#,
        ),
        (
            r#""expect": {"outcome": "accept"}"#,
            r#""expect": {"outcome": "accept", "leak": true}"#,
        ),
        (
            r#"{"json": {"jsonrpc": "2.0", "id": 1, "method": "ping"}}"#,
            r#"{"base64": "!!"}"#,
        ),
        (r#""requirements": ["MCP-MSG-01"]"#, r#""requirements": []"#),
        (
            r#""request": {"#,
            r#""request": {"raw_http": "GET / HTTP/1.1\r\n\r\n", "#,
        ),
    ] {
        let text = GOOD.replace(from, to);
        assert_ne!(text, GOOD, "replacement of {from} did not apply");
        assert!(
            matches!(
                parse_case("x.json", &text),
                Err(CaseError::Invalid { .. }) | Err(CaseError::Syntax { .. })
            ),
            "{to} should be refused"
        );
    }
    // Two body kinds at once.
    let two = GOOD.replace(
        r#"{"json": {"jsonrpc": "2.0", "id": 1, "method": "ping"}}"#,
        r#"{"json": 1, "text": "x"}"#,
    );
    assert!(matches!(
        parse_case("x.json", &two),
        Err(CaseError::Syntax { .. })
    ));
}

#[test]
fn extra_case_folders_add_cases_and_refuse_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("mine")).unwrap();
    std::fs::write(dir.path().join("mine/ping.json"), GOOD).unwrap();
    let mut cat = Catalogue::embedded().unwrap();
    let before = cat.cases.len();
    assert_eq!(cat.add_dir(dir.path()).unwrap(), 1);
    assert_eq!(cat.cases.len(), before + 1);
    assert!(matches!(
        cat.add_dir(dir.path()),
        Err(CaseError::Duplicate { .. })
    ));
}

/// `cases/schema.json` is generated from the case model (`mcp-gauntlet schema`) and kept in step:
/// `UPDATE_EXPECT=1` rewrites it.
#[test]
fn schema_json_is_in_step_with_the_code() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/cases/schema.json");
    let now = case::schema_json();
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::write(path, &now).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(committed == now, "cases/schema.json is stale: run `mcp-gauntlet schema > cases/schema.json` (or UPDATE_EXPECT=1)");
    let schema: serde_json::Value = serde_json::from_str(&now).unwrap();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    for key in ["title", "requirements", "request", "expect"] {
        assert!(required.contains(&key), "{key} is required");
    }
    assert_eq!(
        schema["additionalProperties"], false,
        "unknown keys are refused"
    );
}

#[test]
fn committed_peer_baselines_parse_and_name_real_cases_with_reasons() {
    use mcp_gauntlet::report::baseline::Baseline;
    let cat = Catalogue::embedded().expect("every case file is valid");
    let ids: BTreeSet<&str> = cat.cases.iter().map(|c| c.id.as_str()).collect();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("targets");
    let mut seen = 0;
    for peer in std::fs::read_dir(&root).unwrap() {
        let peer = peer.unwrap().path();
        if !peer.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&peer).unwrap() {
            let f = f.unwrap().path();
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            if !name.starts_with("baseline-") {
                continue;
            }
            seen += 1;
            let b = Baseline::load(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            for k in &b.known_failures {
                assert!(
                    ids.contains(k.id.as_str()),
                    "{}: unknown case {}",
                    f.display(),
                    k.id
                );
                // A reason says what is wrong in words, not only the evidence the runner printed.
                assert!(
                    !k.reason.starts_with('[') && k.reason.len() > 40,
                    "{}: {} has no reason of its own",
                    f.display(),
                    k.id
                );
            }
        }
    }
    assert!(seen >= 6, "only {seen} peer baselines");
}

/// A `series.hold` is a few hundred connections held a while, the request the steps' own: what
/// only a stepped series has beside it, or bounds past its own, are refused.
#[test]
fn held_connections_within_their_bounds_only() {
    let held = |series: &str| {
        format!(
            r#"{{"title": "t", "requirements": ["MCP-DOS-08"], "transports": ["http"],
            "series": {series},
            "request": {{"body": {{"json": {{"jsonrpc": "2.0", "id": "h-{{{{step}}}}", "method": "{{{{liveness_method}}}}"}}}}}},
            "expect": {{"outcome": "accept", "series": {{"fds_growth": 16}}}}}}"#
        )
    };
    let good = held(r#"{"count": 256, "hold": {"trickle": "headers", "for_ms": 4000}}"#);
    let case = parse_case("x.json", &good).expect("a held series parses");
    let hold = case.series.and_then(|s| s.hold).expect("its hold");
    assert_eq!(
        (hold.trickle, hold.every_ms),
        (mcp_gauntlet::case::Trickle::Headers, 250)
    );
    for bad in [
        r#"{"count": 1001, "hold": {"trickle": "idle", "for_ms": 4000}}"#,
        r#"{"count": 10, "hold": {"trickle": "idle", "for_ms": 60001}}"#,
        r#"{"count": 10, "hold": {"trickle": "body", "every_ms": 5, "for_ms": 4000}}"#,
        r#"{"count": 10, "warmup": 2, "hold": {"trickle": "idle", "for_ms": 4000}}"#,
        r#"{"count": 10, "connections": 4, "hold": {"trickle": "idle", "for_ms": 4000}}"#,
        r#"{"count": 10, "close_each": true, "hold": {"trickle": "idle", "for_ms": 4000}}"#,
        r#"{"count": 10, "cap": [503], "hold": {"trickle": "idle", "for_ms": 4000}}"#,
        r#"{"count": 10, "budget_ms": 9000, "hold": {"trickle": "idle", "for_ms": 4000}}"#,
    ] {
        assert!(
            matches!(
                parse_case("x.json", &held(bad)),
                Err(CaseError::Invalid { .. })
            ),
            "{bad} should be refused"
        );
    }
    assert!(matches!(
        parse_case(
            "x.json",
            &held(r#"{"count": 10, "hold": {"trickle": "slow", "for_ms": 1}}"#)
        ),
        Err(CaseError::Syntax { .. }) | Err(CaseError::Invalid { .. })
    ));
}

/// A series may run over stdio too, each step a line to one process; what is HTTP's is refused
/// beside it.
#[test]
fn a_series_over_stdio_takes_nothing_of_http() {
    let series = |transports: &str, series: &str, request: &str| {
        format!(
            r#"{{"title": "t", "requirements": ["MCP-DOS-03"], "transports": {transports},
            "series": {series},
            "request": {{{request}"body": {{"json": {{"jsonrpc": "2.0", "id": "s-{{{{step}}}}", "method": "tools/call",
                "params": {{"name": "x{{{{fresh}}}}", "arguments": {{}}}}}}}}}},
            "expect": {{"outcome": "reject", "series": {{"retained_bytes_per_step": 24576}}}}}}"#
        )
    };
    let both = r#"["http", "stdio"]"#;
    parse_case("x.json", &series(both, r#"{"count": 100}"#, "")).expect("a series over both");
    for (transports, spec, request) in [
        (both, r#"{"count": 100, "close_each": true}"#, ""),
        (both, r#"{"count": 100, "cap": [503]}"#, ""),
        (
            both,
            r#"{"count": 100}"#,
            r#""headers": {"mcp-name": "x"}, "#,
        ),
        (both, r#"{"count": 100}"#, r#""close_input": true, "#),
        (
            r#"["stdio"]"#,
            r#"{"count": 10, "hold": {"trickle": "idle", "for_ms": 1000}}"#,
            "",
        ),
        ("[]", r#"{"count": 100}"#, ""),
    ] {
        assert!(
            matches!(
                parse_case("x.json", &series(transports, spec, request)),
                Err(CaseError::Invalid { .. })
            ),
            "{transports} {spec} {request} should be refused"
        );
    }
}

/// A batch claims the version that had batches by its `MCP-Protocol-Version` header or its
/// handshake; one sent without the header (the session says the version) does not.
#[test]
fn which_cases_claim_the_batch_era() {
    let cat = mcp_gauntlet::case::Catalogue::embedded().expect("the catalogue loads");
    let claims = |id: &str| {
        cat.cases
            .iter()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("no case {id}"))
            .claims_batch_era()
    };
    assert!(claims("versions/batch-with-version-header-2025-03-26"));
    assert!(claims(
        "versions/batch-after-initialize-claiming-2025-03-26"
    ));
    assert!(!claims("batch/denied-call-in-array-without-version-header"));
    assert!(!claims(
        "lifecycle/call-right-after-initialized-is-answered"
    ));
}
