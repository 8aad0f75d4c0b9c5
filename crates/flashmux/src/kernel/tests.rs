//! The page cache's tests: exact values derived by hand from the rules in the module headers, and a
//! property test against a reference model of page states.

use super::pagecache::{PageState as S, ReadOutcome, WriteOutcome};
use super::*;
use crate::units::SimTime;
use proptest::prelude::*;
use std::collections::BTreeMap;

const A: FileId = FileId(1);
const B: FileId = FileId(2);
const C: FileId = FileId(3);

fn secs(s: u64) -> SimTime {
    SimTime(s * 1_000_000_000)
}

fn cache_with(f: impl FnOnce(&mut PageCacheConfig)) -> PageCache {
    let mut cfg = PageCacheConfig::default();
    f(&mut cfg);
    PageCache::new(cfg).unwrap()
}

fn cache(capacity_pages: u64) -> PageCache {
    cache_with(|c| c.capacity_pages = capacity_pages)
}

fn ext(file: FileId, first: u64, pages: u64) -> Extent {
    Extent { file, first, pages }
}

/// A read that proceeds: (hits, issued extents with their ids, wait_on).
fn read(
    c: &mut PageCache,
    now: SimTime,
    file: FileId,
    page: u64,
    pages: u64,
    st: Option<StreamId>,
) -> (u64, Vec<ReadIo>, Vec<IoId>) {
    match c.read(now, file, page * PAGE_SIZE, pages * PAGE_SIZE, st).unwrap() {
        ReadOutcome::Read { hits, issue, wait_on } => (hits, issue, wait_on),
        o => panic!("read refused: {o:?}"),
    }
}

fn write(c: &mut PageCache, now: SimTime, file: FileId, page: u64, pages: u64) -> WriteOutcome {
    c.write(now, file, page * PAGE_SIZE, pages * PAGE_SIZE, false).unwrap()
}

fn extents_r(v: &[ReadIo]) -> Vec<Extent> {
    v.iter().map(|r| r.extent).collect()
}
fn extents_w(v: &[WriteIo]) -> Vec<Extent> {
    v.iter().map(|r| r.extent).collect()
}

#[test]
fn hits_never_produce_io_and_a_second_reader_waits_for_the_first_read() {
    // The pagecache.rs worked example, with 8 pages: the first read misses all 8 (one extent of
    // 8 pages, 32 KiB under max_extent_bytes = 128 KiB); a reader of page 1 while it is in
    // flight waits on that I/O and issues none; after completion, every read hits.
    let mut c = cache(64);
    let (hits, issue, wait) = read(&mut c, secs(0), A, 0, 8, None);
    assert_eq!((hits, extents_r(&issue)), (0, vec![ext(A, 0, 8)]));
    assert_eq!(wait, vec![issue[0].id]);
    let (hits, issue2, wait2) = read(&mut c, secs(0), A, 1, 1, None);
    assert_eq!((hits, issue2.len(), wait2), (0, 0, vec![issue[0].id]));
    assert_eq!(c.page_state(A, 1), Some(S::Locked));
    c.read_done(secs(1), issue[0].id).unwrap();
    for _ in 0..3 {
        assert_eq!(read(&mut c, secs(2), A, 0, 8, None), (8, vec![], vec![]));
    }
    // Page 1 was accessed at the miss, then by the waiting reader: active.
    assert!(c.is_active(A, 1));
    let s = c.stats();
    assert_eq!((s.misses, s.waits, s.hits, s.readahead_pages), (8, 1, 24, 0));
    c.check_invariants().unwrap();
}

#[test]
fn a_sequential_4k_reader_ramps_the_window_4_8_16_32_32() {
    // readahead.rs worked example, read_ahead_kb = 128 (max 32 pages). Each read completes at
    // once. Read k issues:
    //   page 0: initial init(1) = 4 (1 <= 32/32): pages 0-3, async_size 3, marker on page 1;
    //   page 1: marker, expected page 1: next(4) = 8 (4 >= 32/16, 4 <= 16): 4-11, marker 4;
    //   page 4: next(8) = 16: 12-27, marker 12; page 12: next(16) = 32 (16 <= 16): 28-59,
    //   marker 28; page 28: next(32) = 32 (max): 60-91, marker 60; page 60: 92-123, marker 92;
    //   page 92: 124-155, marker 124. Every other page is a hit with no I/O.
    let mut c = cache(1024);
    let st = c.open_stream(A);
    let mut windows = BTreeMap::new();
    for p in 0..=100 {
        let (_, issue, wait) = read(&mut c, secs(0), A, p, 1, Some(st));
        if !issue.is_empty() {
            windows.insert(p, extents_r(&issue));
        }
        for r in &issue {
            c.read_done(secs(0), r.id).unwrap();
        }
        if p > 0 {
            assert!(wait.is_empty(), "page {p} was read ahead");
        }
    }
    let want: BTreeMap<u64, Vec<Extent>> = [
        (0, vec![ext(A, 0, 4)]),
        (1, vec![ext(A, 4, 8)]),
        (4, vec![ext(A, 12, 16)]),
        (12, vec![ext(A, 28, 32)]),
        (28, vec![ext(A, 60, 32)]),
        (60, vec![ext(A, 92, 32)]),
        (92, vec![ext(A, 124, 32)]),
    ]
    .into();
    assert_eq!(windows, want);
    assert!(c.has_marker(A, 124), "the next window's trigger is page 124");
    // 156 pages read, 1 asked for before it was read: 155 read ahead, 100 of them used (1-100).
    assert_eq!((c.stats().readahead_pages, c.stats().readahead_hits, c.stats().misses), (155, 100, 1));
    c.check_invariants().unwrap();
}

