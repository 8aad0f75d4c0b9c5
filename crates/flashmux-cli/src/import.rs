//! `flashmux import mqsim SSD.xml [WORKLOAD.xml] [-o scenario.toml]`: another simulator's
//! configuration as flashmux scenario files (the importers are `flashmux::import`'s). This file
//! owns the command line: where the scenarios go (stdout, `-o`, or `-o`'s name numbered per
//! scenario) and the warnings on stderr.

use crate::BadArg;
use anyhow::Context;
use flashmux::import::Imported;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ImportArgs {
    #[command(subcommand)]
    from: ImportFrom,
}

#[derive(clap::Subcommand)]
enum ImportFrom {
    /// MQSim's device file (Execution_Parameter_Set) and workload file (MQSim_IO_Scenarios): one
    /// scenario per IO_Scenario. What each parameter becomes: docs/MQSIM.md.
    Mqsim(MqsimArgs),
}

#[derive(clap::Args)]
struct MqsimArgs {
    /// MQSim's device file (`-i` of MQSim), e.g. ssdconfig.xml.
    ssd: PathBuf,
    /// MQSim's workload file (`-w` of MQSim), e.g. workload.xml; without it, MQSim's built-in
    /// workload.
    workload: Option<PathBuf>,
    /// Write the scenario here instead of stdout; with several IO_Scenarios, NAME-1.toml,
    /// NAME-2.toml, ... beside it.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

pub fn run(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let ImportFrom::Mqsim(a) = args.from;
    let imported = flashmux::import::mqsim::import(&a.ssd, a.workload.as_deref())?;
    write(&imported, a.output.as_deref())?;
    for w in &imported.warnings {
        eprintln!("warning: {w}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The scenarios to stdout (only one) or to `output` (numbered when there are several).
fn write(imported: &Imported, output: Option<&Path>) -> anyhow::Result<()> {
    let n = imported.scenarios.len();
    let Some(out) = output else {
        if n > 1 {
            return Err(BadArg(format!(
                "the workload has {n} IO_Scenarios, one scenario file each: give -o NAME.toml (written as NAME-1.toml to NAME-{n}.toml)"
            ))
            .into());
        }
        print!("{}", imported.scenarios[0].toml);
        return Ok(());
    };
    for (k, s) in imported.scenarios.iter().enumerate() {
        let path = if n == 1 { out.to_path_buf() } else { numbered(out, k + 1) };
        std::fs::write(&path, &s.toml).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("wrote {} ({})", path.display(), s.name);
    }
    Ok(())
}

/// `dir/name.toml` as `dir/name-k.toml`.
fn numbered(out: &Path, k: usize) -> PathBuf {
    let stem = out.file_stem().map_or("scenario".into(), |s| s.to_string_lossy().into_owned());
    let name = match out.extension() {
        Some(e) => format!("{stem}-{k}.{}", e.to_string_lossy()),
        None => format!("{stem}-{k}"),
    };
    out.with_file_name(name)
}
