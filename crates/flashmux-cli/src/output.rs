//! Writing a run's results: files in the output directory and the terminal output.

use crate::OutputFormat;
use anyhow::Context;
use flashmux::metrics::RunResults;
use flashmux::report;
use std::fs;
use std::io::Write;
use std::path::Path;

/// Writes `results.json`, `timeline.csv` and `summary.txt` into `dir`, and prints `format` on stdout.
pub fn write_all(r: &RunResults, dir: &Path, format: OutputFormat) -> anyhow::Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("creating output directory {}", dir.display()))?;
    let plus = format == OutputFormat::JsonPlus;
    let json = serde_json::to_string_pretty(&report::fio_json(r, plus)).context("serializing results")? + "\n";
    let path = dir.join("results.json");
    fs::write(&path, &json).with_context(|| format!("writing {}", path.display()))?;
    let path = dir.join("timeline.csv");
    let f = fs::File::create(&path).with_context(|| format!("writing {}", path.display()))?;
    report::write_timeline_csv(r, std::io::BufWriter::new(f)).with_context(|| format!("writing {}", path.display()))?;
    let table = report::tenant_table(r);
    let path = dir.join("summary.txt");
    fs::write(&path, &table).with_context(|| format!("writing {}", path.display()))?;
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
