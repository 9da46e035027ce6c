//! `mcp-gauntlet campaign` and `campaign merge`: a folder of target files run lane by lane, or
//! several shards' folders merged, into a matrix and the ecosystem pages.

use super::flags::{CampaignArgs, CampaignCommand};
use anyhow::Context as _;
use mcp_gauntlet::campaign;
use mcp_gauntlet::exit;
use std::path::{Path, PathBuf};

pub(crate) fn campaign(args: CampaignArgs) -> anyhow::Result<u8> {
    if let Some(CampaignCommand::Merge {
        targets,
        out,
        matrix,
        ecosystem,
        dirs,
    }) = args.merge
    {
        return campaign_merge(
            &targets,
            &out,
            matrix.as_deref(),
            ecosystem.as_deref(),
            &dirs,
        );
    }
    let (Some(targets), Some(out)) = (args.targets, args.out) else {
        return Ok(exit::USAGE);
    };
    let started = std::time::Instant::now();
    let survey = args.ecosystem.is_some();
    let ecosystem = args
        .ecosystem
        .map(|dir| (dir, campaign::Provenance::here(shown_command())));
    let outcome = campaign::run(&campaign::CampaignOptions {
        targets,
        out,
        cache: args.cache,
        only: args.only,
        slow: args.slow,
        targets_at_once: usize::from(args.targets_at_once),
        jobs: args.jobs.map(usize::from),
        shard: args.shard,
        spec: args.spec,
        libtest_args: args.libtest,
        matrix: args.matrix,
        self_exe: std::env::current_exe().ok(),
        ecosystem,
    })?;
    print!("{}", outcome.summary(started.elapsed().as_secs()));
    if let Some(m) = &outcome.matrix {
        println!("matrix: {} ({} columns)", m.markdown.display(), m.columns);
    }
    if let Some(e) = &outcome.ecosystem {
        println!(
            "ecosystem: {} ({} packages; {} lanes tested, {} could not be)",
            e.index.display(),
            e.packages,
            e.tested,
            e.untested
        );
    }
    Ok(if outcome.tested_nothing() {
        println!("campaign: nothing was tested");
        exit::UNTESTABLE
    } else if survey && outcome.ecosystem.is_some() {
        // A survey's failures are its findings: the campaign did its job when the pages are.
        exit::SUCCESS
    } else if outcome.passed() {
        exit::SUCCESS
    } else {
        exit::CASES_FAILED
    })
}

/// This command line as a reader would type it again: `mcp-gauntlet` for the program, wherever
/// it was run from.
fn shown_command() -> String {
    let mut args: Vec<String> = std::env::args().collect();
    if let Some(first) = args.first_mut() {
        *first = "mcp-gauntlet".to_string();
    }
    // The pages are of every lane in the folder, whichever a run with `--target` or `--shard`
    // added last: the command that makes them all again has neither.
    let mut shown = Vec::with_capacity(args.len());
    let mut args = args.into_iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--" => {
                shown.push(a);
                shown.extend(args.by_ref());
            }
            "--target" | "--shard" => {
                args.next();
            }
            _ if a.starts_with("--target=") || a.starts_with("--shard=") => {}
            _ => shown.push(a),
        }
    }
    shell_words::join(shown)
}

/// `campaign merge`: the matrix from several campaign folders.
fn campaign_merge(
    targets: &Path,
    out: &Path,
    matrix: Option<&Path>,
    ecosystem: Option<&Path>,
    dirs: &[PathBuf],
) -> anyhow::Result<u8> {
    let files = campaign::load_dir(targets)?;
    std::fs::create_dir_all(out).with_context(|| format!("cannot make {}", out.display()))?;
    let m = campaign::write_matrix(&files, dirs, out, matrix)?;
    println!("{} columns: {}", m.columns, m.markdown.display());
    if let Some(dir) = ecosystem {
        let left_out = targets.join(campaign::ecosystem::LEFT_OUT_FILE);
        let made = campaign::Provenance::here(shown_command());
        let e = campaign::write_ecosystem(&files, dirs, Some(&left_out), dir, &made)?;
        println!("ecosystem: {} ({} packages)", e.index.display(), e.packages);
    }
    if m.missing.is_empty() {
        return Ok(exit::SUCCESS);
    }
    // A lane no shard finished is not a column: the matrix is not the whole campaign's.
    println!(
        "missing (no folder has them finished): {}{}",
        m.missing.join(", "),
        if matrix.is_some() {
            "; --matrix not written"
        } else {
            ""
        }
    );
    // The ecosystem pages list those lanes as could-not-test: written whole all the same.
    Ok(if ecosystem.is_some() {
        exit::SUCCESS
    } else {
        exit::INCOMPLETE
    })
}
