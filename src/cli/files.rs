//! The commands that read and write files only: `matrix`, `check-cases`, `check-targets`,
//! `advisories`, `schema` and `auth-issuer`.

use anyhow::Context as _;
use mcp_gauntlet::case::Catalogue;
use mcp_gauntlet::exit;
use std::path::{Path, PathBuf};

pub(crate) fn advisories() -> anyhow::Result<u8> {
    let cat = Catalogue::embedded()?;
    print!("{}", mcp_gauntlet::report::advisory_listing(&cat));
    Ok(exit::SUCCESS)
}

/// The case format's JSON Schema, or with `targets` the target format's.
pub(crate) fn schema(targets: bool) -> u8 {
    if targets {
        print!("{}", mcp_gauntlet::campaign::schema_json());
    } else {
        print!("{}", mcp_gauntlet::case::schema_json());
    }
    exit::SUCCESS
}

pub(crate) fn auth_issuer(out: &Path, kid: &str) -> anyhow::Result<u8> {
    let issuer = mcp_gauntlet::auth::Issuer::generate("unused", kid)?;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let key = out.join("issuer-key.pem");
    std::fs::write(&key, issuer.private_pem())
        .with_context(|| format!("cannot write {}", key.display()))?;
    let jwks = out.join("jwks.json");
    std::fs::write(&jwks, issuer.jwks())
        .with_context(|| format!("cannot write {}", jwks.display()))?;
    println!("{}\n{}", key.display(), jwks.display());
    Ok(exit::SUCCESS)
}

pub(crate) fn matrix(
    reports: &[String],
    output: Option<PathBuf>,
    html: Option<PathBuf>,
) -> anyhow::Result<u8> {
    use mcp_gauntlet::report::{self, ReportFile};
    let loaded = ReportFile::read_all(reports)?;
    let m = report::Matrix::build(&loaded);
    if let Some(p) = &html {
        std::fs::write(p, m.html()).with_context(|| format!("cannot write {}", p.display()))?;
    }
    let table = m.markdown();
    match output {
        Some(p) => {
            std::fs::write(&p, table).with_context(|| format!("cannot write {}", p.display()))?
        }
        None => print!("{table}"),
    }
    Ok(exit::SUCCESS)
}

pub(crate) fn check_targets(dirs: &[PathBuf]) -> anyhow::Result<u8> {
    let mut total = 0;
    for dir in dirs {
        total += mcp_gauntlet::campaign::load_dir(dir)?.len();
    }
    println!("{total} target files valid");
    Ok(exit::SUCCESS)
}

pub(crate) fn check_cases(dirs: &[PathBuf]) -> anyhow::Result<u8> {
    let mut cat = Catalogue::default();
    let mut total = 0;
    for dir in dirs {
        total += cat.add_dir(dir)?;
    }
    println!("{total} case files valid");
    Ok(exit::SUCCESS)
}
