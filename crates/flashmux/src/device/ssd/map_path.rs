//! The map path: DFTL address translation in time — map-cache lookups, translation-page reads
//! and programs, and the map updates GC's moves cause.
//!
//! # Model
//! A command's units `first..=last` span translation pages of `map_entries` L2P entries each;
//! each page is one lookup in the map cache ([`CmtPolicy`]). With `mapping = "full"` every
//! lookup hits and costs nothing (it is only counted). With DFTL:
//! - a hit is ready at once — or when the page's load for an earlier command completes;
//! - a miss reads the translation page from flash, queued on its die like any read
//!   ([`super::array::FlashArray::reserve_read`]); the command waits for it (`map_wait_ns`);
//! - a dirty page the cache evicts is programmed back to its plane's translation block; with no
//!   free block there it waits in the controller's SRAM until GC frees one
//!   (`map_programs_deferred`);
//! - GC that moves data changes L2P entries: a cached translation page just becomes dirty, any
//!   other is read, updated and programmed back (one read and one program per page per victim).
//!
//! # Worked example
//! 16 KiB translation pages of 4-byte entries: 4096 entries, 16 MiB of 4 KiB units per page. A
//! 64 KiB read at offset 16 MiB − 32 KiB spans pages 0 and 1: two lookups. If page 1 misses on a
//! die busy until t + 100 µs (tR = 50 µs, 400 MB/s channel), the read's data lookup starts at
//! t + 100 + 50 + 40.96 µs = t + 190.96 µs; the command is counted once in `commands_delayed`.
//!
//! # Parameters
//! `mapping` ([`MappingConfig`]: `full`, or `dftl` with the cache's policy and size in pages),
//! `geometry.page_bytes` (translation-page size), entry size (4 bytes).
//!
//! Source: DFTL (Gupta, Kim, Urgaonkar, ASPLOS '09), with the per-tenant cache partitions of
//! paper C (`SEEDS.md`).

use super::Ssd;
use crate::device::Outbox;
use crate::ftl::{cmt, CmtPolicy, Eviction, Ftl, FullMap, MapStats, MappingConfig};
use crate::units::{MapPage, PlaneId, SimTime, TenantId};
use std::collections::VecDeque;

/// Per-tenant translation counters the map cache does not keep itself.
#[derive(Clone, Debug, Default)]
struct TenantMap {
    commands_delayed: u64,
    wait_ns: u64,
    /// Bit per translation page the tenant looked up, and how many are set.
    touched: Vec<u64>,
    pages_touched: u64,
    /// Translation pages GC read and rewrote because it moved this tenant's data.
    gc_map_updates: u64,
}

/// Counters of the map path, for the drive's statistics.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct MapPathStats {
    pub(super) map_reads: u64,
    pub(super) map_programs: u64,
    pub(super) gc_map_updates: u64,
    pub(super) gc_map_updates_cached: u64,
    pub(super) map_programs_deferred: u64,
}

pub(super) struct MapPath {
    map: Box<dyn CmtPolicy>,
    /// Translation pages are on flash (DFTL): misses cost flash reads, evictions programs.
    dftl: bool,
    /// L2P entries per translation page (for `full`, what DFTL would use with 4-byte entries, so
    /// lookups are counted alike).
    map_entries: u32,
    /// When each translation page's load from flash completes (DFTL).
    ready: Vec<SimTime>,
    tenants: Vec<TenantMap>,
    /// Map programs waiting for room in their plane, per plane.
    pending: Vec<VecDeque<MapPage>>,
    evicted: Vec<Eviction>,
    gc_updates: Vec<(MapPage, u16)>,
    pub(super) stats: MapPathStats,
}

