//! `flashmux._native`: the simulator as a Python extension module.
//!
//! This module is the thin layer between Python and the `flashmux` crate; the Python package
//! (`python/flashmux/`) builds the user-facing API on it (results as pandas DataFrames, sweeps on
//! a thread pool or on Ray, the cache). Everything a run computes comes from the same library
//! calls `flashmux run` and `flashmux sweep` make, so a run's `results.json` is byte-identical to
//! the command line's for the same scenario and seed.
//!
//! - [`Scenario`]: a scenario's TOML document and its resolved, validated form. Keys are set by
//!   their dotted path (as an experiment's `[[sweep]]` sets them) and every change is validated
//!   at once.
//! - [`run`]: one simulation, with the GIL released; the timeline streams to a file, so memory
//!   does not grow with the run's length. Ctrl-C in Python stops it after the event in progress
//!   and raises `KeyboardInterrupt`.
//! - [`Experiment`]: an experiment file, or a base scenario and a grid, as its points; each point
//!   resolves on its own, so a sweep can record a bad point and go on.
//! - [`run_point`]: one point from its scenario text, returning the rows `flashmux sweep` writes
//!   to `sweep.csv` (the unit of work a Ray task runs).
//! - Errors are Python exceptions carrying the command line's message: `ConfigError` for bad
//!   input (the CLI's exit code 2), `SimulationError` for a run that failed.

use flashmux::config::{self, ConfigError as FmConfigError, PRESET_NAMES};
use flashmux::experiment::{self, bundled, parse_path, set_path, Experiment as FmExperiment, ExperimentError, Step};
use flashmux::metrics::{RunResults, StopReason};
use flashmux::report::{self, TimelineCsv};
use flashmux::sim::{Progress, SimError, Simulator, TimelineSink};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

create_exception!(flashmux._native, FlashmuxError, PyException, "Any error flashmux reports.");
create_exception!(
    flashmux._native,
    ConfigError,
    FlashmuxError,
    "Bad input: a scenario, job file, experiment or value that flashmux refuses (the command line's exit code 2). `file` and `line` say where, when known."
);
create_exception!(
    flashmux._native,
    SimulationError,
    FlashmuxError,
    "A run that could not be built or could not write its results."
);

/// Events simulated between two looks at Python's signals (Ctrl-C).
const BATCH_EVENTS: u64 = 200_000;

/// A `ConfigError` exception with `file` and `line` set where the error has them.
fn config_err(py: Python<'_>, e: &FmConfigError) -> PyErr {
    let err = ConfigError::new_err(flashmux::error_chain(e));
    let (file, line) = match e {
        FmConfigError::Invalid { file, line, .. } => (Some(file.clone()), *line),
        FmConfigError::Io { path, .. } => (Some(path.clone()), None),
        FmConfigError::Fio(_) => (None, None),
    };
    set_location(py, &err, file, line);
    err
}

fn experiment_err(py: Python<'_>, e: &ExperimentError) -> PyErr {
    let err = ConfigError::new_err(flashmux::error_chain(e));
    let (file, line) = match e {
        ExperimentError::Io { path, .. } => (Some(path.clone()), None),
        ExperimentError::Toml { file, line, .. } => (Some(file.clone()), *line),
        ExperimentError::Invalid { file, .. } | ExperimentError::BadKey { file, .. } => (Some(file.clone()), None),
        ExperimentError::Point { error, .. } => return config_err_with(py, err, error),
    };
    set_location(py, &err, file, line);
    err
}

/// `err` with the location of the point's own `error`.
fn config_err_with(py: Python<'_>, err: PyErr, error: &FmConfigError) -> PyErr {
    let located = config_err(py, error);
    let v = located.value(py);
    let (file, line) = (v.getattr("file").ok(), v.getattr("line").ok());
    let target = err.value(py);
    let _ = target.setattr("file", file);
    let _ = target.setattr("line", line);
    err
}

fn set_location(py: Python<'_>, err: &PyErr, file: Option<String>, line: Option<usize>) {
    let v = err.value(py);
    let _ = v.setattr("file", file);
    let _ = v.setattr("line", line);
}

fn sim_err(py: Python<'_>, e: &SimError) -> PyErr {
    // The command line counts every SimError as bad input (exit code 2): the scenario asked for
    // something the model cannot build.
    let err = ConfigError::new_err(flashmux::error_chain(e));
    set_location(py, &err, None, None);
    err
}

// ---------------------------------------------------------------------------------------------
// Python values and TOML values.

