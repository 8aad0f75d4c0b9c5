//! The importer on hand-written MQSim files: what each parameter becomes, the warnings of the
//! approximations, the errors of the refusals with their lines, and generated scenarios that load.

use super::{import_text, BUILT_IN_WORKLOAD};
use crate::config::{DeviceKind, Scenario, Workload};
use crate::device::{Arbitration, Priority};
use crate::ftl::{CmtPolicyKind, MappingConfig, VictimPolicy};
use crate::import::{ImportError, Imported};
use crate::units::Nanos;
use std::path::Path;

/// A small drive: 2 channels x 2 chips x 1 die x 2 planes, 256 blocks of 32 4 KiB pages; GREEDY
/// with copy-back, no preconditioning (what loads before the GC policies and workload
/// preconditioning land), priorities applied.
const SSD: &str = r#"<?xml version="1.0" encoding="us-ascii"?>
<Execution_Parameter_Set>
	<Host_Parameter_Set>
		<PCIe_Lane_Bandwidth>1.0</PCIe_Lane_Bandwidth>
		<PCIe_Lane_Count>4</PCIe_Lane_Count>
		<SATA_Processing_Delay>400000</SATA_Processing_Delay>
		<Enable_ResponseTime_Logging>false</Enable_ResponseTime_Logging>
		<ResponseTime_Logging_Period_Length>1000000</ResponseTime_Logging_Period_Length>
	</Host_Parameter_Set>
	<Device_Parameter_Set>
		<Seed>321</Seed>
		<Enabled_Preconditioning>false</Enabled_Preconditioning>
		<Memory_Type>FLASH</Memory_Type>
		<HostInterface_Type>NVME</HostInterface_Type>
		<IO_Queue_Depth>256</IO_Queue_Depth>
		<Queue_Fetch_Size>512</Queue_Fetch_Size>
		<Caching_Mechanism>ADVANCED</Caching_Mechanism>
		<Data_Cache_Sharing_Mode>SHARED</Data_Cache_Sharing_Mode>
		<Data_Cache_Capacity>1048576</Data_Cache_Capacity>
		<Data_Cache_DRAM_Row_Size>8192</Data_Cache_DRAM_Row_Size>
		<Data_Cache_DRAM_Data_Rate>800</Data_Cache_DRAM_Data_Rate>
		<Data_Cache_DRAM_Data_Busrt_Size>4</Data_Cache_DRAM_Data_Busrt_Size>
		<Data_Cache_DRAM_tRCD>13</Data_Cache_DRAM_tRCD>
		<Data_Cache_DRAM_tCL>13</Data_Cache_DRAM_tCL>
		<Data_Cache_DRAM_tRP>13</Data_Cache_DRAM_tRP>
		<Address_Mapping>PAGE_LEVEL</Address_Mapping>
		<Ideal_Mapping_Table>false</Ideal_Mapping_Table>
		<CMT_Capacity>65536</CMT_Capacity>
		<CMT_Sharing_Mode>EQUAL_PARTITIONING</CMT_Sharing_Mode>
		<Plane_Allocation_Scheme>CWDP</Plane_Allocation_Scheme>
		<Transaction_Scheduling_Policy>PRIORITY_OUT_OF_ORDER</Transaction_Scheduling_Policy>
		<Overprovisioning_Ratio>0.2</Overprovisioning_Ratio>
		<GC_Exec_Threshold>0.05</GC_Exec_Threshold>
		<GC_Block_Selection_Policy>GREEDY</GC_Block_Selection_Policy>
		<Use_Copyback_for_GC>true</Use_Copyback_for_GC>
		<Preemptible_GC_Enabled>false</Preemptible_GC_Enabled>
		<GC_Hard_Threshold>0.005</GC_Hard_Threshold>
		<Dynamic_Wearleveling_Enabled>false</Dynamic_Wearleveling_Enabled>
		<Static_Wearleveling_Enabled>false</Static_Wearleveling_Enabled>
		<Static_Wearleveling_Threshold>100</Static_Wearleveling_Threshold>
		<Prefered_suspend_erase_time_for_read>700000</Prefered_suspend_erase_time_for_read>
		<Preferred_suspend_erase_time_for_write>700000</Preferred_suspend_erase_time_for_write>
		<Preferred_suspend_write_time_for_read>100000</Preferred_suspend_write_time_for_read>
		<Flash_Channel_Count>2</Flash_Channel_Count>
		<Flash_Channel_Width>1</Flash_Channel_Width>
		<Channel_Transfer_Rate>333</Channel_Transfer_Rate>
		<Chip_No_Per_Channel>2</Chip_No_Per_Channel>
		<Flash_Comm_Protocol>NVDDR2</Flash_Comm_Protocol>
		<Flash_Parameter_Set>
			<Flash_Technology>TLC</Flash_Technology>
			<CMD_Suspension_Support>NONE</CMD_Suspension_Support>
			<Page_Read_Latency_LSB>60000</Page_Read_Latency_LSB>
			<Page_Read_Latency_CSB>60000</Page_Read_Latency_CSB>
			<Page_Read_Latency_MSB>60000</Page_Read_Latency_MSB>
			<Page_Program_Latency_LSB>500000</Page_Program_Latency_LSB>
			<Page_Program_Latency_CSB>500000</Page_Program_Latency_CSB>
			<Page_Program_Latency_MSB>500000</Page_Program_Latency_MSB>
			<Block_Erase_Latency>3000000</Block_Erase_Latency>
			<Block_PE_Cycles_Limit>10000</Block_PE_Cycles_Limit>
			<Suspend_Erase_Time>700000</Suspend_Erase_Time>
			<Suspend_Program_Time>100000</Suspend_Program_Time>
			<Die_No_Per_Chip>1</Die_No_Per_Chip>
			<Plane_No_Per_Die>2</Plane_No_Per_Die>
			<Block_No_Per_Plane>256</Block_No_Per_Plane>
			<Page_No_Per_Block>32</Page_No_Per_Block>
			<Page_Capacity>4096</Page_Capacity>
			<Page_Metadat_Capacity>448</Page_Metadat_Capacity>
		</Flash_Parameter_Set>
	</Device_Parameter_Set>
