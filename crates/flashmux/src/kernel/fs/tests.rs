//! The filesystem's tests: layouts and allocations derived by hand from the rules in the module
//! headers, and a property test against a reference model of which blocks each file owns.

use super::extents::{tree_blocks, ExtentMap, MAX_EXTENT_LEN};
use super::layout::{default_journal_blocks, has_super};
use super::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const GIB: u64 = 1 << 30;

fn fs_1g() -> Fs {
    Fs::mkfs(GIB, FsOptions::default()).unwrap()
}

fn ext(start: u64, len: u64) -> PhysExtent {
    PhysExtent { start, len }
}

fn meta(block: u64, kind: MetaKind) -> MetaBlock {
    MetaBlock { block, kind }
}

#[test]
fn superblock_copies_are_in_groups_0_1_and_powers_of_3_5_7() {
    let with: Vec<u64> = (0..100).filter(|&g| has_super(g)).collect();
    assert_eq!(with, vec![0, 1, 3, 5, 7, 9, 25, 27, 49, 81]);
}

#[test]
fn journal_size_follows_mke2fs_by_filesystem_size() {
    // ext2fs_default_journal_size: the thresholds are exclusive upper bounds.
    assert_eq!(default_journal_blocks(2047), 0);
    assert_eq!(default_journal_blocks(32767), 1024);
    assert_eq!(default_journal_blocks(262143), 4096);
    assert_eq!(default_journal_blocks(262144), 8192); // 1 GiB: 32 MiB
    assert_eq!(default_journal_blocks(4 << 20), 32768); // 16 GiB: 128 MiB
    assert_eq!(default_journal_blocks(16 << 20), 131072); // 64 GiB: 512 MiB
    assert_eq!(default_journal_blocks(1 << 28), 262144); // 1 TiB: 1 GiB
}

#[test]
fn layout_of_a_1_gib_filesystem() {
    // 262144 blocks = 8 groups of 32768. Inodes: 2^30 / 16384 = 65536, 8192 a group, 512
    // inode-table blocks (256-byte inodes, 16 a block). One descriptor block (8 × 64 bytes);
    // reserved GDT: growth to 2^28 blocks = 8192 groups = 128 descriptor blocks, less 1 = 127.
    // Group 0: superblock 0, descriptors 1, reserved GDT 2–128. One flex group, the last: its
    // table offset is 7 + 1 = 8: block bitmaps 129–136, inode bitmaps 137–144, inode tables
    // 145–4240 (8 × 512).
    let fs = fs_1g();
    let l = fs.layout();
    assert_eq!((l.blocks, l.groups, l.inodes_per_group, l.inode_table_blocks), (262144, 8, 8192, 512));
    assert_eq!((l.desc_blocks, l.reserved_gdt_blocks), (1, 127));
    assert_eq!((l.block_bitmap(0), l.inode_bitmap(0), l.inode_table(0)), (129, 137, 145));
    assert_eq!((l.block_bitmap(1), l.inode_bitmap(1), l.inode_table(1)), (130, 138, 657));
    assert_eq!(l.inode_table(7) + 512, 4241);
    assert_eq!(l.region_of(0), Some(MetaKind::Superblock));
    assert_eq!(l.region_of(128), Some(MetaKind::ReservedGdt));
    assert_eq!(l.region_of(4240), Some(MetaKind::InodeTable));
    assert_eq!(l.region_of(4241), None);
    // Group 1's copy: superblock 32768, descriptor 32769, reserved GDT 32770–32896.
    assert_eq!(l.region_of(32768), Some(MetaKind::Superblock));
    assert_eq!(l.region_of(32896), Some(MetaKind::ReservedGdt));
    assert_eq!(l.region_of(32897), None);
    assert_eq!(l.region_of(2 * 32768), None);
    // Journal: 8192 blocks; the middle block 131072 is in group 4; groups 3 and 5 carry copies
    // (32768 − 129 free) and group 4 none (32768): group 4, from its first block.
    assert_eq!(fs.journal(), ext(131072, 8192));
    assert_eq!(l.region_of(139263), Some(MetaKind::Journal));
    assert_eq!(l.region_of(139264), None);
    // Free: 262144 − 5 copies × 129 (groups 0, 1, 3, 5, 7) − 16 bitmaps − 4096 inode-table
    // blocks − 8192 journal = 249195; mkfs then takes the root's block (4241), lost+found's
    // four (4242–4245) and the resize inode's (4246): 249189.
    assert_eq!(l.data_blocks(), 249195);
    assert_eq!(fs.free_blocks(), 249189);
    assert_eq!(fs.extents(fs.root()).unwrap(), vec![Mapping { logical: 0, physical: Some(4241), len: 1 }]);
    assert_eq!(fs.extents(Ino(11)).unwrap(), vec![Mapping { logical: 0, physical: Some(4242), len: 4 }]);
    fs.check_invariants().unwrap();
}

