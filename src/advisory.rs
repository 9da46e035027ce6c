//! Published advisories the catalogue reproduces: the ids a case may cite (checked by shape
//! and against `cases/advisories.json`), what each advisory is, and which cases a run is
//! limited to with `--advisories` / `--advisory ID`.
//!
//! An advisory is cited by its own id (a CVE when it has one) or any of its aliases (its GHSA
//! id, a RUSTSEC id); an upstream issue or pull request (`owner/repo#N`) stands in where no id
//! was published.

use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// One entry of `cases/advisories.json`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Advisory {
    /// The id the suite names it by: the CVE when there is one.
    pub id: String,
    /// Other ids of the same advisory (GHSA, RUSTSEC).
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Where the affected package comes from (`npm`, `PyPI`, `crates.io`, `Go`, `Maven`,
    /// `RubyGems`), or `gateway` for a proxy's own bug report.
    pub ecosystem: String,
    pub package: String,
    /// The affected releases, as the advisory states them (`< 1.23.0`).
    pub affected: String,
    /// The first fixed release, when there is one.
    #[serde(default)]
    pub fixed: Option<String>,
    /// What goes wrong, in one line.
    pub summary: String,
    /// The published advisory (or the issue or pull request).
    pub url: String,
    /// The oracles whose failure is this advisory's bug, by the names findings carry
    /// (`crossed`: an answer reached another client; `canary`: the denied tool ran). A case
    /// citing it that fails on another oracle only (a refusal's status, an error code) found
    /// something, but not this. (A leaf: the names are checked against the oracles by a test
    /// of `report`, which knows both.)
    pub checks: Vec<String>,
}

impl Advisory {
    /// The advisory's id with its aliases: `CVE-2026-34742 (GHSA-xw59-hvm2-8pj6)`.
    pub fn ids(&self) -> String {
        if self.aliases.is_empty() {
            self.id.clone()
        } else {
            format!("{} ({})", self.id, self.aliases.join(", "))
        }
    }

    /// `Go github.com/modelcontextprotocol/go-sdk < 1.4.0, fixed in 1.4.0`.
    pub(crate) fn affects(&self) -> String {
        let fixed = self
            .fixed
            .as_ref()
            .map_or(String::new(), |f| format!(", fixed in {f}"));
        format!(
            "{} {} {}{fixed}",
            self.ecosystem, self.package, self.affected
        )
    }

    /// `CVE-2026-53937 (Maven io.modelcontextprotocol:kotlin-sdk)`: the advisory and whose it is.
    pub fn whose(&self) -> String {
        format!("{} ({} {})", self.id, self.ecosystem, self.package)
    }

    /// Whether `id` names this advisory (its id or an alias, ASCII case ignored).
    pub(crate) fn is_named(&self, id: &str) -> bool {
        std::iter::once(&self.id)
            .chain(&self.aliases)
            .any(|a| a.eq_ignore_ascii_case(id))
    }
}

/// Who a run's target is, as far as advisories go: the package its target file (or
/// `--package`) names, and the names its `serverInfo` gave. An advisory is REPRODUCED only on
/// its own package; on any other target the same weakness is "as in" it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subject {
    /// (ecosystem, package), spelled as `cases/advisories.json` spells them.
    pub package: Option<(String, String)>,
    /// The `serverInfo` names the target answered with.
    pub servers: Vec<String>,
}

impl Subject {
    /// Read `ECOSYSTEM:PACKAGE` (`npm:@modelcontextprotocol/sdk`, `PyPI:mcp`).
    pub fn parse_package(s: &str) -> Option<(String, String)> {
        let (eco, name) = s.split_once(':')?;
        (!eco.trim().is_empty() && !name.trim().is_empty())
            .then(|| (eco.trim().to_string(), name.trim().to_string()))
    }

    /// `npm @modelcontextprotocol/sdk`, when the package is known.
    pub fn package_line(&self) -> Option<String> {
        self.package.as_ref().map(|(e, p)| format!("{e} {p}"))
    }

