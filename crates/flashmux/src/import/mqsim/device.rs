//! MQSim's device file (`Execution_Parameter_Set`: `Host_Parameter_Set`, `Device_Parameter_Set`
//! and its `Flash_Parameter_Set`): every parameter read with MQSim's default when it is missing
//! (`exec/Host_Parameter_Set.cpp`, `Device_Parameter_Set.cpp`, `Flash_Parameter_Set.cpp`), and
//! written as flashmux's `[device]` and `[host]` keys: mapped, approximated (with a comment and
//! a warning) or refused (docs/MQSIM.md has the table and the reasons).

use super::emit::{duration, quoted, size, Toml};
use super::xml::{line_of, root, Loc, Params, Val};
use crate::import::ImportError;
use roxmltree::Document;

const HOST: &[&str] = &[
    "PCIe_Lane_Bandwidth",
    "PCIe_Lane_Count",
    "SATA_Processing_Delay",
    "Enable_ResponseTime_Logging",
    "ResponseTime_Logging_Period_Length",
];

const DEVICE: &[&str] = &[
    "Seed",
    "Enabled_Preconditioning",
    "Memory_Type",
    "HostInterface_Type",
    "IO_Queue_Depth",
    "Queue_Fetch_Size",
    "Caching_Mechanism",
    "Data_Cache_Sharing_Mode",
    "Data_Cache_Capacity",
    "Data_Cache_DRAM_Row_Size",
    "Data_Cache_DRAM_Data_Rate",
    "Data_Cache_DRAM_Data_Busrt_Size",
    "Data_Cache_DRAM_tRCD",
    "Data_Cache_DRAM_tCL",
    "Data_Cache_DRAM_tRP",
    "Address_Mapping",
    "Ideal_Mapping_Table",
    "CMT_Capacity",
    "CMT_Sharing_Mode",
    "Plane_Allocation_Scheme",
    "Transaction_Scheduling_Policy",
    "Overprovisioning_Ratio",
    "GC_Exec_Threshold",
    "GC_Block_Selection_Policy",
    "Use_Copyback_for_GC",
    "Preemptible_GC_Enabled",
    "GC_Hard_Threshold",
    "Dynamic_Wearleveling_Enabled",
    "Static_Wearleveling_Enabled",
    "Static_Wearleveling_Threshold",
    "Prefered_suspend_erase_time_for_read",
    "Preferred_suspend_erase_time_for_write",
    "Preferred_suspend_write_time_for_read",
    "Flash_Channel_Count",
    "Flash_Channel_Width",
    "Channel_Transfer_Rate",
    "Chip_No_Per_Channel",
    "Flash_Comm_Protocol",
];

const FLASH: &[&str] = &[
    "Flash_Technology",
    "CMD_Suspension_Support",
    "Page_Read_Latency_LSB",
    "Page_Read_Latency_CSB",
    "Page_Read_Latency_MSB",
    "Page_Program_Latency_LSB",
    "Page_Program_Latency_CSB",
    "Page_Program_Latency_MSB",
    "Block_Erase_Latency",
    "Block_PE_Cycles_Limit",
    "Suspend_Erase_Time",
    "Suspend_Program_Time",
    "Die_No_Per_Chip",
    "Plane_No_Per_Die",
    "Block_No_Per_Plane",
    "Page_No_Per_Block",
    "Page_Capacity",
    "Page_Metadat_Capacity",
];

/// The 24 orders of MQSim's `Plane_Allocation_Scheme` (C channel, W way = chip, D die, P plane).
const PLANE_SCHEMES: &[&str] = &[
    "CWDP", "CWPD", "CDWP", "CDPW", "CPWD", "CPDW", "WCDP", "WCPD", "WDCP", "WDPC", "WPCD", "WPDC", "DCWP", "DCPW",
    "DWCP", "DWPC", "DPCW", "DPWC", "PCWD", "PCDW", "PWCD", "PWDC", "PDCW", "PDWC",
];

/// MQSim's flash chips add this ready/busy signal delay to every read (`Flash_Chip.h`,
/// `commProtocolDelayRead`'s default).
pub(super) const READ_SIGNAL_DELAY_NS: u64 = 20;

/// GC in MQSim never starts below this many free blocks per plane: its limit of outstanding GC
/// erases per plane (`SSD_Device.cpp` passes 10; `GC_and_WL_Unit_Base.cpp` raises the threshold).
const MAX_ONGOING_GC_PER_PLANE: u64 = 10;