#[test]
fn layout_of_a_64_gib_filesystem() {
    // 2^24 blocks = 512 groups, 8192 inodes and 512 table blocks each. Descriptors: 512 / 64 =
    // 8 blocks. Reserved GDT: 1024 × 2^24 exceeds 2^32 − 1, so growth to 2^32 blocks = 131072
    // groups = 2048 descriptor blocks, less 8 = 2040, capped at 1024. Group 0: superblock 0,
    // descriptors 1–8, reserved 9–1032; flex group 0 (groups 0–15, table offset 16): block
    // bitmaps 1033–1048, inode bitmaps 1049–1064, inode tables 1065–9256.
    let fs = Fs::mkfs(64 * GIB, FsOptions::default()).unwrap();
    let l = fs.layout();
    assert_eq!((l.blocks, l.groups, l.desc_blocks, l.reserved_gdt_blocks), (1 << 24, 512, 8, 1024));
    assert_eq!((l.block_bitmap(0), l.inode_bitmap(0), l.inode_table(0)), (1033, 1049, 1065));
    assert_eq!((l.block_bitmap(1), l.inode_bitmap(1), l.inode_table(1)), (1034, 1050, 1577));
    assert_eq!(l.inode_table(15) + 512, 9257);
    // Group 16 starts flex group 1 (no superblock copy): its tables from its first block.
    assert_eq!((l.block_bitmap(16), l.inode_bitmap(16), l.inode_table(16)), (524288, 524304, 524320));
    // Journal: 131072 blocks. The middle group 256 is beyond the first flex group: rounded
    // to 256 (a flex start), then 256 (32768 − 8224 free) against 257 (32768): group 257.
    assert_eq!(fs.journal(), ext(257 * 32768, 131072));
    assert_eq!(fs.journal().end(), 8552448);
    // Copies in 0, 1, 3, 5, 7, 9, 25, 27, 49, 81, 125, 243, 343: 13 × (1 + 8 + 1024) = 13429;
    // 32 flex groups × (16 + 16 + 8192) = 263168; journal 131072:
    // 16777216 − 13429 − 263168 − 131072 = 16369547, less mkfs's 6 blocks.
    assert_eq!(l.data_blocks(), 16369547);
    assert_eq!(fs.free_blocks(), 16369541);
    assert_eq!(fs.extents(fs.root()).unwrap()[0].physical, Some(9257));
    fs.check_invariants().unwrap();
}

#[test]
fn layout_of_a_1_tib_filesystem_is_computed_without_per_block_state() {
    // 2^28 blocks = 8192 groups; 128 descriptor blocks; reserved GDT capped at 1024 (growth to
    // 2^32 blocks would need 2048 − 128). Group 0: superblock 0, descriptors 1–128, reserved
    // 129–1152, tables from 1153. Copies in 0, 1, 3, 9, 27, 81, 243, 729, 2187, 6561, 5, 25,
    // 125, 625, 3125, 7, 49, 343, 2401: 19 × (1 + 128 + 1024) = 21907 blocks; 512 flex groups
    // × 8224 = 4210688; journal 262144 (1 GiB), placed in group 4097 (the middle group 4096
    // holds flex group 256's tables). 2^28 − 21907 − 4210688 − 262144 = 263940717.
    let fs = Fs::mkfs(1 << 40, FsOptions::default()).unwrap();
    let l = fs.layout();
    assert_eq!((l.groups, l.desc_blocks, l.reserved_gdt_blocks), (8192, 128, 1024));
    assert_eq!((l.block_bitmap(0), l.inode_bitmap(0), l.inode_table(0)), (1153, 1169, 1185));
    assert_eq!(fs.journal(), ext(4097 * 32768, 262144));
    assert_eq!(l.data_blocks(), 263940717);
    assert_eq!(fs.free_blocks(), 263940717 - 6);
}

