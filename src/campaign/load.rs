//! Reading target files: a folder of them, each checked (the pin typed once, the files it
//! names, its lanes' placeholders, its advisory rows against `cases/advisories.json`), and what
//! is wrong, at a file, line and column.

use super::file::{
    Ecosystem, LaneKind, LaneSpec, Recipe, Role, TargetFile, TargetSpec, SCHEMA_FILE,
};
use std::path::{Path, PathBuf};

/// Why a target file (or a folder of them) was refused: file, line and column, and what.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    #[error("cannot read {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}:{line}:{column}: {problem}")]
    Invalid {
        path: String,
        line: usize,
        column: usize,
        problem: Problem,
    },
    #[error("{dir}: no target files (NAME.json or NAME/target.json)")]
    Empty { dir: String },
    #[error("{path}: a target's name is letters, digits, `-`, `_` and `.`")]
    BadName { path: String },
    #[error("{first} and {second} both make the column `{column}` (two targets of one name, or a lane name that makes another target's column)")]
    SameColumn {
        column: String,
        first: String,
        second: String,
    },
}

/// What is wrong in a target file that parses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    #[error("`release` is required: the exact release the recipe pins")]
    NoRelease,
    #[error("recipe `{recipe}` does not install from {ecosystem}")]
    RecipeEcosystem {
        recipe: &'static str,
        ecosystem: &'static str,
    },
    #[error("`{0}` does not exist beside the target file")]
    Missing(String),
    #[error("the recipe does not pin {package} {release} (`{found}`)")]
    Pin {
        package: String,
        release: String,
        found: String,
    },
    #[error("a pypi or npm recipe needs a requirements file, a folder or packages")]
    NoRecipeSource,
    #[error("two lanes are named `{0}`")]
    DuplicateLane(String),
    #[error("an `{0}` lane needs a command")]
    NoCommand(&'static str),
    #[error("an embedded lane takes no command")]
    EmbeddedCommand,
    #[error("the command of an `{kind}` lane lacks `{{{placeholder}}}`")]
    MissingPlaceholder {
        kind: &'static str,
        placeholder: &'static str,
    },
    #[error("unknown placeholder `{{{placeholder}}}` in an `{kind}` lane's command")]
    UnknownPlaceholder {
        kind: &'static str,
        placeholder: String,
    },
    #[error("the command does not split as a shell would: {0}")]
    Unsplittable(String),
    #[error("a lane name is letters, digits and `-`: `{0}`")]
    BadLaneName(String),
    #[error("a target of `advisories` takes its releases from its rows: no `release`")]
    AdvisoryRelease,
    #[error("`{0}` is not an advisory of cases/advisories.json")]
    UnknownAdvisory(String),
    #[error("{id} is about {ecosystem} {package}, not this target's package")]
    AdvisoryPackage {
        id: String,
        ecosystem: String,
        package: String,
    },
    #[error("{release} is given as {} for {id}, whose affected releases are `{range}`", role.as_str())]
    OutsideRange {
        id: String,
        release: String,
        role: Role,
        range: String,
    },
    #[error("no lane is named `{0}`")]
    UnknownLane(String),
}

/// Every target file under `dir` (`NAME.json`, `NAME/target.json`), read and checked, by name.
pub fn load_dir(dir: &Path) -> Result<Vec<TargetFile>, TargetError> {
    let read = |source| TargetError::Read {
        path: dir.display().to_string(),
        source,
    };
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read)? {
        let path = entry.map_err(read)?.path();
        let inner = path.join("target.json");
        if path.is_dir() && inner.is_file() {
            paths.push(inner);
        } else if path.is_file()
            && path.extension().is_some_and(|e| e == "json")
            && path.file_name().is_some_and(|n| n != SCHEMA_FILE)
        {
            paths.push(path);
        }
    }
    if paths.is_empty() {
        return Err(TargetError::Empty {
            dir: dir.display().to_string(),
        });
    }
    let mut out = paths
        .iter()
        .map(|p| load_file(p))
        .collect::<Result<Vec<_>, _>>()?;
    out.sort_by(|a, b| a.name.cmp(&b.name));
    // Names and columns name files under the campaign's folder and its cache: each one once.
    let mut columns = std::collections::BTreeMap::new();
    for t in &out {
        for lane in &t.spec.lanes {
            if let Some(first) = columns.insert(t.column(lane), t.path.display().to_string()) {
                return Err(TargetError::SameColumn {
                    column: t.column(lane),
                    first,
                    second: t.path.display().to_string(),
                });
            }
        }
    }
    Ok(out)
}