#[test]
fn the_marker_triggers_the_next_window_while_its_page_is_still_being_read() {
    // Page 0 reads 0-3 (marker 1) and does not complete; page 1 is locked but carries the
    // marker: the window 4-11 starts now, and the reader of page 1 waits on the first read.
    let mut c = cache(1024);
    let st = c.open_stream(A);
    let (_, first, _) = read(&mut c, secs(0), A, 0, 1, Some(st));
    let (hits, issue, wait) = read(&mut c, secs(0), A, 1, 1, Some(st));
    assert_eq!((hits, extents_r(&issue), wait), (0, vec![ext(A, 4, 8)], vec![first[0].id]));
    // A 128 KiB reader: init(32) = 32 = max, all asynchronous, at the window's start: merged to
    // size 32 with async_size 16, marker on page 16, which the same read reaches: window
    // 32-63 too. Only the first extent is waited on.
    let mut c = cache(1024);
    let st = c.open_stream(B);
    let (_, issue, wait) = read(&mut c, secs(0), B, 0, 32, Some(st));
    assert_eq!(extents_r(&issue), vec![ext(B, 0, 32), ext(B, 32, 32)]);
    assert_eq!(wait, vec![issue[0].id]);
    assert!(c.has_marker(B, 32));
}

#[test]
fn read_ahead_sizes_follow_the_kernel_rules() {
    // max = 32: init rounds up to a power of two, x4 up to 1 (32/32), x2 up to 8 (32/4), else 32;
    // next is x4 below 2 (32/16), x2 up to 16 (32/2), else 32.
    use super::readahead::{init_size, next_size};
    let init: Vec<u64> = [1, 2, 3, 4, 8, 9, 32, 100].iter().map(|&s| init_size(s, 32)).collect();
    assert_eq!(init, vec![4, 4, 8, 8, 16, 32, 32, 32]);
    let next: Vec<u64> = [1, 2, 4, 8, 16, 17, 32].iter().map(|&s| next_size(s, 32)).collect();
    assert_eq!(next, vec![4, 4, 8, 16, 32, 32, 32]);
    // max = 512 (2 MiB), max/16 = 32: from one page 4, then 16 (4 < 32: x4), 64 (16 < 32: x4),
    // 128, 256 (x2 while at most 256), 512.
    let mut s = init_size(1, 512);
    let mut ramp = vec![s];
    while s < 512 {
        s = next_size(s, 512);
        ramp.push(s);
    }
    assert_eq!(ramp, vec![4, 16, 64, 128, 256, 512]);
}

#[test]
fn a_marker_hit_without_matching_state_starts_where_the_cache_stops() {
    // Stream 1 reads page 0: window 0-3, marker on 1. Stream 2 (no state) reads page 1: a marker
    // hit that is not its expected page: the first uncached page after 1 is 4; size
    // next(4 - 1 + 1) = next(4) = 8, all asynchronous: window 4-11.
    let mut c = cache(1024);
    let (s1, s2) = (c.open_stream(A), c.open_stream(A));
    read(&mut c, secs(0), A, 0, 1, Some(s1));
    let (_, issue, _) = read(&mut c, secs(0), A, 1, 1, Some(s2));
    assert_eq!(extents_r(&issue), vec![ext(A, 4, 8)]);
    assert!(c.has_marker(A, 4));
}

#[test]
fn a_random_reader_gets_no_read_ahead() {
    // Pages 1000, 37, 512, 9, 700: none is page 0, none within one page after the previous read,
    // none a marker: each read reads only its own page.
    let mut c = cache(1024);
    let st = c.open_stream(A);
    for p in [1000, 37, 512, 9, 700] {
        let (_, issue, _) = read(&mut c, secs(0), A, p, 1, Some(st));
        assert_eq!(extents_r(&issue), vec![ext(A, p, 1)]);
    }
    assert_eq!(c.stats().readahead_pages, 0);
    // The next page after the last read is sequential: an initial window of 4 from page 701.
    let (_, issue, _) = read(&mut c, secs(0), A, 701, 1, Some(st));
    assert_eq!(extents_r(&issue), vec![ext(A, 701, 4)]);
}

