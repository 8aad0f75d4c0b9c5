//! MQSim's data cache (`Caching_Mechanism`, `Data_Cache_*` and the flows'
//! `Device_Level_Data_Caching_Mode`) as flashmux's `[device.buffer]`.
//!
//! MQSim's ADVANCED cache manager (`Data_Cache_Manager_Flash_Advanced.cpp`) sends a page whose
//! address was not written in the last second ("cold") to flash as soon as it is admitted, and
//! admits pages only while less than a page per plane is being written back
//! (`write_to_destage_buffer`; the window `back_pressure_buffer_max_depth` is set in
//! `SSD_Device.cpp`); a write completes when its pages are admitted and its DRAM write has
//! ended, without waiting for flash. flashmux's buffer of one page per plane, flushed page by
//! page, is that window; MQSim's DRAM is one channel serving accesses in order, which
//! `dram_access` and `dram_rate` give (fitted to MQSim's access-time formula). What is not
//! carried over: pages rewritten within a second stay in MQSim's cache up to
//! `Data_Cache_Capacity` (write hits); flashmux's buffer holds only the window.

use super::device::{Device, FlowSummary};
use super::emit::{quoted, size, Toml};
use crate::import::ImportError;

const U32: u64 = u32::MAX as u64;

/// Writes `[device.buffer]`.
pub(super) fn emit(d: &Device, t: &mut Toml, flows: &FlowSummary) -> Result<(), ImportError> {
    let p = &d.dev;
    let s = "device.buffer";
    let mechanism = p.choice("Caching_Mechanism", Some("ADVANCED"), &["SIMPLE", "ADVANCED"])?;
    let sharing = p.choice("Data_Cache_Sharing_Mode", Some("SHARED"), &["SHARED", "EQUAL_PARTITIONING"])?;
    let capacity = p.uint("Data_Cache_Capacity", Some(512 * 1024 * 1024), U32)?;
    let page = d.geometry.page_bytes;
    if capacity.v < page {
        return Err(capacity.loc.err(format!(
            "{} bytes: less than one {page}-byte page: flashmux's write buffer holds whole pages (MQSim's data cache too)",
            capacity.v
        )));
    }
    // SSD_Device.cpp: back_pressure_buffer_max_depth = every plane's page, in sectors.
    let window = d.geometry.total_planes() * page;
    t.note(s, "MQSim's write-back window: a page per plane in flight to flash; cold pages go to flash at once");
    let why = format!(
        "{} bytes of data cache: MQSim keeps pages rewritten within a second there (write hits); flashmux's buffer is its write-back window of a page per plane ({window} bytes), which is what cold and sequential data see",
        capacity.v
    );
    if capacity.v == window {
        t.set(s, "size", quoted(&size(window)));
    } else {
        t.approx(s, "size", quoted(&size(window)), &capacity.loc, &why);
    }
    t.set(s, "flush", quoted("page"));
    t.set(s, "volatile_write_cache", false);
    if mechanism.v == "SIMPLE" {
        let why = "SIMPLE: MQSim's simple cache manager; flashmux's buffer behaves as its ADVANCED one (a shared write-back buffer)";
        t.approx_note(s, &mechanism.loc, why);
    }
    if sharing.v == "EQUAL_PARTITIONING" && flows.count > 1 {
        let why = format!(
            "EQUAL_PARTITIONING: MQSim gives each of the {} flows an equal part of the cache; flashmux's buffer is shared, so a writing tenant can fill it for all",
            flows.count
        );
        t.approx_note(s, &sharing.loc, &why);
    }
    for mode in &flows.caching {
        if mode.v != "WRITE_CACHE" {
            let why = format!(
                "{}: flashmux buffers every tenant's writes and serves reads from flash unless the data is still in the buffer (MQSim's WRITE_CACHE); {}",
                mode.v,
                match mode.v {
                    "TURNED_OFF" => "MQSim writes this flow's data straight to flash, so its writes complete sooner here",
                    "READ_CACHE" => "MQSim caches this flow's reads and writes its data straight to flash",
                    _ => "MQSim also caches the data this flow reads",
                }
            );
            t.approx_note(s, &mode.loc, &why);
        }
    }
    dram(d, t, flows.largest_write)
}