#[test]
fn a_short_last_group_is_dropped_and_a_long_one_kept() {
    // 1 GiB + 100 blocks: a 100-block last group is below 2 + 512 + 50 blocks: dropped.
    let fs = Fs::mkfs(GIB + 100 * 4096, FsOptions::default()).unwrap();
    assert_eq!((fs.layout().blocks, fs.layout().groups), (262144, 8));
    // 1 GiB + 1000 blocks: group 8 (no copy) of 1000 blocks is at least 2 + 457 + 50 (below):
    // kept. Inodes: 263144 × 4096 / 16384 = 65786, over 9 groups 7310, rounded up to whole
    // table blocks: 457 blocks of 16 = 7312. Reserved GDT: growth to 263144 × 1024 blocks =
    // 8224 groups (rounded up) = 129 descriptor blocks, less 1 = 128: group 0's tables start at
    // 130. Flex group 0 is now 9 groups, table offset 8 + 1 = 9: block bitmaps 130–138, inode
    // bitmaps 139–147, tables from 148.
    let fs = Fs::mkfs(GIB + 1000 * 4096, FsOptions::default()).unwrap();
    let l = fs.layout();
    assert_eq!((l.blocks, l.groups, l.inodes_per_group, l.inode_table_blocks), (263144, 9, 7312, 457));
    assert_eq!(l.reserved_gdt_blocks, 128);
    assert_eq!((l.block_bitmap(8), l.inode_bitmap(0), l.inode_table(0)), (138, 139, 148));
    fs.check_invariants().unwrap();
}

#[test]
fn bad_options_name_their_key() {
    let key = |f: fn(&mut FsOptions), bytes: u64| -> String {
        let mut o = FsOptions::default();
        f(&mut o);
        Fs::mkfs(bytes, o).unwrap_err().to_string()
    };
    assert!(key(|o| o.block_size = 1024, GIB).starts_with("kernel.fs.block_size: 1024: expected"));
    assert!(key(|o| o.blocks_per_group = 40000, GIB).starts_with("kernel.fs.blocks_per_group: 40000"));
    assert!(key(|o| o.inode_ratio = 3000, GIB).starts_with("kernel.fs.inode_ratio: 3000"));
    assert!(key(|o| o.inode_size = 100, GIB).starts_with("kernel.fs.inode_size: 100"));
    assert!(key(|o| o.flex_bg_size = 3, GIB).starts_with("kernel.fs.flex_bg_size: 3"));
    assert!(key(|o| o.journal_blocks = 10, GIB).starts_with("kernel.fs.journal_blocks: 10"));
    assert!(key(|o| o.mb_stream_req = 0, GIB).starts_with("kernel.fs.mb_stream_req: 0"));
    assert!(key(|o| o.mb_group_prealloc = 0, GIB).starts_with("kernel.fs.mb_group_prealloc: 0"));
    assert!(key(|_| {}, 4 << 20).starts_with("kernel.fs.device_bytes: 4194304"));
    // 4096-byte inodes for every 1024 bytes: 32768 inodes a group (the most one bitmap block
    // counts) in 32768 table blocks: the tables do not fit a group.
    assert!(key(
        |o| {
            o.inode_ratio = 1024;
            o.inode_size = 4096
        },
        GIB
    )
    .starts_with("kernel.fs.inode_ratio: 1024"));
}

#[test]
fn extents_merge_when_contiguous_and_split_at_32768_blocks() {
    let mut m = ExtentMap::default();
    m.insert(0, 1000, 16);
    m.insert(16, 1016, 16); // continues logically and physically: one extent
    assert_eq!(m.len(), 1);
    m.insert(32, 5000, 8); // physically elsewhere: a second extent
    assert_eq!(m.len(), 2);
    m.insert(40, 5008, 40000); // merged with the second: 8 + 40000 = 32768 + 7240 blocks
    let v: Vec<(u64, u64)> = m.iter().map(|e| (e.logical, e.len)).collect();
    assert_eq!(v, vec![(0, 32), (32, MAX_EXTENT_LEN), (32800, 7240)]);
    // Past the end: the last extent (logical 32800 at 5000 + 32768) projected to 40080.
    assert_eq!(m.goal(40080), Some(5000 + 40080 - 32));
    // Before the first extent: projected back from it.
    let mut n = ExtentMap::default();
    n.insert(10, 500, 1);
    assert_eq!((n.goal(4), n.goal(12)), (Some(494), Some(502)));
    assert_eq!(m.map_range(30, 4)[0], Mapping { logical: 30, physical: Some(1030), len: 2 });
    // Truncating inside the last extent returns its tail.
    assert_eq!(m.truncate(40000), vec![ext(5000 + 40000 - 32, 40)]);
    assert_eq!(m.mapped_blocks(), 40000);
    // Tree blocks: 4 inline, then leaves of 340, then index blocks beyond 4 leaves.
    assert_eq!((tree_blocks(4), tree_blocks(5), tree_blocks(1360), tree_blocks(1361)), (0, 1, 4, 5 + 1));
}