impl MapPath {
    /// The map path of a drive of `logical_units` units over `ftl`, for `tenants` tenants.
    pub(super) fn new(
        mapping: &MappingConfig,
        page_bytes: u32,
        logical_units: u64,
        ftl: &Ftl,
        planes: usize,
        tenants: usize,
    ) -> Result<MapPath, cmt::CmtError> {
        let (map, dftl, map_entries): (Box<dyn CmtPolicy>, bool, u32) = match mapping {
            MappingConfig::Full => (Box::new(FullMap::new(tenants)), false, page_bytes / 4),
            MappingConfig::Dftl { cmt: c, .. } => {
                (cmt::build(c, tenants, ftl.map_pages())?, true, ftl.map_entries_per_page())
            }
        };
        let pages = logical_units.div_ceil(map_entries.max(1) as u64) as usize;
        Ok(MapPath {
            map,
            dftl,
            map_entries: map_entries.max(1),
            ready: vec![SimTime::ZERO; ftl.map_pages() as usize],
            tenants: (0..tenants)
                .map(|_| TenantMap { touched: vec![0; pages.div_ceil(64)], ..TenantMap::default() })
                .collect(),
            pending: vec![VecDeque::new(); planes],
            evicted: Vec::new(),
            gc_updates: Vec::new(),
            stats: MapPathStats::default(),
        })
    }

    pub(super) fn cache(&self) -> &dyn CmtPolicy {
        self.map.as_ref()
    }

    /// The name of the mapping mode and, for DFTL, the map-cache policy (`full`, `dftl/shared`, ...).
    pub(super) fn name(&self) -> String {
        if self.dftl {
            format!("dftl/{}", self.map.name())
        } else {
            "full".into()
        }
    }

    /// `tenant`'s translation counters.
    pub(super) fn tenant_stats(&self, tenant: TenantId) -> MapStats {
        let c = self.map.stats(tenant);
        let empty = TenantMap::default();
        let w = self.tenants.get(tenant.index()).unwrap_or(&empty);
        MapStats {
            lookups: c.lookups,
            hits: c.hits,
            misses: c.misses,
            miss_ratio: if c.lookups > 0 { c.misses as f64 / c.lookups as f64 } else { 0.0 },
            map_loads: if self.dftl { c.misses } else { 0 },
            map_flushes: c.dirty_evictions,
            commands_delayed: w.commands_delayed,
            map_wait_ns: w.wait_ns,
            pages_touched: w.pages_touched,
            gc_map_updates: w.gc_map_updates,
            cmt_pages: self.map.held(tenant),
            cmt_allocation: self.map.allocation(tenant),
        }
    }

    /// Zeroes the map cache's counters (after preconditioning).
    pub(super) fn reset_stats(&mut self) {
        self.map.reset_stats();
        for w in &mut self.tenants {
            let words = w.touched.len();
            *w = TenantMap { touched: vec![0; words], ..TenantMap::default() };
        }
    }

    /// Marks translation page `mp` as looked up by `tenant`.
    fn touch(&mut self, tenant: TenantId, mp: MapPage) {
        if let Some(w) = self.tenants.get_mut(tenant.index()) {
            let (word, bit) = (mp.index() / 64, 1u64 << (mp.0 % 64));
            if w.touched[word] & bit == 0 {
                w.touched[word] |= bit;
                w.pages_touched += 1;
            }
        }
    }

    pub(super) fn check_invariants(&self) {
        self.map.check_invariants();
        for w in &self.tenants {
            let set: u64 = w.touched.iter().map(|b| b.count_ones() as u64).sum();
            assert_eq!(set, w.pages_touched, "pages touched miscounted");
        }
    }
}

