//! The FTL's state written out and read back into an FTL of the same shape: what a saved drive
//! holds (`device::drive_state`).
//!
//! Only what changes as the drive is written is saved — the mapping tables, the ownership
//! ledger, every block's and plane's state, the victim buckets, the counters, the DFTL
//! translation directory and the victim policy's random stream; what the geometry and the
//! parameters fix (strides, the stripe-to-plane map, scratch buffers) comes from the FTL the
//! state is read into, which the scenario has just built. An FTL read back this way continues
//! exactly as the one that was saved would have: the same tables, the same free lists in the
//! same order, the same next victim draw.
//!
//! Layout: the small state as a JSON document (length-prefixed), then the three per-unit tables
//! as little-endian arrays (L2P: 4 B per logical unit; P2L: 4 B and owner: 2 B per physical
//! unit). Reading checks the shape against the FTL and every index against its range, so a file
//! that passed its checksum but does not fit is refused with a message rather than a panic later.

use super::{Block, BlockState, Ftl, FtlStats, GcJob, Plane, PlacementGc, TenantGc, MAP_BIT, MIXED, NO_LPN, UNMAPPED};
use crate::engine::SimRng;
use crate::units::PlaneId;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::io::{self, Read, Write};

/// Values per chunk when the tables are converted to bytes.
const CHUNK: usize = 1 << 16;
/// The small state's JSON is at most this long (about 60 bytes per block: 1 TiB drives of
/// small blocks stay well within it).
const MAX_META_BYTES: u64 = 1 << 32;

/// A state that cannot be read into this FTL.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{0}")]
    Io(#[from] io::Error),
    /// Saved from a drive of another shape, or inconsistent.
    #[error("{0}")]
    Invalid(String),
}

#[derive(Serialize, Deserialize)]
struct PlaneRec {
    free: Vec<u32>,
    /// Placement 0's open host block (the only one without data placement).
    user_active: Option<u32>,
    gc_active: Option<u32>,
    map_active: Option<u32>,
    map_gc_active: Option<u32>,
    erasing: u32,
    /// The open host blocks of placements 1 and up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    more_host_open: Vec<Option<u32>>,
    /// Each placement's open GC block (persistent placements only; empty with one placement).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    placement_gc: Vec<Option<u32>>,
    #[serde(default)]
    cause: (u16, u16),
}

/// Everything but the per-unit tables.
#[derive(Serialize, Deserialize)]
struct Meta {
    logical_units: u64,
    total_units: u64,
    units_per_block: u32,
    planes: u32,
    map_pages: u32,
    block_state: Vec<u8>,
    block_valid: Vec<u32>,
    block_written: Vec<u32>,
    block_erases: Vec<u32>,
    block_write_seq: Vec<u64>,
    block_map: Vec<bool>,
    plane: Vec<PlaneRec>,
    buckets: [Vec<u32>; 4],
    write_seq: u64,
    stats: FtlStats,
    tenant_gc: Vec<TenantGc>,
    unowned_gc: TenantGc,
    map_gc: TenantGc,
    /// (plane, victim, read pages, program pages, moved units)
    pending_gc: Vec<[u32; 5]>,
    gtd: Vec<u32>,
    gc_map_updates: Vec<(u32, u16)>,
    map_update_stamp: Vec<u64>,
    relocations: u64,
    victim_rng: SimRng,
    /// Placements the drive keeps apart (absent: one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    placements: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    block_placement: Vec<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    placement_stats: Vec<PlacementGc>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    gc_moves: Vec<u64>,
}

fn state_code(s: BlockState) -> u8 {
    match s {
        BlockState::Free => 0,
        BlockState::Active => 1,
        BlockState::Full => 2,
        BlockState::Erasing => 3,
    }
}

fn state_of(c: u8) -> Option<BlockState> {
    Some(match c {
        0 => BlockState::Free,
        1 => BlockState::Active,
        2 => BlockState::Full,
        3 => BlockState::Erasing,
        _ => return None,
    })
}

