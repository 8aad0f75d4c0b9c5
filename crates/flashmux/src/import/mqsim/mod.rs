//! `flashmux import mqsim`: MQSim's device file and workload file as flashmux scenarios, one per
//! `IO_Scenario`. This file reads the files and puts each scenario together (its header, seed,
//! preconditioning and the flows' regions); the device's keys are `device.rs` and `cache.rs`'s,
//! the flows' are `workload.rs`, `synthetic.rs` and `trace.rs`'s, the XML reading `xml.rs`'s and
//! the text `emit.rs`'s. docs/MQSIM.md has every parameter's mapping and the MQSim behaviour
//! behind it.

mod cache;
mod device;
mod emit;
mod synthetic;
mod trace;
mod workload;
mod xml;

#[cfg(test)]
mod tests;

use super::{ImportError, Imported, ImportedScenario};
use device::{Device, FlowSummary};
use emit::{quoted, Toml};
use std::path::Path;
use workload::{Flow, FlowCtx, IoScenario};
use xml::Loc;

/// The label of MQSim's built-in workload in messages.
pub const BUILT_IN_WORKLOAD: &str = "<MQSim's built-in workload>";

/// Imports MQSim's device file `ssd` and its workload file `workload` (MQSim's built-in workload
/// without one). Relative trace paths are taken from the workload file's directory.
pub fn import(ssd: &Path, workload: Option<&Path>) -> Result<Imported, ImportError> {
    let read = |p: &Path| {
        crate::fsutil::read_text(p, crate::fsutil::MAX_INPUT_FILE_BYTES, "MQSim file").map_err(|e| ImportError {
            file: p.display().to_string(),
            line: None,
            element: "file".into(),
            message: format!("cannot read it: {e}"),
        })
    };
    let ssd_text = read(ssd)?;
    let wl = match workload {
        Some(w) => Some((w.display().to_string(), read(w)?, w.parent().unwrap_or(Path::new(".")).to_path_buf())),
        None => None,
    };
    let wl_ref = wl.as_ref().map(|(label, text, dir)| (label.as_str(), text.as_str(), dir.as_path()));
    import_text(&ssd.display().to_string(), &ssd_text, wl_ref)
}

/// [`import`] from text: the device file's label and text, and the workload file's label, text
/// and directory.
pub fn import_text(
    ssd_label: &str,
    ssd_text: &str,
    workload: Option<(&str, &str, &Path)>,
) -> Result<Imported, ImportError> {
    let mut warnings = Vec::new();
    let device = device::read(ssd_label, ssd_text, &mut warnings)?;
    let (label, dir) = match workload {
        Some((l, _, d)) => (l, d),
        None => (BUILT_IN_WORKLOAD, Path::new(".")),
    };
    let mut scenarios = match workload {
        Some((l, text, _)) => workload::read(l, text, &mut warnings)?,
        None => Vec::new(),
    };
    let mut label = label;
    if scenarios.is_empty() {
        let why = match workload {
            Some(_) => {
                "no IO_Scenario: MQSim runs its built-in workload (two random 4 KiB readers), and so does the import"
            }
            None => {
                "no workload file: MQSim runs its built-in workload (two random 4 KiB readers), and so does the import"
            }
        };
        warnings.push(Loc::new(label, None, "MQSim_IO_Scenarios").warning(why));
        label = BUILT_IN_WORKLOAD;
        scenarios = workload::read(label, workload::BUILT_IN, &mut warnings)?;
    }
    let stem = |l: &str| Path::new(l).file_stem().map_or("mqsim".to_string(), |s| s.to_string_lossy().into_owned());
    let base = if label == BUILT_IN_WORKLOAD { stem(ssd_label) } else { stem(label) };
    let n = scenarios.len();
    let mut out = Vec::new();
    for (k, sc) in scenarios.iter().enumerate() {
        let name = if n == 1 { base.clone() } else { format!("{base}-{}", k + 1) };
        let header = format!(
            "{ssd_label} and {label} (IO_Scenario {} of {n}{})",
            k + 1,
            sc.line.map_or(String::new(), |l| format!(", line {l}"))
        );
        let mut t = scenario(&device, sc, &name, &header, dir)?;
        warnings.append(&mut t.warnings);
        out.push(ImportedScenario { name, toml: t.render() });
    }
    let mut seen = std::collections::BTreeSet::new();
    warnings.retain(|w| seen.insert(w.clone()));
    Ok(Imported { scenarios: out, warnings })
}