/// A Python value as a TOML value: bool, int, float, str, list/tuple, dict with str keys.
fn to_toml(v: &Bound<'_, PyAny>, what: &str) -> PyResult<toml::Value> {
    if v.is_instance_of::<PyBool>() {
        return Ok(toml::Value::Boolean(v.extract()?));
    }
    if v.is_instance_of::<PyInt>() {
        return v.extract::<i64>().map(toml::Value::Integer).map_err(|_| {
            ConfigError::new_err(format!("{what}: {} does not fit in a 64-bit signed integer (TOML's)", v))
        });
    }
    if v.is_instance_of::<PyFloat>() {
        return Ok(toml::Value::Float(v.extract()?));
    }
    if v.is_instance_of::<PyString>() {
        return Ok(toml::Value::String(v.extract()?));
    }
    if let Ok(d) = v.cast::<PyDict>() {
        let mut t = toml::map::Map::new();
        for (k, x) in d.iter() {
            let key: String = k
                .extract()
                .map_err(|_| PyTypeError::new_err(format!("{what}: table keys must be strings, found a {}", k.get_type().name().map(|n| n.to_string()).unwrap_or_default())))?;
            let value = to_toml(&x, &format!("{what}.{key}"))?;
            t.insert(key, value);
        }
        return Ok(toml::Value::Table(t));
    }
    if v.is_none() {
        return Err(PyTypeError::new_err(format!("{what}: None has no TOML value: leave the key out instead")));
    }
    // Lists, tuples, ranges and other sequences; numpy scalars through their Python value.
    if !v.is_instance_of::<PyString>() {
        if let Ok(items) = v.try_iter() {
            let mut out = Vec::new();
            for (i, x) in items.enumerate() {
                out.push(to_toml(&x?, &format!("{what}[{i}]"))?);
            }
            return Ok(toml::Value::Array(out));
        }
    }
    if let Ok(item) = v.call_method0("item") {
        if !item.is(v) {
            return to_toml(&item, what);
        }
    }
    Err(PyTypeError::new_err(format!(
        "{what}: a {} has no TOML value: give a bool, int, float, str, list or dict",
        v.get_type().name()?
    )))
}

