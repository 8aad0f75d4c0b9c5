//! MQSim's workload file (`MQSim_IO_Scenarios` → `IO_Scenario` → its flows): each flow read as
//! MQSim's `exec/IO_Flow_Parameter_Set.cpp` reads it, its logical range laid out as
//! `utils/Logical_Address_Partitioning_Unit.cpp` lays it out, and written as a `[[tenant]]`:
//! a synthetic flow as an inline fio job that generates what `host/IO_Flow_Synthetic.cpp`
//! generates, a trace flow as a trace tenant replaying the file as `host/IO_Flow_Trace_Based.cpp`
//! does.

use super::device::Geometry;
use super::emit::{quoted, Toml};
use super::xml::{line_of, root, Loc, Params, Val};
use crate::import::ImportError;
use std::path::{Path, PathBuf};

const COMMON: &[&str] = &[
    "Priority_Class",
    "Device_Level_Data_Caching_Mode",
    "Channel_IDs",
    "Chip_IDs",
    "Die_IDs",
    "Plane_IDs",
    "Initial_Occupancy_Percentage",
];

const SYNTHETIC: &[&str] = &[
    "Working_Set_Percentage",
    "Synthetic_Generator_Type",
    "Read_Percentage",
    "Address_Distribution",
    "Percentage_of_Hot_Region",
    "Generated_Aligned_Addresses",
    "Address_Alignment_Unit",
    "Request_Size_Distribution",
    "Average_Request_Size",
    "Variance_Request_Size",
    "Seed",
    "Average_No_of_Reqs_in_Queue",
    "Bandwidth",
    "Stop_Time",
    "Total_Requests_To_Generate",
];

const TRACE: &[&str] = &["File_Path", "Percentage_To_Be_Executed", "Relay_Count", "Time_Unit"];

/// MQSim's built-in workload, which it runs when the workload file has no `IO_Scenario`
/// (`main.cpp`, `read_workload_definitions`): two 4 KiB random readers at queue depth 2 on 85%
/// of their ranges for 1 s, with the values MQSim's source sets.
pub(super) const BUILT_IN: &str = r#"<MQSim_IO_Scenarios><IO_Scenario>
<IO_Flow_Parameter_Set_Synthetic><Priority_Class>HIGH</Priority_Class><Device_Level_Data_Caching_Mode>WRITE_CACHE</Device_Level_Data_Caching_Mode><Channel_IDs>0,1,2,3,4,5,6,7</Channel_IDs><Chip_IDs>0,1,2,3</Chip_IDs><Die_IDs>0,1</Die_IDs><Plane_IDs>0,1</Plane_IDs><Initial_Occupancy_Percentage>50</Initial_Occupancy_Percentage><Working_Set_Percentage>85</Working_Set_Percentage><Synthetic_Generator_Type>QUEUE_DEPTH</Synthetic_Generator_Type><Read_Percentage>100</Read_Percentage><Address_Distribution>RANDOM_UNIFORM</Address_Distribution><Percentage_of_Hot_Region>0</Percentage_of_Hot_Region><Generated_Aligned_Addresses>true</Generated_Aligned_Addresses><Address_Alignment_Unit>16</Address_Alignment_Unit><Request_Size_Distribution>FIXED</Request_Size_Distribution><Average_Request_Size>8</Average_Request_Size><Variance_Request_Size>0</Variance_Request_Size><Seed>12344</Seed><Average_No_of_Reqs_in_Queue>2</Average_No_of_Reqs_in_Queue><Bandwidth>262144</Bandwidth><Stop_Time>1000000000</Stop_Time><Total_Requests_To_Generate>0</Total_Requests_To_Generate></IO_Flow_Parameter_Set_Synthetic>
<IO_Flow_Parameter_Set_Synthetic><Priority_Class>HIGH</Priority_Class><Device_Level_Data_Caching_Mode>WRITE_CACHE</Device_Level_Data_Caching_Mode><Channel_IDs>0,1,2,3,4,5,6,7</Channel_IDs><Chip_IDs>0,1,2,3</Chip_IDs><Die_IDs>0,1</Die_IDs><Plane_IDs>0,1</Plane_IDs><Initial_Occupancy_Percentage>50</Initial_Occupancy_Percentage><Working_Set_Percentage>85</Working_Set_Percentage><Synthetic_Generator_Type>QUEUE_DEPTH</Synthetic_Generator_Type><Read_Percentage>100</Read_Percentage><Address_Distribution>RANDOM_UNIFORM</Address_Distribution><Percentage_of_Hot_Region>0</Percentage_of_Hot_Region><Generated_Aligned_Addresses>true</Generated_Aligned_Addresses><Address_Alignment_Unit>16</Address_Alignment_Unit><Request_Size_Distribution>FIXED</Request_Size_Distribution><Average_Request_Size>8</Average_Request_Size><Variance_Request_Size>0</Variance_Request_Size><Seed>6533</Seed><Average_No_of_Reqs_in_Queue>2</Average_No_of_Reqs_in_Queue><Bandwidth>131072</Bandwidth><Stop_Time>1000000000</Stop_Time><Total_Requests_To_Generate>0</Total_Requests_To_Generate></IO_Flow_Parameter_Set_Synthetic>
</IO_Scenario></MQSim_IO_Scenarios>"#;