/// One target file, read and checked.
pub fn load_file(path: &Path) -> Result<TargetFile, TargetError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| TargetError::Read {
        path: shown.clone(),
        source,
    })?;
    let spec: TargetSpec = serde_json::from_str(&text).map_err(|e| TargetError::Syntax {
        path: shown.clone(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let dir = path
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let dir = std::path::absolute(&dir).unwrap_or(dir);
    let name = if path.file_name().is_some_and(|n| n == "target.json") {
        dir.file_name()
    } else {
        path.file_stem()
    }
    .map(|n| n.to_string_lossy().into_owned())
    .unwrap_or_default();
    let named = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || name.starts_with('.') || !name.chars().all(named) {
        return Err(TargetError::BadName { path: shown });
    }
    let file = TargetFile {
        name,
        path: path.to_path_buf(),
        dir,
        spec,
    };
    if let Err((problem, key)) = check(&file) {
        let (line, column) = locate(&text, &key);
        return Err(TargetError::Invalid {
            path: shown,
            line,
            column,
            problem,
        });
    }
    Ok(file)
}

/// Where `key` (a member's name, or a string value) first appears in `text`.
fn locate(text: &str, key: &str) -> (usize, usize) {
    let at = text.find(&format!("\"{key}\"")).unwrap_or(0);
    crate::case::line_col(text, at)
}

pub(crate) type Located = (Problem, String);

/// The file's checks; on the first problem, it and the member (or value) to point at.
fn check(f: &TargetFile) -> Result<(), Located> {
    let s = &f.spec;
    if !s.advisories.is_empty() {
        // Its recipe, once per release its rows name.
        // A problem of one release's recipe points at the release in the rows.
        for release in check_rows(f)? {
            check_recipe(&f.at_release(&release))
                .map_err(|(problem, _)| (problem, release.clone()))?;
        }
    } else if s.release.is_none() && s.ecosystem != Ecosystem::None {
        return Err((Problem::NoRelease, "package".into()));
    } else {
        check_recipe(f)?;
    }
    let mut names = std::collections::BTreeSet::new();
    for lane in &s.lanes {
        let name = lane.name().unwrap_or("").to_string();
        if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        {
            return Err((Problem::BadLaneName(name.clone()), name));
        }
        if !names.insert(name.clone()) {
            return Err((Problem::DuplicateLane(name.clone()), name));
        }
        check_lane(f, lane)?;
    }
    Ok(())
}

pub(crate) fn check_recipe(f: &TargetFile) -> Result<(), Located> {
    let s = &f.spec;
    let ok = matches!(
        (&s.install, s.ecosystem),
        (Recipe::Pypi { .. }, Ecosystem::PyPi)
            | (Recipe::Npm { .. }, Ecosystem::Npm)
            | (Recipe::Cargo { .. }, Ecosystem::Crates)
            | (Recipe::Command, _)
            | (Recipe::Builtin, Ecosystem::None)
    );
    if !ok {
        return Err((
            Problem::RecipeEcosystem {
                recipe: s.install.kind(),
                ecosystem: s.ecosystem.as_str(),
            },
            "install".into(),
        ));
    }
    check_pin(f)
}

/// The pin is typed once, in the recipe's own file, and the target file's release must be it;
/// the files the recipe reads exist.
fn check_pin(f: &TargetFile) -> Result<(), Located> {
    let s = &f.spec;
    let release = f.release();
    let exists = |rel: &str| -> Result<PathBuf, Located> {
        let p = f.beside(rel);
        if p.exists() {
            Ok(p)
        } else {
            Err((Problem::Missing(rel.to_string()), rel.to_string()))
        }
    };
    // The pin is typed once, in the recipe's own file, and the target file's release must be it.
    let pinned = |text: &str, want: &str, key: &str| -> Result<(), Located> {
        if text.contains(want) {
            Ok(())
        } else {
            Err((
                Problem::Pin {
                    package: s.package.clone(),
                    release: release.to_string(),
                    found: key.to_string(),
                },
                key.to_string(),
            ))
        }
    };
    match &s.install {
        Recipe::Pypi {
            requirements,
            packages,
        } => {
            let want = format!("{}=={release}", s.package);
            let mut listed = packages.join("\n");
            if let Some(r) = requirements {
                listed.push_str(&std::fs::read_to_string(exists(r)?).unwrap_or_default());
            } else if packages.is_empty() {
                return Err((Problem::NoRecipeSource, "install".into()));
            }
            let lines: Vec<&str> = listed.lines().map(str::trim).collect();
            if !lines.iter().any(|l| l.eq_ignore_ascii_case(&want)) {
                let key = requirements.clone().unwrap_or_else(|| "packages".into());
                return Err((
                    Problem::Pin {
                        package: s.package.clone(),
                        release: release.to_string(),
                        found: key.clone(),
                    },
                    key,
                ));
            }
        }
        Recipe::Npm {
            folder,
            packages,
            copy,
        } => {
            if let Some(d) = folder {
                let manifest = exists(&format!("{d}/package.json"))?;
                if npm_pin(&manifest, &s.package).as_deref() != Some(release) {
                    pinned("", "-", d)?;
                }
                for c in copy {
                    exists(&format!("{d}/{c}"))?;
                }
            } else if packages.is_empty() {
                return Err((Problem::NoRecipeSource, "install".into()));
            } else if !packages.contains(&format!("{}@{release}", s.package)) {
                pinned("", "-", "packages")?;
            }
        }
        Recipe::Cargo { manifest } => {
            let text = std::fs::read_to_string(exists(manifest)?).unwrap_or_default();
            // The package's own dependency line pins it (`rmcp = { version = "=3.11.0", … }`).
            let own = dependency_lines(&text, &s.package);
            pinned(&own, &format!("\"={release}\""), manifest)?;
        }
        Recipe::Command | Recipe::Builtin => {}
    }
    Ok(())
}

/// The release `package.json`'s `dependencies` pin `package` at.
fn npm_pin(manifest: &Path, package: &str) -> Option<String> {
    let text = std::fs::read_to_string(manifest).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json.get("dependencies")?
        .get(package)?
        .as_str()
        .map(str::to_string)
}

/// The lines of a Cargo manifest that name `package` as a dependency (`NAME = …`).
fn dependency_lines(manifest: &str, package: &str) -> String {
    manifest
        .lines()
        .filter(|l| {
            l.trim_start()
                .strip_prefix(package)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .collect()
}

fn check_lane(f: &TargetFile, lane: &LaneSpec) -> Result<(), Located> {
    let kind = lane.kind.as_str();
    for rel in [&lane.baseline, &lane.unstable].into_iter().flatten() {
        if !f.beside(rel).is_file() {
            return Err((Problem::Missing(rel.clone()), rel.clone()));
        }
    }
    let command = match (&lane.command, lane.kind) {
        (None, LaneKind::Embedded) => return Ok(()),
        (Some(c), LaneKind::Embedded) => return Err((Problem::EmbeddedCommand, c.clone())),
        (None, _) => return Err((Problem::NoCommand(kind), "lanes".into())),
        (Some(c), _) => c,
    };
    if let Err(e) = shell_words::split(command) {
        return Err((Problem::Unsplittable(e.to_string()), command.clone()));
    }
    let used = placeholders(command);
    for p in lane.kind.required() {
        if !used.iter().any(|u| u == p) {
            return Err((
                Problem::MissingPlaceholder {
                    kind,
                    placeholder: p,
                },
                command.clone(),
            ));
        }
    }
    // `{jwks}`: the campaign's token issuer's public keys, when the target has one;
    // `{release}`: the release a row runs, in a target of advisory rows.
    let campaigns = |u: &str| {
        (u == "jwks" && f.spec.speak.issuer.is_some()) || (u == "release" && f.proves_advisories())
    };
    if let Some(p) = used
        .iter()
        .find(|u| !lane.kind.allowed().contains(&u.as_str()) && !campaigns(u))
    {
        return Err((
            Problem::UnknownPlaceholder {
                kind,
                placeholder: p.clone(),
            },
            command.clone(),
        ));
    }
    if used.iter().any(|u| u == "python") && !matches!(f.spec.install, Recipe::Pypi { .. }) {
        return Err((
            Problem::UnknownPlaceholder {
                kind,
                placeholder: "python".into(),
            },
            command.clone(),
        ));
    }
    Ok(())
}

/// The `{name}` placeholders of a command, in order.
pub(crate) fn placeholders(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = command;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        let name = &after[..close];
        if !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
            out.push(name.to_string());
        }
        rest = &after[close + 1..];
    }
    out
}

/// The rows' checks: each advisory known and about this package, each release on its side of
/// the advisory's range, each lane there. The releases the rows name, in order, each once.
pub(crate) fn check_rows(f: &TargetFile) -> Result<Vec<String>, Located> {
    let s = &f.spec;
    if s.release.is_some() {
        return Err((Problem::AdvisoryRelease, "release".into()));
    }
    let mut releases = Vec::new();
    for row in &s.advisories {
        let Some(a) = crate::advisory::find(&row.id) else {
            return Err((Problem::UnknownAdvisory(row.id.clone()), row.id.clone()));
        };
        if a.ecosystem != s.ecosystem.as_str() || a.package != s.package {
            return Err((
                Problem::AdvisoryPackage {
                    id: a.id.clone(),
                    ecosystem: a.ecosystem.clone(),
                    package: a.package.clone(),
                },
                row.id.clone(),
            ));
        }
        for (release, role, inside) in [
            (&row.affected, Role::Affected, true),
            (&row.fixed, Role::Fixed, false),
        ] {
            if in_range(&a.affected, release) != Some(inside) {
                return Err((
                    Problem::OutsideRange {
                        id: a.id.clone(),
                        release: release.clone(),
                        role,
                        range: a.affected.clone(),
                    },
                    release.clone(),
                ));
            }
            if !releases.contains(release) {
                releases.push(release.clone());
            }
        }
        if !s.lanes.iter().any(|l| l.name() == Some(row.lane.as_str())) {
            return Err((Problem::UnknownLane(row.lane.clone()), row.lane.clone()));
        }
    }
    Ok(releases)
}

/// Whether `version` is inside `range` (`< 1.23.0`, `>= 1.10.0, < 1.26.0`): `None` when either
/// is not dotted numbers and comparisons.
pub(crate) fn in_range(range: &str, version: &str) -> Option<bool> {
    let parse =
        |v: &str| -> Option<Vec<u64>> { v.trim().split('.').map(|p| p.parse().ok()).collect() };
    let have = parse(version)?;
    let mut inside = true;
    for part in range.split(',') {
        let part = part.trim();
        let (op, bound) = part.split_at(part.find(|c: char| c.is_ascii_digit())?);
        let bound = parse(bound)?;
        let len = have.len().max(bound.len());
        let pad = |v: &[u64]| {
            let mut v = v.to_vec();
            v.resize(len, 0);
            v
        };
        let order = pad(&have).cmp(&pad(&bound));
        use std::cmp::Ordering::*;
        inside &= match op.trim_end() {
            "<" => order == Less,
            "<=" => order != Greater,
            ">" => order == Greater,
            ">=" => order != Less,
            "=" | "==" | "" => order == Equal,
            _ => return None,
        };
    }
    Some(inside)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_the_braced_lower_case_words() {
        assert_eq!(
            placeholders("{python} {dir}/s.py http {port} {X} {} {a-b} {downstream_url}"),
            ["python", "dir", "port", "downstream_url"]
        );
        assert!(placeholders("no {braces").is_empty());
    }

    #[test]
    fn ranges_hold_their_releases_and_nothing_else() {
        assert_eq!(in_range("< 1.23.0", "1.22.0"), Some(true));
        assert_eq!(in_range("< 1.23.0", "1.23.0"), Some(false));
        assert_eq!(in_range(">= 1.10.0, < 1.26.0", "1.25.3"), Some(true));
        assert_eq!(in_range(">= 1.10.0, < 1.26.0", "1.9.9"), Some(false));
        assert_eq!(in_range(">= 1.10.0, < 1.26.0", "1.26"), Some(false));
        assert_eq!(in_range("<= 2.0", "2.0.0"), Some(true));
        assert_eq!(in_range("< 1.23.0", "1.23.0rc1"), None);
        assert_eq!(in_range("before 1.2", "1.0"), None);
    }
}