/// PCIe TLPs of MQSim's link (`PCIe_Link.h`): 128-byte payloads and 28 bytes of header and
/// framing each.
const TLP_PAYLOAD: f64 = 128.0;
const TLP_OVERHEAD: f64 = 28.0;

const U32: u64 = u32::MAX as u64;

/// The device file, read.
pub(super) struct Device {
    pub host: Params,
    pub dev: Params,
    pub flash: Params,
    pub geometry: Geometry,
    pub seed: Val<i64>,
    pub preconditioning: Val<bool>,
    pub queue_depth: Val<u64>,
    pub tsu: Val<&'static str>,
}

/// MQSim's geometry, in its own terms.
#[derive(Clone, Copy, Debug)]
pub(super) struct Geometry {
    pub channels: u64,
    pub chips: u64,
    pub dies: u64,
    pub planes: u64,
    pub blocks: u64,
    pub pages: u64,
    pub page_bytes: u64,
    pub op: f64,
}

impl Geometry {
    pub fn total_planes(&self) -> u64 {
        self.channels * self.chips * self.dies * self.planes
    }
    pub fn total_pages(&self) -> u64 {
        self.total_planes() * self.blocks * self.pages
    }
    pub fn sectors_per_page(&self) -> u64 {
        self.page_bytes / 512
    }
    /// flashmux's over-provisioning (spare / logical) for MQSim's (spare / physical).
    pub fn flashmux_op(&self) -> f64 {
        1.0 / (1.0 - self.op) - 1.0
    }

    /// The logical bytes flashmux exports for this geometry with one mapping unit per page
    /// (`SsdConfig::logical_units`, the loader's own rule).
    pub fn flashmux_capacity(&self) -> u64 {
        let Some(crate::config::Preset { kind: crate::config::DeviceKind::Ssd(mut c), .. }) =
            crate::config::preset("tlc-nvme")
        else {
            unreachable!("tlc-nvme is a flash preset")
        };
        let g = &mut c.geometry;
        (g.channels, g.chips_per_channel, g.dies_per_chip, g.planes_per_die) =
            (self.channels as u32, self.chips as u32, self.dies as u32, self.planes as u32);
        (g.blocks_per_plane, g.pages_per_block, g.page_bytes, g.unit_bytes) =
            (self.blocks as u32, self.pages as u32, self.page_bytes as u32, self.page_bytes as u32);
        c.overprovisioning = self.flashmux_op();
        c.logical_units() * self.page_bytes
    }
}

/// Reads the device file's text.
pub(super) fn read(file: &str, text: &str, warnings: &mut Vec<String>) -> Result<Device, ImportError> {
    let doc = super::xml::parse(file, text)?;
    let r = root(file, &doc, "Execution_Parameter_Set", "an MQSim device file")?;
    let set = |name: &str| r.children().rev().find(|c| c.is_element() && c.tag_name().name() == name);
    for c in r.children().filter(|c| c.is_element()) {
        let name = c.tag_name().name();
        if name != "Host_Parameter_Set" && name != "Device_Parameter_Set" {
            let loc = Loc::new(file, Some(line_of(&doc, c)), name);
            warnings.push(loc.warning("not a parameter set MQSim reads: MQSim ignores it, and so does the import"));
        }
    }
    let empty = Document::parse("<none/>").expect("valid");
    let params = |name: &str, known: &[&str], nested: &[&str], w: &mut Vec<String>| match set(name) {
        Some(n) => Params::read(file, &doc, n, known, nested, w),
        None => Params::read(file, &empty, empty.root_element(), known, nested, w),
    };
    let host = params("Host_Parameter_Set", HOST, &[], warnings)?;
    let dev = params("Device_Parameter_Set", DEVICE, &["Flash_Parameter_Set"], warnings)?;
    let flash = match set("Device_Parameter_Set")
        .and_then(|d| d.children().rev().find(|c| c.is_element() && c.tag_name().name() == "Flash_Parameter_Set"))
    {
        Some(n) => Params::read(file, &doc, n, FLASH, &[], warnings)?,
        None => Params::read(file, &empty, empty.root_element(), FLASH, &[], warnings)?,
    };
    let geometry = read_geometry(&dev, &flash)?;
    refuse_device(&dev)?;
    Ok(Device {
        seed: dev.int("Seed", Some(123))?,
        preconditioning: dev.boolean("Enabled_Preconditioning", Some(true))?,
        queue_depth: positive(dev.uint("IO_Queue_Depth", Some(1024), u16::MAX as u64)?)?,
        tsu: dev.choice(
            "Transaction_Scheduling_Policy",
            Some("OUT_OF_ORDER"),
            &["OUT_OF_ORDER", "PRIORITY_OUT_OF_ORDER", "FLIN"],
        )?,
        geometry,
        host,
        dev,
        flash,
    })
}

