//! The commands that talk to a live target outside a run: `fuzz`, `load` and `bench`.

use super::flags::{FuzzArgs, LoadArgs};
use super::Usage;
use mcp_gauntlet::case::Profile;
use mcp_gauntlet::exit;
use mcp_gauntlet::settings::Settings;
use std::time::Duration;

pub(crate) fn bench(requests: u64) -> anyhow::Result<u8> {
    let report = mcp_gauntlet::bench::bench(None, requests.max(64))?;
    print!("{report}");
    Ok(exit::SUCCESS)
}

pub(crate) fn load(args: LoadArgs) -> anyhow::Result<u8> {
    use mcp_gauntlet::load::{load, summary, LoadOptions};
    let (target, _) = args
        .target
        .resolve(None, Profile::Server, args.tls, args.process);
    let time = args.time.map(Duration::from_secs);
    let results = load(LoadOptions {
        target,
        concurrency: args.concurrency.max(1),
        requests: if time.is_none() {
            Some(args.requests.unwrap_or(2000))
        } else {
            None
        },
        time,
        request_timeout: Duration::from_secs(args.request_timeout.max(1)),
        spec_version: args.spec,
        same_ids: args.same_ids,
        self_exe: None,
    })?;
    print!("{}", summary(&results));
    Ok(if results.iter().all(|r| r.clean()) {
        exit::SUCCESS
    } else {
        exit::CASES_FAILED
    })
}

pub(crate) fn fuzz(args: FuzzArgs) -> anyhow::Result<u8> {
    use mcp_gauntlet::fuzz::live::{fuzz, FuzzOptions};
    let mapping =
        mcp_gauntlet::mapping::CallMapping::new(args.tool_name.as_deref(), &args.tool_server, None)
            .map_err(Usage::wrap)?;
    let (target, profile) =
        args.target
            .resolve(args.witness_log, args.profile, args.tls, args.process);
    let outcome = fuzz(FuzzOptions {
        target,
        profile,
        seed: args.seed,
        iterations: args.iterations,
        time: args.time.map(Duration::from_secs),
        max_findings: args.max_findings.max(1),
        save: args.save,
        settings: Settings {
            mapping,
            ..args.exchange.settings()
        },
        spec: args.exchange.spec,
        self_exe: None,
        progress: true,
    })?;
    for f in &outcome.findings {
        println!("finding on [{}]: {:?}", f.lane, f.model);
        if let Some(p) = &f.saved {
            println!("  saved as {}", p.display());
        }
        for line in f.explanation.lines() {
            println!("  {line}");
        }
    }
    Ok(if outcome.findings.is_empty() {
        exit::SUCCESS
    } else {
        exit::CASES_FAILED
    })
}