</Execution_Parameter_Set>
"#;

/// A synthetic flow's parameters (`{...}` marks are replaced per flow).
const FLOW: &str = r#"		<IO_Flow_Parameter_Set_Synthetic>
			<Priority_Class>{PRIO}</Priority_Class>
			<Device_Level_Data_Caching_Mode>WRITE_CACHE</Device_Level_Data_Caching_Mode>
			<Channel_IDs>0,1</Channel_IDs>
			<Chip_IDs>0,1</Chip_IDs>
			<Die_IDs>0</Die_IDs>
			<Plane_IDs>0,1</Plane_IDs>
			<Initial_Occupancy_Percentage>50</Initial_Occupancy_Percentage>
			<Working_Set_Percentage>{WS}</Working_Set_Percentage>
			<Synthetic_Generator_Type>{GEN}</Synthetic_Generator_Type>
			<Read_Percentage>{READ}</Read_Percentage>
			<Address_Distribution>{DIST}</Address_Distribution>
			<Percentage_of_Hot_Region>20</Percentage_of_Hot_Region>
			<Generated_Aligned_Addresses>true</Generated_Aligned_Addresses>
			<Address_Alignment_Unit>8</Address_Alignment_Unit>
			<Request_Size_Distribution>{SIZE}</Request_Size_Distribution>
			<Average_Request_Size>8</Average_Request_Size>
			<Variance_Request_Size>2</Variance_Request_Size>
			<Seed>798</Seed>
			<Average_No_of_Reqs_in_Queue>16</Average_No_of_Reqs_in_Queue>
			<Bandwidth>4096000</Bandwidth>
			<Stop_Time>{STOP}</Stop_Time>
			<Total_Requests_To_Generate>5000</Total_Requests_To_Generate>
		</IO_Flow_Parameter_Set_Synthetic>
"#;

fn flow(prio: &str, ws: u32, gen: &str, read: u32, dist: &str, size: &str, stop: u64) -> String {
    FLOW.replace("{PRIO}", prio)
        .replace("{WS}", &ws.to_string())
        .replace("{GEN}", gen)
        .replace("{READ}", &read.to_string())
        .replace("{DIST}", dist)
        .replace("{SIZE}", size)
        .replace("{STOP}", &stop.to_string())
}

/// Two flows: a closed-loop 70% read mix on half its range and an open-loop hot/cold writer.
fn workload() -> String {
    format!(
        "<MQSim_IO_Scenarios>\n\t<IO_Scenario>\n{}{}\t</IO_Scenario>\n</MQSim_IO_Scenarios>\n",
        flow("URGENT", 50, "QUEUE_DEPTH", 70, "RANDOM_UNIFORM", "FIXED", 100_000_000),
        flow("LOW", 100, "BANDWIDTH", 0, "RANDOM_HOTCOLD", "FIXED", 0)
    )
}

fn run(ssd: &str, wl: &str) -> Result<Imported, ImportError> {
    import_text("ssd.xml", ssd, Some(("wl.xml", wl, Path::new("."))))
}

fn imported(ssd: &str, wl: &str) -> Imported {
    run(ssd, wl).unwrap_or_else(|e| panic!("{e}"))
}

/// The 1-based line of the first `needle` in `text`.
fn line(text: &str, needle: &str) -> u32 {
    let at = text.find(needle).unwrap_or_else(|| panic!("{needle}"));
    text[..at].matches('\n').count() as u32 + 1
}

fn load(toml: &str) -> Scenario {
    Scenario::from_toml(toml, "imported.toml", Path::new(".")).unwrap_or_else(|e| panic!("{e}\n{toml}"))
}