/// One flow, read.
pub(super) struct Flow {
    pub p: Params,
    /// The flow's element.
    pub loc: Loc,
    pub trace: bool,
    pub priority: Val<&'static str>,
    pub caching: Val<&'static str>,
    pub occupancy: Val<u64>,
}

/// One `IO_Scenario`: its line and flows.
pub(super) struct IoScenario {
    pub line: Option<u32>,
    pub flows: Vec<Flow>,
}

/// Reads the workload file's text; `built_in` when it is MQSim's built-in workload.
pub(super) fn read(file: &str, text: &str, warnings: &mut Vec<String>) -> Result<Vec<IoScenario>, ImportError> {
    let doc = super::xml::parse(file, text)?;
    let r = root(file, &doc, "MQSim_IO_Scenarios", "an MQSim workload file")?;
    let mut out = Vec::new();
    for s in r.children().filter(|c| c.is_element()) {
        let line = line_of(&doc, s);
        if s.tag_name().name() != "IO_Scenario" {
            let loc = Loc::new(file, Some(line), s.tag_name().name());
            warnings.push(loc.warning("not an IO_Scenario: MQSim ignores it, and so does the import"));
            continue;
        }
        let mut flows = Vec::new();
        for f in s.children().filter(|c| c.is_element()) {
            let name = f.tag_name().name();
            let loc = Loc::new(file, Some(line_of(&doc, f)), name);
            let known: Vec<&str> = match name {
                "IO_Flow_Parameter_Set_Synthetic" => COMMON.iter().chain(SYNTHETIC).copied().collect(),
                "IO_Flow_Parameter_Set_Trace_Based" => COMMON.iter().chain(TRACE).copied().collect(),
                _ => return Err(loc.err(
                    "expected IO_Flow_Parameter_Set_Synthetic or IO_Flow_Parameter_Set_Trace_Based (MQSim would run an uninitialised flow)",
                )),
            };
            let p = Params::read(file, &doc, f, &known, &[], warnings)?;
            flows.push(read_flow(p, loc)?);
        }
        if flows.is_empty() {
            return Err(Loc::new(file, Some(line), "IO_Scenario").err("no flows: expected at least one IO_Flow_Parameter_Set_Synthetic or IO_Flow_Parameter_Set_Trace_Based (MQSim would divide by zero)"));
        }
        out.push(IoScenario { line: Some(line), flows });
    }
    Ok(out)
}