#[test]
fn a_page_dirtied_at_1s_is_written_at_35s() {
    // Wakeups at multiples of 5 s; expired when dirtied at or before now - 30 s. At 30 s the
    // cutoff is 0 s: not expired. At 35 s the cutoff is 5 s >= 1 s: written. The first multiple
    // of 5 s at or after 1 + 30 = 31 s is 35 s.
    let mut c = cache(1000);
    assert_eq!(write(&mut c, secs(1), A, 0, 1), WriteOutcome::Done { dirtied: 1 });
    assert_eq!(c.flusher_wakeup_at(), Some(secs(35)));
    assert_eq!(c.flush(secs(30)).unwrap(), vec![]);
    assert_eq!(c.flusher_wakeup_at(), Some(secs(35)));
    let w = c.flush(secs(35)).unwrap();
    assert_eq!((extents_w(&w), w[0].reason), (vec![ext(A, 0, 1)], WriteReason::Expiry));
    assert_eq!((c.page_state(A, 0), c.flusher_wakeup_at()), (Some(S::Writeback), None));
    c.write_done(secs(36), w[0].id).unwrap();
    assert_eq!(c.page_state(A, 0), Some(S::Clean));
    // A page dirtied at exactly 40 s has age 30 s at 70 s: written there, not later.
    write(&mut c, secs(40), A, 1, 1);
    assert_eq!(c.flusher_wakeup_at(), Some(secs(70)));
    assert_eq!(c.flush(secs(65)).unwrap(), vec![]);
    assert_eq!(extents_w(&c.flush(secs(70)).unwrap()), vec![ext(A, 1, 1)]);
    assert_eq!(c.stats().written_back.expiry, 2);
    c.check_invariants().unwrap();
}

#[test]
fn background_writeback_starts_when_crossing_10_percent_and_stops_at_it() {
    // 1000 pages: background threshold 100. A gets 1 page (t = 1 s), B 100 (t = 2 s): 101 > 100,
    // the flusher is due now. A became dirty first: its chunk (1 page) is written; then 100 are
    // dirty, not over 100: the pass stops before B.
    let mut c = cache(1000);
    assert_eq!(c.thresholds(), (200, 100));
    write(&mut c, secs(1), A, 0, 1);
    write(&mut c, secs(2), B, 0, 99);
    assert_eq!(c.flusher_wakeup_at(), Some(secs(35)), "100 dirty pages are not over the threshold");
    write(&mut c, secs(3), B, 99, 1);
    assert_eq!(c.flusher_wakeup_at(), Some(secs(3)));
    let w = c.flush(secs(3)).unwrap();
    assert_eq!((extents_w(&w), w[0].reason), (vec![ext(A, 0, 1)], WriteReason::Background));
    assert_eq!((c.dirty_pages(), c.flusher_wakeup_at()), (100, Some(secs(35))));
    assert_eq!(c.stats().written_back.background, 1);
}

#[test]
fn a_writer_is_throttled_above_20_percent_and_released_by_completions() {
    // 1000 pages: dirty threshold 200. 200 dirty pages are not over it: a 1-page write passes
    // (201). The next writes are refused: one throttle event, two refused writes. The flusher
    // puts all 201 under writeback (201 > 100, one chunk, extents of 32 pages: 6 × 32 + 9):
    // dirty + writeback is still 201. The first completion (32 pages, at 3 s) brings it to 169:
    // released, after 3 s - 2 s = 1 s held.
    let mut c = cache(1000);
    write(&mut c, secs(1), A, 0, 200);
    assert_eq!(write(&mut c, secs(1), A, 200, 1), WriteOutcome::Done { dirtied: 1 });
    assert_eq!(write(&mut c, secs(2), A, 201, 1), WriteOutcome::Throttled);
    assert_eq!(write(&mut c, secs(2), A, 201, 1), WriteOutcome::Throttled);
    let w = c.flush(secs(2)).unwrap();
    assert_eq!(w.len(), 7);
    assert_eq!((w[0].extent, w[6].extent), (ext(A, 0, 32), ext(A, 192, 9)));
    assert_eq!(write(&mut c, secs(2), A, 201, 1), WriteOutcome::Throttled);
    c.write_done(secs(3), w[0].id).unwrap();
    assert_eq!(write(&mut c, secs(3), A, 201, 1), WriteOutcome::Done { dirtied: 1 });
    let s = c.stats();
    assert_eq!((s.throttle_events, s.throttled_writes, s.throttled_ns, s.peak_dirty), (1, 3, 1_000_000_000, 201));
    c.check_invariants().unwrap();
}