impl Ssd {
    /// Looks up the L2P entries of units `first..=last` for `tenant` (`dirty`: the command
    /// changes them) and returns when all of them are in the controller. Each translation page
    /// the command spans is one map-cache lookup; a miss reads the page from flash (queued on its
    /// die like any read), and dirty pages the cache evicts are programmed back.
    pub(super) fn translate(
        &mut self,
        now: SimTime,
        tenant: TenantId,
        first: u32,
        last: u32,
        dirty: bool,
        out: &mut Outbox,
    ) -> SimTime {
        assert!(first <= last, "translation of an empty range {first}..={last}");
        let mut ready = now;
        let entries = self.map.map_entries;
        for mp in (first / entries..=last / entries).map(MapPage) {
            let m = &mut self.map;
            let hit = m.map.access(now, tenant, mp, dirty, &mut m.evicted);
            m.touch(tenant, mp);
            if !m.dftl {
                continue;
            }
            if hit {
                // Still arriving for an earlier command?
                ready = ready.max(m.ready[mp.index()]);
            } else {
                let page = self.ftl.map_location(mp);
                let end = self.array.reserve_read(now, now, page, self.geo.page_bytes as u64);
                self.map.stats.map_reads += 1;
                self.map.ready[mp.index()] = end;
                ready = ready.max(end);
            }
            self.flush_evicted(now);
        }
        if ready > now {
            let w = &mut self.map.tenants[tenant.index()];
            w.commands_delayed += 1;
            w.wait_ns += ready.0 - now.0;
        }
        if self.map.dftl {
            // Map programs may have opened blocks and started GC.
            self.schedule_new_gc(now, out);
        }
        debug_assert!(ready >= now);
        ready
    }

    /// Programs the dirty translation pages the map cache has evicted.
    fn flush_evicted(&mut self, now: SimTime) {
        for i in 0..self.map.evicted.len() {
            let e = self.map.evicted[i];
            if e.dirty {
                self.program_map_page(now, now, e.page);
                self.map.stats.map_programs += 1;
            }
        }
        self.map.evicted.clear();
    }

    /// Writes translation page `mp` to flash once `ready` (its contents are in the controller):
    /// channel transfer, then tPROG on its die. Without a free block in its plane it waits
    /// (in the controller's SRAM) for GC to free one. The caller schedules any GC it starts.
    fn program_map_page(&mut self, now: SimTime, ready: SimTime, mp: MapPage) {
        let plane = self.ftl.map_plane(mp);
        if !self.ftl.can_program_map(plane) {
            self.map.stats.map_programs_deferred += 1;
            self.map.pending[plane.index()].push_back(mp);
            return;
        }
        self.ftl.program_map(plane, mp);
        self.array.reserve_map_program(now, ready, self.geo.die_of_plane(plane));
    }

    /// Map programs that were waiting for room: those whose plane has room now.
    pub(super) fn retry_map_programs(&mut self, now: SimTime) {
        for plane in 0..self.map.pending.len() {
            while let Some(&mp) = self.map.pending[plane].front() {
                if !self.ftl.can_program_map(PlaneId(plane as u32)) {
                    break;
                }
                self.map.pending[plane].pop_front();
                self.program_map_page(now, now, mp);
            }
        }
    }

    /// GC moved data: its entries changed. Cached translation pages just become dirty; the
    /// others are read, updated and written back (one read and one program per page per victim).
    pub(super) fn apply_gc_map_updates(&mut self, now: SimTime) -> bool {
        self.ftl.take_gc_map_updates(&mut self.map.gc_updates);
        if self.map.gc_updates.is_empty() {
            return false;
        }
        let updates = std::mem::take(&mut self.map.gc_updates);
        for &(mp, owner) in &updates {
            if self.map.map.update_if_cached(mp) {
                self.map.stats.gc_map_updates_cached += 1;
                continue;
            }
            let page = self.ftl.map_location(mp);
            let end = self.array.reserve_read(now, now, page, self.geo.page_bytes as u64);
            self.program_map_page(now, end, mp);
            self.map.stats.gc_map_updates += 1;
            if let Some(w) = self.map.tenants.get_mut(owner as usize) {
                w.gc_map_updates += 1;
            }
        }
        self.map.gc_updates = updates;
        self.map.gc_updates.clear();
        true
    }
}