#[test]
fn a_streaming_file_is_one_physical_run() {
    // A 100 MiB file (25600 blocks), its i_size set by the writes, written back 64 KiB (16
    // blocks) at a time. Predicted size > 8 MiB: 2048-block windows aligned to 2048. The first
    // (no neighbour: stream goal, group 0 from its first block) is 4247–6294 (after mkfs's
    // blocks); every later window continues the previous extent and is found exactly there.
    // 13 windows end at 4247 + 26624 = 30871 < 32768: all in group 0. One extent (25600 ≤
    // 32768); the last window's 1024 blocks past the end are released at close.
    let mut fs = fs_1g();
    let (f, _) = fs.create(fs.root(), "stream").unwrap();
    fs.set_size(f, 100 << 20).unwrap();
    let before = fs.free_blocks();
    for i in 0..1600 {
        let ch = fs.allocate(f, i * 16, 16, 0).unwrap();
        assert_eq!(ch.mapped, vec![Mapping { logical: i * 16, physical: Some(4247 + i * 16), len: 16 }]);
        assert_eq!(ch.allocated, vec![ext(4247 + i * 16, 16)]);
    }
    assert_eq!(fs.extents(f).unwrap(), vec![Mapping { logical: 0, physical: Some(4247), len: 25600 }]);
    assert_eq!(fs.free_blocks(), before - 25600);
    let s = fs.stats();
    assert_eq!((s.alloc.inode_pas, s.alloc.goal_hits, s.alloc.inode_pa_hits), (13, 12, 1600 - 13));
    assert_eq!(fs.release(f).unwrap().released, 1024);
    fs.check_invariants().unwrap();
}

#[test]
fn a_writeback_from_a_preallocation_dirties_one_bitmap_descriptor_and_inode_block() {
    // The file is inode 12 (group 0, after lost+found's 11): inode-table block 145 + 11 / 16.
    // Blocks in group 0: block bitmap 129, descriptor block 1.
    let mut fs = fs_1g();
    let (f, _) = fs.create(fs.root(), "f").unwrap();
    assert_eq!(f, Ino(12));
    fs.set_size(f, 1 << 20).unwrap();
    fs.allocate(f, 0, 16, 0).unwrap();
    let ch = fs.allocate(f, 16, 16, 0).unwrap();
    let want: BTreeSet<MetaBlock> =
        [meta(1, MetaKind::GroupDesc), meta(129, MetaKind::BlockBitmap), meta(145, MetaKind::InodeTable)].into();
    assert_eq!(ch.dirtied, want);
}

#[test]
fn creating_a_file_dirties_its_inode_the_bitmap_and_the_parent_block() {
    // Inode 12: inode bitmap 137, descriptor block 1, inode-table block 145 (which also holds
    // the root, inode 2, whose mtime changes), the root's directory block 4241.
    let mut fs = fs_1g();
    let (_, ch) = fs.create(fs.root(), "f000").unwrap();
    let want: BTreeSet<MetaBlock> = [
        meta(1, MetaKind::GroupDesc),
        meta(137, MetaKind::InodeBitmap),
        meta(145, MetaKind::InodeTable),
        meta(4241, MetaKind::Directory),
    ]
    .into();
    assert_eq!(ch.dirtied, want);
    assert!(ch.allocated.is_empty());
}