#[test]
fn eviction_never_drops_dirty_or_in_flight_pages() {
    // 16 pages, thresholds 16 and 15 pages (out of the way): 8 dirty (A), 4 being read (B), 4
    // being read (C). A read of D needs a page and
    // none is clean: NoMemory, nothing dropped, the flusher asked for 1 page now. Writeback
    // does not make it evictable. When B's read completes, B's pages join the inactive list
    // (0 first, so it is the tail): D's read evicts B page 0 and nothing else.
    let mut c = cache_with(|c| {
        c.capacity_pages = 16;
        c.dirty_bytes = 16 * PAGE_SIZE;
        c.dirty_background_bytes = 15 * PAGE_SIZE;
    });
    write(&mut c, secs(0), A, 0, 8);
    let (_, rb, _) = read(&mut c, secs(0), B, 0, 4, None);
    read(&mut c, secs(0), C, 0, 4, None);
    let refused = c.read(secs(1), FileId(4), 0, 4096, None).unwrap();
    assert_eq!(refused, ReadOutcome::NoMemory { short: 1 });
    assert_eq!(c.flusher_wakeup_at(), Some(secs(1)));
    let w = c.flush(secs(1)).unwrap();
    assert_eq!((extents_w(&w), w[0].reason), (vec![ext(A, 0, 1)], WriteReason::MemoryPressure));
    assert!(matches!(c.read(secs(1), FileId(4), 0, 4096, None).unwrap(), ReadOutcome::NoMemory { .. }));
    c.read_done(secs(2), rb[0].id).unwrap();
    let (_, issue, _) = read(&mut c, secs(2), FileId(4), 0, 1, None);
    assert_eq!(extents_r(&issue), vec![ext(FileId(4), 0, 1)]);
    assert_eq!(c.page_state(B, 0), None);
    assert_eq!(c.page_state(A, 0), Some(S::Writeback));
    assert!((1..8).all(|p| c.page_state(A, p) == Some(S::Dirty)));
    assert!((0..4).all(|p| c.page_state(C, p) == Some(S::Locked)));
    assert!((1..4).all(|p| c.page_state(B, p) == Some(S::Clean)));
    assert_eq!((c.stats().evictions, c.stats().no_memory, c.stats().written_back.memory_pressure), (1, 2, 1));
    c.check_invariants().unwrap();
}

#[test]
fn a_page_read_twice_is_active_and_the_inactive_list_is_evicted_first() {
    // 16 pages filled by one read of A 0-15, completed in page order: inactive head 15, tail 0.
    // Page 0 read again: active. A read of B evicts the inactive tail, page 1 (the active list
    // holds 1 page, not more than the inactive 15: no demotion).
    let mut c = cache(16);
    let (_, r, _) = read(&mut c, secs(0), A, 0, 16, None);
    c.read_done(secs(0), r[0].id).unwrap();
    read(&mut c, secs(0), A, 0, 1, None);
    assert!(c.is_active(A, 0));
    read(&mut c, secs(0), B, 0, 1, None);
    assert_eq!((c.page_state(A, 0), c.page_state(A, 1), c.page_state(A, 2)), (Some(S::Clean), None, Some(S::Clean)));
    c.check_invariants().unwrap();
}

#[test]
fn fsync_writes_exactly_the_files_dirty_pages_as_merged_extents() {
    // A: pages 0-2, 5, 10-11 dirty; B: page 0. fsync(A): three extents, B untouched. Page 5
    // written again under writeback: a second fsync issues nothing, waits on A's two writes
    // still in flight, and holds page 5 back; when its write completes, fsync writes it.
    let mut c = cache(1000);
    write(&mut c, secs(0), A, 0, 3);
    write(&mut c, secs(0), A, 5, 1);
    write(&mut c, secs(0), A, 10, 2);
    write(&mut c, secs(0), B, 0, 1);
    let r = c.fsync(secs(1), A).unwrap();
    assert_eq!(extents_w(&r.issue), vec![ext(A, 0, 3), ext(A, 5, 1), ext(A, 10, 2)]);
    assert!(r.issue.iter().all(|w| w.reason == WriteReason::Fsync));
    assert_eq!(r.wait_on, r.issue.iter().map(|w| w.id).collect::<Vec<_>>());
    assert_eq!((r.held_back, c.page_state(B, 0)), (0, Some(S::Dirty)));
    c.write_done(secs(2), r.issue[0].id).unwrap();
    write(&mut c, secs(2), A, 5, 1);
    assert_eq!(c.page_state(A, 5), Some(S::WritebackDirty));
    let r2 = c.fdatasync(secs(2), A).unwrap();
    assert_eq!((r2.issue.len(), r2.wait_on.clone(), r2.held_back), (0, vec![r.issue[1].id, r.issue[2].id], 1));
    c.write_done(secs(3), r.issue[1].id).unwrap();
    let r3 = c.fsync(secs(3), A).unwrap();
    assert_eq!((extents_w(&r3.issue), r3.held_back), (vec![ext(A, 5, 1)], 0));
    assert_eq!(c.stats().written_back.fsync, 7);
    c.check_invariants().unwrap();
}

#[test]
fn the_flusher_writes_1024_pages_per_file_in_round_robin() {
    // Two files of 1500 dirty pages (A at 1 s, B at 2 s), thresholds out of the way, extents up
    // to 4 MiB (1024 pages). At 35 s both have expired: A 0-1023, B 0-1023, then each file's
    // remaining 476 pages in the same order (b_more_io).
    let mut c = cache_with(|c| {
        c.capacity_pages = 10_000;
        c.dirty_bytes = 1 << 30;
        c.dirty_background_bytes = 512 << 20;
        c.max_extent_bytes = 4 << 20;
    });
    write(&mut c, secs(1), A, 0, 1500);
    write(&mut c, secs(2), B, 0, 1500);
    let w = c.flush(secs(35)).unwrap();
    assert_eq!(extents_w(&w), vec![ext(A, 0, 1024), ext(B, 0, 1024), ext(A, 1024, 476), ext(B, 1024, 476)]);
    assert_eq!((c.stats().written_back.expiry, c.dirty_pages(), c.writeback_pages()), (3000, 0, 3000));
    c.check_invariants().unwrap();
}