#[test]
fn a_device_and_two_flows_load_with_their_values() {
    let wl = workload();
    let imp = imported(SSD, &wl);
    assert_eq!(imp.scenarios.len(), 1);
    assert_eq!(imp.scenarios[0].name, "wl");
    let s = load(&imp.scenarios[0].toml);
    assert_eq!(s.seed, 321);
    let DeviceKind::Ssd(c) = &s.device.kind else { panic!("a flash drive") };
    let g = &c.geometry;
    assert_eq!((g.channels, g.chips_per_channel, g.dies_per_chip, g.planes_per_die), (2, 2, 1, 2));
    assert_eq!((g.blocks_per_plane, g.pages_per_block, g.page_bytes, g.unit_bytes), (256, 32, 4096, 4096));
    // MQSim's 0.2 of the physical space spare is 0.25 of the logical space.
    assert!((c.overprovisioning - 0.25).abs() < 1e-12, "{}", c.overprovisioning);
    // trunc(65536 pages / 1.25) = 52428, down to whole stripes of 8 planes.
    assert_eq!(s.device.capacity_bytes(), 52424 * 4096);
    assert_eq!(c.timing.read, Nanos(60_020));
    assert_eq!(c.timing.program, Nanos(500_000));
    assert_eq!(c.timing.erase, Nanos(3_000_000));
    // 1 byte per trunc(1000 / 333) = 3 ns.
    assert_eq!(c.timing.channel_bytes_per_sec, 333_333_333);
    assert!(!c.interleave_dies);
    assert_eq!(c.multiplane, crate::flash::Multiplane::SamePage);
    // 4 lanes x 1 GB/s x 128 / 156.
    assert_eq!(c.host_link_bytes_per_sec, 3_282_051_282);
    // MQSim: GC below max(trunc(0.05 x 256), 10) = 12 free blocks; flashmux at or below 11.
    assert_eq!(c.gc_threshold_blocks, 11);
    assert_eq!(c.victim_policy, VictimPolicy::Greedy);
    // The write-back window: a 4 KiB page for each of the 8 planes (the 1 MiB cache is noted).
    assert_eq!(c.buffer_units, 8);
    // DRAM at 800 MT/s, 4-byte bursts (1.25 ns), tRCD + tCL = 26 ns: a 4 KiB page in
    // 26 + 4096 / 4 / 2 × 1.25 = 666 ns, 8 KiB in 1,306 ns: 26 ns + 6.4 GB/s.
    assert_eq!(c.dram, crate::device::DramTiming { access: Nanos(26), bytes_per_sec: Some(6_400_000_000) });
    assert!(c.data_out_first);
    // 65536 pages: log2 = 16, 8 sectors a page: entries of ceil((32 + 8) / 8) = 5 bytes cached,
    // ceil(24 / 8) = 3 bytes in translation pages (1365 a page); 65536 / 5 = 13107 entries: 10 pages.
    let MappingConfig::Dftl { entry_bytes, cmt } = &c.mapping else { panic!("dftl") };
    assert_eq!((*entry_bytes, cmt.pages, cmt.policy), (3, 10, CmtPolicyKind::Partitioned));
    assert_eq!((s.device.nvme.queues, s.device.nvme.queue_depth), (2, 256));
    let Arbitration::Wrr { weights, classes } = &s.device.nvme.arbitration else { panic!("wrr") };
    assert_eq!((weights, classes.as_slice()), (&[4, 2, 1], &[Priority::Urgent, Priority::Low][..]));
    assert_eq!(s.host.queue_depth, 512);
    // Each flow's range: 8 planes x trunc(256 x 32 x 8 x 0.8 / 2) sectors; the second one ends
    // where flashmux's capacity does, 32 sectors short of MQSim's.
    let sectors = 8 * (256 * 32 * 8 * 8 / 10 / 2) as u64;
    assert_eq!(s.tenants[0].region, (0, sectors * 512));
    assert_eq!(s.tenants[1].region, (sectors * 512, 52424 * 4096 - sectors * 512));
    assert_eq!(2 * sectors - 52424 * 8, 32);
    let opts = |t: usize| -> Vec<String> {
        let Workload::Fio(jobs) = &s.tenants[t].workload else { panic!("fio") };
        jobs[0].all_options().map(|(k, v)| format!("{k}={v}")).collect()
    };
    let half = ((sectors - 1) / 2 + 1) * 512;
    for o in ["rw=randrw", "rwmixread=70", "bs=4096", "ba=4096", "norandommap=1", "iodepth=16"] {
        assert!(opts(0).contains(&o.to_string()), "{o}: {:?}", opts(0));
    }
    for o in [format!("size={half}"), "randseed=798".into(), "time_based=".into(), "runtime=100ms".into()] {
        assert!(opts(0).iter().any(|x| x == &o || x.starts_with(&o)), "{o}: {:?}", opts(0));
    }
    // 4096000 B/s in 8-sector requests: 1000 IOPS, Poisson.
    for o in [
        "rw=randwrite",
        "random_distribution=zoned:80/20:20/80",
        "rate_iops=1000",
        "rate_process=poisson",
        "io_size=1p",
        "number_ios=5000",
    ] {
        assert!(opts(1).contains(&o.to_string()), "{o}: {:?}", opts(1));
    }
    assert_eq!(s.precondition.state, crate::device::precondition::PreconditionState::Clean);
    // fio limits reads and writes each to its own rate: a mix's rate is split by its read share.
    let mixed = wl.replacen("<Read_Percentage>0<", "<Read_Percentage>25<", 1);
    let toml = imported(SSD, &mixed).scenarios.remove(0).toml;
    assert!(toml.contains("rate_iops=250,750\n"), "{toml}");
    load(&toml);
}