#[test]
fn small_files_are_packed_in_the_locality_group_preallocation() {
    // 100 files of 8 KiB (2 blocks ≤ mb_stream_req 16): the first finds 512 blocks from its
    // goal, the first block of group 1 (regular files start at the flex group's second
    // group): group 1's first free block is 32897 (after its 129-block superblock copy). Each
    // file then takes the next 2 blocks of that preallocation: file i at 32897 + 2i.
    let mut fs = fs_1g();
    let mut files = Vec::new();
    for i in 0..100 {
        let (f, _) = fs.create(fs.root(), &format!("f{i:03}")).unwrap();
        fs.set_size(f, 8192).unwrap();
        let ch = fs.allocate(f, 0, 2, 0).unwrap();
        assert_eq!(ch.allocated, vec![ext(32897 + 2 * i, 2)]);
        fs.release(f).unwrap();
        files.push(f);
    }
    let s = fs.stats();
    assert_eq!((s.alloc.group_pas, s.alloc.group_pa_hits), (1, 99));
    assert_eq!((s.files, s.extents_per_file_max), (100, 1));
    // All in 200 blocks of one group, not one file per group.
    let all: Vec<u64> = files.iter().map(|&f| fs.extents(f).unwrap()[0].physical.unwrap()).collect();
    assert_eq!((all.iter().min(), all.iter().max()), (Some(&32897), Some(&33095)));
    fs.check_invariants().unwrap();
    // Deleting them returns each file's 2 blocks: 100 merged into one run of 200.
    let mut freed = Vec::new();
    for f in files {
        freed.extend(fs.unlink(f).unwrap().freed);
    }
    assert_eq!(merge(freed), vec![ext(32897, 200)]);
    fs.check_invariants().unwrap();
}

#[test]
fn top_level_directories_spread_and_subdirectories_stay_near() {
    // A 64 GiB filesystem has 32 flex groups. A top-level directory goes to the first flex
    // group, from the one its name hashes to, with the fewest directories among those with at
    // least the average free inodes and blocks (flex group 0, with its superblock copies, and
    // 16, with the journal, have fewer): while flex groups without a directory remain, each
    // new one gets its own.
    let mut fs = Fs::mkfs(64 * GIB, FsOptions::default()).unwrap();
    let mut flexes = BTreeSet::new();
    let mut dirs = Vec::new();
    for i in 0..8 {
        let (d, _) = fs.mkdir(fs.root(), &format!("top{i}")).unwrap();
        flexes.insert(fs.group_of(d) / 16);
        dirs.push(d);
    }
    assert_eq!(flexes.len(), 8, "top-level directories share flex groups: {flexes:?}");
    // A subdirectory and a file under top0 stay in its flex group.
    let (sub, _) = fs.mkdir(dirs[0], "sub").unwrap();
    let (file, _) = fs.create(dirs[0], "file").unwrap();
    assert_eq!(fs.group_of(sub) / 16, fs.group_of(dirs[0]) / 16);
    assert_eq!(fs.group_of(file), fs.group_of(dirs[0]) / 16 * 16);
    fs.check_invariants().unwrap();
}

#[test]
fn truncate_returns_the_tail_and_releases_the_preallocation() {
    // 1 MiB file (256 blocks): window (0, 256) from group 0's first free block 4247. Written
    // back whole, then truncated to 100 KiB (25 blocks): blocks 4272–4502 return.
    let mut fs = fs_1g();
    let (f, _) = fs.create(fs.root(), "t").unwrap();
    fs.set_size(f, 1 << 20).unwrap();
    fs.allocate(f, 0, 128, 0).unwrap(); // 128 used, 128 preallocated
    let ch = fs.truncate(f, 100 << 10).unwrap();
    assert_eq!(ch.freed, vec![ext(4247 + 25, 103)]);
    assert_eq!(ch.released, 128);
    assert!(ch.dirtied.contains(&meta(0, MetaKind::Superblock)));
    assert_eq!(fs.map(f, 0, 30).unwrap()[1], Mapping { logical: 25, physical: None, len: 5 });
    fs.check_invariants().unwrap();
}

#[test]
fn the_fifth_extent_takes_a_tree_leaf_and_truncate_returns_it() {
    // A 1 MiB file (window 0..256 at 4247–4502, group 0's first free run) written back one
    // block in two: logical 0, 2, 4, 6, 8 at 4247, 4249, …, 4255 from the preallocation, five
    // extents (not contiguous logically). The fifth needs a leaf: the first free block of
    // group 0 outside the preallocation, 4503.
    let mut fs = fs_1g();
    let (f, _) = fs.create(fs.root(), "holes").unwrap();
    fs.set_size(f, 1 << 20).unwrap();
    for i in 0..4 {
        let ch = fs.allocate(f, 2 * i, 1, 0).unwrap();
        assert_eq!(ch.allocated, vec![ext(4247 + 2 * i, 1)]);
        assert!(ch.dirtied.iter().all(|m| m.kind != MetaKind::ExtentTree));
    }
    let ch = fs.allocate(f, 8, 1, 0).unwrap();
    assert_eq!(ch.allocated, vec![ext(4255, 1), ext(4503, 1)]);
    assert!(ch.dirtied.contains(&meta(4503, MetaKind::ExtentTree)));
    fs.check_invariants().unwrap();
    // Truncate to 4 blocks: the preallocation's 256 − 5 unused blocks are released; the data
    // at logical 4, 6, 8 and the leaf (2 extents fit the inode again) are freed.
    let ch = fs.truncate(f, 4 * 4096).unwrap();
    assert_eq!(ch.released, 251);
    assert_eq!(ch.freed, vec![ext(4251, 1), ext(4253, 1), ext(4255, 1), ext(4503, 1)]);
    assert_eq!(fs.extents(f).unwrap().len(), 2);
    fs.check_invariants().unwrap();
}