/// A TOML value as a Python value (datetimes as their TOML text).
fn from_toml<'py>(py: Python<'py>, v: &toml::Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        toml::Value::String(s) => s.into_pyobject(py)?.into_any(),
        toml::Value::Integer(i) => i.into_pyobject(py)?.into_any(),
        toml::Value::Float(f) => f.into_pyobject(py)?.into_any(),
        toml::Value::Boolean(b) => PyBool::new(py, *b).to_owned().into_any(),
        toml::Value::Datetime(d) => d.to_string().into_pyobject(py)?.into_any(),
        toml::Value::Array(a) => {
            let l = PyList::empty(py);
            for x in a {
                l.append(from_toml(py, x)?)?;
            }
            l.into_any()
        }
        toml::Value::Table(t) => {
            let d = PyDict::new(py);
            for (k, x) in t {
                d.set_item(k, from_toml(py, x)?)?;
            }
            d.into_any()
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Scenario.

/// A scenario: its TOML document and the validated scenario it resolves to.
#[pyclass(module = "flashmux._native", frozen)]
struct Scenario {
    /// The text the scenario resolves from: the file's own text until a key is set, then the
    /// document written out.
    text: String,
    /// Whether `text` is a file's (its errors name lines) or generated.
    located: bool,
    /// Names it in errors: the file, or what it was made from.
    label: String,
    /// Where relative paths (`job_file`, `trace`) start.
    base_dir: PathBuf,
    doc: toml::Value,
    resolved: config::Scenario,
}

impl Scenario {
    fn resolve(py: Python<'_>, text: String, label: String, base_dir: PathBuf, located: bool) -> PyResult<Scenario> {
        let doc: toml::Value = toml::from_str(&text).map_err(|e| {
            // The scenario loader reports the same parse error with its line.
            match config::Scenario::from_toml(&text, &label, &base_dir) {
                Err(ce) => config_err(py, &ce),
                Ok(_) => ConfigError::new_err(format!("{label}: {e}")),
            }
        })?;
        let resolved = py
            .detach(|| {
                if located {
                    config::Scenario::from_toml(&text, &label, &base_dir)
                } else {
                    config::Scenario::from_generated_toml(&text, &label, &base_dir)
                }
            })
            .map_err(|e| config_err(py, &e))?;
        Ok(Scenario { text, located, label, base_dir, doc, resolved })
    }

    fn with_doc(&self, py: Python<'_>, doc: toml::Value) -> PyResult<Scenario> {
        let text = toml::to_string(&doc).map_err(|e| ConfigError::new_err(format!("{}: {e}", self.label)))?;
        Scenario::resolve(py, text, self.label.clone(), self.base_dir.clone(), false)
    }
}

#[pymethods]
impl Scenario {
    /// Loads a scenario file (TOML); relative paths in it start at the file's directory.
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<Scenario> {
        let text = flashmux::fsutil::read_text(&path, flashmux::fsutil::MAX_INPUT_FILE_BYTES, "scenario file")
            .map_err(|error| config_err(py, &FmConfigError::Io { path: path.display().to_string(), error }))?;
        let base = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
        Scenario::resolve(py, text, path.display().to_string(), base, true)
    }

    /// A scenario from TOML text; `name` labels it in errors, `base_dir` resolves relative paths.
    #[staticmethod]
    #[pyo3(signature = (text, name = "<string>".to_string(), base_dir = PathBuf::from(".")))]
    fn from_toml(py: Python<'_>, text: String, name: String, base_dir: PathBuf) -> PyResult<Scenario> {
        Scenario::resolve(py, text, name, base_dir, true)
    }

    /// A scenario from a dict shaped as the TOML file is (`{"device": {"preset": ...},
    /// "tenant": [{...}]}`).
    #[staticmethod]
    #[pyo3(signature = (doc, name = "<dict>".to_string(), base_dir = PathBuf::from(".")))]
    fn from_dict(py: Python<'_>, doc: &Bound<'_, PyAny>, name: String, base_dir: PathBuf) -> PyResult<Scenario> {
        let value = to_toml(doc, &name)?;
        if !value.is_table() {
            return Err(PyTypeError::new_err(format!("{name}: a scenario is a dict (a TOML table)")));
        }
        let text = toml::to_string(&value).map_err(|e| ConfigError::new_err(format!("{name}: {e}")))?;
        Scenario::resolve(py, text, name, base_dir, false)
    }

    /// The built-in default scenario (`flashmux run` with no arguments).
    #[staticmethod]
    fn default(py: Python<'_>) -> PyResult<Scenario> {
        Scenario::resolve(py, config::DEFAULT_SCENARIO.to_string(), "<built-in default scenario>".into(), ".".into(), true)
    }

    /// A copy with `key` (a dotted path: `device.ftl.cmt.pages`, `tenant.1.fio`, `seed`) set to
    /// `value`, validated at once: a bad key or value raises ConfigError and nothing changes.
    fn set(&self, py: Python<'_>, key: &str, value: &Bound<'_, PyAny>) -> PyResult<Scenario> {
        let v = to_toml(value, key)?;
        let mut doc = self.doc.clone();
        set_path(&mut doc, key, v).map_err(|m| ConfigError::new_err(format!("{}: key '{key}': {m}", self.label)))?;
        self.with_doc(py, doc)
    }

    /// The value at `key` (a dotted path) as the scenario's document gives it, or `default` if
    /// the document does not set it (the resolved scenario may still have a preset's value).
    #[pyo3(signature = (key, default = None))]
    fn get<'py>(&self, py: Python<'py>, key: &str, default: Option<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        let steps = parse_path(key).map_err(|m| ConfigError::new_err(format!("key '{key}': {m}")))?;
        let mut cur = &self.doc;
        for step in &steps {
            let next = match (step, cur) {
                (Step::Index(i, _), toml::Value::Array(a)) => a.get(*i),
                (Step::Key(k) | Step::Index(_, k), toml::Value::Table(t)) => t.get(k),
                _ => None,
            };
            match next {
                Some(n) => cur = n,
                None => return Ok(default.unwrap_or_else(|| py.None().into_bound(py))),
            }
        }
        from_toml(py, cur)
    }

    /// The scenario's document as TOML text.
    fn to_toml(&self) -> PyResult<String> {
        if self.located {
            return Ok(self.text.clone());
        }
        toml::to_string(&self.doc).map_err(|e| ConfigError::new_err(e.to_string()))
    }

    /// The scenario's document as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        from_toml(py, &self.doc)
    }

    /// SHA-256 (hex) of everything that determines the run's results, seed included: the
    /// `config_hash` of its results.json.
    #[getter]
    fn config_hash(&self) -> String {
        self.resolved.config_hash()
    }

    #[getter]
    fn seed(&self) -> u64 {
        self.resolved.seed
    }

    #[getter]
    fn name(&self) -> String {
        self.resolved.name.clone()
    }

    /// The tenants' names, in order.
    #[getter]
    fn tenants(&self) -> Vec<String> {
        self.resolved.tenants.iter().map(|t| t.name.clone()).collect()
    }

    /// Warnings from resolving it (unknown fio options, ...), as the command line prints them.
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.resolved.warnings.clone()
    }

    /// Options accepted but not modelled.
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.resolved.notes.clone()
    }

    /// What names it in errors.
    #[getter]
    fn label(&self) -> String {
        self.label.clone()
    }

    #[getter]
    fn base_dir(&self) -> PathBuf {
        self.base_dir.clone()
    }

    /// The text it resolves from and whether that is a file's own (see `_from_state`).
    fn _state(&self) -> (String, String, PathBuf, bool) {
        (self.text.clone(), self.label.clone(), self.base_dir.clone(), self.located)
    }

    /// Rebuilds a scenario from `_state()` (pickling, Ray).
    #[staticmethod]
    fn _from_state(py: Python<'_>, text: String, label: String, base_dir: PathBuf, located: bool) -> PyResult<Scenario> {
        Scenario::resolve(py, text, label, base_dir, located)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let ctor = py.get_type::<Scenario>().getattr("_from_state")?;
        let args = slf.borrow()._state().into_pyobject(py)?;
        PyTuple::new(py, [ctor.into_any(), args.into_any()])
    }

    fn __repr__(&self) -> String {
        format!(
            "Scenario(name={:?}, tenants={:?}, seed={}, config_hash={}…)",
            self.resolved.name,
            self.tenants(),
            self.resolved.seed,
            &self.resolved.config_hash()[..12]
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Running.

/// A flag a sweep sets to stop its running points after the event in progress.
#[pyclass(module = "flashmux._native", frozen)]
#[derive(Clone, Default)]
struct Cancel {
    flag: Arc<AtomicBool>,
}

#[pymethods]
impl Cancel {
    #[new]
    fn new() -> Cancel {
        Cancel::default()
    }

    fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }

    #[getter]
    fn cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
}

/// The timeline's rows streamed into a CSV file as intervals close; the first write error is
/// kept and reported when the run ends.
struct TimelineFile {
    out: Arc<Mutex<TimelineState>>,
}

struct TimelineState {
    csv: Option<TimelineCsv<BufWriter<File>>>,
    error: Option<String>,
    path: PathBuf,
}

impl TimelineSink for TimelineFile {
    fn row(&mut self, row: &flashmux::metrics::TimelineRow) {
        let mut s = self.out.lock().expect("not poisoned");
        if let Some(csv) = s.csv.as_mut() {
            if let Err(e) = csv.row(row) {
                s.error = Some(format!("writing {}: {e}", s.path.display()));
                s.csv = None;
            }
        }
    }
}

fn open_timeline(path: &Path) -> Result<Arc<Mutex<TimelineState>>, String> {
    let f = File::create(path).map_err(|e| format!("creating {}: {e}", path.display()))?;
    let csv = TimelineCsv::new(BufWriter::new(f)).map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(Arc::new(Mutex::new(TimelineState { csv: Some(csv), error: None, path: path.to_path_buf() })))
}

fn close_timeline(t: &Mutex<TimelineState>) -> Result<(), String> {
    let mut s = t.lock().expect("not poisoned");
    if let Some(e) = s.error.take() {
        return Err(e);
    }
    if let Some(csv) = s.csv.take() {
        let path = s.path.display().to_string();
        let mut w = csv.finish().map_err(|e| format!("writing {path}: {e}"))?;
        w.flush().map_err(|e| format!("writing {path}: {e}"))?;
    }
    Ok(())
}

/// Runs `scenario` to its end with the GIL released. The timeline streams to `timeline` (or
/// nowhere). Ctrl-C (checked between batches of events, on the main thread) or `cancel` stop it
/// after the event in progress; a Ctrl-C is returned as the error after the run has ended.
fn simulate(
    py: Python<'_>,
    scenario: config::Scenario,
    timeline: Option<&Path>,
    cancel: Option<&Cancel>,
) -> PyResult<RunResults> {
    let flag = cancel.map_or_else(|| Arc::new(AtomicBool::new(false)), |c| c.flag.clone());
    let timeline = match timeline {
        Some(p) => Some(open_timeline(p).map_err(SimulationError::new_err)?),
        None => None,
    };
    let sink = timeline.clone();
    let mut signal: Option<PyErr> = None;
    let results = py.detach(|| -> Result<RunResults, SimError> {
        let stop = || flag.load(Ordering::SeqCst);
        let mut sim = Simulator::new_polling(scenario, &stop)?;
        sim.stream_timeline(match sink {
            Some(out) => Box::new(TimelineFile { out }),
            None => Box::new(flashmux::sim::NoTimeline),
        });
        loop {
            if let Progress::Finished(_) = sim.run_polling(BATCH_EVENTS, &stop) {
                break;
            }
            if signal.is_none() {
                if let Err(e) = Python::attach(|py| py.check_signals()) {
                    signal = Some(e);
                    flag.store(true, Ordering::SeqCst);
                }
            }
        }
        Ok(sim.finish())
    });
    let results = results.map_err(|e| sim_err(py, &e))?;
    if let Some(t) = &timeline {
        close_timeline(t).map_err(SimulationError::new_err)?;
    }
    if let Some(e) = signal {
        return Err(e);
    }
    Ok(results)
}

/// The metric columns and one row per tenant, as `flashmux sweep` writes them to `sweep.csv`.
fn metric_rows(r: &RunResults) -> (Vec<String>, Vec<Vec<String>>) {
    let mut columns = vec!["tenant".to_string()];
    columns.extend(experiment::METRIC_COLUMNS.iter().map(|c| c.to_string()));
    let rows = r
        .tenants
        .iter()
        .map(|t| {
            let mut row = vec![t.name.clone()];
            row.extend(experiment::tenant_metrics(r, t).into_iter().map(|(_, v)| v));
            row
        })
        .collect();
    (columns, rows)
}

fn stop_name(r: &RunResults) -> &'static str {
    report::stop_reason_name(r.stop_reason)
}

