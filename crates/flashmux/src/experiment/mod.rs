//! Experiments: one base scenario, a parameter sweep over it, one simulation per point, and one
//! table of results.
//!
//! An experiment file (TOML) names the base scenario and the sweep's axes:
//!
//! ```toml
//! name = "op-sweep"                  # optional; default: the file's name without .toml
//! scenario = "base.toml"             # relative to the experiment file
//!
//! [[sweep]]                          # one axis per [[sweep]]
//! key = "device.ftl.overprovisioning"
//! values = [0.07, 0.15, 0.28]
//! label = "op"                       # optional; default: the key's last component
//!
//! [[sweep]]
//! key = "tenant.1.fio"               # array elements by index: the second [[tenant]]
//! values = ["[w]\nrw=randwrite\nbs=4k\n", "[w]\nrw=write\nbs=128k\n"]
//! names = ["random", "sequential"]   # optional: shown in the results instead of the values
//! label = "workload"
//! ```
//!
//! - `scenario` is either a path to a scenario file or an inline `[scenario]` table holding the
//!   whole scenario (then relative `job_file` paths are relative to the experiment file).
//! - Each axis sets one key of the scenario, by a dotted path of bare TOML keys; array elements
//!   are selected by index (`tenant.0.region`). Keys missing from the base are created with the
//!   tables on the way, but an index past an array's end is an error. A value may be any TOML
//!   value (string, integer, float, boolean, array, inline table); it replaces what the base had.
//!   Axes are applied in order, so an axis may refine a key an earlier one replaced.
//! - `names` (optional, one per value, unique) are what the results show for the values: useful
//!   for long values such as fio job texts.
//! - The points are the cartesian product of the axes, the first axis outermost (it changes
//!   slowest). Without any `[[sweep]]` the experiment is its base scenario alone, one point.
//! - Labels name the axes' columns in the results and must be unique; they may not be `tenant`
//!   or a metric column's name.
//!
//! The sweep works on the scenario's TOML: each point's document is the base with the point's
//! values set, and resolves with [`Scenario::from_toml`] exactly as a scenario file would, so
//! every scenario key (including ones added later) can be swept. [`Experiment::points`]
//! resolves every point before anything runs: a bad point is reported with its parameters.
//!
//! [`run_points`] runs the points one after the other (each run is deterministic, so the results
//! are too); [`write_csv`] and [`format_table`] give one row per (point, tenant): the point's
//! parameters, the tenant, then the metrics of [`tenant_metrics`]. The scenario's `output`
//! directory is not used: where results go is the caller's choice (`flashmux sweep -o`).

pub mod bundled;
mod fdp;
pub mod gc_profile;
mod paper_a;
mod paper_b;
mod paper_c;
mod paper_d;
mod paper_e;
mod placement_budgets;
mod path;
mod results;
pub mod validate;
mod zns;

pub use path::{parse_path, set_path, Step};
pub use results::{format_table, run_points, tenant_metrics, write_csv, METRIC_COLUMNS};

use crate::config::{ConfigError, Scenario};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// A bad experiment: always the user's to fix, never a bug.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    #[error("cannot read {path}: {error}")]
    Io { path: String, error: crate::fsutil::ReadError },
    /// The file is not valid TOML or does not have the experiment (or scenario) file's shape;
    /// `message` is the parser's, with the line and column.
    #[error("{file}: {message}")]
    Toml { file: String, line: Option<usize>, message: String },
    #[error("{file}: {message}")]
    Invalid { file: String, message: String },
    #[error("{file}: sweep '{label}': key '{key}': {message}")]
    BadKey { file: String, label: String, key: String, message: String },
    /// A point whose scenario does not resolve.
    #[error("{file}: point {number} of {count} ({params}): {error}")]
    Point { file: String, number: usize, count: usize, params: String, error: Box<ConfigError> },
}

/// One axis of a sweep: a scenario key and the values it takes.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// Dotted path into the scenario, e.g. `device.ftl.overprovisioning` or `tenant.1.fio`.
    pub key: String,
    /// Its column in the results.
    pub label: String,
    pub values: Vec<toml::Value>,
    /// Names shown for the values in the results (one per value), for values too long to show,
    /// such as fio job texts; `None`: the values are shown.
    pub names: Option<Vec<String>>,
}

