//! How the controller holds the L2P table, and what a translation costs.
//!
//! The authoritative L2P table is the flat array inside [`super::Ftl`]. A map-cache policy
//! ([`CmtPolicy`]) decides whether the controller has the needed translation page at hand (a hit)
//! or must first read it from flash. `full` keeps the whole table in device DRAM, so every lookup
//! hits; `dftl` keeps it on flash in translation pages and caches whole pages in a cached mapping
//! table (CMT) shared, partitioned or balanced between tenants ([`super::cmt`]).

use super::cmt::{CmtConfig, CmtPolicy, CmtStats, Eviction, PeriodRecord};
use crate::units::{MapPage, SimTime, TenantId};
use serde::Serialize;

/// How the L2P table is held.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "mode")]
pub enum MappingConfig {
    /// The whole table in controller DRAM.
    Full,
    /// Demand-based (DFTL): the table on flash in translation pages of `page bytes / entry_bytes`
    /// entries, whole pages cached in a CMT.
    Dftl { entry_bytes: u32, cmt: CmtConfig },
}

crate::named! {
    /// The mapping modes by name (`device.ftl.mapping`).
    pub enum MappingKind: "mapping" {
        Full = "full",
        Dftl = "dftl",
    }
}

impl MappingConfig {
    pub fn kind(&self) -> MappingKind {
        match self {
            MappingConfig::Full => MappingKind::Full,
            MappingConfig::Dftl { .. } => MappingKind::Dftl,
        }
    }
    /// The name used in config files.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }
    /// L2P entries per translation page, DFTL only.
    pub fn entries_per_page(&self, page_bytes: u32) -> Option<u32> {
        match self {
            MappingConfig::Full => None,
            MappingConfig::Dftl { entry_bytes, .. } => Some(page_bytes / entry_bytes),
        }
    }
}

/// One tenant's translation counters, as reported.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MapStats {
    /// Translation-page lookups: one per translation page a command needs.
    pub lookups: u64,
    pub hits: u64,
    pub misses: u64,
    /// misses / lookups (0 when there were no lookups).
    pub miss_ratio: f64,
    /// Translation pages read from flash for this tenant's misses (DFTL).
    pub map_loads: u64,
    /// Dirty translation pages evicted from the cache pages this tenant held: each one a flash
    /// program (DFTL).
    pub map_flushes: u64,
    /// Commands that waited for a translation page to arrive from flash.
    pub commands_delayed: u64,
    /// Total time those commands waited, ns: the extra latency caused by map misses.
    pub map_wait_ns: u64,
    /// Distinct translation pages the tenant looked up during the run: its working set in
    /// translation pages.
    pub pages_touched: u64,
    /// Translation pages GC read and rewrote because it moved this tenant's data (DFTL).
    pub gc_map_updates: u64,
    /// Cache pages held on this tenant's behalf when the run ended.
    pub cmt_pages: u32,
    /// The tenant's allocation of cache pages (partitioned, balanced), when the run ended.
    pub cmt_allocation: Option<u32>,
}

/// The whole L2P table in DRAM: every lookup hits, nothing is cached or evicted.
#[derive(Default)]
pub struct FullMap {
    per_tenant: Vec<CmtStats>,
}

impl FullMap {
    pub fn new(tenants: usize) -> Self {
        FullMap { per_tenant: vec![CmtStats::default(); tenants] }
    }
}

impl CmtPolicy for FullMap {
    fn name(&self) -> &'static str {
        "full"
    }
    fn access(
        &mut self,
        _now: SimTime,
        tenant: TenantId,
        _page: MapPage,
        _dirty: bool,
        _evicted: &mut Vec<Eviction>,
    ) -> bool {
        if tenant.index() >= self.per_tenant.len() {
            self.per_tenant.resize(tenant.index() + 1, CmtStats::default());
        }
        let s = &mut self.per_tenant[tenant.index()];
        s.lookups += 1;
        s.hits += 1;
        true
    }
    fn advance(&mut self, _now: SimTime, _evicted: &mut Vec<Eviction>) {}
    fn update_if_cached(&mut self, _page: MapPage) -> bool {
        true
    }
    fn contains(&self, _page: MapPage) -> bool {
        true
    }
    fn stats(&self, tenant: TenantId) -> CmtStats {
        self.per_tenant.get(tenant.index()).cloned().unwrap_or_default()
    }
    fn held(&self, _tenant: TenantId) -> u32 {
        0
    }
    fn allocation(&self, _tenant: TenantId) -> Option<u32> {
        None
    }
    fn periods(&self) -> &[PeriodRecord] {
        &[]
    }
    fn reset_stats(&mut self) {
        self.per_tenant.iter_mut().for_each(|s| *s = CmtStats::default());
    }
    fn check_invariants(&self) {
        for s in &self.per_tenant {
            assert_eq!(s.lookups, s.hits, "the full map missed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_map_always_hits_and_counts_per_tenant() {
        let mut m = FullMap::new(1);
        let mut ev = Vec::new();
        assert!(m.access(SimTime::ZERO, TenantId(0), MapPage(5), true, &mut ev));
        assert!(m.access(SimTime::ZERO, TenantId(2), MapPage(5), false, &mut ev));
        assert!(ev.is_empty());
        assert_eq!(m.stats(TenantId(0)).lookups, 1);
        assert_eq!(m.stats(TenantId(0)).hits, 1);
        assert_eq!(m.stats(TenantId(2)).lookups, 1);
        assert_eq!(m.stats(TenantId(1)), CmtStats::default());
        m.check_invariants();
    }

    #[test]
    fn entries_per_translation_page() {
        assert_eq!(MappingConfig::Full.entries_per_page(4096), None);
        let cmt = CmtConfig {
            pages: 4,
            policy: super::super::cmt::CmtPolicyKind::Shared,
            shares: None,
            period: crate::units::Nanos::from_secs(10),
            step: 1,
            floor: 1,
        };
        assert_eq!(MappingConfig::Dftl { entry_bytes: 4, cmt }.entries_per_page(4096), Some(1024));
    }
}