/// The id of the drive `s` ages, if a sweep can age it once and share it: an SSD whose
/// preconditioning writes, in a scenario that does not load a saved drive already.
fn shared_drive(s: &config::Scenario) -> Option<String> {
    let ages = s.precondition.state != flashmux::device::precondition::PreconditionState::Clean;
    let flash = matches!(s.device.kind, flashmux::device::DeviceKind::Ssd(_));
    (ages && flash && s.drive_state.is_none()).then(|| s.drive_id())
}

/// Ages `s`'s drive and saves it to `path`; returns the bytes written and what aging did, or
/// `(0, "")` if `cancel` stopped it first (nothing is saved). Ctrl-C raises KeyboardInterrupt.
fn age_to(py: Python<'_>, s: config::Scenario, path: &Path, cancel: Option<&Cancel>) -> PyResult<(u64, String)> {
    if let flashmux::device::DeviceKind::Null(_) = s.device.kind {
        return Err(ConfigError::new_err(format!("device '{}' is a null device: it has no flash to age", s.device.preset)));
    }
    check_memory(std::slice::from_ref(&s), 1)?;
    let signal: Mutex<Option<PyErr>> = Mutex::new(None);
    let flag = cancel.map_or_else(|| Arc::new(AtomicBool::new(false)), |c| c.flag.clone());
    let asked = std::sync::atomic::AtomicU32::new(0);
    let out = py.detach(|| -> Result<(u64, String), SimError> {
        let stop = || {
            // Aging asks every millisecond or so: look at Ctrl-C every 64th time.
            if !flag.load(Ordering::SeqCst) && asked.fetch_add(1, Ordering::Relaxed) % 64 == 0 {
                if let Err(e) = Python::attach(|py| py.check_signals()) {
                    *signal.lock().expect("not poisoned") = Some(e);
                    flag.store(true, Ordering::SeqCst);
                }
            }
            flag.load(Ordering::SeqCst)
        };
        let sim = Simulator::new_polling(s, &stop)?;
        if sim.precondition_report().interrupted {
            return Ok((0, String::new()));
        }
        let bytes = sim.save_drive_state(path)?;
        Ok((bytes, report::precondition_summary(sim.precondition_report())))
    });
    if let Some(e) = signal.into_inner().expect("not poisoned") {
        return Err(e);
    }
    out.map_err(|e| sim_err(py, &e))
}