#[test]
fn partial_writes_read_the_page_first_unless_beyond_eof() {
    // Bytes 100-299 of page 0: the page is read first; after the read the write dirties it.
    // The same beyond the end of the file needs no read.
    let mut c = cache(64);
    let o = c.write(secs(0), A, 100, 200, false).unwrap();
    let WriteOutcome::Wait { issue, wait_on } = o else { panic!("{o:?}") };
    assert_eq!((extents_r(&issue), wait_on), (vec![ext(A, 0, 1)], vec![issue[0].id]));
    c.read_done(secs(1), issue[0].id).unwrap();
    assert_eq!(c.write(secs(1), A, 100, 200, false).unwrap(), WriteOutcome::Done { dirtied: 1 });
    assert_eq!(c.write(secs(1), B, 100, 200, true).unwrap(), WriteOutcome::Done { dirtied: 1 });
    // Whole pages 1-2 of A need no read; a write to a page being read waits for it.
    assert_eq!(write(&mut c, secs(1), A, 1, 2), WriteOutcome::Done { dirtied: 2 });
    let (_, r, _) = read(&mut c, secs(1), A, 8, 1, None);
    assert_eq!(write(&mut c, secs(1), A, 8, 1), WriteOutcome::Wait { issue: vec![], wait_on: vec![r[0].id] });
    c.check_invariants().unwrap();
}

#[test]
fn invalidate_drops_clean_pages_and_reports_the_rest() {
    let mut c = cache(64);
    let (_, r, _) = read(&mut c, secs(0), A, 0, 4, None);
    c.read_done(secs(0), r[0].id).unwrap();
    write(&mut c, secs(0), A, 1, 1);
    let (_, r2, _) = read(&mut c, secs(0), A, 6, 1, None);
    let inv = c.invalidate(secs(0), A, 0, 8).unwrap();
    assert_eq!(inv, Invalidated { dropped: 3, dirty: 1, busy: vec![r2[0].id] });
    assert_eq!((c.page_state(A, 0), c.page_state(A, 1)), (None, Some(S::Dirty)));
    c.check_invariants().unwrap();
}

#[test]
fn truncate_drops_clean_and_dirty_pages_and_waits_for_those_in_flight() {
    // truncate.rs worked example. A: read 0-3 (io 1, completed: clean), write 4-5 (dirty), read
    // 8 (io 2, locked), write 6-7 and sync them (io 3: writeback), write 7 again (writeback +
    // dirty). Dirty: 4, 5, 7 = 3; writeback: 6, 7 = 2.
    let mut c = cache(64);
    c.set_file_end(A, 100);
    let (_, r, _) = read(&mut c, secs(0), A, 0, 4, None);
    c.read_done(secs(0), r[0].id).unwrap();
    write(&mut c, secs(0), A, 4, 2);
    let (_, r8, _) = read(&mut c, secs(0), A, 8, 1, None);
    write(&mut c, secs(0), A, 6, 2);
    let w = c.sync_range(secs(0), A, 6, 8).unwrap().issue;
    assert_eq!((extents_w(&w), c.page_state(A, 4)), (vec![ext(A, 6, 2)], Some(S::Dirty)));
    write(&mut c, secs(0), A, 7, 1);
    assert_eq!((c.dirty_pages(), c.writeback_pages()), (3, 2));
    let (read_io, write_io) = (r8[0].id, w[0].id);
    assert_eq!((read_io, write_io), (IoId(2), IoId(3)));
    // Truncate at 2: 2-3 clean dropped, 4-5 dirty dropped and 7's new data (3 dirty), busy: the
    // read and the write, sorted. 0-1 stay; 6-8 wait, marked. Nothing dirty: A has left the
    // flusher's order (no wakeup), its read-ahead end is 2.
    let t = c.truncate(secs(1), A, 2).unwrap();
    assert_eq!(t, truncate::Truncated { clean: 2, dirty: 3, busy: vec![IoId(2), IoId(3)] });
    assert_eq!((c.cached_pages(), c.dirty_pages(), c.writeback_pages()), (5, 0, 2));
    assert_eq!((c.page_state(A, 1), c.page_state(A, 2), c.page_state(A, 4)), (Some(S::Clean), None, None));
    assert_eq!((c.page_state(A, 7), c.page_state(A, 8)), (Some(S::Writeback), Some(S::Locked)));
    assert!((6..=8).all(|p| c.is_truncated_in_flight(A, p)) && !c.is_truncated_in_flight(A, 1));
    assert_eq!(c.flusher_wakeup_at(), None);
    c.check_invariants().unwrap();
    // The read completes: page 8 dropped, not clean. Then the write: 6 and 7 dropped, 7 not
    // dirty again. 2 + 2 at once, 1 + 2 at completion: 7 pages truncated, 3 of them dirty.
    c.read_done(secs(2), read_io).unwrap();
    assert_eq!((c.page_state(A, 8), c.cached_pages()), (None, 4));
    c.write_done(secs(3), write_io).unwrap();
    assert_eq!((c.cached_pages(), c.dirty_pages(), c.writeback_pages()), (2, 0, 0));
    assert_eq!((c.stats().truncated_pages, c.stats().truncated_dirty), (7, 3));
    assert_eq!(c.stats().written_back.fsync, 2, "6 and 7 were written once, 7's new data never");
    c.check_invariants().unwrap();
    assert_eq!(c.ends.get(&A), Some(&2), "the read-ahead end 100 became 2");
    // An unlink of a file with nothing in flight leaves nothing; B's end (none) becomes 0: a
    // stream's first read at 0 (a window of 4, 0-3) reads only its own page.
    write(&mut c, secs(4), B, 0, 3);
    let t = c.truncate(secs(4), B, 0).unwrap();
    assert_eq!(t, truncate::Truncated { clean: 0, dirty: 3, busy: vec![] });
    assert_eq!((c.page_state(B, 0), c.dirty_pages()), (None, 0));
    let st = c.open_stream(B);
    let (_, issue, _) = read(&mut c, secs(4), B, 0, 1, Some(st));
    assert_eq!(extents_r(&issue), vec![ext(B, 0, 1)]);
    c.check_invariants().unwrap();
}