fn positive(v: Val<u64>) -> Result<Val<u64>, ImportError> {
    if v.v == 0 {
        return Err(v.loc.err("must be at least 1"));
    }
    Ok(v)
}

fn read_geometry(dev: &Params, flash: &Params) -> Result<Geometry, ImportError> {
    let page = positive(flash.uint("Page_Capacity", Some(8192), U32)?)?;
    if !page.v.is_power_of_two() || page.v < 512 {
        return Err(page.loc.err(format!(
            "{} bytes: flashmux's flash pages are a power of two of at least 512 bytes (MQSim counts them in 512-byte sectors)",
            page.v
        )));
    }
    let op = dev.float("Overprovisioning_Ratio", Some(0.07))?;
    if !(op.v > 0.0 && op.v < 1.0) {
        return Err(op.loc.err(format!("{}: expected a fraction of the physical space in (0, 1)", op.v)));
    }
    Ok(Geometry {
        channels: positive(dev.uint("Flash_Channel_Count", Some(8), U32)?)?.v,
        chips: positive(dev.uint("Chip_No_Per_Channel", Some(4), U32)?)?.v,
        dies: positive(flash.uint("Die_No_Per_Chip", Some(2), U32)?)?.v,
        planes: positive(flash.uint("Plane_No_Per_Die", Some(2), U32)?)?.v,
        blocks: positive(flash.uint("Block_No_Per_Plane", Some(2048), U32)?)?.v,
        pages: positive(flash.uint("Page_No_Per_Block", Some(256), U32)?)?.v,
        page_bytes: page.v,
        op: op.v,
    })
}

/// What flashmux cannot run without misleading: SATA, hybrid mapping, FLIN, a memory other than
/// flash.
fn refuse_device(dev: &Params) -> Result<(), ImportError> {
    dev.choice("Memory_Type", Some("FLASH"), &["FLASH"])?;
    dev.choice("Flash_Comm_Protocol", Some("NVDDR2"), &["NVDDR2"])?;
    let hi = dev.choice("HostInterface_Type", Some("NVME"), &["NVME", "SATA"])?;
    if hi.v == "SATA" {
        return Err(hi.loc.err(
            "SATA: flashmux's device front end is NVMe (queues, arbitration, a PCIe link); MQSim's SATA path (one NCQ, SATA_Processing_Delay per message, its HBA) would be a different device: use NVME, or flashmux's x25e preset by hand",
        ));
    }
    let mapping = dev.choice("Address_Mapping", Some("PAGE_LEVEL"), &["PAGE_LEVEL", "HYBRID"])?;
    if mapping.v == "HYBRID" {
        return Err(mapping.loc.err(
            "HYBRID: MQSim's hybrid mapping unit is a stub (Address_Mapping_Unit_Hybrid.cpp: every function empty), so MQSim cannot run it either: use PAGE_LEVEL",
        ));
    }
    let tsu = dev.choice(
        "Transaction_Scheduling_Policy",
        Some("OUT_OF_ORDER"),
        &["OUT_OF_ORDER", "PRIORITY_OUT_OF_ORDER", "FLIN"],
    )?;
    if tsu.v == "FLIN" {
        return Err(tsu.loc.err(
            "FLIN: MQSim reads the name but has no scheduler for it (SSD_Device.cpp throws \"No implementation is available\"): use OUT_OF_ORDER or PRIORITY_OUT_OF_ORDER",
        ));
    }
    Ok(())
}

/// What the device's keys depend on in the workload: its flows' count, priorities (by index)
/// and caching modes.
pub(super) struct FlowSummary<'a> {
    pub count: usize,
    pub caching: Vec<&'a Val<&'static str>>,
    /// The largest write request of the synthetic flows that write, bytes (MQSim's DRAM time is
    /// fitted there); `None` if none does or a trace flow writes sizes of its own.
    pub largest_write: Option<u64>,
}