impl Axis {
    /// What the results show for value `i`: its name, or the value itself.
    fn shown(&self, i: usize) -> toml::Value {
        match &self.names {
            Some(names) => toml::Value::String(names[i].clone()),
            None => self.values[i].clone(),
        }
    }
}

/// A loaded experiment: the base scenario's TOML and the axes.
#[derive(Clone, Debug, PartialEq)]
pub struct Experiment {
    pub name: String,
    /// The base scenario as a TOML document.
    pub base: toml::Value,
    /// Names the base scenario in errors (its file, or the experiment file's `[scenario]`).
    pub base_label: String,
    /// Where the base scenario's relative paths (`job_file`) start.
    pub base_dir: PathBuf,
    pub axes: Vec<Axis>,
}

/// One point of a sweep: its parameters and its resolved scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// 0-based position in the sweep.
    pub index: usize,
    /// (label, value) per axis, in axis order; the value's name instead where the axis has names.
    pub params: Vec<(String, toml::Value)>,
    pub scenario: Scenario,
}

impl Point {
    /// The parameters as `label = value, ...` (values in TOML notation), for messages.
    pub fn describe(&self) -> String {
        describe(&self.params)
    }
}

fn describe(params: &[(String, toml::Value)]) -> String {
    if params.is_empty() {
        return "the base scenario".into();
    }
    params.iter().map(|(l, v)| format!("{l} = {}", toml_text(v))).collect::<Vec<_>>().join(", ")
}

/// A value in TOML notation (strings quoted), on one line.
fn toml_text(v: &toml::Value) -> String {
    v.to_string().replace('\n', "\\n")
}