impl Ftl {
    /// Writes the state (see the module's header) to `w`.
    pub fn write_state(&self, w: &mut dyn Write) -> io::Result<()> {
        let n = self.params.placements.count();
        let many = n > 1;
        let meta = Meta {
            logical_units: self.l2p.len() as u64,
            total_units: self.p2l.len() as u64,
            units_per_block: self.units_per_block,
            planes: self.planes.len() as u32,
            map_pages: self.gtd.len() as u32,
            block_state: self.blocks.iter().map(|b| state_code(b.state)).collect(),
            block_valid: self.blocks.iter().map(|b| b.valid).collect(),
            block_written: self.blocks.iter().map(|b| b.written).collect(),
            block_erases: self.blocks.iter().map(|b| b.erase_count).collect(),
            block_write_seq: self.blocks.iter().map(|b| b.last_write_seq).collect(),
            block_map: self.blocks.iter().map(|b| b.map).collect(),
            plane: self
                .planes
                .iter()
                .map(|p| PlaneRec {
                    free: p.free.iter().copied().collect(),
                    user_active: p.host_open[0],
                    gc_active: p.gc_active,
                    map_active: p.map_active,
                    map_gc_active: p.map_gc_active,
                    erasing: p.erasing,
                    more_host_open: p.host_open[1..].to_vec(),
                    placement_gc: if many { p.placement_gc.clone() } else { Vec::new() },
                    cause: p.cause,
                })
                .collect(),
            buckets: self.buckets.parts(),
            write_seq: self.write_seq,
            stats: self.stats.clone(),
            tenant_gc: self.tenant_gc.clone(),
            unowned_gc: self.unowned_gc.clone(),
            map_gc: self.map_gc.clone(),
            pending_gc: self
                .pending_gc
                .iter()
                .map(|j| [j.plane.0, j.victim, j.read_pages, j.program_pages, j.moved_units])
                .collect(),
            gtd: self.gtd.clone(),
            gc_map_updates: self.gc_map_updates.iter().map(|(m, o)| (m.0, *o)).collect(),
            map_update_stamp: self.map_update_stamp.clone(),
            relocations: self.relocations,
            victim_rng: self.victim_rng.clone(),
            placements: many.then_some(n as u32),
            block_placement: if many { self.blocks.iter().map(|b| b.placement).collect() } else { Vec::new() },
            placement_stats: if many { self.placement_gc.clone() } else { Vec::new() },
            gc_moves: if many { self.gc_moves.clone() } else { Vec::new() },
        };
        let json = serde_json::to_vec(&meta).map_err(io::Error::other)?;
        w.write_all(&(json.len() as u64).to_le_bytes())?;
        w.write_all(&json)?;
        write_table(w, &self.l2p)?;
        write_table(w, &self.p2l)?;
        write_table(w, &self.owner)?;
        if many {
            w.write_all(&self.unit_placement)?;
        }
        Ok(())
    }

