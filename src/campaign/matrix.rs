//! The campaign's matrix: the lanes' reports as columns, in the campaign's order, headed by what
//! the target files say (package, pin, lane, the versions each lane spoke), as Markdown, HTML and
//! JSON. `campaign merge` builds it from several shards' folders.

use super::{CampaignError, TargetFile};
use crate::report::{Matrix, ReportFile};
use std::path::{Path, PathBuf};

/// Where a matrix was written.
#[derive(Debug, Clone)]
pub struct MatrixFiles {
    pub markdown: PathBuf,
    pub html: PathBuf,
    pub json: PathBuf,
    /// The columns it has.
    pub columns: usize,
    /// The lanes of the targets that no folder has finished (no record of a run that matched
    /// or differed from its baseline: not run, skipped, untestable, died): not in the matrix.
    pub missing: Vec<String>,
}

/// A column found: its target, its lane's kind, and its report.
struct Column<'a> {
    target: &'a TargetFile,
    lane: &'a super::LaneSpec,
    name: String,
    report: ReportFile,
}

/// Build the matrix of every lane of `targets` finished in one of `dirs` (the first folder with
/// a record of it that matched or differed from its baseline, and its report), and write
/// `matrix.md`, `matrix.html` and `matrix.json` into `out`; the Markdown also to `also` (its
/// HTML beside it) when given and no lane is missing.
pub fn write_matrix(
    targets: &[TargetFile],
    dirs: &[PathBuf],
    out: &Path,
    also: Option<&Path>,
) -> Result<MatrixFiles, CampaignError> {
    let mut columns = Vec::new();
    let mut missing = Vec::new();
    // A target of advisory rows makes the advisory table, not columns.
    for t in targets.iter().filter(|t| !t.proves_advisories()) {
        for lane in &t.spec.lanes {
            let name = t.column(lane);
            let Some(path) = dirs
                .iter()
                .find(|d| super::lane::finished(d, &name).is_some())
                .map(|d| d.join(format!("{name}.json")))
            else {
                missing.push(name);
                continue;
            };
            let arg = format!("{name}={}", path.display());
            let (_, report) = ReportFile::read_all(&[arg])?
                .pop()
                .expect("one report read for one argument");
            columns.push(Column {
                target: t,
                lane,
                name,
                report,
            });
        }
    }
    let reports: Vec<(String, ReportFile)> = columns
        .iter()
        .map(|c| (c.name.clone(), c.report.clone()))
        .collect();
    let m = Matrix::build(&reports);
    let markdown = format!("{}{}", header(&columns), m.markdown());
    let mut json = m.json();
    json["suite"] = env!("CARGO_PKG_VERSION").into();
    json["targets"] = columns
        .iter()
        .map(|c| {
            serde_json::json!({
                "column": c.name,
                "target": c.target.name,
                "package": c.target.spec.package,
                "ecosystem": c.target.spec.ecosystem.as_str(),
                "release": c.target.release(),
                "lane": c.lane.kind.as_str(),
                "versions": c.report.spec,
            })
        })
        .collect::<Vec<_>>()
        .into();
    let files = MatrixFiles {
        markdown: out.join("matrix.md"),
        html: out.join("matrix.html"),
        json: out.join("matrix.json"),
        columns: columns.len(),
        missing,
    };
    let write = |path: &Path, text: &str| {
        std::fs::write(path, text).map_err(|source| CampaignError::Write {
            path: path.display().to_string(),
            source,
        })
    };
    write(&files.markdown, &markdown)?;
    write(&files.html, &m.html())?;
    let json = serde_json::to_string_pretty(&json).expect("a JSON value serializes") + "\n";
    write(&files.json, &json)?;
    if let Some(md) = also.filter(|_| files.missing.is_empty()) {
        write(md, &markdown)?;
        write(&md.with_extension("html"), &m.html())?;
    }
    Ok(files)
}

/// What the matrix is of: the legend, then a table of the columns from the target files.
fn header(columns: &[Column]) -> String {
    let mut out = String::from(
        "# Cross-SDK matrix\n\n\
         Written by `mcp-gauntlet campaign targets` from the target files under `targets/`: the\n\
         catalogue against each target below, over each of its lanes, each lane at every known\n\
         version its target accepts (the version follows the lane's name in each row; a version a\n\
         target does not advertise has no rows). `known` cells are real failures that the lane's\n\
         baseline lists (beside its target file, with the reason for each); **FAIL** is a failure\n\
         no baseline lists; `warn` is a should-level failure or a leak of internal detail; `-` or\n\
         an empty cell means the case does not apply to that target. The targets spoken to in\n\
         their own way (tool names, call mapping, refusal style) are listed under the table.\n\n\
         | column | package | release | lane | versions spoken |\n|---|---|---|---|---|\n",
    );
    for c in columns {
        let package = match c.target.spec.ecosystem {
            super::file::Ecosystem::None => "the suite's own".to_string(),
            e => format!("{} `{}`", e.as_str(), c.target.spec.package),
        };
        out.push_str(&format!(
            "| {} | {package} | {} | {} | {} |\n",
            c.name,
            c.target.release(),
            c.lane.kind.as_str(),
            c.report.spec.replace(',', ", ")
        ));
    }
    out.push('\n');
    let mut seen = std::collections::BTreeSet::new();
    for c in columns {
        if seen.insert(&c.target.name) {
            out.push_str(&format!("- `{}`: {}\n", c.target.name, c.target.spec.about));
        }
    }
    out.push('\n');
    out
}
