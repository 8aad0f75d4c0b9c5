//! DFTL's cached mapping table (CMT): the controller's DRAM cache of translation (map) pages,
//! shared by several tenants under one of three policies.
//!
//! The cache unit is a whole map page (`page` in `0..map_pages`). This module is pure bookkeeping:
//! the caller turns misses into flash reads and dirty [`Eviction`]s into flash programs.
//!
//! * `shared` — one LRU list of `pages` map pages for every tenant (one cache, not one per tenant).
//! * `partitioned` — one LRU list per tenant, sized by its share: `floor(pages × share)` plus the
//!   leftover pages by largest remainder (ties to the lower tenant index), so sizes sum to `pages`.
//! * `balanced` — as `partitioned`, and at the end of every period of length `period` up to `step`
//!   map pages move from one tenant's allocation to another's (below).
//!
//! A page is cached at most once. An access by a tenant other than the page's holder (the tenant
//! whose miss loaded it) is a hit and refreshes the page in the holder's list. Every operation is
//! O(1): the LRU lists are intrusive doubly-linked lists in `prev`/`next` arrays indexed by page.
//!
//! # Balancing (paper C, with one change)
//! For each period, `D_t` is the number of distinct map pages tenant `t` accessed (hits and misses)
//! and `A_t` its allocation; `rECS_t = D_t / A_t` and `ΔrECS_t` is its change from the previous
//! period (0 for the first). The giver is the tenant with the most negative `ΔrECS` and the taker the
//! one with the largest positive `ΔrECS` (or else the largest `rECS > 1`), as in the paper, **but the
//! giver must have surplus**: `A_t > D_t`, pages it held but did not touch during the whole period.
//!
//! Why: moving pages from A to B raises `rECS_A` and lowers `rECS_B` through the allocation change
//! alone, even if neither workload changed. Under the literal rule A shows the larger `ΔrECS` the next
//! period, so the pages move straight back and the split oscillates around the initial one instead of
//! drifting from a tenant that does not use its pages to one that does. With the surplus rule a
//! tenant gives only pages it did not touch: at most `min(step, A_t − D_t, A_t − floor)` per period.
//! So each allocation changes by at most `step` per period, never drops below `floor`, and a tenant
//! never loses pages it touched in the last period (its new allocation is ≥ `D_t`).
//!
//! Periods are closed lazily by [`CmtPolicy::advance`] (which `access` calls first). A period in which
//! nobody accessed anything has every `rECS = 0` and every `ΔrECS ≤ 0`, so there is no taker and no
//! allocation changes; after one such period every previous `rECS` is 0, so further empty periods
//! are identical. Hence once two consecutive empty periods have been closed (and recorded),
//! `advance` jumps straight to the period containing `now`: the skipped empty periods are **not**
//! recorded in [`CmtPolicy::periods`]. The history is capped at [`MAX_PERIOD_RECORDS`] records;
//! beyond that balancing continues without recording.

use crate::units::{MapPage, Nanos, SimTime, TenantId};
use serde::Serialize;

const NIL: u32 = u32::MAX;

/// Period records kept at most (balancing continues beyond, unrecorded).
pub const MAX_PERIOD_RECORDS: usize = 1_000_000;