    /// Reads a state written by [`Ftl::write_state`] into an FTL of the same shape (logical and
    /// physical units, blocks, planes, translation pages). On an error the FTL is left half
    /// read: discard it.
    pub fn read_state(&mut self, r: &mut dyn Read) -> Result<(), StateError> {
        let bad = |m: String| StateError::Invalid(m);
        let mut len = [0u8; 8];
        r.read_exact(&mut len)?;
        let len = u64::from_le_bytes(len);
        if len > MAX_META_BYTES {
            return Err(bad(format!("the FTL's state claims {len} bytes of metadata: not a drive state")));
        }
        let mut json = vec![0u8; len as usize];
        r.read_exact(&mut json)?;
        let m: Meta = serde_json::from_slice(&json).map_err(|e| bad(format!("the FTL's state does not parse: {e}")))?;
        drop(json);
        let blocks = self.blocks.len();
        let shape = |what: &str, saved: u64, here: u64| {
            if saved == here {
                Ok(())
            } else {
                Err(bad(format!("saved from a drive with {saved} {what}, this one has {here}")))
            }
        };
        shape("logical units", m.logical_units, self.l2p.len() as u64)?;
        shape("physical units", m.total_units, self.p2l.len() as u64)?;
        shape("units per block", m.units_per_block as u64, self.units_per_block as u64)?;
        shape("planes", m.planes as u64, self.planes.len() as u64)?;
        shape("translation pages", m.map_pages as u64, self.gtd.len() as u64)?;
        let n = self.params.placements.count();
        shape("data placements", m.placements.unwrap_or(1) as u64, n as u64)?;
        let many = n > 1;
        if many
            && (m.block_placement.len() != blocks || m.placement_stats.len() != n || m.gc_moves.len() != n * n)
        {
            return Err(bad("the placement tables do not match the drive's placements".into()));
        }
        if m.block_placement.iter().any(|&h| h != MIXED && h as usize >= n) {
            return Err(bad(format!("a block holds data of a placement past the drive's {n}")));
        }
        let per_block = [
            m.block_state.len(),
            m.block_valid.len(),
            m.block_written.len(),
            m.block_erases.len(),
            m.block_write_seq.len(),
            m.block_map.len(),
            m.buckets[1].len(),
            m.buckets[2].len(),
        ];
        if per_block.iter().any(|&n| n != blocks) || m.plane.len() != self.planes.len() {
            return Err(bad(format!("the block and plane tables do not match the drive's {blocks} blocks")));
        }
        let (heads, hints) = self.buckets.shape();
        if m.buckets[0].len() != heads || m.buckets[3].len() != hints || m.map_update_stamp.len() != self.gtd.len() {
            return Err(bad("the victim buckets or translation tables do not match the drive".into()));
        }
        let total = self.p2l.len() as u32;
        let upb = self.units_per_block;
        let block_ok = |b: u32| (b as usize) < blocks;
        let link_ok = |b: u32| b == u32::MAX || block_ok(b);
        let mut new_blocks = Vec::with_capacity(blocks);
        for i in 0..blocks {
            let state = state_of(m.block_state[i]).ok_or_else(|| bad(format!("block {i}: state {} is not one", m.block_state[i])))?;
            if m.block_valid[i] > upb || m.block_written[i] > upb {
                return Err(bad(format!("block {i}: more than its {upb} units valid or written")));
            }
            new_blocks.push(Block {
                state,
                valid: m.block_valid[i],
                written: m.block_written[i],
                erase_count: m.block_erases[i],
                last_write_seq: m.block_write_seq[i],
                map: m.block_map[i],
                placement: m.block_placement.get(i).copied().unwrap_or(0),
            });
        }
        let mut planes = Vec::with_capacity(m.plane.len());
        for (i, p) in m.plane.into_iter().enumerate() {
            let mut host_open = vec![p.user_active];
            host_open.extend(p.more_host_open);
            let placement_gc = if many { p.placement_gc } else { vec![None] };
            if host_open.len() != n || placement_gc.len() != n {
                return Err(bad(format!("plane {i}: open blocks for another number of placements than the drive's {n}")));
            }
            let opens = [p.gc_active, p.map_active, p.map_gc_active];
            let all = opens.iter().chain(&host_open).chain(&placement_gc).flatten();
            if !p.free.iter().all(|&b| block_ok(b)) || !all.clone().all(|&b| block_ok(b)) {
                return Err(bad(format!("plane {i}: a block number past the drive's {blocks}")));
            }
            planes.push(Plane {
                free: VecDeque::from(p.free),
                host_open,
                gc_active: p.gc_active,
                placement_gc,
                map_active: p.map_active,
                map_gc_active: p.map_gc_active,
                erasing: p.erasing,
                cause: p.cause,
            });
        }
        if !m.buckets[0].iter().chain(&m.buckets[1]).chain(&m.buckets[2]).all(|&b| link_ok(b)) {
            return Err(bad("the victim buckets link to a block past the drive's".into()));
        }
        if m.pending_gc.iter().any(|j| j[0] >= m.planes || !block_ok(j[1])) {
            return Err(bad("a pending GC job names a plane or block past the drive's".into()));
        }
        let map_pages = m.map_pages;
        if m.gtd.iter().any(|&u| u != UNMAPPED && u >= total) || m.gc_map_updates.iter().any(|(p, _)| *p >= map_pages) {
            return Err(bad("the translation directory points past the drive".into()));
        }
        // The tables are read in place (they are the largest part of the drive: no second
        // copy), then checked; a state that fails the checks leaves this FTL unusable, and the
        // caller discards it (a device whose load failed is never run).
        let logical = self.l2p.len() as u32;
        read_table(r, &mut self.l2p)?;
        if let Some(i) = self.l2p.iter().position(|&u| u != UNMAPPED && u >= total) {
            return Err(bad(format!("logical unit {i} maps to unit {} past the drive's {total}", self.l2p[i])));
        }
        read_table(r, &mut self.p2l)?;
        let p2l_ok = |x: u32| x == NO_LPN || (x & MAP_BIT != 0 && (x & !MAP_BIT) < map_pages) || (x & MAP_BIT == 0 && x < logical);
        if let Some(i) = self.p2l.iter().position(|&x| !p2l_ok(x)) {
            return Err(bad(format!("physical unit {i} names logical unit {} past the drive's", self.p2l[i])));
        }
        read_table(r, &mut self.owner)?;
        if many {
            r.read_exact(&mut self.unit_placement)?;
            if let Some(i) = self.unit_placement.iter().position(|&h| h as usize >= n) {
                return Err(bad(format!("physical unit {i} holds data of placement {} past the drive's {n}", self.unit_placement[i])));
            }
            self.placement_gc = m.placement_stats;
            self.gc_moves = m.gc_moves;
        }
        // Everything read and checked: take the rest.
        self.blocks = new_blocks;
        self.planes = planes;
        let [h, p, n, hint] = m.buckets;
        self.buckets.set_parts(h, p, n, hint);
        self.write_seq = m.write_seq;
        self.stats = m.stats;
        self.tenant_gc = m.tenant_gc;
        self.unowned_gc = m.unowned_gc;
        self.map_gc = m.map_gc;
        self.pending_gc = m
            .pending_gc
            .into_iter()
            .map(|[plane, victim, read_pages, program_pages, moved_units]| GcJob {
                plane: PlaneId(plane),
                victim,
                read_pages,
                program_pages,
                moved_units,
            })
            .collect();
        self.gtd = m.gtd;
        self.gc_map_updates = m.gc_map_updates.into_iter().map(|(p, o)| (crate::units::MapPage(p), o)).collect();
        self.map_update_stamp = m.map_update_stamp;
        self.relocations = m.relocations;
        self.victim_rng = m.victim_rng;
        Ok(())
    }
}