impl Device {
    /// Writes `[device]` and its tables, `[host]`.
    pub fn emit(&self, t: &mut Toml, flows: &FlowSummary) -> Result<(), ImportError> {
        t.set("device", "preset", quoted("tlc-nvme"));
        t.note("device", "the preset only fills what MQSim has no parameter for; every MQSim parameter is set below");
        self.emit_geometry(t)?;
        self.emit_timing(t)?;
        self.emit_ftl(t)?;
        self.emit_mapping(t, flows.count)?;
        super::cache::emit(self, t, flows)?;
        self.emit_interface(t, flows.count)?;
        self.emit_unmodelled(t)?;
        t.set("host", "queue_depth", self.queue_depth.v * flows.count.max(1) as u64);
        t.note("host", "MQSim has no host software: no submission or completion time");
        t.set("host", "submit_overhead", quoted("0ns"));
        t.set("host", "completion_overhead", quoted("0ns"));
        Ok(())
    }

    fn emit_geometry(&self, t: &mut Toml) -> Result<(), ImportError> {
        let g = &self.geometry;
        let s = "device.geometry";
        for (key, v) in [
            ("channels", g.channels),
            ("chips_per_channel", g.chips),
            ("dies_per_chip", g.dies),
            ("planes_per_die", g.planes),
            ("blocks_per_plane", g.blocks),
            ("pages_per_block", g.pages),
        ] {
            t.set(s, key, v);
        }
        t.set(s, "page_size", quoted(&size(g.page_bytes)));
        t.note(s, "MQSim maps one logical page per flash page");
        t.set(s, "unit_size", quoted(&size(g.page_bytes)));
        Ok(())
    }

    fn emit_timing(&self, t: &mut Toml) -> Result<(), ImportError> {
        let f = &self.flash;
        let tech = f.choice("Flash_Technology", Some("MLC"), &["SLC", "MLC", "TLC"])?;
        let s = "device.timing";
        for (key, kind) in [("read", "Read"), ("program", "Program")] {
            let lat = |bit: &str| {
                f.uint(
                    &format!("Page_{kind}_Latency_{bit}"),
                    Some(if kind == "Read" { 75_000 } else { 750_000 }),
                    u64::MAX / 4,
                )
            };
            let (lsb, csb, msb) = (lat("LSB")?, lat("CSB")?, lat("MSB")?);
            let (mean, spread) = page_type_mean(tech.v, g_pages(self), [lsb.v, csb.v, msb.v]);
            let extra = if key == "read" { READ_SIGNAL_DELAY_NS } else { 0 };
            let value = quoted(&duration(mean + extra));
            let plus =
                if extra > 0 { format!(" plus MQSim's {extra} ns ready/busy signal delay") } else { String::new() };
            if spread {
                let why = format!(
                    "flashmux has one {key} time: the mean over the {} page types as MQSim assigns them to a block's pages ({} ns){plus}",
                    tech.v, mean
                );
                t.approx(s, key, value, &lsb.loc, &why);
            } else {
                t.note(s, &format!("{key}: MQSim's {} latency{plus}", tech.v));
                t.set(s, key, value);
            }
        }
        let erase = f.uint("Block_Erase_Latency", Some(3_800_000), u64::MAX / 4)?;
        t.set(s, "erase", quoted(&duration(erase.v)));
        self.emit_channel(t)?;
        t.note(s, "MQSim's transaction scheduler sends one command per chip at a time (dies not interleaved)");
        t.set(s, "interleave_dies", false);
        t.note(s, "MQSim's PHY sends every waiting data-out before a channel takes a new command (NVM_PHY_ONFI_NVDDR2.cpp)");
        t.set(s, "data_out_first", true);
        t.note(s, "MQSim joins programs into one multi-plane command only at the same page index of their blocks");
        t.set(s, "multiplane", quoted("same-page"));
        Ok(())
    }