/// Refuses a run the machine has no memory for, as the command line does.
fn check_memory(scenarios: &[config::Scenario], parallel: usize) -> PyResult<()> {
    config::limits::check_memory(scenarios, parallel).map_err(ConfigError::new_err)
}

/// Runs `scenario` (with `seed` instead of its own, if given) and returns a dict: `json` (the
/// results.json text `flashmux run` writes), `summary` (summary.txt), `columns` and `rows` (the
/// per-tenant metrics of sweep.csv), `config_hash`, `stop_reason`, `warnings`, `notes`.
/// `timeline`: the file the timeline's CSV streams to. `json_plus`: with latency histograms.
/// `alone_baseline`: also each tenant alone, for slowdowns and fairness (`--alone-baseline`).
#[pyfunction]
#[pyo3(signature = (scenario, seed = None, timeline = None, json_plus = false, alone_baseline = false, cancel = None))]
fn run<'py>(
    py: Python<'py>,
    scenario: &Scenario,
    seed: Option<u64>,
    timeline: Option<PathBuf>,
    json_plus: bool,
    alone_baseline: bool,
    cancel: Option<&Cancel>,
) -> PyResult<Bound<'py, PyDict>> {
    let mut s = scenario.resolved.clone();
    if let Some(seed) = seed {
        s.seed = seed;
    }
    check_memory(std::slice::from_ref(&s), 1)?;
    let notes = s.notes.clone();
    let baseline = alone_baseline.then(|| s.clone());
    let mut r = simulate(py, s, timeline.as_deref(), cancel)?;
    if let Some(b) = baseline {
        if r.stop_reason != StopReason::Interrupted {
            let mut alone = Vec::new();
            for i in 0..b.tenants.len() {
                let Some(a) = b.alone(i) else { break };
                let ar = simulate(py, a, None, cancel)?;
                if ar.stop_reason == StopReason::Interrupted {
                    r.warnings.push("the alone baseline was interrupted: no slowdowns were measured".into());
                    alone.clear();
                    break;
                }
                alone.push(ar);
            }
            if alone.len() == b.tenants.len() {
                r.add_alone_baseline(&alone);
            }
        }
    }
    let d = PyDict::new(py);
    d.set_item("json", report::results_json(&r, json_plus))?;
    d.set_item("summary", report::tenant_table(&r))?;
    let (columns, rows) = metric_rows(&r);
    d.set_item("columns", columns)?;
    d.set_item("rows", rows)?;
    d.set_item("config_hash", &r.config_hash)?;
    d.set_item("stop_reason", stop_name(&r))?;
    d.set_item("warnings", r.warnings.clone())?;
    d.set_item("notes", notes)?;
    Ok(d)
}