/// A value as a results column shows it: strings as they are, everything else in TOML notation.
pub fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExperimentFile {
    name: Option<String>,
    scenario: Option<toml::Value>,
    #[serde(default)]
    sweep: Vec<SweepSection>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepSection {
    key: String,
    values: Vec<toml::Value>,
    label: Option<String>,
    names: Option<Vec<String>>,
}

/// At most this many points (a typo such as a huge list is better caught than run).
pub const MAX_POINTS: usize = 100_000;

/// The TOML parser's error as an [`ExperimentError::Toml`], with its line (1-based).
fn toml_error(file: &str, text: &str, e: &toml::de::Error) -> ExperimentError {
    let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
    ExperimentError::Toml { file: file.to_string(), line, message: e.to_string().trim_end().to_string() }
}

impl Experiment {
    /// Loads an experiment file; a scenario path in it is relative to the file's directory.
    pub fn load(path: &Path) -> Result<Experiment, ExperimentError> {
        let text = crate::fsutil::read_text(path, crate::fsutil::MAX_INPUT_FILE_BYTES, "experiment file")
            .map_err(|error| ExperimentError::Io { path: path.display().to_string(), error })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::from_toml(&text, &path.display().to_string(), base)
    }

    /// Parses experiment text; `file` names it in errors (and gives the default name),
    /// `base_dir` resolves the scenario path.
    pub fn from_toml(text: &str, file: &str, base_dir: &Path) -> Result<Experiment, ExperimentError> {
        let f: ExperimentFile = toml::from_str(text).map_err(|e| toml_error(file, text, &e))?;
        Self::from_file(f, file, base_dir)
    }

    /// An experiment from a document already parsed or built in code (e.g. a bundled experiment
    /// with its base scenario put inline as the `scenario` table); as [`Experiment::from_toml`],
    /// but errors in the document's shape have no line.
    pub fn from_value(doc: toml::Value, file: &str, base_dir: &Path) -> Result<Experiment, ExperimentError> {
        let f: ExperimentFile = doc.try_into().map_err(|e: toml::de::Error| ExperimentError::Toml {
            file: file.to_string(),
            line: None,
            message: e.to_string().trim_end().to_string(),
        })?;
        Self::from_file(f, file, base_dir)
    }

    fn from_file(f: ExperimentFile, file: &str, base_dir: &Path) -> Result<Experiment, ExperimentError> {
        let invalid = |message: String| ExperimentError::Invalid { file: file.to_string(), message };

        let name = match f.name {
            Some(n) => n,
            None => {
                Path::new(file).file_stem().map_or_else(|| "experiment".into(), |s| s.to_string_lossy().into_owned())
            }
        };
        if name.is_empty()
            || name == "."
            || name == ".."
            || name.contains(|c: char| c == '/' || c == '\\' || c.is_control())
        {
            return Err(invalid(format!(
                "name: '{name}' cannot name the output directory: use a plain name without slashes"
            )));
        }

        let (base, base_label, scenario_dir) = match f.scenario {
            None => {
                return Err(invalid(
                    "no scenario: give scenario = \"<file>\" (relative to this file) or a [scenario] table".into(),
                ))
            }
            Some(toml::Value::String(rel)) => {
                let path = base_dir.join(&rel);
                let label = path.display().to_string();
                let text = crate::fsutil::read_text(&path, crate::fsutil::MAX_INPUT_FILE_BYTES, "scenario file")
                    .map_err(|error| ExperimentError::Io { path: label.clone(), error })?;
                let doc: toml::Value = toml::from_str(&text).map_err(|e| toml_error(&label, &text, &e))?;
                let dir = path.parent().map_or_else(|| base_dir.to_path_buf(), Path::to_path_buf);
                (doc, label, dir)
            }
            Some(t @ toml::Value::Table(_)) => (t, format!("{file}[scenario]"), base_dir.to_path_buf()),
            Some(other) => {
                return Err(invalid(format!(
                    "scenario: expected a file name (string) or a [scenario] table, found {}",
                    other.type_str()
                )))
            }
        };

        let reserved: Vec<&str> = std::iter::once("tenant").chain(METRIC_COLUMNS.iter().copied()).collect();
        let mut axes: Vec<Axis> = Vec::new();
        let mut count: usize = 1;
        for (i, s) in f.sweep.into_iter().enumerate() {
            let steps = parse_path(&s.key).map_err(|message| ExperimentError::BadKey {
                file: file.to_string(),
                label: s.label.clone().unwrap_or_else(|| format!("#{}", i + 1)),
                key: s.key.clone(),
                message,
            })?;
            let label = match s.label {
                Some(l) => l,
                None => steps
                    .last()
                    .map(|st| match st {
                        Step::Key(k) | Step::Index(_, k) => k.clone(),
                    })
                    .unwrap_or_default(),
            };
            let which = format!("sweep #{} ({})", i + 1, s.key);
            if label.is_empty() || label.contains(|c: char| c.is_control()) {
                return Err(invalid(format!("{which}: label must be non-empty, without control characters")));
            }
            if reserved.contains(&label.as_str()) {
                return Err(invalid(format!(
                    "{which}: label '{label}' is also a result column's name: choose another label"
                )));
            }
            if let Some(other) = axes.iter().find(|a| a.label == label) {
                return Err(invalid(format!(
                    "{which}: label '{label}' is already used by the sweep of '{}': give each sweep its own label",
                    other.key
                )));
            }
            if let Some(other) = axes.iter().find(|a| a.key == s.key) {
                return Err(invalid(format!("{which}: '{}' is already swept (label '{}')", s.key, other.label)));
            }
            if s.values.is_empty() {
                return Err(invalid(format!("{which}: values is empty: give at least one value")));
            }
            if let Some(names) = &s.names {
                if names.len() != s.values.len() {
                    return Err(invalid(format!(
                        "{which}: {} names for {} values: give one name per value",
                        names.len(),
                        s.values.len()
                    )));
                }
                for (j, name) in names.iter().enumerate() {
                    if name.is_empty() || name.contains(|c: char| c.is_control()) {
                        return Err(invalid(format!(
                            "{which}: names[{j}] must be non-empty, without control characters"
                        )));
                    }
                    if names[..j].contains(name) {
                        return Err(invalid(format!("{which}: the name '{name}' is given to two values")));
                    }
                }
            }
            count = count
                .checked_mul(s.values.len())
                .filter(|&n| n <= MAX_POINTS)
                .ok_or_else(|| invalid(format!("the sweep has more than {MAX_POINTS} points")))?;
            axes.push(Axis { key: s.key, label, values: s.values, names: s.names });
        }
        Ok(Experiment { name, base, base_label, base_dir: scenario_dir, axes })
    }

    /// The number of points: the product of the axes' lengths.
    pub fn len(&self) -> usize {
        self.axes.iter().map(|a| a.values.len()).product()
    }

    /// Always false: an experiment has at least one point.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every point's choice of values, first axis outermost: for each axis, the index of its
    /// value.
    pub fn choices(&self) -> Vec<Vec<usize>> {
        (0..self.len()).filter_map(|i| self.choices_of(i)).collect()
    }

    /// The scenario document of one choice of values (see [`Experiment::choices`]): the base
    /// with each axis' value set, in axis order.
    pub fn document(&self, choice: &[usize]) -> Result<toml::Value, ExperimentError> {
        let mut doc = self.base.clone();
        for (axis, &i) in self.axes.iter().zip(choice) {
            let value = axis.values.get(i).cloned().ok_or_else(|| ExperimentError::Invalid {
                file: self.base_label.clone(),
                message: format!("sweep '{}' has no value #{i}", axis.label),
            })?;
            set_path(&mut doc, &axis.key, value).map_err(|message| ExperimentError::BadKey {
                file: self.base_label.clone(),
                label: axis.label.clone(),
                key: axis.key.clone(),
                message,
            })?;
        }
        Ok(doc)
    }

    /// Every point's resolved scenario, in sweep order. All points are resolved (and so
    /// validated) before anything runs; the first bad one is the error.
    pub fn points(&self) -> Result<Vec<Point>, ExperimentError> {
        (0..self.len()).map(|i| self.point(i)).collect()
    }

    /// Point `index` (0-based, in sweep order) resolved on its own: a caller that records a
    /// bad point and goes on (the Python sweep) resolves them one by one.
    pub fn point(&self, index: usize) -> Result<Point, ExperimentError> {
        self.point_and_text(index).map(|(p, _)| p)
    }

    /// [`Experiment::point`] and the scenario TOML it resolved from (what
    /// [`Scenario::from_generated_toml`] takes to resolve it again elsewhere, e.g. on a worker).
    pub fn point_and_text(&self, index: usize) -> Result<(Point, String), ExperimentError> {
        let count = self.len();
        let choice = self.choices_of(index).ok_or_else(|| ExperimentError::Invalid {
            file: self.base_label.clone(),
            message: format!("no point {} of {count}", index + 1),
        })?;
        let params: Vec<(String, toml::Value)> =
            self.axes.iter().zip(&choice).map(|(a, &i)| (a.label.clone(), a.shown(i))).collect();
        let doc = self.document(&choice)?;
        let point_err = |error: ConfigError| ExperimentError::Point {
            file: self.base_label.clone(),
            number: index + 1,
            count,
            params: describe(&params),
            error: Box::new(error),
        };
        let text = toml::to_string(&doc).map_err(|e| {
            point_err(ConfigError::Invalid { file: self.base_label.clone(), line: None, message: e.to_string() })
        })?;
        let scenario = Scenario::from_generated_toml(&text, &self.base_label, &self.base_dir).map_err(point_err)?;
        Ok((Point { index, params, scenario }, text))
    }

    /// Point `index`'s choice of values (see [`Experiment::choices`]), or `None` past the last.
    pub fn choices_of(&self, index: usize) -> Option<Vec<usize>> {
        if index >= self.len() {
            return None;
        }
        // Mixed-radix digits of the point's index, last axis fastest.
        let mut i = index;
        let mut digits = vec![0; self.axes.len()];
        for (d, axis) in digits.iter_mut().zip(&self.axes).rev() {
            *d = i % axis.values.len();
            i /= axis.values.len();
        }
        Some(digits)
    }
}

#[cfg(test)]
mod tests;
