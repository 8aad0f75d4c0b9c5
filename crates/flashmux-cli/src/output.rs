//! Writing a run's results: files in the output directory and the terminal output.
//!
//! Nothing is lost: the directory is checked before anything is simulated (a bad `-o` costs no
//! simulation), the timeline streams into it as the run goes (so memory does not grow with
//! simulated time), each file appears whole (written beside its final name and renamed into
//! place), and if the directory cannot be written at the end after all, the results go to a
//! directory under the system's temporary directory and the error says where.

use crate::{BadArg, OutputFormat};
use anyhow::Context;
use flashmux::metrics::{RunResults, TimelineRow};
use flashmux::fsutil;
use flashmux::report::{self, TimelineCsv};
use flashmux::sim::TimelineSink;
use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A run's output directory, checked to be writable.
pub struct OutputDir {
    dir: PathBuf,
}

impl OutputDir {
    /// Checks that `dir` can hold the results (creating it if it is missing and writing a file
    /// in it), then leaves it as it was: a directory that cannot is bad input, found before
    /// the run, and a run rejected later leaves nothing behind. The results create it again.
    pub fn prepare(dir: &Path) -> Result<OutputDir, BadArg> {
        let bad = |what: &str, e: std::io::Error| {
            BadArg(format!("output directory {}: {what}: {e} (choose another with -o DIR)", dir.display()))
        };
        // The directories this creates, deepest last, to remove again.
        let missing: Vec<&Path> = dir.ancestors().take_while(|p| !p.as_os_str().is_empty() && !p.exists()).collect();
        let probed = fs::create_dir_all(dir).map_err(|e| bad("cannot be created", e)).and_then(|()| {
            let probe = dir.join(format!(".flashmux-probe-{}", std::process::id()));
            fs::write(&probe, b"").map_err(|e| bad("a file cannot be written in it", e))?;
            let _ = fs::remove_file(&probe);
            Ok(())
        });
        for p in &missing {
            let _ = fs::remove_dir(p);
        }
        probed.map(|()| OutputDir { dir: dir.to_path_buf() })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// `timeline.csv`, streamed: rows are written as the run closes its intervals (the file is
    /// created with the first), into a file beside it that [`write_all`] renames into place.
    pub fn timeline(&self) -> TimelineFile {
        let tmp = temp_name(&self.dir.join("timeline.csv"));
        TimelineFile { state: Arc::new(Mutex::new(Stream { tmp: tmp.clone(), csv: None, error: None, rows: 0 })), tmp }
    }
}

/// `timeline.csv` while a run streams it.
pub struct TimelineFile {
    state: Arc<Mutex<Stream>>,
    tmp: PathBuf,
}

struct Stream {
    tmp: PathBuf,
    /// The file, once the first row came.
    csv: Option<TimelineCsv<BufWriter<fs::File>>>,
    /// The first write that failed; rows after it are not written.
    error: Option<std::io::Error>,
    rows: u64,
}

struct Sink(Arc<Mutex<Stream>>);

impl TimelineSink for Sink {
    fn row(&mut self, row: &TimelineRow) {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if s.error.is_some() {
            return;
        }
        if let Err(e) = s.open().and_then(|csv| csv.row(row)) {
            s.error = Some(e);
            return;
        }
        s.rows += 1;
    }
}

impl Stream {
    /// The file, created (its directory too) and given its header the first time.
    fn open(&mut self) -> std::io::Result<&mut TimelineCsv<BufWriter<fs::File>>> {
        if self.csv.is_none() {
            if let Some(dir) = self.tmp.parent() {
                fs::create_dir_all(dir)?;
            }
            self.csv = Some(TimelineCsv::new(BufWriter::new(fs::File::create(&self.tmp)?))?);
        }
        Ok(self.csv.as_mut().expect("just opened"))
    }
}

impl TimelineFile {
    /// What the simulator streams its rows into.
    pub fn sink(&self) -> Box<dyn TimelineSink> {
        Box::new(Sink(self.state.clone()))
    }

    /// Flushes the file and renames it to `timeline.csv` in `dir`.
    fn finish(self, dir: &Path) -> anyhow::Result<()> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        // A run without a single row still gets its header.
        let opened = if s.error.is_none() { s.open().map(|_| ()) } else { Ok(()) };
        let flushed = match s.csv.take() {
            Some(csv) => csv.finish().and_then(|mut w| w.flush()),
            None => opened,
        };
        let rows = s.rows;
        if let Some(e) = s.error.take().or(flushed.err()) {
            anyhow::bail!("writing {} failed after {rows} rows: {e}; the rows written are in {}", "timeline.csv", self.tmp.display());
        }
        let to = dir.join("timeline.csv");
        fs::rename(&self.tmp, &to)
            .with_context(|| format!("moving {} to {}: the timeline is in the former", self.tmp.display(), to.display()))
    }
}

/// Writes `results.json`, `timeline.csv` (the streamed `timeline`, or else the rows in
/// `r.timeline`) and `summary.txt` into `dir`, and prints `format` on stdout. If `dir` cannot
/// be written, the files go to a new directory under the system's temporary directory and the
/// error names it.
pub fn write_all(r: &RunResults, dir: &OutputDir, format: OutputFormat, timeline: Option<TimelineFile>) -> anyhow::Result<()> {
    let plus = format == OutputFormat::JsonPlus;
    let json = report::results_json(r, plus);
    let table = report::tenant_table(r);
    // The terminal output first: it does not depend on the directory.
    let printed = print(r, &json, &table, dir.path(), format);
    let timeline_done = timeline.map(|t| t.finish(dir.path()));
    let written = write_files(r, dir.path(), &json, &table, timeline_done.is_none());
    let written = written.map_err(|e| {
        let fallback = std::env::temp_dir().join(format!("flashmux-results-{}", std::process::id()));
        match write_files(r, &fallback, &json, &table, timeline_done.is_none()) {
            Ok(()) => e.context(format!("the results were written to {} instead", fallback.display())),
            Err(e2) => e.context(format!("writing them to {} failed too: {e2:#}", fallback.display())),
        }
    });
    written?;
    if let Some(t) = timeline_done {
        t?;
    }
    printed
}

fn write_files(r: &RunResults, dir: &Path, json: &str, table: &str, with_timeline: bool) -> anyhow::Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("creating output directory {}", dir.display()))?;
    write_atomic(&dir.join("results.json"), json.as_bytes())?;
    if with_timeline {
        let mut buf = Vec::new();
        report::write_timeline_csv(r, &mut buf).context("formatting timeline.csv")?;
        write_atomic(&dir.join("timeline.csv"), &buf)?;
    }
    write_atomic(&dir.join("summary.txt"), table.as_bytes())
}

fn print(r: &RunResults, json: &str, table: &str, dir: &Path, format: OutputFormat) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match format {
        OutputFormat::Normal => {
            write!(out, "{}", report::fio_normal(r))?;
            writeln!(out)?;
            write!(out, "{table}")?;
            writeln!(out, "\nresults: {}", dir.display())?;
        }
        OutputFormat::Json | OutputFormat::JsonPlus => write!(out, "{json}")?,
    }
    Ok(())
}

/// A hidden name beside `path` for the timeline while it streams.
fn temp_name(path: &Path) -> PathBuf {
    let name = path.file_name().map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.{}.partial", std::process::id()))
}

/// Writes `bytes` to `path` whole or not at all ([`fsutil::write_atomic`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    fsutil::write_atomic(path, |w| w.write_all(bytes)).with_context(|| format!("writing {}", path.display()))
}