/// Ages the drive of a sweep point (its scenario text, as `Experiment.point` gives it) and saves
/// it to `path`: `(bytes, what aging did)`.
/// `cancel` stops it (then `(0, "")`, nothing saved).
#[pyfunction]
#[pyo3(signature = (text, label, base_dir, path, cancel = None))]
fn age_point(
    py: Python<'_>,
    text: String,
    label: String,
    base_dir: PathBuf,
    path: PathBuf,
    cancel: Option<&Cancel>,
) -> PyResult<(u64, String)> {
    let s = py
        .detach(|| config::Scenario::from_generated_toml(&text, &label, &base_dir))
        .map_err(|e| config_err(py, &e))?;
    age_to(py, s, &path, cancel)
}

/// Ages `scenario`'s drive (with `seed` instead of its own, if given) and saves it to `path`, as
/// `flashmux age --save` does: `(bytes, what aging did)`.
#[pyfunction]
#[pyo3(signature = (scenario, path, seed = None))]
fn age(py: Python<'_>, scenario: &Scenario, path: PathBuf, seed: Option<u64>) -> PyResult<(u64, String)> {
    let mut s = scenario.resolved.clone();
    if let Some(seed) = seed {
        s.seed = seed;
    }
    if let Some(p) = &s.drive_state {
        return Err(ConfigError::new_err(format!(
            "the scenario loads its drive from {} (precondition.state_file): there is nothing to age; remove state_file to age the drive",
            p.display()
        )));
    }
    age_to(py, s, &path, None)
}

/// One sweep point from its scenario text (as `Experiment.point` gives it): the per-tenant
/// metrics of sweep.csv, `(columns, rows, stop_reason, config_hash)`.
/// `state_file`: a saved drive to load instead of aging (the sweep's shared drive).
#[pyfunction]
#[pyo3(signature = (text, label, base_dir, cancel = None, state_file = None))]
fn run_point(
    py: Python<'_>,
    text: String,
    label: String,
    base_dir: PathBuf,
    cancel: Option<&Cancel>,
    state_file: Option<PathBuf>,
) -> PyResult<(Vec<String>, Vec<Vec<String>>, String, String)> {
    let mut s = py
        .detach(|| config::Scenario::from_generated_toml(&text, &label, &base_dir))
        .map_err(|e| config_err(py, &e))?;
    if state_file.is_some() {
        s.drive_state = state_file;
    }
    let r = simulate(py, s, None, cancel)?;
    let (columns, rows) = metric_rows(&r);
    Ok((columns, rows, stop_name(&r).to_string(), r.config_hash.clone()))
}

// ---------------------------------------------------------------------------------------------
// Experiments.

/// An experiment: a base scenario and the axes of its sweep, expanded point by point.
#[pyclass(module = "flashmux._native", frozen)]
struct Experiment {
    exp: FmExperiment,
}

