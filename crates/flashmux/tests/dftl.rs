//! End-to-end tests of DFTL: translation pages on flash, the map cache and its policies.

mod common;

use common::run_checked;
use flashmux::config::Scenario;
use flashmux::metrics::RunResults;
use flashmux::report::fio_json;
use std::path::Path;

fn run(text: &str) -> RunResults {
    run_checked(text, 3_000)
}

/// 64 MiB of flash with paper C's timing; 64-byte entries so the small table still has a few
/// hundred translation pages (64 entries each).
fn drive(mapping: &str) -> String {
    format!(
        r#"
[device]
preset = "paper-c"
[device.geometry]
channels = 4
chips_per_channel = 1
blocks_per_plane = 64
pages_per_block = 64
[device.ftl]
overprovisioning = 0.15
{mapping}
[device.buffer]
size = "256KiB"
[precondition]
state = "sequential-fill"
"#
    )
}

const READER_WRITER: &str = r#"
[[tenant]]
name = "reader"
fio = """
[r]
rw=randread
bs=4k
iodepth=8
time_based
runtime=300ms
"""
[[tenant]]
name = "writer"
fio = """
[w]
rw=randwrite
bs=4k
iodepth=8
time_based
runtime=300ms
"""
"#;

fn dftl(cmt: &str) -> String {
    format!("mapping = \"dftl\"\nentry_size = 64\n[device.ftl.cmt]\n{cmt}")
}

#[test]
fn dftl_runs_deterministically_and_accounts_every_lookup() {
    let text = format!("{}{READER_WRITER}", drive(&dftl("pages = 16\npolicy = \"shared\"")));
    let a = run(&text);
    let b = run(&text);
    assert_eq!(fio_json(&a, false).to_string(), fio_json(&b, false).to_string(), "DFTL runs are not reproducible");
    let d = &a.device;
    assert_eq!(d.mapping, "dftl/shared");
    let cmt = d.cmt.as_ref().expect("a DFTL run reports its map cache");
    assert_eq!(cmt.entries_per_page, 64);
    assert!(cmt.map_pages > 200, "{} translation pages", cmt.map_pages);
    let mut misses = 0;
    for t in &a.tenants {
        let m = &t.map;
        assert_eq!(m.lookups, m.hits + m.misses, "{}: lookups", t.name);
        assert!(m.lookups > 100, "{}: {} lookups", t.name, m.lookups);
        assert!(m.misses > 0 && m.map_loads == m.misses, "{}: {m:?}", t.name);
        assert!(m.cmt_pages <= 16);
        misses += m.misses;
    }
    // Every miss is a translation-page read; the writer's dirty pages come back out as programs.
    assert_eq!(d.ssd.map_reads, misses);
    let flushes: u64 = a.tenants.iter().map(|t| t.map.map_flushes).sum();
    assert!(flushes > 0, "writes dirtied no translation page");
    assert_eq!(d.ssd.map_programs, flushes);
    // One unit per page on this drive: programmed translation pages are flushes and GC's
    // updates, less any still waiting for a free block.
    let asked = d.ssd.map_programs + d.ssd.gc_map_updates;
    assert!(d.ftl.map_units_programmed <= asked && d.ftl.map_units_programmed + d.ssd.map_programs_deferred >= asked);
    // GC's uncached map updates are charged to the tenants whose data moved.
    let charged: u64 = a.tenants.iter().map(|t| t.map.gc_map_updates).sum();
    // (Data no tenant owns, e.g. preconditioned space between regions, is charged to nobody.)
    assert!(charged <= d.ssd.gc_map_updates, "{charged} charged of {}", d.ssd.gc_map_updates);
    // Write amplification counts the translation pages written.
    let f = &d.ftl;
    let waf = (f.host_units_programmed + f.gc_units_programmed + f.padding_units_programmed + f.map_units_programmed)
        as f64
        / f.host_units_programmed as f64;
    assert!((d.waf.unwrap() - waf).abs() < 1e-12);
    // The timeline carries the lookups and the pages held.
    let lookups: u64 = a.timeline.iter().filter(|r| r.tenant == "reader").map(|r| r.map_lookups).sum();
    assert_eq!(lookups, a.tenants[0].map.lookups);
}