#[test]
fn a_directory_grows_by_a_block_when_its_first_is_full() {
    // The root's block: 4096 − 12 (checksum tail) − 24 (. and ..) − 20 (lost+found) = 4040
    // bytes; 4-byte names take 12: 336 entries fit. The 337th appends block 1 to the root,
    // allocated at once from group 0's first free block (4247, after mkfs's blocks).
    let mut fs = fs_1g();
    for i in 0..336 {
        let (_, ch) = fs.create(fs.root(), &format!("n{i:03}")).unwrap();
        assert!(ch.allocated.is_empty());
        assert!(ch.dirtied.contains(&meta(4241, MetaKind::Directory)));
    }
    let (_, ch) = fs.create(fs.root(), "n336").unwrap();
    assert_eq!(ch.allocated, vec![ext(4247, 1)]);
    assert!(ch.dirtied.contains(&meta(4247, MetaKind::Directory)));
    assert!(!ch.dirtied.contains(&meta(4241, MetaKind::Directory)));
    assert_eq!(fs.extents(fs.root()).unwrap().len(), 2);
    fs.check_invariants().unwrap();
    let json = serde_json::to_value(fs.stats()).unwrap();
    assert_eq!((json["files"].as_u64(), json["directories"].as_u64()), (Some(337), Some(2)));
}

#[test]
fn errors_are_values() {
    let mut fs = fs_1g();
    let (f, _) = fs.create(fs.root(), "x").unwrap();
    assert_eq!(fs.create(f, "y").unwrap_err(), FsError::WrongType { ino: f, expected: "directory" });
    assert_eq!(fs.create(fs.root(), "").unwrap_err(), FsError::BadName { len: 0 });
    assert_eq!(fs.allocate(f, 0, 0, 0).unwrap_err(), FsError::BadRange { op: "allocate", logical: 0, len: 0 });
    assert!(matches!(fs.allocate(f, u32::MAX as u64, 2, 0), Err(FsError::BadRange { .. })));
    assert_eq!(fs.allocate(f, 0, 1, 8192).unwrap_err(), FsError::BadCpu(8192));
    assert_eq!(fs.unlink(Ino(999)).unwrap_err(), FsError::NoInode(Ino(999)));
    let (d, _) = fs.mkdir(fs.root(), "d").unwrap();
    fs.create(d, "z").unwrap();
    assert_eq!(fs.rmdir(d).unwrap_err(), FsError::NotEmpty(d));
    assert_eq!(fs.rmdir(fs.root()).unwrap_err(), FsError::Reserved(fs.root()));
    // A full filesystem refuses before changing anything.
    let (big, _) = fs.create(fs.root(), "big").unwrap();
    assert_eq!(fs.allocate(big, 0, 300_000, 0).unwrap_err(), FsError::NoSpace);
    fs.check_invariants().unwrap();
}

// ---- the property test ----

#[derive(Clone, Debug)]
enum Op {
    Create,
    Mkdir,
    Append { f: usize, n: u64 },
    Write { f: usize, at: u64, n: u64 },
    Truncate { f: usize, keep_pct: u64 },
    Unlink { f: usize },
    Release { f: usize },
}

/// An operation; appends of up to `append` blocks.
fn op(append: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Create),
        1 => Just(Op::Mkdir),
        4 => (0..64usize, 1..append).prop_map(|(f, n)| Op::Append { f, n }),
        3 => (0..64usize, 0..600u64, 1..40u64).prop_map(|(f, at, n)| Op::Write { f, at, n }),
        2 => (0..64usize, 0..100u64).prop_map(|(f, keep_pct)| Op::Truncate { f, keep_pct }),
        1 => (0..64usize).prop_map(|f| Op::Unlink { f }),
        1 => (0..64usize).prop_map(|f| Op::Release { f }),
    ]
}

