//! The flash translation layer: page-level mapping, allocation, garbage collection, TRIM and the
//! ownership ledger.
//!
//! [`Ftl`] holds the functional state — which physical unit holds each logical page, which
//! tenant wrote each physical unit, the state of every block — and changes it instantly. *When*
//! those changes happen on the flash (and how long they occupy dies and channels) is decided by the
//! device model, which turns the FTL's programs and [`GcJob`]s into timed operations. The same FTL
//! runs without timing to precondition a drive in seconds.

mod buckets;
pub mod cmt;
mod core;
mod mapping;

pub use self::core::{
    Ftl, FtlError, FtlParams, FtlStats, GcJob, Loc, PlacementGc, Placements, StateError, TenantGc, VictimPolicy, MAP_OWNER,
    NO_OWNER, ZonedFtl,
};
pub use cmt::{CmtConfig, CmtPolicy, CmtPolicyKind, CmtStats, Eviction, PeriodRecord};
pub use mapping::{FullMap, MapStats, MappingConfig, MappingKind};

#[cfg(test)]
mod tests;