/// One `IO_Scenario` on the device as a scenario.
fn scenario(d: &Device, sc: &IoScenario, name: &str, from: &str, dir: &Path) -> Result<Toml, ImportError> {
    let mut t = Toml::default();
    t.note("", &format!("Imported from MQSim's {from} by `flashmux import mqsim`."));
    t.note(
        "",
        "Every MQSim parameter is mapped; '# approximated:' marks what flashmux models differently (docs/MQSIM.md).",
    );
    t.set("", "name", quoted(name));
    if d.seed.v < 0 {
        let why = format!("{}: flashmux's seeds are not negative: {}", d.seed.v, d.seed.v.unsigned_abs());
        t.approx("", "seed", d.seed.v.unsigned_abs(), &d.seed.loc, &why);
    } else {
        t.set("", "seed", d.seed.v);
    }
    for f in &sc.flows {
        workload::check_resources(f, &d.geometry)?;
    }
    let summary = FlowSummary {
        count: sc.flows.len(),
        caching: sc.flows.iter().map(|f| &f.caching).collect(),
        largest_write: synthetic::largest_write(&sc.flows)?,
    };
    d.emit(&mut t, &summary)?;
    precondition(&mut t, d, &sc.flows);
    unwritten_reads(&mut t, d, &sc.flows)?;
    let ctx = FlowCtx { wrr: d.tsu.v == "PRIORITY_OUT_OF_ORDER", queue_depth: d.queue_depth.v, dir: dir.to_path_buf() };
    let capacity = d.geometry.flashmux_capacity();
    for (i, (f, (start, count))) in sc.flows.iter().zip(workload::ranges(&d.geometry, sc.flows.len())).enumerate() {
        let (offset, mut bytes) = (start * 512, count * 512);
        if offset >= capacity {
            return Err(f.loc.err(format!(
                "its range starts at byte {offset}, beyond flashmux's logical capacity of {capacity} bytes"
            )));
        }
        if offset + bytes > capacity {
            let why = format!(
                "MQSim's range ends {} bytes beyond flashmux's logical capacity ({capacity} bytes: physical / (1 + OP), whole stripes of one page per plane): shortened by as much",
                offset + bytes - capacity
            );
            bytes = capacity - offset;
            t.approx_note(&format!("tenant.{i}"), &f.loc, &why);
        }
        workload::emit_flow(&mut t, i, f, (offset, bytes), &ctx)?;
    }
    Ok(t)
}

/// A flow that reads where its range may hold no data: MQSim gives a never-written address a
/// page on the fly and reads flash (`ssd/Address_Mapping_Unit_Page_Level.cpp`,
/// `online_create_entry_for_reads`); flashmux, as a drive does, answers zeros without touching
/// flash, so those reads are faster than MQSim's.
fn unwritten_reads(t: &mut Toml, d: &Device, flows: &[Flow]) -> Result<(), ImportError> {
    for f in flows {
        let full = d.preconditioning.v && f.occupancy.v == 100;
        let reads = f.trace || f.p.uint("Read_Percentage", None, 100)?.v > 0;
        if reads && !full {
            let held = if d.preconditioning.v { format!("{}%", f.occupancy.v) } else { "none (no preconditioning)".into() };
            let why = format!(
                "MQSim reads flash even for an address never written (it maps it on the fly); flashmux returns zeros \
                 without touching flash, so reads of the part of the range that holds no data (held: {held}) are faster \
                 than MQSim's; to compare with MQSim, fill the drive ([precondition] fill = 1.0, with state = \"sequential-fill\" \
                 where it is clean)"
            );
            t.approx_note("precondition", &f.occupancy.loc, &why);
        }
    }
    Ok(())
}

/// `[precondition]`: MQSim fills each flow's range to its `Initial_Occupancy_Percentage` with
/// the flow's own pattern when `Enabled_Preconditioning` is on.
fn precondition(t: &mut Toml, d: &Device, flows: &[Flow]) {
    let s = "precondition";
    if !d.preconditioning.v {
        t.note(s, "Enabled_Preconditioning false: MQSim starts on an empty drive");
        t.set(s, "state", quoted("clean"));
        return;
    }
    if flows.iter().all(|f| f.occupancy.v == 0) {
        t.note(s, "every flow's Initial_Occupancy_Percentage is 0: nothing to fill");
        t.set(s, "state", quoted("clean"));
        return;
    }
    t.note(s, "MQSim preconditions each flow's range with the flow's own access pattern");
    t.set(s, "state", quoted("workload"));
    let mean = flows.iter().map(|f| f.occupancy.v).sum::<u64>() as f64 / flows.len() as f64;
    match flows.iter().find(|f| f.occupancy.v != flows[0].occupancy.v) {
        None => t.set(s, "fill", flows[0].occupancy.v as f64 / 100.0),
        Some(f) => {
            let all: Vec<String> = flows.iter().map(|f| format!("{}%", f.occupancy.v)).collect();
            let why =
                format!("flashmux fills every tenant's region to one level: the flows' mean of {}", all.join(", "));
            let fill = ((mean / 100.0).max(0.01) * 1e6).round() / 1e6;
            t.approx(s, "fill", fill, &f.occupancy.loc, &why);
        }
    }
}