/// The reference: each file's logical → physical blocks, every block in use, who owns data.
struct Reference {
    files: BTreeMap<Ino, BTreeMap<u64, u64>>,
    used: BTreeSet<u64>,
    owner: BTreeMap<u64, Ino>,
}

impl Reference {
    fn take(&mut self, fs: &Fs, ch: &Change) {
        for e in &ch.allocated {
            for b in e.start..e.end() {
                assert!(fs.layout().region_of(b).is_none(), "block {b} allocated in a fixed region");
                assert!(self.used.insert(b), "block {b} allocated twice");
            }
        }
    }
    /// Checks `ch.freed` is exactly `data` plus blocks no file's data holds (tree blocks).
    fn give(&mut self, ch: &Change, data: &BTreeSet<u64>) {
        let mut freed_data = BTreeSet::new();
        for e in &ch.freed {
            for b in e.start..e.end() {
                assert!(self.used.remove(&b), "block {b} freed but not in use");
                if let Some(_o) = self.owner.remove(&b) {
                    freed_data.insert(b);
                }
            }
        }
        assert_eq!(&freed_data, data, "freed data blocks differ from those released");
    }
}

fn run(device_bytes: u64, blocks_per_group: u64, ops: Vec<Op>) {
    let opts = FsOptions { blocks_per_group, ..FsOptions::default() };
    let mut fs = Fs::mkfs(device_bytes, opts).unwrap();
    let capacity = fs.layout().data_blocks();
    let mkfs_used: BTreeSet<u64> =
        (0..fs.layout().blocks).filter(|&b| fs.layout().region_of(b).is_none() && !fs.is_free(b)).collect();
    assert_eq!(capacity - mkfs_used.len() as u64, fs.free_blocks());
    let mut r = Reference { files: BTreeMap::new(), used: mkfs_used, owner: BTreeMap::new() };
    let mut dirs = vec![fs.root()];
    let pick = |r: &Reference, f: usize| r.files.keys().nth(f % r.files.len().max(1)).copied();
    for op in ops {
        match op {
            Op::Create => {
                let parent = dirs[r.files.len() % dirs.len()];
                let Ok((ino, ch)) = fs.create(parent, &format!("f{}", r.files.len())) else {
                    assert_eq!(fs.free_blocks(), capacity - r.used.len() as u64, "a refused create changed blocks");
                    continue;
                };
                r.take(&fs, &ch);
                r.files.insert(ino, BTreeMap::new());
            }
            Op::Mkdir => {
                let Ok((d, ch)) = fs.mkdir(fs.root(), &format!("d{}", dirs.len())) else {
                    assert_eq!(fs.free_blocks(), capacity - r.used.len() as u64, "a refused mkdir changed blocks");
                    continue;
                };
                r.take(&fs, &ch);
                dirs.push(d);
            }
            Op::Append { f, n } | Op::Write { f, n, .. } => {
                let Some(ino) = pick(&r, f) else { continue };
                let size = fs.size(ino).unwrap().div_ceil(BLOCK_SIZE);
                let at = if let Op::Write { at, .. } = op { at } else { size };
                fs.set_size(ino, (at + n).max(size) * BLOCK_SIZE).unwrap();
                let ch = match fs.allocate(ino, at, n, (f % 2) as u32) {
                    Ok(ch) => ch,
                    Err(FsError::NoSpace) => {
                        assert_eq!(
                            fs.free_blocks(),
                            capacity - r.used.len() as u64,
                            "a refused allocation changed blocks"
                        );
                        continue;
                    }
                    Err(e) => panic!("{e}"),
                };
                r.take(&fs, &ch);
                // A write that fills a hole between extents merges them: the tree may shrink and
                // free a tree block (no data).
                r.give(&ch, &BTreeSet::new());
                let file = r.files.get_mut(&ino).unwrap();
                for m in &ch.mapped {
                    for i in 0..m.len {
                        let p = m.physical.expect("an allocated block") + i;
                        match file.get(&(m.logical + i)) {
                            Some(&old) => assert_eq!(old, p, "a mapped block moved"),
                            None => {
                                assert!(r.used.contains(&p), "block {p} mapped but not allocated");
                                assert_eq!(r.owner.insert(p, ino), None, "block {p} owned twice");
                                file.insert(m.logical + i, p);
                            }
                        }
                    }
                }
            }
            Op::Truncate { f, keep_pct } => {
                let Some(ino) = pick(&r, f) else { continue };
                let keep = fs.size(ino).unwrap().div_ceil(BLOCK_SIZE) * keep_pct / 100;
                let ch = fs.truncate(ino, keep * BLOCK_SIZE).unwrap();
                let file = r.files.get_mut(&ino).unwrap();
                let gone: BTreeSet<u64> = file.split_off(&keep).into_values().collect();
                r.give(&ch, &gone);
            }
            Op::Unlink { f } => {
                let Some(ino) = pick(&r, f) else { continue };
                let ch = fs.unlink(ino).unwrap();
                let gone: BTreeSet<u64> = r.files.remove(&ino).unwrap().into_values().collect();
                r.give(&ch, &gone);
            }
            Op::Release { f } => {
                let Some(ino) = pick(&r, f) else { continue };
                let ch = fs.release(ino).unwrap();
                assert!(ch.freed.is_empty() && ch.allocated.is_empty() && ch.dirtied.is_empty());
            }
        }
        fs.check_invariants().unwrap();
        assert_eq!(fs.free_blocks(), capacity - r.used.len() as u64);
        for (&ino, file) in &r.files {
            let end = file.keys().next_back().map_or(1, |&l| l + 1);
            for m in fs.map(ino, 0, end).unwrap() {
                for i in 0..m.len {
                    assert_eq!(
                        file.get(&(m.logical + i)).copied(),
                        m.physical.map(|p| p + i),
                        "{ino:?} block {}",
                        m.logical + i
                    );
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// 64 MiB in 4 groups of 4096 blocks (1024 inodes each; journal: 1024 blocks, group 2).
    #[test]
    fn allocation_agrees_with_a_reference_of_owned_blocks(ops in proptest::collection::vec(op(80), 1..80)) {
        run(64 << 20, 4096, ops);
    }

    /// 16 MiB in 4 groups of 1024 blocks, about 2800 free: requests fail, runs are partial,
    /// preallocations are released to satisfy others.
    #[test]
    fn a_nearly_full_filesystem_agrees_with_the_reference(ops in proptest::collection::vec(op(400), 1..120)) {
        run(16 << 20, 1024, ops);
    }
}

#[test]
fn a_2_gib_layout_matches_what_mke2fs_made_for_the_kernel_captures() {
    // `tests/data/kernel/ext4/capture.txt` (mke2fs of e2fsprogs on a 2 GiB image, dumpe2fs -h and
    // debugfs): 524288 blocks of 4096, 32768 per group, 8192 inodes per group, flex groups of
    // 16, 255 reserved GDT blocks, and the journal (inode 8) at blocks 262144–278527 (16384
    // blocks: 64 MiB, in the middle group, 8 of 16).
    let fs = Fs::mkfs(2 * GIB, FsOptions::default()).unwrap();
    let l = fs.layout();
    assert_eq!((l.blocks, l.groups, l.inodes_per_group), (524288, 16, 8192));
    assert_eq!(l.reserved_gdt_blocks, 255);
    assert_eq!(fs.journal(), ext(262144, 16384));
    fs.check_invariants().unwrap();
}

proptest! {
    /// A directory's first block with room, found through its chunk maxima, is the first block
    /// a scan of every block finds, through adds (appending blocks as needed) and removes.
    #[test]
    fn a_directorys_first_block_with_room_is_the_scans(ops in proptest::collection::vec((0u8..4, 8u64..264), 1..3000)) {
        let mut d = super::inode::Dir::new();
        let mut live: Vec<(Ino, u64)> = Vec::new();
        for (i, (add, bytes)) in ops.into_iter().enumerate() {
            // Three adds to a remove: a few thousand entries span several chunks of blocks.
            if add > 0 || live.is_empty() {
                let want = d.free.iter().position(|&f| f >= bytes).map(|b| b as u64);
                let got = d.block_with_room(bytes);
                prop_assert_eq!(got, want);
                let block = got.unwrap_or(d.free.len() as u64);
                let ino = Ino(i as u32 + 100);
                d.add(ino, block, bytes);
                live.push((ino, bytes));
            } else {
                let (ino, _) = live.swap_remove(bytes as usize % live.len());
                d.remove(ino);
            }
            prop_assert!(d.check().is_ok(), "{:?}", d.check());
        }
    }
}