    fn emit_channel(&self, t: &mut Toml) -> Result<(), ImportError> {
        let d = &self.dev;
        let width = positive(d.uint("Flash_Channel_Width", Some(1), U32)?)?;
        let rate = positive(d.uint("Channel_Transfer_Rate", Some(300), U32)?)?;
        // MQSim: a transfer of X bytes takes X / width / 2 × (2 × trunc(1000 / rate)) ns
        // (ONFI_Channel_NVDDR2.h, SSD_Device.cpp), so width bytes per trunc(1000 / rate) ns.
        let cycle_ns = 1000 / rate.v;
        let s = "device.timing";
        t.set(s, "command", quoted("0ns"));
        if cycle_ns == 0 {
            let why = format!(
                "{} MT/s: MQSim rounds its transfer cycle down to 0 ns (instant transfers); flashmux's channel needs a rate: {} MT/s x {} bytes",
                rate.v, rate.v, width.v
            );
            t.approx(s, "channel_rate", quoted(&format!("{}B/s", rate.v * 1_000_000 * width.v)), &rate.loc, &why);
            return Ok(());
        }
        let bytes_per_sec = width.v * 1_000_000_000 / cycle_ns;
        t.note(
            s,
            &format!("{} MT/s x {} bytes, with MQSim's cycle of trunc(1000 / rate) = {cycle_ns} ns", rate.v, width.v),
        );
        t.set(s, "channel_rate", quoted(&format!("{bytes_per_sec}B/s")));
        Ok(())
    }

    fn emit_ftl(&self, t: &mut Toml) -> Result<(), ImportError> {
        let d = &self.dev;
        let g = &self.geometry;
        let s = "device.ftl";
        t.note(
            s,
            &format!(
                "MQSim's Overprovisioning_Ratio {} is spare / physical; flashmux's is spare / logical: 1 / (1 - r) - 1",
                g.op
            ),
        );
        t.set(s, "overprovisioning", g.flashmux_op());
        let thr = d.float("GC_Exec_Threshold", Some(0.05))?;
        if !(0.0..1.0).contains(&thr.v) {
            return Err(thr.loc.err(format!("{}: expected a fraction of a plane's blocks in [0, 1)", thr.v)));
        }
        let mq = ((thr.v * g.blocks as f64) as u64).max(1).max(MAX_ONGOING_GC_PER_PLANE);
        t.note(s, &format!(
            "MQSim starts GC when a plane has fewer than max(trunc({} x {}), {MAX_ONGOING_GC_PER_PLANE}) = {mq} free blocks; flashmux at or below the threshold",
            thr.v, g.blocks
        ));
        t.set(s, "gc_threshold_blocks", (mq - 1).max(2));
        let policy = d.choice(
            "GC_Block_Selection_Policy",
            Some("RGA"),
            &["GREEDY", "RGA", "RANDOM", "RANDOM_P", "RANDOM_PP", "FIFO"],
        )?;
        match policy.v {
            "GREEDY" => t.set(s, "gc_victim", quoted("greedy")),
            "RGA" => {
                t.set(s, "gc_victim", quoted("rga"));
                t.note(s, &format!("RGA's d: MQSim samples trunc(log2({})) blocks", g.blocks));
                t.set(s, "gc_rga_candidates", (g.blocks as f64).log2() as u64);
            }
            "RANDOM" => t.set(s, "gc_victim", quoted("random")),
            "FIFO" => t.set(s, "gc_victim", quoted("fifo")),
            p => {
                let why = format!(
                    "{p}: flashmux's random victim draws among all full blocks; MQSim's {p} redraws {} up to {} times",
                    if p == "RANDOM_P" {
                        "blocks still being written"
                    } else {
                        "blocks being written or with fewer invalid pages than its rho threshold"
                    },
                    g.blocks
                );
                t.approx(s, "gc_victim", quoted("random"), &policy.loc, &why);
            }
        }
        let copyback = d.boolean("Use_Copyback_for_GC", Some(false))?;
        if copyback.v {
            t.note(s, "Use_Copyback_for_GC: flashmux's GC copies on the die (its default)");
        } else {
            t.note(s, "Use_Copyback_for_GC = false: GC data crosses the channel");
            t.set(s, "gc_copyback", false);
        }
        self.emit_gc_unmodelled(t)
    }