    /// Whether the target is the advisory's package: its target file names it, or a
    /// `serverInfo` name is the package's name or its last path segment (`rmcp`,
    /// `kotlin-sdk`), ASCII case ignored.
    pub fn is(&self, a: &Advisory) -> bool {
        if let Some((eco, name)) = &self.package {
            return eco.eq_ignore_ascii_case(&a.ecosystem) && name == &a.package;
        }
        let last = a
            .package
            .rsplit(['/', ':'])
            .next()
            .unwrap_or(&a.package)
            .trim();
        self.servers.iter().any(|s| {
            let s = s.trim();
            !s.is_empty() && (s.eq_ignore_ascii_case(&a.package) || s.eq_ignore_ascii_case(last))
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AdvisoriesFile {
    #[allow(dead_code)]
    about: String,
    advisories: Vec<Advisory>,
}

/// Why the advisory catalogue (`cases/advisories.json`) cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum CatalogueError {
    #[error("cases/advisories.json is not a valid advisory catalogue: {0}")]
    Syntax(String),
    #[error("cases/advisories.json: `{0}` is not an advisory id (CVE-YYYY-N, GHSA-xxxx-xxxx-xxxx, RUSTSEC-YYYY-NNNN, owner/repo#N)")]
    BadId(String),
    #[error("cases/advisories.json: `{0}` names two entries")]
    Duplicate(String),
    #[error("cases/advisories.json: `{0}` names no checks (the oracles its bug shows on)")]
    NoChecks(String),
}

/// Parse and check a catalogue: every id and alias well formed, none named twice.
pub(crate) fn parse_catalogue(text: &str) -> Result<Vec<Advisory>, CatalogueError> {
    let file: AdvisoriesFile =
        serde_json::from_str(text).map_err(|e| CatalogueError::Syntax(e.to_string()))?;
    let mut seen = std::collections::BTreeSet::new();
    for a in &file.advisories {
        if a.checks.is_empty() {
            return Err(CatalogueError::NoChecks(a.id.clone()));
        }
        for id in std::iter::once(&a.id).chain(&a.aliases) {
            if shape(id).is_none() {
                return Err(CatalogueError::BadId(id.clone()));
            }
            if !seen.insert(id.to_ascii_uppercase()) {
                return Err(CatalogueError::Duplicate(id.clone()));
            }
        }
    }
    Ok(file.advisories)
}

/// The catalogue embedded from `cases/advisories.json` (checked by a test; an unreadable one
/// is empty, which makes every case that cites an advisory fail validation loudly).
pub fn catalogue() -> &'static [Advisory] {
    static CATALOGUE: OnceLock<Vec<Advisory>> = OnceLock::new();
    CATALOGUE.get_or_init(|| {
        parse_catalogue(include_str!("../cases/advisories.json")).unwrap_or_default()
    })
}

/// The catalogue's entry that `id` names (its id or an alias).
pub fn find(id: &str) -> Option<&'static Advisory> {
    catalogue().iter().find(|a| a.is_named(id))
}

/// The kinds of id a case may cite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdShape {
    /// `CVE-2026-27896`
    Cve,
    /// `GHSA-wvj2-96wp-fq3f`
    Ghsa,
    /// `RUSTSEC-2026-0140`
    Rustsec,
    /// `stacklok/toolhive#6234`: an upstream issue or pull request, where no id was published.
    Upstream,
}