#[test]
fn command_suspension_maps_to_none_as_mqsims_scheduler_never_suspends() {
    let susp = SSD.replacen("<CMD_Suspension_Support>NONE", "<CMD_Suspension_Support>PROGRAM_ERASE", 1);
    assert_ne!(susp, SSD);
    let (plain, with) = (imported(SSD, &workload()), imported(&susp, &workload()));
    assert_eq!(plain.warnings, with.warnings, "no approximation");
    assert!(with.scenarios[0].toml.contains("CMD_Suspension_Support PROGRAM_ERASE: MQSim's transaction scheduler never issues a read to a busy chip"));
}

#[test]
fn the_dram_time_is_mqsims_formula() {
    // MQSim's shipped ssdconfig: 8 KiB rows, 100 MT/s (10 ns bursts), 1-byte bursts,
    // tRCD = tCL = tRP = 13 ns. Measured in MQSim itself: 40,986 ns for an 8 KiB access and
    // 163,944 ns for 64 KiB (its row count halved: 4 × (4,096 × 10 + 13) + 2 × 26).
    let t = |bytes| super::cache::mqsim_dram_ns(bytes, 8192, 1, 10.0, 13, 13, 13);
    assert_eq!(t(8192), 40_986);
    assert_eq!(t(65536), 163_944);
    assert_eq!(t(4096), 26 + 20_480);
    // 12 KiB: one row pair counted 12288 / 8192 / 2 = 0 times, then 4 KiB at one byte a burst.
    assert_eq!(t(12288), 26 + 26 + 409);
    // Above 4,294 MT/s MQSim's 32-bit rate × 10^6 wraps: 100,000 MT/s runs at 1,215,752,192
    // transfers/s, which the import says and uses.
    let fast = SSD.replacen("<Data_Cache_DRAM_Data_Rate>800<", "<Data_Cache_DRAM_Data_Rate>100000<", 1);
    assert_ne!(fast, SSD);
    let imp = imported(&fast, &workload());
    assert!(imp.warnings.iter().any(|w| w.contains("wraps to 1215752192 transfers/s")), "{:#?}", imp.warnings);
}

#[test]
fn every_flow_and_device_parameter_leaves_no_warning_when_mapped_exactly() {
    let imp = imported(SSD, &workload());
    // The CMT's granularity, the data cache's capacity beyond the write-back window, the DRAM
    // time, WRR and the last range's rounding are always approximations, and so are reads on a
    // drive not filled (the first flow reads, with no preconditioning); nothing else in this
    // file is.
    let elements: Vec<&str> = imp.warnings.iter().map(|w| w.split(": ").nth(1).unwrap_or("")).collect();
    assert_eq!(
        elements,
        [
            "CMT_Capacity",
            "Data_Cache_Capacity",
            "Data_Cache_DRAM_Data_Rate",
            "Transaction_Scheduling_Policy",
            "Initial_Occupancy_Percentage",
            "IO_Flow_Parameter_Set_Synthetic"
        ],
        "{:#?}",
        imp.warnings
    );
}

/// The device file with `from` replaced by `to` (which must be there).
fn ssd_with(from: &str, to: &str) -> String {
    assert!(SSD.contains(from), "{from}");
    SSD.replacen(from, to, 1)
}