#[test]
fn a_truncated_page_written_again_under_writeback_is_the_files_again() {
    // Page 0 dirty, under writeback (io 1), truncated (marked), then written again: writeback +
    // dirty and no longer marked; when the write completes it is dirty (1 dirty page), not
    // dropped: only the truncation's own count stands (0 dropped, 0 dirty).
    let mut c = cache(64);
    write(&mut c, secs(0), A, 0, 1);
    let w = c.fsync(secs(0), A).unwrap().issue;
    let t = c.truncate(secs(1), A, 0).unwrap();
    assert_eq!(t, truncate::Truncated { clean: 0, dirty: 0, busy: vec![w[0].id] });
    assert_eq!(write(&mut c, secs(2), A, 0, 1), WriteOutcome::Done { dirtied: 1 });
    assert!(!c.is_truncated_in_flight(A, 0));
    c.write_done(secs(3), w[0].id).unwrap();
    assert_eq!((c.page_state(A, 0), c.dirty_pages(), c.stats().truncated_pages), (Some(S::Dirty), 1, 0));
    c.check_invariants().unwrap();
}

#[test]
fn bad_calls_are_errors() {
    let mut c = cache(64);
    c.read(secs(5), A, 0, 1, None).unwrap();
    assert_eq!(
        c.read(secs(4), A, 0, 1, None),
        Err(CacheError::TimeWentBack { now: 4_000_000_000, clock: 5_000_000_000 })
    );
    assert!(matches!(c.read(secs(5), A, 0, 0, None), Err(CacheError::BadRange { .. })));
    assert!(matches!(c.write(secs(5), A, u64::MAX, 2, false), Err(CacheError::BadRange { .. })));
    assert!(matches!(c.read(secs(5), A, 0, 65 * 4096, None), Err(CacheError::TooLarge { pages: 65, .. })));
    let st = c.open_stream(A);
    assert!(matches!(c.read(secs(5), B, 0, 1, Some(st)), Err(CacheError::StreamFile { .. })));
    c.close_stream(st).unwrap();
    assert_eq!(c.close_stream(st), Err(CacheError::UnknownStream(st)));
    assert!(matches!(c.write_done(secs(5), IoId(1)), Err(CacheError::UnknownIo { .. })), "IoId(1) is a read");
    let bad = PageCacheConfig { dirty_ratio: 101, ..Default::default() };
    assert_eq!(
        PageCache::new(bad).err().unwrap().to_string(),
        "kernel.pagecache.dirty_ratio: 101: expected a percentage, 0 to 100"
    );
}

#[test]
fn bytes_settings_override_the_ratios() {
    // dirty_bytes 1 MiB + 1 = 257 pages (rounded up); background 10% of 1000 = 100. With a
    // background setting not below the dirty one, background is half of it.
    let c = cache_with(|c| {
        c.capacity_pages = 1000;
        c.dirty_bytes = (1 << 20) + 1;
    });
    assert_eq!(c.thresholds(), (257, 100));
    let c = cache_with(|c| {
        c.capacity_pages = 1000;
        c.dirty_background_bytes = 4 << 20;
    });
    assert_eq!(c.thresholds(), (200, 100));
}

/// The reference model: each page's state, the I/O in flight, and the pages truncated while
/// their I/O was in flight (dropped when it completes).
#[derive(Default)]
struct Model {
    pages: BTreeMap<(FileId, u64), S>,
    inflight: BTreeMap<IoId, (Extent, bool)>,
    doomed: std::collections::BTreeSet<(FileId, u64)>,
}

