//! The experiments that come with flashmux, each reproducing a paper's setup: its sweep, the
//! paper's findings as checks on the measured results, and the paper's figures.

use super::{Experiment, ExperimentError, Point};
use crate::metrics::RunResults;
use crate::report::plot::PlotError;
use std::path::{Path, PathBuf};

/// One of the paper's findings, and what flashmux measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub claim: String,
    pub measured: String,
    pub pass: bool,
}

/// Draws an experiment's figures into a directory; returns the files written.
pub type FiguresFn = fn(&[Point], &[RunResults], &Path) -> Result<Vec<PathBuf>, PlotError>;

/// A bundled experiment.
pub struct Bundled {
    /// Its name for `flashmux reproduce`.
    pub name: &'static str,
    pub summary: &'static str,
    /// The sweeps, one per part of the paper's evaluation (most have one); `quick`: the short
    /// variant the test suite runs.
    pub parts: fn(quick: bool) -> Result<Vec<Experiment>, ExperimentError>,
    /// The paper's findings checked on the runs (in point order).
    pub evaluate: fn(&[Point], &[RunResults]) -> Vec<Check>,
    /// The paper's figures, written into the directory; returns the files.
    pub figures: FiguresFn,
}

/// Every bundled experiment.
pub const BUNDLED: &[Bundled] = &[
    super::paper_a::BUNDLED,
    super::paper_b::BUNDLED,
    super::paper_c::BUNDLED,
    super::paper_d::BUNDLED,
    super::paper_e::BUNDLED,
    super::fdp::MULTI_TENANT,
    super::fdp::NOISY_HANDLE,
    super::placement_budgets::BUNDLED,
    super::zns::BUNDLED,
];

pub fn bundled(name: &str) -> Option<&'static Bundled> {
    BUNDLED.iter().find(|b| b.name == name)
}

/// Every part's points, one list, in part order (each part's points keep their own indexes).
pub fn points(parts: &[Experiment]) -> Result<Vec<Point>, ExperimentError> {
    let mut all = Vec::new();
    for p in parts {
        all.extend(p.points()?);
    }
    Ok(all)
}

/// What a reproduction concluded from its runs: the figures drawn, the findings checked, and
/// `checks.txt` (their text) written.
pub struct Conclusion {
    pub figures: Vec<PathBuf>,
    pub checks: Vec<Check>,
    /// [`format_checks`] of the checks, as written to `checks_file`.
    pub text: String,
    pub checks_file: PathBuf,
}

/// Why a reproduction's conclusion could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ConcludeError {
    #[error("drawing the figures: {0}")]
    Figures(PlotError),
    #[error("writing {path}: {error}")]
    Checks { path: String, error: std::io::Error },
}

impl Bundled {
    /// Draws the figures into `out_dir`, checks the paper's findings on the runs (`points` and
    /// their `results`, in point order) and writes `out_dir/checks.txt`: what `flashmux
    /// reproduce` and the Python `reproduce` do once every part has run.
    pub fn conclude(&self, points: &[Point], results: &[RunResults], out_dir: &Path) -> Result<Conclusion, ConcludeError> {
        let figures = (self.figures)(points, results, out_dir).map_err(ConcludeError::Figures)?;
        let checks = (self.evaluate)(points, results);
        let text = format_checks(&checks);
        let checks_file = out_dir.join("checks.txt");
        crate::fsutil::write_atomic(&checks_file, |w| w.write_all(text.as_bytes()))
            .map_err(|error| ConcludeError::Checks { path: checks_file.display().to_string(), error })?;
        Ok(Conclusion { figures, checks, text, checks_file })
    }
}

/// The checks as lines of text: `PASS`/`FAIL`, the claim, then what was measured.
pub fn format_checks(checks: &[Check]) -> String {
    let mut out = String::new();
    for c in checks {
        out.push_str(&format!("{} {}\n     measured: {}\n", if c.pass { "PASS" } else { "FAIL" }, c.claim, c.measured));
    }
    out
}

/// A one-part bundled experiment's sweep, `experiments/<dir>/experiment.toml` or (`quick`)
/// `quick.toml`, with its `base.toml` inline.
pub(super) fn variant(dir: &str, quick: bool, full: &str, quick_text: &str, base: &str) -> Result<Vec<Experiment>, ExperimentError> {
    let (text, file) = if quick { (quick_text, "quick.toml") } else { (full, "experiment.toml") };
    Ok(vec![embedded(text, &format!("experiments/{dir}/{file}"), base, &format!("experiments/{dir}/base.toml"))?])
}

/// A sweep parameter's value as text (a string without its quotes).
pub(super) fn param_text(v: &toml::Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// Point `p`'s value of the sweep parameter `label`, as text; `None` if its sweep has no such
/// axis.
pub(super) fn param(p: &Point, label: &str) -> Option<String> {
    p.params.iter().find(|(l, _)| l == label).map(|(_, v)| param_text(v))
}

/// A tenant's bandwidth (MB/s) over its runtime; NaN when no tenant has that name.
pub(super) fn bw(r: &RunResults, name: &str) -> f64 {
    r.tenants.iter().find(|t| t.name == name).map_or(f64::NAN, |t| t.bw_bytes_per_sec() / 1e6)
}

/// Every tenant's bandwidth together, MB/s.
pub(super) fn total(r: &RunResults) -> f64 {
    r.tenants.iter().map(|t| t.bw_bytes_per_sec() / 1e6).sum()
}

/// A finding whose runs are not in the results.
pub(super) fn missing(claim: &str) -> Check {
    Check { claim: claim.into(), measured: "runs missing".into(), pass: false }
}

/// An experiment embedded in the binary: its text with the base scenario's text put inline, so
/// it runs from any directory. `file` and `base_file` name them in errors.
pub(super) fn embedded(text: &str, file: &str, base: &str, base_file: &str) -> Result<Experiment, ExperimentError> {
    let parse = |t: &str, f: &str| {
        t.parse::<toml::Value>().map_err(|e| ExperimentError::Toml { file: f.into(), line: None, message: e.to_string() })
    };
    let mut doc = parse(text, file)?;
    let base = parse(base, base_file)?;
    doc.as_table_mut().expect("an experiment file is a table").insert("scenario".into(), base);
    Experiment::from_value(doc, file, Path::new("."))
}