#[test]
fn each_device_approximation_has_its_comment_and_a_warning_with_its_line() {
    let wl = workload();
    for (from, to, element, words) in [
        ("<Queue_Fetch_Size>512", "<Queue_Fetch_Size>64", "Queue_Fetch_Size", "one limit per queue"),
        ("<Preemptible_GC_Enabled>false", "<Preemptible_GC_Enabled>true", "Preemptible_GC_Enabled", "not preempted"),
        (
            "<Dynamic_Wearleveling_Enabled>false",
            "<Dynamic_Wearleveling_Enabled>TRUE",
            "Dynamic_Wearleveling_Enabled",
            "wear levelling",
        ),
        (
            "<Static_Wearleveling_Enabled>false",
            "<Static_Wearleveling_Enabled>true",
            "Static_Wearleveling_Enabled",
            "wear levelling",
        ),
        ("<Plane_Allocation_Scheme>CWDP", "<Plane_Allocation_Scheme>PDCW", "Plane_Allocation_Scheme", "CWDP"),
        ("<Caching_Mechanism>ADVANCED", "<Caching_Mechanism>simple", "Caching_Mechanism", "SIMPLE"),
        (
            "<Data_Cache_Sharing_Mode>SHARED",
            "<Data_Cache_Sharing_Mode>EQUAL_PARTITIONING",
            "Data_Cache_Sharing_Mode",
            "shared",
        ),
        (
            "<GC_Block_Selection_Policy>GREEDY",
            "<GC_Block_Selection_Policy>RANDOM_PP",
            "GC_Block_Selection_Policy",
            "rho",
        ),
        ("<Seed>321", "<Seed>-5", "Seed", "not negative"),
        ("<Channel_Transfer_Rate>333", "<Channel_Transfer_Rate>1200", "Channel_Transfer_Rate", "0 ns"),
        (
            "<Page_Read_Latency_LSB>60000",
            "<Page_Read_Latency_LSB>30000",
            "Page_Read_Latency_LSB",
            "mean over the TLC page types",
        ),
        ("<Page_Program_Latency_MSB>500000", "<Page_Program_Latency_MSB>900000", "Page_Program_Latency_LSB", "mean"),
        ("<Seed>321</Seed>", "<Seed>321</Seed><Colour>red</Colour>", "Colour", "MQSim ignores it"),
        ("<Seed>321</Seed>", "<Seed>321</Seed><Seed>322</Seed>", "Seed", "given twice"),
    ] {
        let ssd = ssd_with(from, to);
        let imp = imported(&ssd, &wl);
        let at = line(&ssd, &format!("<{element}>"));
        let prefix = format!("ssd.xml:{at}: {element}: ");
        let w = imp.warnings.iter().find(|w| w.starts_with(&prefix));
        assert!(w.is_some_and(|w| w.contains(words)), "{prefix}...{words}: {:#?}", imp.warnings);
        let toml = &imp.scenarios[0].toml;
        let ignored = element == "Colour" || from == "<Seed>321</Seed>";
        assert!(ignored || toml.contains(&format!("# approximated: {element}: ")), "{element}:\n{toml}");
        if !matches!(element, "GC_Block_Selection_Policy" | "Colour") {
            load(toml);
        }
    }
}

#[test]
fn the_tlc_mean_follows_mqsim_s_page_types() {
    // 32 pages: 0-5 LSB, 6-7 CSB, then ((p - 8) / 2) % 3: 8 LSB, 8 CSB, 8 MSB over pages 8-31.
    let (mean, spread) = super::device::page_type_mean("TLC", 32, [100, 200, 400]);
    assert_eq!(mean, (14 * 100 + 10 * 200 + 8 * 400) / 32);
    assert!(spread);
    assert_eq!(super::device::page_type_mean("MLC", 4, [100, 999, 300]), (200, true));
    assert_eq!(super::device::page_type_mean("SLC", 4, [100, 999, 300]), (100, false));
}

#[test]
fn gc_policies_copyback_and_preconditioning_are_written_as_their_keys() {
    let wl = workload();
    for (policy, keys) in [
        ("RGA", &["gc_victim = \"rga\"", "gc_rga_candidates = 8"][..]),
        ("RANDOM", &["gc_victim = \"random\""][..]),
        ("RANDOM_P", &["gc_victim = \"random\""][..]),
        ("FIFO", &["gc_victim = \"fifo\""][..]),
    ] {
        let ssd = ssd_with("<GC_Block_Selection_Policy>GREEDY", &format!("<GC_Block_Selection_Policy>{policy}"));
        let toml = imported(&ssd, &wl).scenarios.remove(0).toml;
        for k in keys {
            assert!(toml.contains(k), "{policy}: {k}\n{toml}");
        }
    }
    let ssd = ssd_with("<Use_Copyback_for_GC>true", "<Use_Copyback_for_GC>false");
    assert!(imported(&ssd, &wl).scenarios[0].toml.contains("\ngc_copyback = false\n"));
    let ssd = ssd_with("<Enabled_Preconditioning>false", "<Enabled_Preconditioning>true");
    let toml = imported(&ssd, &wl).scenarios.remove(0).toml;
    assert!(toml.contains("[precondition]\n# MQSim preconditions each flow's range with the flow's own access pattern\nstate = \"workload\"\nfill = 0.5\n"), "{toml}");
    let state = load(&toml).precondition;
    assert_eq!((state.state, state.fill), (crate::device::precondition::PreconditionState::Workload, 0.5));
    let uneven = wl.replacen("<Initial_Occupancy_Percentage>50", "<Initial_Occupancy_Percentage>90", 1);
    let imp = imported(&ssd, &uneven);
    assert!(imp.scenarios[0].toml.contains("fill = 0.7\n"), "{}", imp.scenarios[0].toml);
    let at = line(&uneven, "<Initial_Occupancy_Percentage>50");
    assert!(
        imp.warnings
            .iter()
            .any(|w| w.starts_with(&format!("wl.xml:{at}: Initial_Occupancy_Percentage: flashmux fills"))),
        "{:#?}",
        imp.warnings
    );
}