/// The shape of `id`, if it is one a case may cite.
pub fn shape(id: &str) -> Option<IdShape> {
    let digits = |s: &str, min: usize, max: usize| {
        (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
    };
    if let Some(rest) = id.strip_prefix("CVE-") {
        let (year, n) = rest.split_once('-')?;
        return (digits(year, 4, 4) && digits(n, 4, 19)).then_some(IdShape::Cve);
    }
    if let Some(rest) = id.strip_prefix("RUSTSEC-") {
        let (year, n) = rest.split_once('-')?;
        return (digits(year, 4, 4) && digits(n, 4, 4)).then_some(IdShape::Rustsec);
    }
    if let Some(rest) = id.strip_prefix("GHSA-") {
        // GitHub's advisory ids: three groups of four from a 20-letter alphabet.
        const ALPHABET: &[u8] = b"23456789cfghjmpqrvwx";
        let groups: Vec<&str> = rest.split('-').collect();
        let ok = groups.len() == 3
            && groups
                .iter()
                .all(|g| g.len() == 4 && g.bytes().all(|b| ALPHABET.contains(&b)));
        return ok.then_some(IdShape::Ghsa);
    }
    let (repo, number) = id.split_once('#')?;
    let (owner, name) = repo.split_once('/')?;
    let github_name = |s: &str| {
        !s.is_empty()
            && s.len() <= 100
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    (github_name(owner) && github_name(name) && digits(number, 1, 9)).then_some(IdShape::Upstream)
}

/// Which cases a run takes, by the advisories they cite.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Selection {
    /// Every case (the default).
    #[default]
    All,
    /// The cases that cite any advisory (`--advisories`).
    Any,
    /// The cases that cite one of these advisories, by id or alias (`--advisory ID`).
    Named(Vec<&'static Advisory>),
}

impl Selection {
    /// Whether a case citing `cited` is run.
    pub fn takes(&self, cited: &[String]) -> bool {
        match self {
            Selection::All => true,
            Selection::Any => !cited.is_empty(),
            Selection::Named(wanted) => cited.iter().any(|c| wanted.iter().any(|a| a.is_named(c))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An advisory is its package's: named by the target file (ecosystem and name), or else
    /// by a `serverInfo` name that is the package or its last segment. A Python server is not
    /// the Kotlin SDK, whatever weakness they share.
    #[test]
    fn an_advisory_is_reproduced_only_on_its_own_package() {
        let kotlin = find("CVE-2026-53937").expect("in the catalogue");
        let rmcp = find("CVE-2026-42559").expect("in the catalogue");
        let python = Subject {
            package: Some(("PyPI".into(), "mcp".into())),
            servers: vec!["kotlin-sdk".into()],
        };
        assert!(!python.is(kotlin), "the target file's package wins");
        let pypi = find("CVE-2025-66416").expect("in the catalogue");
        assert!(python.is(pypi));
        let by_name = |name: &str| Subject {
            package: None,
            servers: vec![name.into()],
        };
        assert!(by_name("rmcp").is(rmcp));
        assert!(by_name("Kotlin-SDK").is(kotlin));
        assert!(!by_name("my-server").is(rmcp));
        assert!(!Subject::default().is(rmcp));
        assert_eq!(
            Subject::parse_package("Maven:io.modelcontextprotocol:kotlin-sdk"),
            Some(("Maven".into(), "io.modelcontextprotocol:kotlin-sdk".into()))
        );
        assert_eq!(Subject::parse_package("mcp"), None);
        assert_eq!(Subject::parse_package(":mcp"), None);
    }

    #[test]
    fn id_shapes() {
        for (id, want) in [
            ("CVE-2026-27896", Some(IdShape::Cve)),
            ("CVE-2025-1234567", Some(IdShape::Cve)),
            ("GHSA-wvj2-96wp-fq3f", Some(IdShape::Ghsa)),
            ("RUSTSEC-2026-0140", Some(IdShape::Rustsec)),
            ("stacklok/toolhive#6234", Some(IdShape::Upstream)),
            ("IBM/mcp-context-forge#4413", Some(IdShape::Upstream)),
            ("CVE-26-27896", None),
            ("CVE-2026-123", None),
            ("cve-2026-27896", None),
            // `a`, `b`, `0` and `1` are not in GitHub's alphabet.
            ("GHSA-abcd-96wp-fq3f", None),
            ("GHSA-wvj2-96wp", None),
            ("RUSTSEC-2026-140", None),
            ("toolhive#6234", None),
            ("a/b#", None),
            ("a/b#x1", None),
            ("", None),
        ] {
            assert_eq!(shape(id), want, "{id}");
        }
    }

    #[test]
    fn the_embedded_catalogue_is_valid_and_found_by_alias() {
        let text = include_str!("../cases/advisories.json");
        let parsed = parse_catalogue(text).expect("cases/advisories.json");
        assert!(!parsed.is_empty());
        assert_eq!(catalogue().len(), parsed.len());
        for a in catalogue() {
            for id in std::iter::once(&a.id).chain(&a.aliases) {
                assert_eq!(find(id), Some(a), "{id}");
            }
            assert!(a.url.starts_with("https://"), "{}", a.id);
        }
    }

    #[test]
    fn a_catalogue_with_a_bad_or_repeated_id_is_refused() {
        let one = |id: &str, alias: &str| {
            format!(
                r#"{{"about": "t", "advisories": [{{"id": "{id}", "aliases": ["{alias}"],
                "ecosystem": "npm", "package": "p", "affected": "< 1", "summary": "s",
                "url": "https://example.com", "checks": ["outcome"]}}]}}"#
            )
        };
        assert!(parse_catalogue(&one("CVE-2026-0001", "GHSA-2222-3333-4444")).is_ok());
        assert!(matches!(
            parse_catalogue(&one("CVE-2026-01", "GHSA-2222-3333-4444")),
            Err(CatalogueError::BadId(_))
        ));
        assert!(matches!(
            parse_catalogue(&one("CVE-2026-0001", "cve-2026-0001")),
            Err(CatalogueError::BadId(_))
        ));
        assert!(matches!(
            parse_catalogue(&one("CVE-2026-0001", "CVE-2026-0001")),
            Err(CatalogueError::Duplicate(_))
        ));
        assert!(matches!(
            parse_catalogue("{}"),
            Err(CatalogueError::Syntax(_))
        ));
        // Every advisory names the oracles its bug shows on, and only oracles there are.
        let with_checks = |checks: &str| {
            one("CVE-2026-0001", "GHSA-2222-3333-4444").replace(
                r#""checks": ["outcome"]"#,
                &format!(r#""checks": {checks}"#),
            )
        };
        assert!(matches!(
            parse_catalogue(&with_checks("[]")),
            Err(CatalogueError::NoChecks(_))
        ));
        assert!(parse_catalogue(&with_checks(r#"["crossed", "canary"]"#)).is_ok());
    }

    #[test]
    fn selections() {
        let cited = vec!["GHSA-xw59-hvm2-8pj6".to_string()];
        assert!(Selection::All.takes(&[]));
        assert!(!Selection::Any.takes(&[]));
        assert!(Selection::Any.takes(&cited));
        let by_cve = Selection::Named(vec![find("CVE-2026-34742").expect("in the catalogue")]);
        assert!(by_cve.takes(&cited), "an alias selects the same advisory");
        let other = Selection::Named(vec![find("CVE-2025-66416").expect("in the catalogue")]);
        assert!(!other.takes(&cited));
    }
}
