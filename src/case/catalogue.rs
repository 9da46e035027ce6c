//! The catalogue: the cases built into the binary and those added from folders, loaded
//! strictly, each id once.

use super::{parse_case, Case, CaseError, Source};
use include_dir::{include_dir, Dir};
use std::path::{Path, PathBuf};

/// The built-in catalogue, embedded at build time.
pub(super) static EMBEDDED: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/cases");

/// The set of cases a run uses.
#[derive(Debug, Clone, Default)]
pub struct Catalogue {
    pub cases: Vec<Case>,
}

impl Catalogue {
    /// The catalogue built into the binary.
    pub fn embedded() -> Result<Catalogue, CaseError> {
        let mut files = Vec::new();
        collect_embedded(&EMBEDDED, &mut files);
        let mut cat = Catalogue::default();
        for (rel, text) in files {
            let id = rel.trim_end_matches(".json").to_string();
            let display = format!("cases/{rel}");
            let spec = parse_case(&display, text)?;
            cat.insert(Case {
                id,
                spec,
                source: Source::Embedded,
            })?;
        }
        cat.sort();
        Ok(cat)
    }

    /// Add every case file under `dir` (recursively). Ids are paths relative to `dir`.
    pub fn add_dir(&mut self, dir: &Path) -> Result<usize, CaseError> {
        let mut files = Vec::new();
        walk(dir, dir, &mut files)?;
        let n = files.len();
        for (rel, path) in files {
            let display = path.display().to_string();
            let text = std::fs::read_to_string(&path).map_err(|source| CaseError::Io {
                path: display.clone(),
                source,
            })?;
            let spec = parse_case(&display, &text)?;
            self.insert(Case {
                id: rel,
                spec,
                source: Source::File(path),
            })?;
        }
        self.sort();
        Ok(n)
    }

    fn insert(&mut self, case: Case) -> Result<(), CaseError> {
        if let Some(other) = self.cases.iter().find(|c| c.id == case.id) {
            return Err(CaseError::Duplicate {
                path: source_name(&case),
                id: case.id,
                other: source_name(other),
            });
        }
        self.cases.push(case);
        Ok(())
    }

    fn sort(&mut self) {
        self.cases.sort_by(|a, b| a.id.cmp(&b.id));
    }
}

fn source_name(case: &Case) -> String {
    match &case.source {
        Source::Embedded => format!("cases/{}.json", case.id),
        Source::File(p) => p.display().to_string(),
    }
}

fn collect_embedded(dir: &'static Dir<'static>, out: &mut Vec<(String, &'static str)>) {
    for file in dir.files() {
        let rel = file.path().to_string_lossy().replace('\\', "/");
        // Top-level JSON files (requirements.json, schema.json, advisories.json) are not cases.
        if rel.ends_with(".json") && rel.contains('/') {
            out.push((rel, file.contents_utf8().unwrap_or("")));
        }
    }
    for sub in dir.dirs() {
        collect_embedded(sub, out);
    }
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) -> Result<(), CaseError> {
    let io = |source| CaseError::Io {
        path: dir.display().to_string(),
        source,
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io)?
        .collect::<Result<_, _>>()
        .map_err(io)?;
    entries.sort_by_key(|e| e.path());
    for entry in entries {
        let path = entry.path();
        if path.is_dir() {
            walk(root, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "json") {
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .with_extension("")
                .to_string_lossy()
                .replace('\\', "/");
            // Catalogue metadata at the root of a cases folder is not a case.
            if rel == "requirements" || rel == "schema" || rel == "advisories" {
                continue;
            }
            out.push((rel, path));
        }
    }
    Ok(())
}