impl Model {
    fn count(&self, f: impl Fn(S) -> bool) -> u64 {
        self.pages.values().filter(|&&s| f(s)).count() as u64
    }
    fn dirty(&self) -> u64 {
        self.count(|s| matches!(s, S::Dirty | S::WritebackDirty))
    }
    fn writeback(&self) -> u64 {
        self.count(|s| matches!(s, S::Writeback | S::WritebackDirty))
    }
    fn start(&mut self, id: IoId, e: Extent, write: bool, from: S, to: S) {
        for p in e.first..e.end() {
            let cur = self.pages.get(&(e.file, p)).copied();
            assert_eq!(cur, (from != S::Locked).then_some(from), "{id:?} {e:?} page {p}");
            self.pages.insert((e.file, p), to);
        }
        self.inflight.insert(id, (e, write));
    }
    /// Pages the cache no longer holds must have been clean: drop them.
    fn sync_evictions(&mut self, c: &PageCache) {
        let gone: Vec<_> = self.pages.keys().filter(|k| c.page_state(k.0, k.1).is_none()).copied().collect();
        for k in gone {
            assert_eq!(self.pages.remove(&k), Some(S::Clean), "{k:?} dropped while not clean");
        }
    }
    fn check(&self, c: &PageCache) {
        for (k, s) in &self.pages {
            assert_eq!(c.page_state(k.0, k.1), Some(*s), "{k:?}");
        }
        assert_eq!(c.cached_pages(), self.pages.len() as u64);
        assert!(c.cached_pages() <= c.config().capacity_pages);
        assert_eq!((c.dirty_pages(), c.writeback_pages()), (self.dirty(), self.writeback()));
        for k in self.pages.keys() {
            assert_eq!(c.is_truncated_in_flight(k.0, k.1), self.doomed.contains(k), "{k:?} marked");
        }
        c.check_invariants().unwrap();
    }
}

#[derive(Clone, Debug)]
enum Op {
    Read { file: u32, page: u64, pages: u64, stream: bool },
    Write { file: u32, page: u64, pages: u64, partial: bool, eof: bool },
    ReadDone(usize),
    WriteDone(usize),
    Flush(u64),
    Fsync(u32),
    Invalidate { file: u32, page: u64 },
    Truncate { file: u32, page: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3u32, 0..48u64, 1..6u64, any::<bool>()).prop_map(|(file, page, pages, stream)| Op::Read {
            file,
            page,
            pages,
            stream
        }),
        (0..3u32, 0..48u64, 1..6u64, any::<bool>(), any::<bool>())
            .prop_map(|(file, page, pages, partial, eof)| Op::Write { file, page, pages, partial, eof }),
        any::<usize>().prop_map(Op::ReadDone),
        any::<usize>().prop_map(Op::WriteDone),
        (0..20_000u64).prop_map(Op::Flush),
        (0..3u32).prop_map(Op::Fsync),
        (0..3u32, 0..48u64).prop_map(|(file, page)| Op::Invalidate { file, page }),
        (0..3u32, 0..56u64).prop_map(|(file, page)| Op::Truncate { file, page }),
    ]
}

