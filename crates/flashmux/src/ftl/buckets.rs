//! Full blocks of every plane grouped by valid-unit count, so greedy GC finds its victim without
//! scanning the plane: each bucket is an intrusive doubly linked list over block numbers, and a
//! per-plane hint remembers that no bucket below it is occupied.

const NONE: u32 = u32::MAX;

pub(super) struct ValidBuckets {
    /// Buckets per plane: valid counts 0..=units_per_block.
    width: usize,
    blocks_per_plane: u32,
    heads: Vec<u32>,
    prev: Vec<u32>,
    next: Vec<u32>,
    /// No bucket below this is occupied (a lower bound, not always tight).
    min_hint: Vec<u32>,
}

impl ValidBuckets {
    pub fn new(planes: u32, blocks_per_plane: u32, units_per_block: u32) -> Self {
        let blocks = planes as usize * blocks_per_plane as usize;
        let width = units_per_block as usize + 1;
        ValidBuckets {
            width,
            blocks_per_plane,
            heads: vec![NONE; planes as usize * width],
            prev: vec![NONE; blocks],
            next: vec![NONE; blocks],
            min_hint: vec![units_per_block + 1; planes as usize],
        }
    }

    /// Heads, prev and next links, and the per-plane hints, as saved in a drive state.
    pub fn parts(&self) -> [Vec<u32>; 4] {
        [self.heads.clone(), self.prev.clone(), self.next.clone(), self.min_hint.clone()]
    }

    /// The lengths of the heads and of the hints (the links have one entry per block).
    pub fn shape(&self) -> (usize, usize) {
        (self.heads.len(), self.min_hint.len())
    }

    /// Takes back what [`ValidBuckets::parts`] gave, of the same lengths (the caller checked them).
    pub fn set_parts(&mut self, heads: Vec<u32>, prev: Vec<u32>, next: Vec<u32>, min_hint: Vec<u32>) {
        debug_assert!(heads.len() == self.heads.len() && prev.len() == self.prev.len() && min_hint.len() == self.min_hint.len());
        self.heads = heads;
        self.prev = prev;
        self.next = next;
        self.min_hint = min_hint;
    }

    fn slot(&self, block: u32, valid: u32) -> usize {
        (block / self.blocks_per_plane) as usize * self.width + valid as usize
    }

    pub fn insert(&mut self, block: u32, valid: u32) {
        let s = self.slot(block, valid);
        let head = self.heads[s];
        self.prev[block as usize] = NONE;
        self.next[block as usize] = head;
        if head != NONE {
            self.prev[head as usize] = block;
        }
        self.heads[s] = block;
        let plane = (block / self.blocks_per_plane) as usize;
        self.min_hint[plane] = self.min_hint[plane].min(valid);
    }

    pub fn remove(&mut self, block: u32, valid: u32) {
        let (p, n) = (self.prev[block as usize], self.next[block as usize]);
        if p == NONE {
            let s = self.slot(block, valid);
            debug_assert_eq!(self.heads[s], block, "block {block} not in bucket {valid}");
            self.heads[s] = n;
        } else {
            self.next[p as usize] = n;
        }
        if n != NONE {
            self.prev[n as usize] = p;
        }
        self.prev[block as usize] = NONE;
        self.next[block as usize] = NONE;
    }

    /// The block lost one valid unit.
    pub fn decrement(&mut self, block: u32, old_valid: u32) {
        self.remove(block, old_valid);
        self.insert(block, old_valid - 1);
    }

    /// A block with the fewest valid units below `limit` in `plane`, if any.
    pub fn min_below(&mut self, plane: u32, limit: u32) -> Option<u32> {
        let base = plane as usize * self.width;
        let mut v = self.min_hint[plane as usize];
        while v < limit {
            let head = self.heads[base + v as usize];
            if head != NONE {
                self.min_hint[plane as usize] = v;
                return Some(head);
            }
            v += 1;
        }
        self.min_hint[plane as usize] = v;
        None
    }

    /// Blocks in bucket (plane, valid), for invariant checks.
    pub fn members(&self, plane: u32, valid: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut b = self.heads[plane as usize * self.width + valid as usize];
        while b != NONE {
            out.push(b);
            b = self.next[b as usize];
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_emptiest_block_per_plane() {
        let mut b = ValidBuckets::new(2, 4, 8);
        b.insert(0, 5);
        b.insert(1, 3);
        b.insert(5, 1); // plane 1
        assert_eq!(b.min_below(0, 8), Some(1));
        b.decrement(0, 5);
        b.decrement(0, 4);
        b.decrement(0, 3);
        assert_eq!(b.min_below(0, 8), Some(0), "block 0 now has 2 valid");
        b.remove(0, 2);
        b.remove(1, 3);
        assert_eq!(b.min_below(0, 8), None);
        assert_eq!(b.min_below(1, 8), Some(5));
        assert_eq!(b.min_below(1, 1), None, "limit excludes the bucket itself");
        b.insert(2, 8);
        assert_eq!(b.min_below(0, 8), None, "full blocks are never victims");
        assert_eq!(b.members(0, 8), vec![2]);
    }
}
