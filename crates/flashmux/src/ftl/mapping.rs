//! The mapping-cache policy: what an L2P lookup costs.
//!
//! The authoritative L2P table is the flat array inside [`super::Ftl`]. A `MapCache` decides
//! whether the controller has the needed translation at hand (a hit) or must first fetch it
//! from flash. `full` keeps the whole table in device DRAM, so every lookup hits; the
//! demand-based policies (DFTL's cached mapping table shared, partitioned or balanced between
//! tenants) plug in here.

use crate::units::{Lpn, TenantId};
use serde::Serialize;

/// The outcome of one translation lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapOutcome {
    pub hit: bool,
}

/// Per-tenant lookup counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MapStats {
    pub lookups: u64,
    pub hits: u64,
    pub misses: u64,
}

pub trait MapCache {
    /// The policy's name as used in config files.
    fn name(&self) -> &'static str;
    /// One L2P access by `tenant` for `lpn` (a write updates the entry, a read only reads it).
    fn access(&mut self, tenant: TenantId, lpn: Lpn, write: bool) -> MapOutcome;
    /// Counters for `tenant` (zero for a tenant never seen).
    fn stats(&self, tenant: TenantId) -> MapStats;
    fn check_invariants(&self) {}
}

/// The whole L2P table in DRAM: every lookup hits.
#[derive(Default)]
pub struct FullMap {
    per_tenant: Vec<MapStats>,
}

impl FullMap {
    pub fn new(tenants: usize) -> Self {
        FullMap { per_tenant: vec![MapStats::default(); tenants] }
    }
}

impl MapCache for FullMap {
    fn name(&self) -> &'static str {
        "full"
    }
    fn access(&mut self, tenant: TenantId, _lpn: Lpn, _write: bool) -> MapOutcome {
        if tenant.index() >= self.per_tenant.len() {
            self.per_tenant.resize(tenant.index() + 1, MapStats::default());
        }
        let s = &mut self.per_tenant[tenant.index()];
        s.lookups += 1;
        s.hits += 1;
        MapOutcome { hit: true }
    }
    fn stats(&self, tenant: TenantId) -> MapStats {
        self.per_tenant.get(tenant.index()).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_map_always_hits_and_counts_per_tenant() {
        let mut m = FullMap::new(1);
        assert!(m.access(TenantId(0), Lpn(5), true).hit);
        assert!(m.access(TenantId(2), Lpn(5), false).hit);
        assert_eq!(m.stats(TenantId(0)), MapStats { lookups: 1, hits: 1, misses: 0 });
        assert_eq!(m.stats(TenantId(2)).lookups, 1);
        assert_eq!(m.stats(TenantId(1)), MapStats::default());
    }
}