#[test]
fn each_flow_approximation_has_a_warning_with_its_line() {
    let base = workload();
    for (from, to, element, words) in [
        ("WRITE_CACHE</Device", "READ_CACHE</Device", "Device_Level_Data_Caching_Mode", "straight to flash"),
        (
            "<Address_Distribution>RANDOM_UNIFORM",
            "<Address_Distribution>STREAMING",
            "Address_Distribution",
            "random address",
        ),
        (
            "<Request_Size_Distribution>FIXED",
            "<Request_Size_Distribution>NORMAL",
            "Request_Size_Distribution",
            "bssplit",
        ),
        ("<Working_Set_Percentage>50", "<Working_Set_Percentage>0", "Working_Set_Percentage", "uses 100"),
        ("<Stop_Time>100000000", "<Stop_Time>100000001", "Stop_Time", "microseconds"),
        ("<Seed>798</Seed>", "<Seed>798</Seed><Intensity>5</Intensity>", "Intensity", "MQSim ignores it"),
    ] {
        let wl = base.replacen(from, to, 1);
        let imp = imported(SSD, &wl);
        let at = line(&wl, &format!("<{element}>"));
        let prefix = format!("wl.xml:{at}: {element}: ");
        assert!(
            imp.warnings.iter().any(|w| w.starts_with(&prefix) && w.contains(words)),
            "{prefix}{words}: {:#?}",
            imp.warnings
        );
        load(&imp.scenarios[0].toml);
    }
    let wl = base.replacen("<Request_Size_Distribution>FIXED", "<Request_Size_Distribution>NORMAL", 1);
    assert!(imported(SSD, &wl).scenarios[0].toml.contains("bssplit=2048/"), "sizes from 4 sectors up");
}

/// The error of importing `ssd` and `wl`, which must start with `file:line: element: `.
fn refused(ssd: &str, wl: &str, file: &str, at: u32, element: &str) -> String {
    let e = run(ssd, wl).err().unwrap_or_else(|| panic!("{element}: expected an error")).to_string();
    assert!(e.starts_with(&format!("{file}:{at}: {element}: ")), "{e}");
    e
}

#[test]
fn refusals_and_bad_values_name_their_file_line_and_element() {
    let wl = workload();
    for (from, to, element, words) in [
        ("<HostInterface_Type>NVME", "<HostInterface_Type>SATA", "HostInterface_Type", "NVMe"),
        ("<Address_Mapping>PAGE_LEVEL", "<Address_Mapping>HYBRID", "Address_Mapping", "stub"),
        (
            "<Transaction_Scheduling_Policy>PRIORITY_OUT_OF_ORDER",
            "<Transaction_Scheduling_Policy>FLIN",
            "Transaction_Scheduling_Policy",
            "no scheduler",
        ),
        ("<Page_Capacity>4096", "<Page_Capacity>6000", "Page_Capacity", "power of two"),
        ("<IO_Queue_Depth>256", "<IO_Queue_Depth>12abc", "IO_Queue_Depth", "not a whole number"),
        ("<IO_Queue_Depth>256", "<IO_Queue_Depth>70000", "IO_Queue_Depth", "at most 65535"),
        ("<Overprovisioning_Ratio>0.2", "<Overprovisioning_Ratio>1.5", "Overprovisioning_Ratio", "(0, 1)"),
        ("<Ideal_Mapping_Table>false", "<Ideal_Mapping_Table>yes", "Ideal_Mapping_Table", "true or false"),
        ("<Flash_Technology>TLC", "<Flash_Technology>QLC", "Flash_Technology", "SLC, MLC, TLC"),
        (
            "<Block_No_Per_Plane>256</Block_No_Per_Plane>",
            "<Block_No_Per_Plane></Block_No_Per_Plane>",
            "Block_No_Per_Plane",
            "empty",
        ),
    ] {
        let ssd = ssd_with(from, to);
        let e = refused(&ssd, &wl, "ssd.xml", line(&ssd, &format!("<{element}>")), element);
        assert!(e.contains(words), "{e}");
    }
    let e = refused(
        "<Execution_Parameter_Set>\n<Host_Parameter_Set>\n</Execution_Parameter_Set>",
        &wl,
        "ssd.xml",
        3,
        "XML",
    );
    assert!(e.contains("not well-formed"), "{e}");
    let e = refused("<?xml version=\"1.0\"?>\n<Device_Parameter_Set/>", &wl, "ssd.xml", 2, "Device_Parameter_Set");
    assert!(e.contains("root element <Execution_Parameter_Set>"), "{e}");
}