#[pymethods]
impl Experiment {
    /// Loads an experiment file, as `flashmux sweep` reads it.
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<Experiment> {
        let exp = FmExperiment::load(&path).map_err(|e| experiment_err(py, &e))?;
        Ok(Experiment { exp })
    }

    /// An experiment from a base scenario and axes: `[(key, values, label or None, names or
    /// None)]`, the first axis outermost, as an experiment file's `[[sweep]]` sections.
    #[staticmethod]
    #[pyo3(signature = (base, axes, name = "sweep".to_string()))]
    fn from_axes(
        py: Python<'_>,
        base: &Scenario,
        axes: Vec<(String, Bound<'_, PyAny>, Option<String>, Option<Vec<String>>)>,
        name: String,
    ) -> PyResult<Experiment> {
        let mut sweep = Vec::new();
        for (key, values, label, names) in axes {
            let mut t = toml::map::Map::new();
            t.insert("key".into(), toml::Value::String(key.clone()));
            let values = to_toml(&values, &key)?;
            if !values.is_array() {
                return Err(PyTypeError::new_err(format!("grid '{key}': the values must be a list")));
            }
            t.insert("values".into(), values);
            if let Some(l) = label {
                t.insert("label".into(), toml::Value::String(l));
            }
            if let Some(n) = names {
                t.insert("names".into(), toml::Value::Array(n.into_iter().map(toml::Value::String).collect()));
            }
            sweep.push(toml::Value::Table(t));
        }
        let mut doc = toml::map::Map::new();
        doc.insert("name".into(), toml::Value::String(name));
        doc.insert("scenario".into(), base.doc.clone());
        doc.insert("sweep".into(), toml::Value::Array(sweep));
        let exp = FmExperiment::from_value(toml::Value::Table(doc), &base.label, &base.base_dir)
            .map_err(|e| experiment_err(py, &e))?;
        Ok(Experiment { exp })
    }

    #[getter]
    fn name(&self) -> String {
        self.exp.name.clone()
    }

    /// The axes' labels, in order (the first columns of the results).
    #[getter]
    fn labels(&self) -> Vec<String> {
        self.exp.axes.iter().map(|a| a.label.clone()).collect()
    }

    fn __len__(&self) -> usize {
        self.exp.len()
    }

    /// Point `index`'s parameters, `[(label, value)]` (a value's name where its axis has names).
    fn params<'py>(&self, py: Python<'py>, index: usize) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
        let choice = self.choice(index)?;
        self.exp
            .axes
            .iter()
            .zip(&choice)
            .map(|(a, &i)| {
                let v = match &a.names {
                    Some(n) => toml::Value::String(n[i].clone()),
                    None => a.values[i].clone(),
                };
                Ok((a.label.clone(), from_toml(py, &v)?))
            })
            .collect()
    }

    /// Point `index` resolved: `(text, label, base_dir, config_hash, drive, memory)`, `text`
    /// being the scenario TOML `run_point` takes, `drive` the id of the drive it ages (None if
    /// it ages nothing a sweep could share) and `memory` the bytes its run is estimated to need;
    /// a point that does not resolve raises ConfigError with the command line's message.
    fn point(&self, py: Python<'_>, index: usize) -> PyResult<(String, String, PathBuf, String, Option<String>, u64)> {
        let (p, text) = py.detach(|| self.exp.point_and_text(index)).map_err(|e| experiment_err(py, &e))?;
        let memory = config::limits::memory_estimate(&p.scenario).total();
        let drive = shared_drive(&p.scenario);
        Ok((text, self.exp.base_label.clone(), self.exp.base_dir.clone(), p.scenario.config_hash(), drive, memory))
    }

    /// The command line's memory check for point `index` (the sweep's largest) run `parallel`
    /// times at once.
    fn check_memory(&self, py: Python<'_>, index: usize, parallel: usize) -> PyResult<()> {
        let p = py.detach(|| self.exp.point(index)).map_err(|e| experiment_err(py, &e))?;
        check_memory(std::slice::from_ref(&p.scenario), parallel)
    }
}

impl Experiment {
    fn choice(&self, index: usize) -> PyResult<Vec<usize>> {
        self.exp
            .choices_of(index)
            .ok_or_else(|| pyo3::exceptions::PyIndexError::new_err(format!("no point {index} of {}", self.exp.len())))
    }
}

// ---------------------------------------------------------------------------------------------
// Listings and bundled experiments.

/// sweep.csv's metric columns, after `tenant`.
#[pyfunction]
fn metric_columns() -> Vec<&'static str> {
    experiment::METRIC_COLUMNS.to_vec()
}