fn read_flow(p: Params, loc: Loc) -> Result<Flow, ImportError> {
    let priority = p.choice("Priority_Class", None, &["URGENT", "HIGH", "MEDIUM", "LOW"])?;
    let caching = p.choice(
        "Device_Level_Data_Caching_Mode",
        None,
        &["TURNED_OFF", "WRITE_CACHE", "READ_CACHE", "WRITE_READ_CACHE"],
    )?;
    let occupancy = p.uint("Initial_Occupancy_Percentage", None, 100)?;
    let trace = loc.element.ends_with("Trace_Based");
    Ok(Flow { p, loc, trace, priority, caching, occupancy })
}

/// Each flow uses every channel, chip, die and plane (flashmux does not partition flash between
/// tenants); an id beyond the device is an error, as in MQSim.
pub(super) fn check_resources(flow: &Flow, g: &Geometry) -> Result<(), ImportError> {
    for (name, count, what) in [
        ("Channel_IDs", g.channels, "channels"),
        ("Chip_IDs", g.chips, "chips per channel"),
        ("Die_IDs", g.dies, "dies per chip"),
        ("Plane_IDs", g.planes, "planes per die"),
    ] {
        let ids = flow.p.ids(name)?;
        if let Some(bad) = ids.v.iter().find(|&&i| i as u64 >= count) {
            return Err(ids.loc.err(format!("id {bad}: the device has {count} {what} (ids 0 to {})", count - 1)));
        }
        if ids.v.len() as u64 != count {
            return Err(ids.loc.err(format!(
                "{} of the {count} {what}: flashmux does not partition the flash between tenants (every tenant's data is striped over the whole array), so this flow would see {count} where MQSim gives it {}: list all of them",
                ids.v.len(), ids.v.len()
            )));
        }
    }
    Ok(())
}

/// Each flow's logical range in sectors (start, count), as MQSim lays them out when every flow
/// uses every plane: each plane's logical sectors, trunc(blocks × pages × sectors × (1 - OP) /
/// flows), summed over the planes, one range after another.
pub(super) fn ranges(g: &Geometry, flows: usize) -> Vec<(u64, u64)> {
    let per_plane = ((g.blocks * g.pages * g.sectors_per_page()) as f64 * (1.0 - g.op) * 1.0 / flows as f64) as u64;
    let count = per_plane * g.total_planes();
    (0..flows as u64).map(|i| (i * count, count)).collect()
}

/// Writes flow `i` as tenant `i` in region `(offset, bytes)`.
pub(super) fn emit_flow(
    t: &mut Toml,
    i: usize,
    flow: &Flow,
    region: (u64, u64),
    ctx: &FlowCtx,
) -> Result<(), ImportError> {
    let s = format!("tenant.{i}");
    t.set(&s, "name", quoted(&format!("flow{i}")));
    t.note(&s, "the flow's logical range, as MQSim lays out the flows' ranges one after another");
    t.set(&s, "region", format!("{{ offset = \"{}\", size = \"{}\" }}", region.0, region.1));
    if ctx.wrr {
        t.set(&s, "priority", quoted(&flow.priority.v.to_ascii_lowercase()));
    } else {
        t.note(&s, &format!("Priority_Class {}: MQSim's OUT_OF_ORDER scheduler does not use it", flow.priority.v));
    }
    if flow.trace {
        return super::trace::emit(t, &s, flow, ctx);
    }
    let job = super::synthetic::job(t, &s, i, flow, region.1, ctx)?;
    t.set(&s, "fio", format!("\"\"\"\n{job}\"\"\""));
    Ok(())
}

/// What every flow's tenant needs to know.
pub(super) struct FlowCtx {
    pub wrr: bool,
    /// The device's queue depth (an open-loop flow's most outstanding requests).
    pub queue_depth: u64,
    /// The directory relative trace paths are resolved in.
    pub dir: PathBuf,
}

impl FlowCtx {
    pub fn trace_path(&self, p: &str) -> PathBuf {
        let path = Path::new(p);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.dir.join(path)
        }
    }
}