#[test]
fn flow_refusals_name_their_line() {
    let base = workload();
    for (from, to, element, words) in [
        ("<Channel_IDs>0,1", "<Channel_IDs>0", "Channel_IDs", "does not partition"),
        ("<Chip_IDs>0,1", "<Chip_IDs>0,1,2", "Chip_IDs", "id 2"),
        ("<Percentage_of_Hot_Region>20</Percentage_of_Hot_Region>\n\t\t\t<Generated_Aligned_Addresses>true</Generated_Aligned_Addresses>\n\t\t\t<Address_Alignment_Unit>8</Address_Alignment_Unit>\n\t\t\t<Request_Size_Distribution>FIXED</Request_Size_Distribution>\n\t\t\t<Average_Request_Size>8</Average_Request_Size>\n\t\t\t<Variance_Request_Size>2</Variance_Request_Size>\n\t\t\t<Seed>798</Seed>\n\t\t\t<Average_No_of_Reqs_in_Queue>16</Average_No_of_Reqs_in_Queue>\n\t\t\t<Bandwidth>4096000</Bandwidth>\n\t\t\t<Stop_Time>0", "<Percentage_of_Hot_Region>0</Percentage_of_Hot_Region>\n\t\t\t<Generated_Aligned_Addresses>true</Generated_Aligned_Addresses>\n\t\t\t<Address_Alignment_Unit>8</Address_Alignment_Unit>\n\t\t\t<Request_Size_Distribution>FIXED</Request_Size_Distribution>\n\t\t\t<Average_Request_Size>8</Average_Request_Size>\n\t\t\t<Variance_Request_Size>2</Variance_Request_Size>\n\t\t\t<Seed>798</Seed>\n\t\t\t<Average_No_of_Reqs_in_Queue>16</Average_No_of_Reqs_in_Queue>\n\t\t\t<Bandwidth>4096000</Bandwidth>\n\t\t\t<Stop_Time>0", "Percentage_of_Hot_Region", "one sector"),
        ("<Bandwidth>4096000</Bandwidth>\n\t\t\t<Stop_Time>0", "<Bandwidth>2048</Bandwidth>\n\t\t\t<Stop_Time>0", "Bandwidth", "divides by zero"),
        ("<Total_Requests_To_Generate>5000</Total_Requests_To_Generate>\n\t\t</IO_Flow_Parameter_Set_Synthetic>\n\t</IO", "<Total_Requests_To_Generate>0</Total_Requests_To_Generate>\n\t\t</IO_Flow_Parameter_Set_Synthetic>\n\t</IO", "Total_Requests_To_Generate", "never"),
        ("<Read_Percentage>70</Read_Percentage>", "", "IO_Flow_Parameter_Set_Synthetic", ""),
        ("<Read_Percentage>70", "<Read_Percentage>170", "Read_Percentage", "at most 100"),
    ] {
        assert!(base.contains(from), "{from}");
        let wl = base.replacen(from, to, 1);
        let e = match element {
            // A missing parameter has no line of its own: the error names it without one.
            "IO_Flow_Parameter_Set_Synthetic" => {
                let e = run(SSD, &wl).expect_err("missing").to_string();
                assert_eq!(e, "wl.xml: Read_Percentage: missing: MQSim has no default for this flow parameter (its value would be whatever is in memory): give it");
                continue;
            }
            _ => refused(SSD, &wl, "wl.xml", line(&wl, &format!("<{element}>{}", to.split('>').nth(1).unwrap_or("").split('<').next().unwrap_or(""))), element),
        };
        assert!(e.contains(words), "{e}");
    }
    let wl = base.replacen("<IO_Flow_Parameter_Set_Synthetic>", "<IO_Flow_Parameter_Set_Other>", 1).replacen(
        "</IO_Flow_Parameter_Set_Synthetic>",
        "</IO_Flow_Parameter_Set_Other>",
        1,
    );
    refused(SSD, &wl, "wl.xml", 3, "IO_Flow_Parameter_Set_Other");
    refused(
        SSD,
        "<MQSim_IO_Scenarios>\n<IO_Scenario>\n</IO_Scenario></MQSim_IO_Scenarios>",
        "wl.xml",
        2,
        "IO_Scenario",
    );
}