fn run_op(c: &mut PageCache, m: &mut Model, streams: &[StreamId], now: SimTime, o: &Op) {
    match *o {
        Op::Read { file, page, pages, stream } => {
            let before = m.pages.clone();
            let st = stream.then(|| streams[file as usize]);
            match c.read(now, FileId(file), page * PAGE_SIZE, pages * PAGE_SIZE, st).unwrap() {
                ReadOutcome::NoMemory { .. } => assert_eq!(c.cached_pages(), before.len() as u64),
                ReadOutcome::Read { issue, wait_on, .. } => {
                    m.sync_evictions(c);
                    for r in &issue {
                        // A clean page evicted and read again by the same call's read-ahead.
                        for p in r.extent.first..r.extent.end() {
                            let old = m.pages.remove(&(r.extent.file, p));
                            assert!(old.is_none() || old == Some(S::Clean), "{p}: {old:?} read again");
                        }
                        m.start(r.id, r.extent, false, S::Locked, S::Locked);
                    }
                    for p in page..page + pages {
                        assert!(m.pages.contains_key(&(FileId(file), p)), "requested page {p} cached");
                    }
                    assert!(wait_on.iter().all(|id| m.inflight.get(id).is_some_and(|x| !x.1)));
                }
            }
        }
        Op::Write { file, page, pages, partial, eof } => {
            let (f, off) = (FileId(file), page * PAGE_SIZE + partial as u64 * 100);
            let over = m.dirty() + m.writeback() > c.thresholds().0;
            match c.write(now, f, off, pages * PAGE_SIZE, eof).unwrap() {
                WriteOutcome::Throttled => assert!(over),
                WriteOutcome::NoMemory { .. } => assert!(!over),
                WriteOutcome::Wait { issue, .. } => {
                    m.sync_evictions(c);
                    for r in &issue {
                        m.start(r.id, r.extent, false, S::Locked, S::Locked);
                    }
                }
                WriteOutcome::Done { dirtied } => {
                    assert!(!over);
                    m.sync_evictions(c);
                    let mut n = 0;
                    for p in off / PAGE_SIZE..=(off + pages * PAGE_SIZE - 1) / PAGE_SIZE {
                        // A page truncated under writeback and written again is the file's again.
                        m.doomed.remove(&(f, p));
                        let s = m.pages.entry((f, p)).or_insert(S::Clean);
                        n += matches!(*s, S::Clean | S::Writeback) as u64;
                        *s = if matches!(*s, S::Writeback | S::WritebackDirty) { S::WritebackDirty } else { S::Dirty };
                    }
                    assert_eq!(dirtied, n);
                }
            }
        }
        Op::ReadDone(k) | Op::WriteDone(k) => {
            let write = matches!(o, Op::WriteDone(_));
            let ids: Vec<IoId> = m.inflight.iter().filter(|x| x.1 .1 == write).map(|x| *x.0).collect();
            if ids.is_empty() {
                return;
            }
            let id = ids[k % ids.len()];
            let (e, _) = m.inflight.remove(&id).unwrap();
            if write {
                c.write_done(now, id).unwrap();
            } else {
                c.read_done(now, id).unwrap();
            }
            for p in e.first..e.end() {
                if m.doomed.remove(&(e.file, p)) {
                    assert_eq!(m.pages.remove(&(e.file, p)), Some(if write { S::Writeback } else { S::Locked }));
                    continue;
                }
                let s = m.pages.get_mut(&(e.file, p)).unwrap();
                *s = if *s == S::WritebackDirty { S::Dirty } else { S::Clean };
            }
        }
        Op::Flush(_) | Op::Fsync(_) => {
            let issue = match *o {
                Op::Fsync(f) => {
                    let r = c.fsync(now, FileId(f)).unwrap();
                    let dirty_left = m.pages.iter().any(|(k, s)| k.0 == FileId(f) && *s == S::Dirty);
                    let wbd = m.pages.iter().filter(|(k, s)| k.0 == FileId(f) && **s == S::WritebackDirty).count();
                    assert_eq!(r.held_back, wbd as u64);
                    let written: u64 = r.issue.iter().map(|w| w.extent.pages).sum();
                    let was_dirty = m.pages.iter().filter(|(k, s)| k.0 == FileId(f) && **s == S::Dirty).count();
                    assert_eq!(written, was_dirty as u64);
                    assert!(written > 0 || !dirty_left);
                    r.issue
                }
                _ => c.flush(now).unwrap(),
            };
            for w in &issue {
                m.start(w.id, w.extent, true, S::Dirty, S::Writeback);
            }
        }
        Op::Invalidate { file, page } => {
            let inv = c.invalidate(now, FileId(file), page, page + 8).unwrap();
            let before = m.count(|s| s == S::Clean);
            m.sync_evictions(c);
            assert_eq!(before - m.count(|s| s == S::Clean), inv.dropped);
        }
        Op::Truncate { file, page } => {
            let f = FileId(file);
            let t = c.truncate(now, f, page).unwrap();
            let past: Vec<((FileId, u64), S)> =
                m.pages.range((f, page)..=(f, u64::MAX)).map(|(k, s)| (*k, *s)).collect();
            let (mut clean, mut dirty) = (0, 0);
            for (k, s) in past {
                match s {
                    S::Clean | S::Dirty => {
                        m.pages.remove(&k);
                        (clean, dirty) = (clean + (s == S::Clean) as u64, dirty + (s == S::Dirty) as u64);
                    }
                    S::WritebackDirty => {
                        m.pages.insert(k, S::Writeback);
                        m.doomed.insert(k);
                        dirty += 1;
                    }
                    S::Locked | S::Writeback => {
                        m.doomed.insert(k);
                    }
                }
            }
            let busy: Vec<IoId> =
                m.inflight.iter().filter(|(_, (e, _))| e.file == f && e.end() > page).map(|(id, _)| *id).collect();
            assert_eq!(t, truncate::Truncated { clean, dirty, busy });
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn the_cache_agrees_with_a_reference_model(cap in 16..40u64, ops in prop::collection::vec(op(), 1..120)) {
        let mut c = cache_with(|c| {
            c.capacity_pages = cap;
            c.read_ahead_kb = 32;
            c.max_extent_bytes = 16 << 10;
        });
        let streams: Vec<StreamId> = (0..3).map(|f| c.open_stream(FileId(f))).collect();
        let mut m = Model::default();
        let mut now = SimTime::ZERO;
        for o in &ops {
            if let Op::Flush(ms) = o {
                now = now + crate::units::Nanos::from_ms(*ms);
            }
            run_op(&mut c, &mut m, &streams, now, o);
            m.check(&c);
        }
    }
}

#[test]
fn read_ahead_stops_at_the_end_of_the_file() {
    // A 1-page read at the start of a stream opens a 4-page window (get_init_ra_size: 1 page,
    // ×4 as it is at most 32 / 32). With the file ending after page 2, only pages 0–1 are read.
    let mut c = cache(64);
    c.set_file_end(A, 2);
    let st = c.open_stream(A);
    let (_, issue, _) = read(&mut c, secs(0), A, 0, 1, Some(st));
    assert_eq!(extents_r(&issue), [ext(A, 0, 2)]);
    // Another file without an end gets the whole window.
    let st = c.open_stream(B);
    let (_, issue, _) = read(&mut c, secs(0), B, 0, 1, Some(st));
    assert_eq!(extents_r(&issue), [ext(B, 0, 4)]);
    c.check_invariants().unwrap();
}