/// The device presets: `[(name, summary)]`.
#[pyfunction]
fn presets() -> Vec<(String, String)> {
    PRESET_NAMES
        .iter()
        .filter_map(|n| config::preset(n))
        .map(|p| (p.name.to_string(), p.summary.to_string()))
        .collect()
}

/// The built-in workload personalities: `[(name, summary, fio job text)]`.
#[pyfunction]
fn personalities() -> Vec<(String, String, String)> {
    flashmux::workload::personality::ALL
        .iter()
        .map(|p| (p.name.to_string(), p.summary.to_string(), p.job.to_string()))
        .collect()
}

/// The bundled paper experiments: `[(name, summary)]`.
#[pyfunction]
fn experiments() -> Vec<(String, String)> {
    bundled::BUNDLED.iter().map(|b| (b.name.to_string(), b.summary.to_string())).collect()
}

/// Runs a bundled paper experiment as `flashmux reproduce` does: every part's sweep.csv, the
/// figures and checks.txt in `output_dir`. Returns `{"checks": [(claim, measured, pass)],
/// "figures": [path], "tables": [path], "interrupted": bool}`.
#[pyfunction]
#[pyo3(signature = (name, output_dir, quick = false, cancel = None))]
fn reproduce<'py>(
    py: Python<'py>,
    name: &str,
    output_dir: PathBuf,
    quick: bool,
    cancel: Option<&Cancel>,
) -> PyResult<Bound<'py, PyDict>> {
    let b = bundled::bundled(name).ok_or_else(|| {
        ConfigError::new_err(format!(
            "unknown experiment '{name}': expected one of {}",
            bundled::BUNDLED.iter().map(|b| b.name).collect::<Vec<_>>().join(", ")
        ))
    })?;
    let parts = (b.parts)(quick).map_err(|e| experiment_err(py, &e))?;
    let (mut points, mut results, mut tables) = (Vec::new(), Vec::new(), Vec::new());
    let d = PyDict::new(py);
    for part in &parts {
        let dir = if parts.len() == 1 { output_dir.clone() } else { output_dir.join(&part.name) };
        let ps = part.points().map_err(|e| experiment_err(py, &e))?;
        check_memory(&ps.iter().map(|p| p.scenario.clone()).collect::<Vec<_>>(), 1)?;
        let mut rs = Vec::new();
        for p in &ps {
            let r = simulate(py, p.scenario.clone(), None, cancel)?;
            let cut = r.stop_reason == StopReason::Interrupted;
            rs.push(r);
            if cut {
                break;
            }
        }
        std::fs::create_dir_all(&dir)
            .map_err(|e| SimulationError::new_err(format!("creating output directory {}: {e}", dir.display())))?;
        let csv = dir.join("sweep.csv");
        experiment::write_csv(&ps[..rs.len()], &rs, &csv)
            .map_err(|e| SimulationError::new_err(format!("writing {}: {e}", csv.display())))?;
        tables.push(csv);
        let interrupted = rs.len() < ps.len() || rs.last().is_some_and(|r| r.stop_reason == StopReason::Interrupted);
        points.extend(ps);
        results.extend(rs);
        if interrupted {
            d.set_item("checks", PyList::empty(py))?;
            d.set_item("figures", PyList::empty(py))?;
            d.set_item("tables", tables)?;
            d.set_item("interrupted", true)?;
            return Ok(d);
        }
    }
    let c = b.conclude(&points, &results, &output_dir).map_err(|e| SimulationError::new_err(flashmux::error_chain(&e)))?;
    let checks: Vec<(String, String, bool)> = c.checks.into_iter().map(|c| (c.claim, c.measured, c.pass)).collect();
    let (figures, path) = (c.figures, c.checks_file);
    d.set_item("checks", checks)?;
    d.set_item("figures", figures)?;
    d.set_item("tables", tables)?;
    d.set_item("checks_file", path)?;
    d.set_item("interrupted", false)?;
    Ok(d)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", flashmux::VERSION)?;
    // Where in which file bad input is, when known; None otherwise.
    let base = py.get_type::<FlashmuxError>();
    base.setattr("file", py.None())?;
    base.setattr("line", py.None())?;
    m.add("FlashmuxError", base)?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("SimulationError", py.get_type::<SimulationError>())?;
    m.add_class::<Scenario>()?;
    m.add_class::<Experiment>()?;
    m.add_class::<Cancel>()?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(run_point, m)?)?;
    m.add_function(wrap_pyfunction!(age_point, m)?)?;
    m.add_function(wrap_pyfunction!(age, m)?)?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(metric_columns, m)?)?;
    m.add_function(wrap_pyfunction!(personalities, m)?)?;
    m.add_function(wrap_pyfunction!(experiments, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce, m)?)?;
    Ok(())
}