    fn emit_gc_unmodelled(&self, t: &mut Toml) -> Result<(), ImportError> {
        let d = &self.dev;
        let s = "device.ftl";
        let preemptible = d.boolean("Preemptible_GC_Enabled", Some(true))?;
        let hard = d.float("GC_Hard_Threshold", Some(0.005))?;
        if preemptible.v {
            let why = format!(
                "true{}: flashmux's GC is not preempted by user I/O (MQSim's lets user transactions go first until a plane is below GC_Hard_Threshold = {}); expect higher tail latency under GC than MQSim's",
                if preemptible.given { "" } else { " (MQSim's default)" },
                hard.v
            );
            t.approx_note(s, &preemptible.loc, &why);
        }
        for (name, what) in [
            ("Dynamic_Wearleveling_Enabled", "dynamic wear levelling (MQSim gives new writes the least-erased free block; flashmux takes free blocks in order)"),
            ("Static_Wearleveling_Enabled", "static wear levelling (MQSim moves cold data once erase counts differ by Static_Wearleveling_Threshold, which takes far longer than a run of seconds)"),
        ] {
            let wl = d.boolean(name, Some(true))?;
            if wl.v {
                let why = format!(
                    "true{}: flashmux has no {what}",
                    if wl.given { "" } else { " (MQSim's default)" }
                );
                t.approx_note(s, &wl.loc, &why);
            }
        }
        d.uint("Static_Wearleveling_Threshold", Some(100), U32)?;
        Ok(())
    }

    fn emit_mapping(&self, t: &mut Toml, flows: usize) -> Result<(), ImportError> {
        let d = &self.dev;
        let g = &self.geometry;
        let ideal = d.boolean("Ideal_Mapping_Table", Some(false))?;
        let cmt = d.uint("CMT_Capacity", Some(2 * 1024 * 1024), U32)?;
        let sharing = d.choice("CMT_Sharing_Mode", Some("SHARED"), &["SHARED", "EQUAL_PARTITIONING"])?;
        let s = "device.ftl";
        if ideal.v {
            t.note(s, "Ideal_Mapping_Table: the whole L2P table in DRAM");
            t.set(s, "mapping", quoted("full"));
            return Ok(());
        }
        // MQSim's entry sizes (Address_Mapping_Unit_Page_Level.cpp): a cached entry holds the
        // LPA, the PPA and a sector bitmap; a translation page's entries hold the PPA and bitmap.
        let lg = (g.total_pages() as f64).log2();
        let spp = g.sectors_per_page() as f64;
        let cmt_entry = ((2.0 * lg + spp) / 8.0).ceil() as u64;
        let gtd_entry = ((lg + spp) / 8.0).ceil() as u64;
        let per_page = g.page_bytes / gtd_entry;
        let entries = cmt.v / cmt_entry;
        let pages = ((entries as f64 / per_page as f64).round() as u64).max(flows.max(1) as u64);
        t.set(s, "mapping", quoted("dftl"));
        t.note(s, &format!("MQSim's translation pages hold {per_page} entries of {gtd_entry} bytes"));
        t.set(s, "entry_size", gtd_entry);
        let c = "device.ftl.cmt";
        let why = format!(
            "MQSim's CMT caches single entries: {} bytes / {cmt_entry}-byte entries = {entries} entries; flashmux caches whole translation pages: {pages} pages of {per_page} entries hold as many, but a random access pattern uses fewer of them",
            cmt.v
        );
        t.approx(c, "pages", pages, &cmt.loc, &why);
        let policy = if sharing.v == "SHARED" { "shared" } else { "partitioned" };
        t.set(c, "policy", quoted(policy));
        Ok(())
    }

    fn emit_interface(&self, t: &mut Toml, flows: usize) -> Result<(), ImportError> {
        let h = &self.host;
        let s = "device.interface";
        let lanes = positive(h.uint("PCIe_Lane_Count", Some(4), U32)?)?;
        let lane = h.float("PCIe_Lane_Bandwidth", Some(0.4))?;
        if lane.v <= 0.0 {
            return Err(lane.loc.err(format!("{}: expected GB/s per lane above 0", lane.v)));
        }
        let rate = (lanes.v as f64 * lane.v * 1e9 * TLP_PAYLOAD / (TLP_PAYLOAD + TLP_OVERHEAD)) as u64;
        t.note(
            s,
            &format!(
                "PCIe: {} lanes x {} GB/s, of which MQSim's TLPs carry {TLP_PAYLOAD} payload bytes in {}",
                lanes.v,
                lane.v,
                TLP_PAYLOAD + TLP_OVERHEAD
            ),
        );
        t.set(s, "link_rate", quoted(&format!("{rate}B/s")));
        t.note(s, "one submission queue per flow, as MQSim gives each flow its own");
        t.set(s, "queues", flows.max(1));
        let fetch = positive(self.dev.uint("Queue_Fetch_Size", Some(512), u16::MAX as u64)?)?;
        if fetch.v < self.queue_depth.v {
            let why = format!(
                "MQSim keeps at most {} commands of a queue in the device and the rest in its {}-entry queue; flashmux has one limit per queue",
                fetch.v, self.queue_depth.v
            );
            t.approx(s, "queue_depth", fetch.v, &fetch.loc, &why);
        } else {
            t.set(s, "queue_depth", self.queue_depth.v);
        }
        t.note(s, "MQSim charges no controller time per command");
        t.set(s, "command_overhead", quoted("0ns"));
        if self.tsu.v == "PRIORITY_OUT_OF_ORDER" {
            let why = "MQSim weighs the flows' priority classes (urgent first, then high:medium:low = 4:2:1) per chip among flash transactions; flashmux's NVMe weighted round robin weighs them among commands waiting for a controller core, so the classes matter only where the controller is busy";
            t.set(s, "arbitration", quoted("wrr"));
            t.approx(s, "wrr_weights", "[4, 2, 1]", &self.tsu.loc, why);
        }
        Ok(())
    }