/// A table element as little-endian bytes.
trait Le: Copy {
    const BYTES: usize;
    fn put(self, out: &mut Vec<u8>);
    fn get(b: &[u8]) -> Self;
}

impl Le for u32 {
    const BYTES: usize = 4;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(b: &[u8]) -> u32 {
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
}

impl Le for u16 {
    const BYTES: usize = 2;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(b: &[u8]) -> u16 {
        u16::from_le_bytes([b[0], b[1]])
    }
}

/// Writes a table, a chunk of values at a time.
fn write_table<T: Le>(w: &mut dyn Write, v: &[T]) -> io::Result<()> {
    let mut buf = Vec::with_capacity(CHUNK * T::BYTES);
    for c in v.chunks(CHUNK) {
        buf.clear();
        for &x in c {
            x.put(&mut buf);
        }
        w.write_all(&buf)?;
    }
    Ok(())
}

/// Reads a table of `out.len()` values into `out`.
fn read_table<T: Le>(r: &mut dyn Read, out: &mut [T]) -> io::Result<()> {
    let mut buf = vec![0u8; CHUNK * T::BYTES];
    for c in out.chunks_mut(CHUNK) {
        let bytes = &mut buf[..c.len() * T::BYTES];
        r.read_exact(bytes)?;
        for (x, b) in c.iter_mut().zip(bytes.chunks_exact(T::BYTES)) {
            *x = T::get(b);
        }
    }
    Ok(())
}