#[test]
fn several_io_scenarios_are_several_scenarios_and_none_is_mqsim_s_built_in_workload() {
    let one = workload();
    let body = one.trim_start_matches("<MQSim_IO_Scenarios>\n").trim_end_matches("</MQSim_IO_Scenarios>\n");
    let two = format!("<MQSim_IO_Scenarios>\n{body}{body}</MQSim_IO_Scenarios>\n");
    let imp = imported(SSD, &two);
    let names: Vec<&str> = imp.scenarios.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["wl-1", "wl-2"]);
    assert!(imp.scenarios[1].toml.contains("IO_Scenario 2 of 2"));
    // MQSim's built-in workload is for its default 8 x 4 x 2 x 2 geometry.
    let big = SSD
        .replace("<Flash_Channel_Count>2", "<Flash_Channel_Count>8")
        .replace("<Chip_No_Per_Channel>2", "<Chip_No_Per_Channel>4")
        .replace("<Die_No_Per_Chip>1", "<Die_No_Per_Chip>2");
    let imp = import_text("ssd.xml", &big, None).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        imp.warnings.iter().any(|w| w.contains("no workload file: MQSim runs its built-in workload")),
        "{:#?}",
        imp.warnings
    );
    let s = load(&imp.scenarios[0].toml);
    assert_eq!(imp.scenarios[0].name, "ssd");
    assert_eq!(s.tenants.len(), 2);
    let e = import_text("ssd.xml", SSD, None).expect_err("ids beyond the small drive").to_string();
    assert!(e.starts_with(&format!("{BUILT_IN_WORKLOAD}:2: Channel_IDs: id 2")), "{e}");
}

#[test]
fn a_trace_flow_replays_its_file_from_the_workload_s_directory() {
    let dir = std::env::temp_dir().join(format!("flashmux-import-trace-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("traces")).unwrap();
    let trace: String = (0..10).map(|i| format!("{} 0 {} 8 {}\n", 1000 * (i + 1), 64 * i, i % 2)).collect();
    std::fs::write(dir.join("traces/t.trace"), trace).unwrap();
    let wl = "<MQSim_IO_Scenarios>\n<IO_Scenario>\n<IO_Flow_Parameter_Set_Trace_Based>\n<Priority_Class>HIGH</Priority_Class>\n<Device_Level_Data_Caching_Mode>WRITE_CACHE</Device_Level_Data_Caching_Mode>\n<Channel_IDs>0,1</Channel_IDs>\n<Chip_IDs>1,0</Chip_IDs>\n<Die_IDs>0</Die_IDs>\n<Plane_IDs>0,1</Plane_IDs>\n<Initial_Occupancy_Percentage>70</Initial_Occupancy_Percentage>\n<File_Path>traces/t.trace</File_Path>\n<Percentage_To_Be_Executed>50</Percentage_To_Be_Executed>\n<Relay_Count>1</Relay_Count>\n<Time_Unit>MICROSECOND</Time_Unit>\n</IO_Flow_Parameter_Set_Trace_Based>\n</IO_Scenario>\n</MQSim_IO_Scenarios>\n";
    let imp = import_text("ssd.xml", SSD, Some(("wl.xml", wl, &dir))).unwrap_or_else(|e| panic!("{e}"));
    let toml = &imp.scenarios[0].toml;
    let path = std::fs::canonicalize(dir.join("traces/t.trace")).unwrap();
    assert!(
        toml.contains(&format!(
            "trace = {{ path = \"{}\", format = \"mqsim\", max_outstanding = 256, max_requests = 5 }}",
            path.display()
        )),
        "{toml}"
    );
    assert!(
        imp.warnings
            .iter()
            .any(|w| w.starts_with("wl.xml:14: Time_Unit: MICROSECOND: MQSim reads this but never uses it")),
        "{:#?}",
        imp.warnings
    );
    let s = load(toml);
    let Workload::Trace { spec, .. } = &s.tenants[0].workload else { panic!("a trace tenant") };
    assert_eq!(spec.max_requests, Some(5));
    let relay = wl.replace("<Relay_Count>1", "<Relay_Count>3");
    let e = import_text("ssd.xml", SSD, Some(("wl.xml", &relay, &dir))).expect_err("refused").to_string();
    assert!(e.starts_with("wl.xml:13: Relay_Count: 3: flashmux replays a trace once"), "{e}");
    let missing = wl.replace("traces/t.trace", "traces/none.trace");
    let e = import_text("ssd.xml", SSD, Some(("wl.xml", &missing, &dir))).expect_err("refused").to_string();
    assert!(e.starts_with("wl.xml:11: File_Path: cannot read the trace 'traces/none.trace'"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reads_on_a_drive_not_filled_are_said_to_be_faster_than_mqsims() {
    // With preconditioning on and every flow at 100% occupancy, reads touch flash in both.
    let full = ssd_with("<Enabled_Preconditioning>false", "<Enabled_Preconditioning>true");
    let at = |wl: &str| {
        imported(&full, wl).warnings.iter().filter(|w| w.contains("never written")).count()
    };
    let wl = workload();
    let reads = at(&wl);
    assert!(reads >= 1, "the workload's reading flows are below 100%");
    let filled = wl.replace("<Initial_Occupancy_Percentage>50<", "<Initial_Occupancy_Percentage>100<");
    assert_eq!(at(&filled), 0, "every flow at 100%");
}
