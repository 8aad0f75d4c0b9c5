//! Read-ahead: the window a stream of reads brings into the page cache before it is asked for —
//! Linux's on-demand read-ahead (`ondemand_readahead`).
//!
//! # Model
//! Each open stream keeps `(start, size, async_size)`: the last window read ahead, `size` pages
//! from `start`, of which the last `async_size` are the asynchronous part. The first page of that
//! part carries the marker (PG_readahead); a read that reaches the marker starts the next window
//! before the reader needs it. `max` is `read_ahead_kb / 4` pages. A read of `req` pages at page
//! `index` decides, in Linux's order:
//! 1. `index == 0` (start of file): an initial window.
//! 2. `index` is the expected page (`start + size - async_size`, the marker, or `start + size`):
//!    sequential; the window moves on: `start += size`, `size = next(size)`,
//!    `async_size = size`.
//! 3. a marker hit without matching state (interleaved streams): the next uncached page after
//!    `index` within `max` pages is where the window starts; `size = next(distance + req)`,
//!    all of it asynchronous. No uncached page within `max`: nothing.
//! 4. `req > max` (an oversize read): an initial window.
//! 5. `index` is at most one page after the previous read's last page: an initial window.
//! 6. otherwise a random read: only the requested pages, the state untouched.
//!
//! Initial window: `start = index`, `size = init(req)`, `async_size = size - req` (or `size` if
//! `req >= size`). Then, if the read is at the window's start and the whole window is
//! asynchronous, the next window is merged in at once: `size += next(size)` with
//! `async_size = next(size)` if that fits in `max`, else `size = max`, `async_size = max / 2`.
//!
//! `init(s)`: `s` rounded up to a power of two, ×4 if at most `max / 32`, ×2 if at most `max / 4`,
//! else `max` (`get_init_ra_size`). `next(s)`: ×4 while below `max / 16`, ×2 while at most
//! `max / 2`, else `max` (`get_next_ra_size`).
//!
//! Only pages not in the cache are read; the marker is set only if its page is newly read
//! (`page_cache_ra_unbounded`). A stream opened without read-ahead (`max = 0`) reads only what it
//! asks for.
//!
//! # Worked example
//! `read_ahead_kb = 128` (`max = 32`), a reader of 4 KiB pages from page 0:
//! - page 0 misses: initial window, `init(1)`: 1 ≤ 32/32 so 4; `async_size = 3`: pages 0–3 are
//!   read, marker on page 0 + 4 - 3 = 1;
//! - page 1 hits the marker; it is the expected page: window 4–11 (`next(4)`: 4 is not below
//!   32/16 = 2, 4 ≤ 16 so 8), all asynchronous, marker on page 4;
//! - page 4: window 12–27 (`next(8)` = 16), marker 12; page 12: window 28–59 (`next(16)` = 32,
//!   16 ≤ 16), marker 28; page 28: window 60–91 (`next(32)` = 32 = max), marker 60; …
//!
//! Windows of 4, 8, 16, 32, 32, … pages, each started when the reader reaches the first page of
//! the previous one. A reader of 128 KiB requests from page 0 gets `init(32) = 32` with
//! `async_size = 32`, at the window's start: merged to `size = 32, async_size = 16`, marker on
//! page 16 — it triggers the window 32–63 in the same read.
//!
//! # Simplifications
//! Linux's context read-ahead (`try_context_readahead`, looking for a sequential stream's traces
//! in the cache; removed in Linux 6.10) is not modelled: such reads are random here. No
//! large-folio orders, no `io_pages` enlargement of oversize reads, no end-of-file clamp (the
//! cache knows no file sizes). Read congestion never defers an asynchronous window.
//!
//! # Parameters
//! `read_ahead_kb` (KiB, default 128: `VM_READAHEAD_PAGES`, include/linux/mm.h).
//!
//! # Source
//! Linux `mm/readahead.c` (`ondemand_readahead`, `get_init_ra_size`, `get_next_ra_size`,
//! `page_cache_sync_ra`, `page_cache_async_ra`, `page_cache_ra_unbounded`), `mm/filemap.c`
//! (`filemap_get_pages`: the sync read-ahead on a missing page, the async one on a marked page).

/// A stream's read-ahead state (`struct file_ra_state`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaState {
    pub start: u64,
    pub size: u64,
    pub async_size: u64,
    /// The last page of the previous read (`prev_pos`), if any.
    pub prev_page: Option<u64>,
}

/// What a read-ahead decision asks the cache to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaDecision {
    /// Read the window `[start, start + size)`, marking page `start + size - async_size` (if
    /// `async_size > 0`) when it is newly read.
    Window { start: u64, size: u64, async_size: u64 },
    /// Read only the requested pages (`req` pages from `index`), no marker.
    Plain,
    /// Read nothing.
    Nothing,
}

/// `get_init_ra_size`: the first window for a read of `size` pages.
pub fn init_size(size: u64, max: u64) -> u64 {
    let s = size.max(1).next_power_of_two();
    if s <= max / 32 {
        s * 4
    } else if s <= max / 4 {
        s * 2
    } else {
        max
    }
}

/// `get_next_ra_size`: the window after one of `cur` pages.
pub fn next_size(cur: u64, max: u64) -> u64 {
    if cur < max / 16 {
        4 * cur
    } else if cur <= max / 2 {
        2 * cur
    } else {
        max
    }
}

/// The on-demand decision for a read of `req` pages at page `index`: `marker` if the page at
/// `index` carries the marker (an asynchronous read-ahead), else the page is missing (a
/// synchronous one). `next_miss(from, max)` is the first page at or after `from`, below
/// `from + max`, that is not in the cache. Updates `ra`.
pub fn ondemand(
    ra: &mut RaState,
    max: u64,
    index: u64,
    req: u64,
    marker: bool,
    next_miss: impl Fn(u64, u64) -> Option<u64>,
) -> RaDecision {
    if max == 0 {
        return if marker { RaDecision::Nothing } else { RaDecision::Plain };
    }
    let expected = ra.start + ra.size - ra.async_size;
    if index != 0 && ra.size > 0 && (index == expected || index == ra.start + ra.size) {
        ra.start += ra.size;
        ra.size = next_size(ra.size, max);
        ra.async_size = ra.size;
        return window(ra, index, max);
    }
    if index != 0 && marker {
        let Some(start) = next_miss(index + 1, max) else { return RaDecision::Nothing };
        ra.start = start;
        ra.size = next_size(start - index + req, max);
        ra.async_size = ra.size;
        return window(ra, index, max);
    }
    let sequential = ra.prev_page.is_some_and(|p| index.wrapping_sub(p) <= 1);
    if index == 0 || req > max || sequential {
        ra.start = index;
        ra.size = init_size(req, max);
        ra.async_size = if ra.size > req { ra.size - req } else { ra.size };
        return window(ra, index, max);
    }
    RaDecision::Plain
}

/// `readit`: merges the next window in when the read is at the start of an all-asynchronous
/// window, and returns the window.
fn window(ra: &mut RaState, index: u64, max: u64) -> RaDecision {
    if index == ra.start && ra.size == ra.async_size {
        let add = next_size(ra.size, max);
        if ra.size + add <= max {
            ra.async_size = add;
            ra.size += add;
        } else {
            ra.size = max;
            ra.async_size = max / 2;
        }
    }
    RaDecision::Window { start: ra.start, size: ra.size, async_size: ra.async_size }
}