crate::named! {
    /// How the map cache is shared among tenants.
    pub enum CmtPolicyKind: "policy" {
        /// One LRU list for every tenant.
        Shared = "shared",
        /// One LRU list per tenant, sized by its share.
        Partitioned = "partitioned",
        /// As partitioned, with pages moved between tenants every period.
        Balanced = "balanced",
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CmtConfig {
    /// Total CMT capacity, in map pages.
    pub pages: u32,
    pub policy: CmtPolicyKind,
    /// Per-tenant fractions summing to 1 (partitioned, and balanced's starting split); None = equal.
    pub shares: Option<Vec<f64>>,
    /// Balanced: rebalancing period.
    pub period: Nanos,
    /// Balanced: map pages moved per period.
    pub step: u32,
    /// Balanced: no tenant's allocation goes below this many map pages.
    pub floor: u32,
}

impl CmtConfig {
    pub const DEFAULT_PERIOD: Nanos = Nanos::from_secs(10);
    pub const DEFAULT_STEP: u32 = 1;
    pub const DEFAULT_FLOOR: u32 = 1;

    /// A config with equal shares and the default balancing parameters.
    pub fn new(pages: u32, policy: CmtPolicyKind) -> Self {
        CmtConfig {
            pages,
            policy,
            shares: None,
            period: Self::DEFAULT_PERIOD,
            step: Self::DEFAULT_STEP,
            floor: Self::DEFAULT_FLOOR,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Eviction {
    pub page: MapPage,
    pub dirty: bool,
    pub holder: TenantId,
}

/// Per-tenant counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CmtStats {
    pub lookups: u64,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub dirty_evictions: u64,
}

/// One balanced-policy period, for reports and the convergence check.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PeriodRecord {
    pub end: SimTime,
    pub distinct: Vec<u32>,
    pub allocation_before: Vec<u32>,
    pub recs: Vec<f64>,
    pub delta_recs: Vec<f64>,
    pub allocation_after: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CmtError {
    #[error("the device has no map pages to cache; expected at least 1")]
    NoMapPages,
    #[error("a {policy} CMT needs at least one tenant")]
    NoTenants { policy: &'static str },
    #[error("{tenants} tenants exceed the 65536 possible tenant ids")]
    TooManyTenants { tenants: usize },
    #[error("CMT of {pages} map pages is smaller than one map page per tenant; expected at least {tenants} map pages for {tenants} tenants")]
    TooSmall { pages: u32, tenants: usize },
    #[error("bad shares: {0}")]
    BadShares(String),
    #[error("tenant {tenant}'s share {share} of a CMT of {pages} map pages is less than one map page; expected every tenant to get at least one")]
    EmptyPartition { tenant: usize, share: f64, pages: u32 },
    #[error("balancing period is 0; expected a positive duration")]
    ZeroPeriod,
    #[error("balancing step is 0; expected at least 1 map page per period")]
    ZeroStep,
    #[error("floor is 0; expected at least 1 map page per tenant")]
    ZeroFloor,
    #[error("floor of {floor} map pages × {tenants} tenants exceeds the CMT's {pages} map pages; expected floor × tenants ≤ CMT pages")]
    FloorTooHigh { floor: u32, tenants: usize, pages: u32 },
    #[error("tenant {tenant}'s initial allocation of {allocation} map pages is below the floor of {floor}; expected a larger share or a lower floor")]
    BelowFloor { tenant: usize, allocation: u32, floor: u32 },
}

/// A map-cache policy. `Send`: under `flashmux serve` the whole model moves to the thread that
/// owns it.
pub trait CmtPolicy: Send {
    fn name(&self) -> &'static str;
    /// One access to map `page` by `tenant` at `now` (`dirty`: the access updates entries, e.g. a write).
    /// Returns true on a hit. Pages evicted to make room — and, for `balanced`, pages evicted because a
    /// period boundary shrank a tenant's allocation — are appended to `evicted`.
    fn access(
        &mut self,
        now: SimTime,
        tenant: TenantId,
        page: MapPage,
        dirty: bool,
        evicted: &mut Vec<Eviction>,
    ) -> bool;
    /// Closes every balancing period that ended at or before `now` (no-op for shared/partitioned).
    /// `access` calls this first.
    fn advance(&mut self, now: SimTime, evicted: &mut Vec<Eviction>);
    /// Garbage collection moved data whose entries live in `page`: if the page is cached, mark it
    /// dirty and return true (no lookup is counted, recency unchanged); else false.
    fn update_if_cached(&mut self, page: MapPage) -> bool;
    fn contains(&self, page: MapPage) -> bool;
    /// Zero for unknown tenants.
    fn stats(&self, tenant: TenantId) -> CmtStats;
    /// Pages currently cached on the tenant's behalf.
    fn held(&self, tenant: TenantId) -> u32;
    /// None for shared.
    fn allocation(&self, tenant: TenantId) -> Option<u32>;
    /// Empty unless balanced.
    fn periods(&self) -> &[PeriodRecord];
    /// Zeroes the counters (not the cache contents, allocations or period history).
    fn reset_stats(&mut self);
    /// Panics with a description on the first violation.
    fn check_invariants(&self);
}

/// Validates and builds the policy for `tenants` tenants over `map_pages` map pages.
pub fn build(cfg: &CmtConfig, tenants: usize, map_pages: u32) -> Result<Box<dyn CmtPolicy>, CmtError> {
    if map_pages == 0 {
        return Err(CmtError::NoMapPages);
    }
    if tenants > 1 << 16 {
        return Err(CmtError::TooManyTenants { tenants });
    }
    if tenants == 0 && cfg.policy != CmtPolicyKind::Shared {
        return Err(CmtError::NoTenants { policy: cfg.policy.name() });
    }
    if (cfg.pages as usize) < tenants {
        return Err(CmtError::TooSmall { pages: cfg.pages, tenants });
    }
    if let Some(shares) = &cfg.shares {
        check_shares(shares, tenants)?;
    }
    let caps = match cfg.policy {
        CmtPolicyKind::Shared => vec![cfg.pages],
        _ => capacities(cfg.pages, cfg.shares.as_deref(), tenants)?,
    };
    let bal = if cfg.policy == CmtPolicyKind::Balanced {
        if cfg.period.0 == 0 {
            return Err(CmtError::ZeroPeriod);
        }
        if cfg.step == 0 {
            return Err(CmtError::ZeroStep);
        }
        if cfg.floor == 0 {
            return Err(CmtError::ZeroFloor);
        }
        if cfg.floor as u64 * tenants as u64 > cfg.pages as u64 {
            return Err(CmtError::FloorTooHigh { floor: cfg.floor, tenants, pages: cfg.pages });
        }
        if let Some((t, &a)) = caps.iter().enumerate().find(|(_, &a)| a < cfg.floor) {
            return Err(CmtError::BelowFloor { tenant: t, allocation: a, floor: cfg.floor });
        }
        Some(Balancer {
            period: cfg.period.0,
            step: cfg.step,
            floor: cfg.floor,
            cur: 0,
            epoch: 1,
            stamps: vec![0; tenants * map_pages as usize],
            distinct: vec![0; tenants],
            prev_recs: None,
            empty_streak: 0,
            records: Vec::new(),
        })
    } else {
        None
    };
    let n = map_pages as usize;
    Ok(Box::new(Cmt {
        kind: cfg.policy,
        pages: cfg.pages,
        map_pages,
        tenants,
        prev: vec![NIL; n],
        next: vec![NIL; n],
        list_of: vec![NIL; n],
        holder: vec![TenantId(0); n],
        dirty: vec![false; n],
        lists: caps.into_iter().map(|cap| List { lru: NIL, mru: NIL, len: 0, cap }).collect(),
        held: vec![0; tenants],
        stats: vec![CmtStats::default(); tenants],
        bal,
    }))
}

fn check_shares(shares: &[f64], tenants: usize) -> Result<(), CmtError> {
    let bad = |m: String| Err(CmtError::BadShares(m));
    if shares.len() != tenants {
        return bad(format!("expected one share per tenant ({tenants}), got {}", shares.len()));
    }
    if let Some((t, s)) = shares.iter().enumerate().find(|(_, s)| !(s.is_finite() && **s > 0.0)) {
        return bad(format!("tenant {t}'s share is {s}; expected a finite number greater than 0"));
    }
    let sum: f64 = shares.iter().sum();
    if (sum - 1.0).abs() > 1e-6 {
        return bad(format!("shares sum to {sum}; expected them to sum to 1"));
    }
    Ok(())
}

/// Per-tenant capacities: floor(pages × share), leftover by largest remainder (ties: lower index).
fn capacities(pages: u32, shares: Option<&[f64]>, tenants: usize) -> Result<Vec<u32>, CmtError> {
    let equal = vec![1.0 / tenants as f64; tenants];
    let shares = shares.unwrap_or(&equal);
    let sum: f64 = shares.iter().sum();
    let exact: Vec<f64> = shares.iter().map(|s| pages as f64 * s / sum).collect();
    let mut caps: Vec<u32> = exact.iter().map(|x| x.floor() as u32).collect();
    let mut order: Vec<usize> = (0..tenants).collect();
    let rem = |t: usize| exact[t] - exact[t].floor();
    order.sort_by(|&a, &b| rem(b).total_cmp(&rem(a)).then(a.cmp(&b)));
    let total: u64 = caps.iter().map(|&c| c as u64).sum();
    if total <= pages as u64 {
        for &t in order.iter().cycle().take((pages as u64 - total) as usize) {
            caps[t] += 1;
        }
    } else {
        // Only reachable through floating-point rounding up to an integer: take back from the
        // smallest remainders.
        let mut excess = total - pages as u64;
        for &t in order.iter().rev() {
            if excess > 0 && caps[t] > 0 {
                caps[t] -= 1;
                excess -= 1;
            }
        }
    }
    if let Some(t) = caps.iter().position(|&c| c == 0) {
        return Err(CmtError::EmptyPartition { tenant: t, share: shares[t] / sum, pages });
    }
    Ok(caps)
}

#[derive(Clone, Debug)]
struct List {
    lru: u32,
    mru: u32,
    len: u32,
    cap: u32,
}

struct Balancer {
    period: u64,
    step: u32,
    floor: u32,
    /// Index of the open period.
    cur: u64,
    /// Stamp of the open period in `stamps` (renumbered on wrap-around).
    epoch: u32,
    /// `stamps[t * map_pages + page] == epoch` iff `t` accessed `page` in the open period.
    stamps: Vec<u32>,
    distinct: Vec<u32>,
    prev_recs: Option<Vec<f64>>,
    /// Consecutive fully empty periods closed most recently.
    empty_streak: u32,
    records: Vec<PeriodRecord>,
}

impl Balancer {
    /// (giver, taker, amount) for the period just closed, or None.
    fn decide(&self, alloc: &[u32], recs: &[f64], delta: &[f64]) -> Option<(usize, usize, u32)> {
        let surplus = |t: usize| alloc[t].saturating_sub(self.distinct[t]);
        let mut giver: Option<usize> = None;
        for t in (0..alloc.len()).filter(|&t| surplus(t) > 0 && alloc[t] > self.floor) {
            let better = match giver {
                None => true,
                Some(g) => delta[t] < delta[g] || (delta[t] == delta[g] && surplus(t) > surplus(g)),
            };
            if better {
                giver = Some(t);
            }
        }
        let g = giver?;
        let argmax = |key: &[f64], min: f64| {
            let mut best: Option<usize> = None;
            for t in (0..alloc.len()).filter(|&t| t != g && key[t] > min) {
                if best.is_none_or(|b| key[t] > key[b]) {
                    best = Some(t);
                }
            }
            best
        };
        let taker = argmax(delta, 0.0).or_else(|| argmax(recs, 1.0))?;
        let amount = self.step.min(surplus(g)).min(alloc[g] - self.floor);
        (amount > 0).then_some((g, taker, amount))
    }
}

struct Cmt {
    kind: CmtPolicyKind,
    pages: u32,
    map_pages: u32,
    tenants: usize,
    prev: Vec<u32>,
    next: Vec<u32>,
    /// The list holding each page, or NIL.
    list_of: Vec<u32>,
    holder: Vec<TenantId>,
    dirty: Vec<bool>,
    lists: Vec<List>,
    held: Vec<u32>,
    stats: Vec<CmtStats>,
    bal: Option<Balancer>,
}

impl Cmt {
    fn unlink(&mut self, page: u32) {
        let p = page as usize;
        let l = &mut self.lists[self.list_of[p] as usize];
        let (pv, nx) = (self.prev[p], self.next[p]);
        if pv == NIL {
            l.lru = nx;
        } else {
            self.next[pv as usize] = nx;
        }
        if nx == NIL {
            l.mru = pv;
        } else {
            self.prev[nx as usize] = pv;
        }
        l.len -= 1;
        self.prev[p] = NIL;
        self.next[p] = NIL;
        self.list_of[p] = NIL;
    }

    fn push_mru(&mut self, list: usize, page: u32) {
        let p = page as usize;
        let l = &mut self.lists[list];
        self.prev[p] = l.mru;
        self.next[p] = NIL;
        if l.mru == NIL {
            l.lru = page;
        } else {
            self.next[l.mru as usize] = page;
        }
        l.mru = page;
        l.len += 1;
        self.list_of[p] = list as u32;
    }

    fn evict_lru(&mut self, list: usize, evicted: &mut Vec<Eviction>) {
        let page = self.lists[list].lru;
        let p = page as usize;
        self.unlink(page);
        let (holder, dirty) = (self.holder[p], self.dirty[p]);
        self.dirty[p] = false;
        self.held[holder.index()] -= 1;
        let s = &mut self.stats[holder.index()];
        s.evictions += 1;
        s.dirty_evictions += dirty as u64;
        evicted.push(Eviction { page: MapPage(page), dirty, holder });
    }

    /// Closes the open balancing period, which ends at `end`.
    fn close_period(&mut self, end: SimTime, evicted: &mut Vec<Eviction>) {
        let alloc: Vec<u32> = self.lists.iter().map(|l| l.cap).collect();
        let b = self.bal.as_mut().expect("balanced");
        let recs: Vec<f64> = b.distinct.iter().zip(&alloc).map(|(&d, &a)| d as f64 / a as f64).collect();
        let delta: Vec<f64> = match &b.prev_recs {
            None => vec![0.0; recs.len()],
            Some(prev) => recs.iter().zip(prev).map(|(r, p)| r - p).collect(),
        };
        let decision = b.decide(&alloc, &recs, &delta);
        let distinct = std::mem::replace(&mut b.distinct, vec![0; alloc.len()]);
        let empty = distinct.iter().all(|&d| d == 0);
        b.empty_streak = if empty { b.empty_streak + 1 } else { 0 };
        b.prev_recs = Some(recs.clone());
        b.cur += 1;
        b.epoch += 1;
        if b.epoch == u32::MAX {
            b.stamps.fill(0);
            b.epoch = 1;
        }
        if let Some((g, t, amount)) = decision {
            self.lists[g].cap -= amount;
            self.lists[t].cap += amount;
            while self.lists[g].len > self.lists[g].cap {
                self.evict_lru(g, evicted);
            }
        }
        let b = self.bal.as_mut().expect("balanced");
        if b.records.len() < MAX_PERIOD_RECORDS {
            let allocation_after = self.lists.iter().map(|l| l.cap).collect();
            b.records.push(PeriodRecord {
                end,
                distinct,
                allocation_before: alloc,
                recs,
                delta_recs: delta,
                allocation_after,
            });
        }
    }
}

impl CmtPolicy for Cmt {
    fn name(&self) -> &'static str {
        self.kind.name()
    }

    fn access(
        &mut self,
        now: SimTime,
        tenant: TenantId,
        page: MapPage,
        dirty: bool,
        evicted: &mut Vec<Eviction>,
    ) -> bool {
        let page = page.0;
        let t = tenant.index();
        assert!(t < self.tenants, "CMT access by tenant {t}, but there are only {} tenants", self.tenants);
        assert!(page < self.map_pages, "CMT access to map page {page} of {}", self.map_pages);
        self.advance(now, evicted);
        if let Some(b) = self.bal.as_mut() {
            let slot = &mut b.stamps[t * self.map_pages as usize + page as usize];
            if *slot != b.epoch {
                *slot = b.epoch;
                b.distinct[t] += 1;
            }
        }
        let p = page as usize;
        self.stats[t].lookups += 1;
        self.dirty[p] |= dirty;
        let list = self.list_of[p];
        if list != NIL {
            self.stats[t].hits += 1;
            self.unlink(page);
            self.push_mru(list as usize, page);
            return true;
        }
        self.stats[t].misses += 1;
        let list = if self.kind == CmtPolicyKind::Shared { 0 } else { t };
        while self.lists[list].len >= self.lists[list].cap {
            self.evict_lru(list, evicted);
        }
        self.push_mru(list, page);
        self.holder[p] = tenant;
        self.held[t] += 1;
        false
    }

    fn advance(&mut self, now: SimTime, evicted: &mut Vec<Eviction>) {
        while let Some(b) = self.bal.as_mut() {
            let end = (b.cur as u128 + 1) * b.period as u128;
            if end > now.0 as u128 {
                break;
            }
            if b.empty_streak >= 2 && b.distinct.iter().all(|&d| d == 0) {
                // Nothing can change until the next access: jump to the period containing `now`.
                b.cur = now.0 / b.period;
                break;
            }
            self.close_period(SimTime(end as u64), evicted);
        }
    }

    fn update_if_cached(&mut self, page: MapPage) -> bool {
        let cached = self.contains(page);
        if cached {
            self.dirty[page.index()] = true;
        }
        cached
    }

    fn contains(&self, page: MapPage) -> bool {
        let page = page.0;
        self.list_of.get(page as usize).is_some_and(|&l| l != NIL)
    }

    fn stats(&self, tenant: TenantId) -> CmtStats {
        self.stats.get(tenant.index()).cloned().unwrap_or_default()
    }

    fn held(&self, tenant: TenantId) -> u32 {
        self.held.get(tenant.index()).copied().unwrap_or(0)
    }

    fn allocation(&self, tenant: TenantId) -> Option<u32> {
        match self.kind {
            CmtPolicyKind::Shared => None,
            _ => self.lists.get(tenant.index()).map(|l| l.cap),
        }
    }

    fn periods(&self) -> &[PeriodRecord] {
        self.bal.as_ref().map_or(&[], |b| &b.records)
    }

    fn reset_stats(&mut self) {
        self.stats.iter_mut().for_each(|s| *s = CmtStats::default());
    }

    fn check_invariants(&self) {
        let n = self.map_pages as usize;
        let shared = self.kind == CmtPolicyKind::Shared;
        let mut seen = vec![false; n];
        let mut held = vec![0u32; self.tenants];
        for (li, l) in self.lists.iter().enumerate() {
            let (mut count, mut prev, mut cur) = (0u32, NIL, l.lru);
            while cur != NIL {
                let c = cur as usize;
                assert!(count < self.map_pages, "list {li} has a cycle");
                assert!(c < n && !seen[c], "list {li} holds page {cur} out of range or twice");
                seen[c] = true;
                assert_eq!(self.list_of[c], li as u32, "page {cur} in list {li} but list_of says otherwise");
                assert_eq!(self.prev[c], prev, "page {cur} in list {li} has a wrong prev link");
                let h = self.holder[c].index();
                assert!(h < self.tenants, "page {cur} held by unknown tenant {h}");
                assert!(shared || h == li, "page {cur} in tenant {li}'s list but held by tenant {h}");
                held[h] += 1;
                count += 1;
                prev = cur;
                cur = self.next[c];
            }
            assert_eq!(l.mru, prev, "list {li}'s MRU end is not its last page");
            assert_eq!(count, l.len, "list {li} has {count} pages but len {}", l.len);
            assert!(l.len <= l.cap, "list {li} holds {} pages over its capacity {}", l.len, l.cap);
        }
        for p in (0..n).filter(|&p| !seen[p]) {
            assert!(self.list_of[p] == NIL, "page {p} claims list {} but is not linked in it", self.list_of[p]);
            assert!(self.prev[p] == NIL && self.next[p] == NIL && !self.dirty[p], "uncached page {p} has state");
        }
        assert_eq!(held, self.held, "per-tenant held counts disagree with the lists");
        let total: u64 = self.lists.iter().map(|l| l.cap as u64).sum();
        assert_eq!(total, self.pages as u64, "capacities sum to {total}, not {}", self.pages);
        assert_eq!(self.lists.len(), if shared { 1 } else { self.tenants }, "wrong number of lists");
        for (t, s) in self.stats.iter().enumerate() {
            assert_eq!(s.lookups, s.hits + s.misses, "tenant {t}: lookups != hits + misses");
            assert!(s.dirty_evictions <= s.evictions, "tenant {t}: more dirty evictions than evictions");
        }
        if let Some(b) = &self.bal {
            for (t, l) in self.lists.iter().enumerate() {
                assert!(l.cap >= b.floor, "tenant {t}'s allocation {} is below the floor {}", l.cap, b.floor);
                let d = b.stamps[t * n..(t + 1) * n].iter().filter(|&&s| s == b.epoch).count();
                assert_eq!(d, b.distinct[t] as usize, "tenant {t}'s distinct-page count disagrees with its stamps");
            }
            for r in &b.records {
                let sum: u64 = r.allocation_after.iter().map(|&a| a as u64).sum();
                assert_eq!(sum, self.pages as u64, "period ending {} allocates {sum} pages", r.end);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cfg(pages: u32, policy: CmtPolicyKind) -> CmtConfig {
        CmtConfig::new(pages, policy)
    }

    /// Runs (tenant, page) reads at time 0 and returns the hit flags.
    fn run(c: &mut dyn CmtPolicy, seq: &[(u16, u32)]) -> Vec<bool> {
        let mut ev = Vec::new();
        seq.iter().map(|&(t, p)| c.access(SimTime::ZERO, TenantId(t), MapPage(p), false, &mut ev)).collect()
    }

    const FIG1: [(u16, u32); 12] =
        [(1, 10), (1, 10), (1, 11), (1, 11), (0, 0), (0, 1), (0, 2), (0, 3), (1, 10), (1, 10), (1, 11), (1, 11)];

    #[test]
    fn paper_c_fig1_shared() {
        let mut c = build(&cfg(4, CmtPolicyKind::Shared), 2, 16).unwrap();
        let hits = run(c.as_mut(), &FIG1);
        let expect = [false, true, false, true, false, false, false, false, false, true, false, true];
        assert_eq!(hits, expect);
        assert_eq!(hits.iter().filter(|&&h| h).count(), 4);
        let s1 = CmtStats { lookups: 8, hits: 4, misses: 4, evictions: 2, dirty_evictions: 0 };
        let s0 = CmtStats { lookups: 4, hits: 0, misses: 4, evictions: 2, dirty_evictions: 0 };
        assert_eq!((c.stats(TenantId(1)), c.stats(TenantId(0))), (s1, s0));
        assert_eq!((c.held(TenantId(0)), c.held(TenantId(1))), (2, 2));
        assert_eq!(c.allocation(TenantId(0)), None);
        c.check_invariants();
    }

    #[test]
    fn paper_c_fig1_partitioned() {
        let mut c = build(&cfg(4, CmtPolicyKind::Partitioned), 2, 16).unwrap();
        let hits = run(c.as_mut(), &FIG1);
        let expect = [false, true, false, true, false, false, false, false, true, true, true, true];
        assert_eq!(hits, expect);
        let s1 = CmtStats { lookups: 8, hits: 6, misses: 2, evictions: 0, dirty_evictions: 0 };
        let s0 = CmtStats { lookups: 4, hits: 0, misses: 4, evictions: 2, dirty_evictions: 0 };
        assert_eq!((c.stats(TenantId(1)), c.stats(TenantId(0))), (s1, s0));
        assert_eq!((c.allocation(TenantId(0)), c.allocation(TenantId(1))), (Some(2), Some(2)));
        c.check_invariants();
    }

    #[test]
    fn cross_tenant_hit_refreshes_holder_list_and_gc_dirties() {
        let mut c = build(&cfg(4, CmtPolicyKind::Partitioned), 2, 16).unwrap();
        let mut ev = Vec::new();
        let t = |i| TenantId(i);
        assert!(!c.access(SimTime(0), t(0), MapPage(1), false, &mut ev));
        assert!(!c.access(SimTime(0), t(0), MapPage(2), false, &mut ev));
        assert!(c.access(SimTime(0), t(1), MapPage(1), false, &mut ev), "hit on tenant 0's page");
        assert_eq!((c.held(t(0)), c.held(t(1))), (2, 0));
        assert!(c.update_if_cached(MapPage(2)) && !c.update_if_cached(MapPage(3)));
        assert_eq!(c.stats(t(0)).lookups, 2);
        assert!(!c.access(SimTime(0), t(0), MapPage(3), false, &mut ev));
        let expect = vec![Eviction { page: MapPage(2), dirty: true, holder: t(0) }];
        assert_eq!(ev, expect, "page 1 was refreshed by tenant 1");
        assert_eq!(c.stats(t(0)).dirty_evictions, 1);
        assert_eq!(c.stats(t(9)), CmtStats::default());
        c.reset_stats();
        assert_eq!(c.stats(t(0)), CmtStats::default());
        assert!(c.contains(MapPage(1)) && c.contains(MapPage(3)));
        assert!(!c.contains(MapPage(2)) && !c.contains(MapPage(99)));
        c.check_invariants();
    }

    #[test]
    fn names_and_capacities() {
        for (i, n) in CmtPolicyKind::NAMES.iter().enumerate() {
            let k = CmtPolicyKind::from_name(n).unwrap();
            assert_eq!((k.name(), k as usize), (*n, i));
        }
        assert_eq!(CmtPolicyKind::from_name("lru"), None);
        assert_eq!(capacities(10, Some(&[0.25, 0.25, 0.5]), 3).unwrap(), vec![3, 2, 5]);
        assert_eq!(capacities(10, None, 3).unwrap(), vec![4, 3, 3]);
        assert_eq!(capacities(7, Some(&[0.1, 0.6, 0.3]), 3).unwrap(), vec![1, 4, 2]);
        assert_eq!(capacities(100, Some(&[0.333, 0.333, 0.334]), 3).unwrap(), vec![33, 33, 34]);
    }

    #[test]
    fn validation_errors() {
        use CmtPolicyKind::*;
        let err = |c: CmtConfig, tenants: usize, map_pages: u32| build(&c, tenants, map_pages).err().unwrap();
        assert_eq!(err(cfg(4, Shared), 2, 0), CmtError::NoMapPages);
        assert_eq!(err(cfg(4, Partitioned), 0, 8), CmtError::NoTenants { policy: "partitioned" });
        assert_eq!(err(cfg(4, Shared), 70_000, 8), CmtError::TooManyTenants { tenants: 70_000 });
        for p in [Shared, Partitioned, Balanced] {
            let e = err(cfg(2, p), 3, 8);
            assert_eq!(e, CmtError::TooSmall { pages: 2, tenants: 3 });
            assert!(e.to_string().contains("CMT of 2 map pages is smaller than one map page per tenant"), "{e}");
        }
        let with_shares = |s: Vec<f64>| CmtConfig { shares: Some(s), ..cfg(100, Partitioned) };
        for bad in [vec![0.5], vec![0.5, 0.6], vec![1.0, 0.0], vec![f64::NAN, 0.5], vec![-0.5, 1.5], vec![f64::INFINITY, 0.5]] {
            let e = err(with_shares(bad.clone()), 2, 8);
            assert!(matches!(e, CmtError::BadShares(_)), "{bad:?}: {e}");
            assert!(e.to_string().contains("expected"), "{e}");
        }
        assert!(build(&with_shares(vec![0.3, 0.7000001]), 2, 8).is_ok());
        let e = err(CmtConfig { shares: Some(vec![0.001, 0.999]), ..cfg(100, Partitioned) }, 2, 8);
        assert!(matches!(e, CmtError::EmptyPartition { tenant: 0, pages: 100, .. }), "{e}");
        let bal = cfg(10, Balanced);
        assert_eq!(err(CmtConfig { period: Nanos(0), ..bal.clone() }, 2, 8), CmtError::ZeroPeriod);
        assert_eq!(err(CmtConfig { step: 0, ..bal.clone() }, 2, 8), CmtError::ZeroStep);
        assert_eq!(err(CmtConfig { floor: 0, ..bal.clone() }, 2, 8), CmtError::ZeroFloor);
        let e = err(CmtConfig { floor: 6, ..bal.clone() }, 2, 8);
        assert_eq!(e, CmtError::FloorTooHigh { floor: 6, tenants: 2, pages: 10 });
        assert!(e.to_string().contains("exceeds the CMT's 10 map pages"), "{e}");
        let e = err(CmtConfig { floor: 3, shares: Some(vec![0.2, 0.8]), ..bal.clone() }, 2, 8);
        assert_eq!(e, CmtError::BelowFloor { tenant: 0, allocation: 2, floor: 3 });
        // Balancing parameters do not matter to the other policies.
        assert!(build(&CmtConfig { step: 0, floor: 0, period: Nanos(0), ..cfg(10, Partitioned) }, 2, 8).is_ok());
        assert!(build(&cfg(4, Shared), 0, 8).is_ok());
    }

    #[test]
    fn giver_and_taker_choice() {
        let b = |distinct: Vec<u32>, step: u32, floor: u32| Balancer {
            period: 1, step, floor, cur: 0, epoch: 1, stamps: Vec::new(), distinct,
            prev_recs: None, empty_streak: 0, records: Vec::new(),
        };
        // Giver ties on ΔrECS go to the larger surplus; taker: positive ΔrECS beats larger rECS.
        let d = b(vec![3, 1, 9, 20], 10, 1).decide(&[5, 5, 5, 10], &[0.6, 0.2, 1.8, 2.0], &[-0.5, -0.5, 0.2, 0.0]);
        assert_eq!(d, Some((1, 2, 4)));
        // Full ties go to the lower index; amount limited by step; fallback taker by rECS > 1.
        let d = b(vec![1, 1, 6, 6], 2, 1).decide(&[5, 5, 4, 4], &[0.2, 0.2, 1.5, 1.5], &[-0.1, -0.1, 0.0, -0.3]);
        assert_eq!(d, Some((0, 2, 2)));
        // The giver must be above the floor and have surplus; the amount stops at the floor.
        let d = b(vec![0, 1, 8], 9, 3).decide(&[3, 5, 4], &[0.0, 0.2, 2.0], &[-1.0, 0.0, 0.0]);
        assert_eq!(d, Some((1, 2, 2)));
        // No taker: nobody's ΔrECS is positive and no rECS exceeds 1.
        assert_eq!(b(vec![1, 4], 1, 1).decide(&[4, 4], &[0.25, 1.0], &[-0.5, 0.0]), None);
        // A taker with surplus is still a taker; the giver itself is never the taker.
        assert_eq!(b(vec![1, 2], 1, 1).decide(&[4, 4], &[0.25, 0.5], &[0.5, 0.1]), Some((1, 0, 1)));
    }

    /// Deterministic xorshift generator for the balanced scenarios.
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u32) -> u32 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as u32
        }
    }

    fn check_records(c: &dyn CmtPolicy, pages: u32, step: u32, floor: u32) {
        for r in c.periods() {
            assert_eq!(r.allocation_after.iter().sum::<u32>(), pages, "{r:?}");
            for t in 0..r.allocation_after.len() {
                let (before, after) = (r.allocation_before[t], r.allocation_after[t]);
                assert!(before.abs_diff(after) <= step, "{r:?}");
                assert!(after >= floor && after >= before.min(r.distinct[t]), "lost touched pages: {r:?}");
            }
        }
    }

    #[test]
    fn balanced_gives_surplus_to_the_tenant_that_uses_it() {
        let (pages, w, step, period) = (64u32, 10u32, 3u32, 1000u64);
        let c = CmtConfig { period: Nanos(period), step, ..cfg(pages, CmtPolicyKind::Balanced) };
        let mut c = build(&c, 2, 2000).unwrap();
        let (mut rng, mut ev, mut now) = (Rng(0x9e37_79b9_7f4a_7c15), Vec::new(), 0u64);
        let mut drive = |c: &mut dyn CmtPolicy, periods: u64| {
            for _ in 0..periods * 100 {
                c.access(SimTime(now), TenantId(0), MapPage((now / 10 % w as u64) as u32), false, &mut ev);
                c.access(SimTime(now + 5), TenantId(1), MapPage(100 + rng.below(1000)), true, &mut ev);
                now += 10;
                c.check_invariants();
            }
        };
        drive(c.as_mut(), 40);
        assert!(c.periods().len() >= 39);
        let a0 = c.allocation(TenantId(0)).unwrap();
        assert!(a0 >= w && a0 < w + step, "tenant 0 kept {a0} pages for a working set of {w}");
        assert_eq!(a0, w);
        assert_eq!(c.allocation(TenantId(1)), Some(pages - a0));
        assert_eq!(c.held(TenantId(1)), pages - a0);
        check_records(c.as_ref(), pages, step, 1);
        // Converged: tenant 0 never misses again, tenant 1 never gives pages away.
        c.reset_stats();
        drive(c.as_mut(), 20);
        assert_eq!(c.stats(TenantId(0)).misses, 0);
        assert_eq!(c.allocation(TenantId(0)), Some(w));
        assert!(c.stats(TenantId(1)).dirty_evictions > 0);
    }

    #[test]
    fn balanced_shrink_evicts_dirty_pages_of_the_giver() {
        let c = CmtConfig { period: Nanos(100), step: 2, ..cfg(8, CmtPolicyKind::Balanced) };
        let mut c = build(&c, 2, 64).unwrap();
        let mut ev = Vec::new();
        for p in 0..4 {
            c.access(SimTime(p as u64), TenantId(0), MapPage(p), p == 0, &mut ev);
        }
        for (i, p) in (10..20).enumerate() {
            c.access(SimTime(10 + i as u64), TenantId(1), MapPage(p), false, &mut ev);
        }
        // Period 1: tenant 0 touches only page 3; GC dirties page 1.
        c.access(SimTime(100), TenantId(0), MapPage(3), false, &mut ev);
        assert!(c.update_if_cached(MapPage(1)));
        for (i, p) in (10..20).enumerate() {
            c.access(SimTime(110 + i as u64), TenantId(1), MapPage(p), false, &mut ev);
        }
        ev.clear();
        c.advance(SimTime(200), &mut ev);
        let t0 = TenantId(0);
        let expect = vec![
            Eviction { page: MapPage(0), dirty: true, holder: t0 },
            Eviction { page: MapPage(1), dirty: true, holder: t0 },
        ];
        assert_eq!(ev, expect);
        assert_eq!((c.allocation(t0), c.allocation(TenantId(1))), (Some(2), Some(6)));
        assert_eq!((c.stats(t0).evictions, c.stats(t0).dirty_evictions), (2, 2));
        let r = &c.periods()[1];
        assert_eq!((r.end, &r.distinct, &r.allocation_after), (SimTime(200), &vec![1, 10], &vec![2, 6]));
        assert_eq!(r.delta_recs, vec![0.25 - 1.0, 0.0]);
        assert_eq!(c.periods()[0].delta_recs, vec![0.0, 0.0]);
        assert!(c.contains(MapPage(2)) && c.contains(MapPage(3)) && !c.contains(MapPage(0)));
        c.check_invariants();
    }

    #[test]
    fn balanced_skips_empty_periods_lazily() {
        let c = CmtConfig { period: Nanos(1000), ..cfg(8, CmtPolicyKind::Balanced) };
        let mut c = build(&c, 2, 64).unwrap();
        let mut ev = Vec::new();
        for p in 0..8 {
            c.access(SimTime(p), TenantId(1), MapPage(p as u32), false, &mut ev);
        }
        ev.clear();
        let far = 1000u64 * 1_000_000_000_000 + 17;
        c.advance(SimTime(far), &mut ev);
        let recs = c.periods();
        assert_eq!(recs.len(), 3, "one busy period, then two empty ones recorded");
        assert_eq!(recs[1].delta_recs, vec![0.0, -2.0]);
        assert_eq!(recs[2].delta_recs, vec![0.0, 0.0]);
        assert_eq!(recs[0].allocation_after, vec![3, 5], "tenant 0 idle, tenant 1 touched 8 > 4");
        assert!(recs.iter().skip(1).all(|r| r.allocation_before == r.allocation_after));
        assert_eq!((c.allocation(TenantId(0)), c.allocation(TenantId(1))), (Some(3), Some(5)));
        // The next access falls in the period containing `far`, which closes at the next boundary.
        c.access(SimTime(far), TenantId(0), MapPage(1), false, &mut ev);
        c.advance(SimTime(far + 1000), &mut ev);
        let last = c.periods().last().unwrap();
        assert_eq!((last.end, &last.distinct), (SimTime(far - 17 + 1000), &vec![1, 0]));
        assert!(ev.is_empty());
        c.check_invariants();
    }

    #[test]
    fn balanced_respects_floor() {
        let c = CmtConfig { period: Nanos(100), step: 2, floor: 3, ..cfg(20, CmtPolicyKind::Balanced) };
        let mut c = build(&c, 2, 500).unwrap();
        let (mut rng, mut ev) = (Rng(7), Vec::new());
        for i in 0..5000u64 {
            c.access(SimTime(i), TenantId(1), MapPage(rng.below(500)), false, &mut ev);
        }
        assert_eq!((c.allocation(TenantId(0)), c.allocation(TenantId(1))), (Some(3), Some(17)));
        check_records(c.as_ref(), 20, 2, 3);
        c.check_invariants();
    }

    /// Reference model: a Vec per list, MRU at the end; entries (page, dirty, holder).
    struct Reference {
        shared: bool,
        lists: Vec<Vec<(u32, bool, u16)>>,
        caps: Vec<u32>,
        stats: Vec<CmtStats>,
    }

    impl Reference {
        fn access(&mut self, t: u16, page: u32, dirty: bool, ev: &mut Vec<Eviction>) -> bool {
            self.stats[t as usize].lookups += 1;
            for l in self.lists.iter_mut() {
                if let Some(i) = l.iter().position(|e| e.0 == page) {
                    let mut e = l.remove(i);
                    e.1 |= dirty;
                    l.push(e);
                    self.stats[t as usize].hits += 1;
                    return true;
                }
            }
            self.stats[t as usize].misses += 1;
            let li = if self.shared { 0 } else { t as usize };
            while self.lists[li].len() >= self.caps[li] as usize {
                let (p, d, h) = self.lists[li].remove(0);
                self.stats[h as usize].evictions += 1;
                self.stats[h as usize].dirty_evictions += d as u64;
                ev.push(Eviction { page: MapPage(p), dirty: d, holder: TenantId(h) });
            }
            self.lists[li].push((page, dirty, t));
            false
        }
        fn gc(&mut self, page: u32) -> bool {
            let e = self.lists.iter_mut().flat_map(|l| l.iter_mut()).find(|e| e.0 == page);
            e.map(|e| e.1 = true).is_some()
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Access(u16, u32, bool),
        Gc(u32),
    }

    fn scenario() -> impl Strategy<Value = (bool, usize, u32, u32, Option<Vec<u32>>, Vec<Op>)> {
        (any::<bool>(), 1usize..=4, 1u32..=24, 0u32..=10).prop_flat_map(|(shared, tenants, map_pages, extra)| {
            let op = (0..tenants as u16, 0..map_pages, any::<bool>(), 0u8..8)
                .prop_map(|(t, p, d, k)| if k == 0 { Op::Gc(p) } else { Op::Access(t, p, d) });
            let weights = proptest::option::of(proptest::collection::vec(1u32..=6, tenants));
            let pages = Just(tenants as u32 + extra);
            (Just(shared), Just(tenants), Just(map_pages), pages, weights, proptest::collection::vec(op, 0..300))
        })
    }

    proptest! {
        #[test]
        fn matches_reference_lru((shared, tenants, map_pages, pages, weights, ops) in scenario()) {
            let kind = if shared { CmtPolicyKind::Shared } else { CmtPolicyKind::Partitioned };
            let shares = weights.map(|w| {
                let sum: u32 = w.iter().sum();
                w.iter().map(|&x| x as f64 / sum as f64).collect::<Vec<f64>>()
            });
            let config = CmtConfig { shares: shares.clone(), ..cfg(pages, kind) };
            let mut c = match build(&config, tenants, map_pages) {
                Err(CmtError::EmptyPartition { .. }) if !shared => return Ok(()),
                r => r.unwrap(),
            };
            let caps: Vec<u32> = if shared {
                vec![pages]
            } else {
                (0..tenants).map(|t| c.allocation(TenantId(t as u16)).unwrap()).collect()
            };
            prop_assert_eq!(caps.iter().sum::<u32>(), pages);
            if let Some(s) = &shares {
                for (t, &cap) in caps.iter().enumerate().filter(|_| !shared) {
                    prop_assert!((cap as f64 - pages as f64 * s[t]).abs() < 1.0, "cap {} share {}", cap, s[t]);
                }
            }
            let lists = vec![Vec::new(); caps.len()];
            let mut r = Reference { shared, lists, caps, stats: vec![CmtStats::default(); tenants] };
            for (i, op) in ops.into_iter().enumerate() {
                let (mut ev, mut rev) = (Vec::new(), Vec::new());
                match op {
                    Op::Access(t, p, d) => {
                        let hit = c.access(SimTime(i as u64), TenantId(t), MapPage(p), d, &mut ev);
                        prop_assert_eq!(hit, r.access(t, p, d, &mut rev), "access {} {:?}", i, op);
                    }
                    Op::Gc(p) => prop_assert_eq!(c.update_if_cached(MapPage(p)), r.gc(p)),
                }
                prop_assert_eq!(&ev, &rev);
                c.check_invariants();
                for t in 0..tenants {
                    let id = TenantId(t as u16);
                    prop_assert_eq!(c.stats(id), r.stats[t].clone());
                    let held = r.lists.iter().flatten().filter(|e| e.2 as usize == t).count() as u32;
                    prop_assert_eq!(c.held(id), held);
                }
                prop_assert!(c.periods().is_empty());
            }
            for p in 0..map_pages {
                prop_assert_eq!(c.contains(MapPage(p)), r.lists.iter().flatten().any(|e| e.0 == p));
            }
        }

        #[test]
        fn balanced_keeps_its_promises(
            seed in any::<u64>(),
            step in 1u32..4,
            floor in 1u32..3,
            n in 0usize..3000,
            hot in 1u32..40,
        ) {
            let c = CmtConfig { period: Nanos(200), step, floor, ..cfg(24, CmtPolicyKind::Balanced) };
            let mut c = build(&c, 3, 64).unwrap();
            let (mut rng, mut ev, mut now) = (Rng(seed | 1), Vec::new(), 0u64);
            for _ in 0..n {
                let t = rng.below(3);
                let p = if t == 0 { rng.below(hot.min(64)) } else { rng.below(64) };
                now += rng.below(20) as u64 + if rng.below(500) == 0 { 10_000 } else { 0 };
                c.access(SimTime(now), TenantId(t as u16), MapPage(p), rng.below(2) == 0, &mut ev);
                c.check_invariants();
            }
            check_records(c.as_ref(), 24, step, floor);
            let total: u32 = (0..3).map(|t| c.allocation(TenantId(t)).unwrap()).sum();
            prop_assert_eq!(total, 24);
        }
    }
}