#[test]
fn a_cache_of_the_whole_table_misses_only_once_per_translation_page() {
    let text = format!("{}{READER_WRITER}", drive(&dftl("size = \"100%\"")));
    let r = run(&text);
    let cmt = r.device.cmt.as_ref().unwrap();
    assert_eq!(cmt.pages, cmt.map_pages);
    let misses: u64 = r.tenants.iter().map(|t| t.map.misses).sum();
    assert!(misses > 0 && misses <= cmt.map_pages as u64, "{misses} misses for {} pages", cmt.map_pages);
    assert_eq!(r.device.ssd.map_programs, 0, "nothing was evicted, so nothing was flushed");
    let held: u32 = r.tenants.iter().map(|t| t.map.cmt_pages).sum();
    assert_eq!(held as u64, misses, "every loaded page is still cached");
    // One compulsory miss per page touched; the two regions may share the page at their border,
    // which only the first tenant to touch it misses.
    let touched: u64 = r.tenants.iter().map(|t| t.map.pages_touched).sum();
    assert!(misses <= touched && touched <= misses + 1, "{misses} misses, {touched} pages touched");
}

#[test]
fn map_misses_add_latency_to_reads() {
    let reader = r#"
[[tenant]]
name = "reader"
fio = """
[r]
rw=randread
bs=4k
iodepth=1
time_based
runtime=200ms
"""
"#;
    let full = run(&format!("{}{reader}", drive("")));
    let tiny = run(&format!("{}{reader}", drive(&dftl("pages = 1"))));
    let (lf, lt) = (full.tenants[0].lat_summary(), tiny.tenants[0].lat_summary());
    let m = &tiny.tenants[0].map;
    // With one cached page nearly every random read first reads its translation page (tR 65 µs).
    assert!(m.miss_ratio > 0.9, "miss ratio {}", m.miss_ratio);
    assert!(m.commands_delayed > 0 && m.map_wait_ns / m.commands_delayed >= 65_000, "{m:?}");
    assert!(lt.mean_ns > lf.mean_ns + 50_000.0, "DFTL mean {} ns vs full {} ns", lt.mean_ns, lf.mean_ns);
    assert_eq!(full.tenants[0].map.misses, 0);
    assert!(full.device.cmt.is_none());
}

#[test]
fn partitioning_shields_a_small_working_set_from_a_random_neighbour() {
    // `hot` rewrites 8 translation pages' worth of data; `noisy` writes over ~100 pages.
    let tenants = r#"
[[tenant]]
name = "hot"
region = { offset = "0", size = "2MiB" }
fio = """
[h]
rw=randwrite
bs=4k
iodepth=4
time_based
runtime=300ms
"""
[[tenant]]
name = "noisy"
region = { offset = "8MiB", size = "24MiB" }
fio = """
[n]
rw=randwrite
bs=4k
iodepth=16
time_based
runtime=300ms
"""
"#;
    let shared = run(&format!("{}{tenants}", drive(&dftl("pages = 24\npolicy = \"shared\""))));
    let parted = run(&format!("{}{tenants}", drive(&dftl("pages = 24\npolicy = \"partitioned\""))));
    let (s, p) = (&shared.tenants[0].map, &parted.tenants[0].map);
    assert!(s.miss_ratio > 2.0 * p.miss_ratio, "hot: shared {} vs partitioned {}", s.miss_ratio, p.miss_ratio);
    // Its own 12 pages hold its 8-page working set: only the first touch of each page misses.
    assert!(p.misses <= 8, "hot missed {} times with its own partition", p.misses);
    assert_eq!(parted.tenants[0].map.cmt_allocation, Some(12));
    // The neighbour pays for the isolation.
    assert!(parted.tenants[1].map.miss_ratio >= shared.tenants[1].map.miss_ratio);
}

