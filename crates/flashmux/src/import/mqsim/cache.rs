//! MQSim's data cache (`Caching_Mechanism`, `Data_Cache_*` and the flows'
//! `Device_Level_Data_Caching_Mode`) as flashmux's `[device.buffer]`: a DRAM write buffer shared
//! by every tenant, without DRAM access time (MQSim's `Data_Cache_Manager_*.cpp`).

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
    t.note(s, "MQSim's data cache, as a write buffer: whole pages written to flash as they fill");
    t.set(s, "size", quoted(&size(capacity.v / page * page)));
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
    dram(d, t)
}

/// MQSim's DRAM timing: flashmux charges none; the warning says what MQSim charges per page.
fn dram(d: &Device, t: &mut Toml) -> Result<(), ImportError> {
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
    // Data_Cache_Manager_Base.h: an access of at most a row costs tRCD + tCL + (size / burst / 2)
    // bursts of 1e9 / (rate × 1e6) ns each.
    let page = d.geometry.page_bytes;
    let per_page = if page <= row.v {
        let burst_ns = 1e9 / (rate.v as f64 * 1e6);
        (trcd.v + tcl.v) as f64 + (page / burst.v / 2) as f64 * burst_ns
    } else {
        f64::NAN
    };
    let _ = trp;
    let cost = if per_page.is_nan() {
        "more than a row per page".to_string()
    } else {
        format!("{:.0} ns per {page}-byte page", per_page)
    };
    let why =
        format!("flashmux's buffer takes no DRAM time; MQSim charges each cache access its DRAM time ({cost} here)");
    t.approx_note("device.buffer", &rate.loc, &why);
    Ok(())
}