/// MQSim's DRAM access time for `bytes` (`estimate_dram_access_time`, Data_Cache_Manager_Base.h),
/// with its integer divisions and truncations; `t_b` is the burst time in ns.
pub(super) fn mqsim_dram_ns(bytes: u64, row: u64, burst: u64, t_b: f64, trcd: u64, tcl: u64, trp: u64) -> u64 {
    if bytes <= row {
        return trcd + tcl + ((bytes / burst / 2) as f64 * t_b) as u64;
    }
    let per_two_rows = ((row / burst / 2) as f64 * t_b + trp as f64) as u64;
    trcd + tcl + per_two_rows * (bytes / row / 2) + trcd + tcl + ((bytes % row) as f64 / (burst as f64 * t_b)) as u64
}

/// MQSim's DRAM timing as `dram_access` + bytes / `dram_rate`: the line through MQSim's access
/// times at a page and at the largest write (two pages if that is not larger than a page).
fn dram(d: &Device, t: &mut Toml, largest_write: Option<u64>) -> Result<(), ImportError> {
    let p = &d.dev;
    let row = p.uint("Data_Cache_DRAM_Row_Size", Some(8192), U32)?;
    let rate = p.uint("Data_Cache_DRAM_Data_Rate", Some(800), U32)?;
    let burst = p.uint("Data_Cache_DRAM_Data_Busrt_Size", Some(4), U32)?;
    let trcd = p.uint("Data_Cache_DRAM_tRCD", Some(13), U32)?;
    let tcl = p.uint("Data_Cache_DRAM_tCL", Some(13), U32)?;
    let trp = p.uint("Data_Cache_DRAM_tRP", Some(13), U32)?;
    for v in [&row, &rate, &burst] {
        if v.v == 0 {
            return Err(v.loc.err("must be at least 1 (MQSim divides by it)"));
        }
    }
    // Data_Cache_Manager_Base.cpp: the burst time is 1e9 / (rate * 1000 * 1000) ns with the
    // product in 32 bits, which wraps above 4,294 MT/s.
    let transfers = (rate.v * 1_000_000) % (1u64 << 32);
    if transfers == 0 {
        return Err(rate.loc.err(format!("{} MT/s: MQSim's 32-bit product rate × 10^6 wraps to 0 and it divides by it", rate.v)));
    }
    let t_b = 1e9 / transfers as f64;
    if transfers != rate.v * 1_000_000 {
        let why = format!(
            "{} MT/s: MQSim computes rate × 10^6 in 32 bits, which wraps to {transfers} transfers/s; its DRAM runs at that rate, and so does flashmux's",
            rate.v
        );
        t.approx_note("device.buffer", &rate.loc, &why);
    }
    let time = |bytes| mqsim_dram_ns(bytes, row.v, burst.v, t_b, trcd.v, tcl.v, trp.v);
    let page = d.geometry.page_bytes;
    let far = largest_write.filter(|&w| w > page).unwrap_or(2 * page);
    let (t1, t2) = (time(page), time(far));
    t.note(
        "device.buffer",
        &format!("MQSim's DRAM: one access at a time, {t1} ns for a {page}-byte page and {t2} ns for {far} bytes (Data_Cache_Manager_Base.h)"),
    );
    if t2 <= t1 {
        t.set("device.buffer", "dram_access", quoted(&format!("{t1}ns")));
        return Ok(());
    }
    let bytes_per_sec = ((far - page) as f64 * 1e9 / (t2 - t1) as f64).round() as u64;
    let access = (t1 as f64 - page as f64 * 1e9 / bytes_per_sec as f64).round().max(0.0) as u64;
    let why = format!(
        "MQSim's DRAM time is piecewise in the access size; flashmux's is {access} ns + bytes at {bytes_per_sec} B/s, the line through MQSim's times at {page} and {far} bytes"
    );
    t.approx("device.buffer", "dram_access", quoted(&format!("{access}ns")), &rate.loc, &why);
    t.set("device.buffer", "dram_rate", quoted(&format!("{bytes_per_sec}B/s")));
    Ok(())
}