fn config_error(cmt: &str, tenants: &str) -> String {
    let text = format!("{}{tenants}", drive(&dftl(cmt)));
    match Scenario::from_toml(&text, "bad.toml", Path::new(".")) {
        Ok(_) => panic!("accepted: {cmt}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_map_cache_settings_are_rejected_with_the_key() {
    let e = config_error("pages = 1", READER_WRITER);
    assert!(e.contains("device.ftl.cmt.pages") && e.contains("smaller than one translation page per tenant"), "{e}");
    let e = config_error("size = \"4KiB\"\npolicy = \"partitioned\"", READER_WRITER);
    assert!(e.contains("device.ftl.cmt.size"), "{e}");
    let e = config_error("pages = 8\npolicy = \"partitioned\"\nshares = [60, 30]", READER_WRITER);
    assert!(e.contains("device.ftl.cmt.shares") && e.contains("90"), "{e}");
    let e = config_error("pages = 8\npolicy = \"partitioned\"\nshares = [100]", READER_WRITER);
    assert!(e.contains("device.ftl.cmt.shares") && e.contains("one per tenant"), "{e}");
    let e = config_error("pages = 8\npolicy = \"lru-k\"", READER_WRITER);
    assert!(e.contains("device.ftl.cmt.policy") && e.contains("shared, partitioned, balanced"), "{e}");
    let e = config_error("pages = 8\npolicy = \"balanced\"\nperiod = \"0s\"", READER_WRITER);
    assert!(e.contains("device.ftl.cmt.period"), "{e}");
    let e = config_error("pages = 8\npolicy = \"balanced\"\nfloor = 5", READER_WRITER);
    assert!(e.contains("device.ftl.cmt") && e.contains("floor"), "{e}");
    let e = config_error("pages = 8\nsize = \"64KiB\"", READER_WRITER);
    assert!(e.contains("give one"), "{e}");
    let text = format!("{}{READER_WRITER}", drive("mapping = \"hybrid\""));
    let e = Scenario::from_toml(&text, "bad.toml", Path::new(".")).err().unwrap().to_string();
    assert!(e.contains("device.ftl.mapping") && e.contains("full, dftl"), "{e}");
    let text = format!("{}{READER_WRITER}", drive("[device.ftl.cmt]\npages = 4"));
    let e = Scenario::from_toml(&text, "bad.toml", Path::new(".")).err().unwrap().to_string();
    assert!(e.contains("mapping = \"dftl\""), "{e}");
}

#[test]
fn gc_map_updates_are_charged_to_the_owners_of_the_moved_data() {
    let writers = r#"
[[tenant]]
name = "a"
fio = """
[a]
rw=randwrite
bs=4k
iodepth=8
time_based
runtime=1s
"""
[[tenant]]
name = "b"
fio = """
[b]
rw=randwrite
bs=4k
iodepth=8
time_based
runtime=1s
"""
"#;
    let text = format!("{}{writers}", drive(&dftl("pages = 16"))).replace("sequential-fill", "aged");
    let r = run(&text);
    let d = &r.device;
    assert!(d.ftl.gc_runs > 0 && d.ssd.gc_map_updates > 0, "GC moved no data: {:?}", d.ssd);
    let charged: u64 = r.tenants.iter().map(|t| t.map.gc_map_updates).sum();
    assert!(r.tenants.iter().all(|t| t.map.gc_map_updates > 0), "both tenants' data moved");
    assert!(charged <= d.ssd.gc_map_updates);
    // Both write alike, so each is charged a similar share.
    let (x, y) = (r.tenants[0].map.gc_map_updates as f64, r.tenants[1].map.gc_map_updates as f64);
    assert!(x / y > 0.5 && x / y < 2.0, "{x} vs {y}");
}