    /// The parameters without effect on MQSim's results, read (and checked) only: among them
    /// command suspension, which MQSim's scheduler never reaches.
    fn emit_unmodelled(&self, t: &mut Toml) -> Result<(), ImportError> {
        let f = &self.flash;
        let susp = f.choice("CMD_Suspension_Support", Some("ERASE"), &["NONE", "PROGRAM", "ERASE", "PROGRAM_ERASE"])?;
        for name in ["Suspend_Erase_Time", "Suspend_Program_Time", "Block_PE_Cycles_Limit", "Page_Metadat_Capacity"] {
            f.uint(name, Some(0), u64::MAX / 4)?;
        }
        for name in [
            "Prefered_suspend_erase_time_for_read",
            "Preferred_suspend_erase_time_for_write",
            "Preferred_suspend_write_time_for_read",
        ] {
            self.dev.uint(name, Some(0), u64::MAX / 4)?;
        }
        if susp.v != "NONE" {
            // TSU_OutofOrder.cpp and TSU_Priority_OutOfOrder.cpp: the WRITING and ERASING cases
            // of the read-issue switch fall through to `default: return false`, so a read is never
            // issued to a busy chip and nothing is ever suspended.
            t.note(
                "device.timing",
                &format!(
                    "CMD_Suspension_Support {}: MQSim's transaction scheduler never issues a read to a busy chip (its switch falls through to `return false`), so nothing is suspended there either",
                    susp.v
                ),
            );
        }
        let h = &self.host;
        h.uint("SATA_Processing_Delay", Some(0), u64::MAX / 4)?;
        h.boolean("Enable_ResponseTime_Logging", Some(false))?;
        h.uint("ResponseTime_Logging_Period_Length", Some(400_000), u64::MAX / 4)?;
        let plane = self.dev.choice("Plane_Allocation_Scheme", Some("CWDP"), PLANE_SCHEMES)?;
        if plane.v != "CWDP" {
            let why = format!(
                "{}: flashmux stripes consecutive pages over channels, then chips, dies and planes (CWDP); the order of the others changes which requests collide",
                plane.v
            );
            t.approx_note("device.ftl", &plane.loc, &why);
        }
        Ok(())
    }
}

fn g_pages(d: &Device) -> u64 {
    d.geometry.pages
}

/// The mean of a block's page latencies (`lat`: LSB, CSB, MSB) as MQSim assigns page types
/// (`Flash_Chip.h`: SLC all LSB; MLC page p is LSB or MSB by p % 2; TLC pages 0-5 LSB, 6-7 CSB,
/// then ((p - 8) / 2) % 3), rounded down; and whether the types' latencies differ on this block.
pub(super) fn page_type_mean(tech: &str, pages: u64, lat: [u64; 3]) -> (u64, bool) {
    let kind = |p: u64| -> usize {
        match tech {
            "SLC" => 0,
            "MLC" => (p % 2) as usize * 2,
            _ if p <= 5 => 0,
            _ if p <= 7 => 1,
            _ => ((p - 8) / 2 % 3) as usize,
        }
    };
    let mut sum: u128 = 0;
    let mut seen = [false; 3];
    for p in 0..pages {
        let k = kind(p);
        seen[k] = true;
        sum += lat[k] as u128;
    }
    let used: Vec<u64> = (0..3).filter(|&k| seen[k]).map(|k| lat[k]).collect();
    ((sum / pages.max(1) as u128) as u64, used.iter().any(|&l| l != used[0]))
}
