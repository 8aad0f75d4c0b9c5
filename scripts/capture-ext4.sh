#!/usr/bin/env bash
# Captures the block requests a real Linux kernel sends for file workloads on ext4, to check
# flashmux's guest-kernel model (page cache, filesystem, elevator) against (docs/EXPERIMENTS.md,
# "The guest kernel against a real one").
#
# Each workload runs on a freshly made ext4 (ordered data, online discard: paper E's mount) on a
# loop device over a sparse file; the kernel's ftrace `blk` tracer records the loop device's
# requests as blktrace records (docs/TRACES.md, "When blktrace is blocked"), which flashmux reads
# (`flashmux trace info OUT/<name>.blktrace.0`). Needs root, a loop device, tracefs, fio and
# e2fsprogs; nothing else on the machine should use the traced loop device.
#
# Usage: scripts/capture-ext4.sh OUTDIR [IMAGE_DIR]
#   OUTDIR     where <name>.blktrace.<cpu>.gz and capture.txt (kernel, settings, the
#              filesystem's layout) go
#   IMAGE_DIR  where the 2 GiB sparse image lives (default /tmp); it must support O_DIRECT
#
# The workloads (each after `sync; echo 3 > drop_caches`):
#   stream       one 128 MiB file written sequentially, 1 MiB buffered writes, then fsync
#   smallfiles   2,000 files of 8 KiB in 20 directories, sync; then all deleted, sync
#   append-fsync one file appended 4 KiB at a time with an fsync after each (1,024 appends)
#   randread-small  6,000 4 KiB buffered random reads of a 64 MiB file (fio's norandommap: blocks
#                   may repeat, so some can hit), the page cache held to
#                   16 MiB with fio's own memory (a memory cgroup)
#   randread-large  the file read once sequentially (read-ahead), then the same random reads,
#                   all cached
set -euo pipefail

out=${1:?usage: capture-ext4.sh OUTDIR [IMAGE_DIR]}
imgdir=${2:-/tmp}
[ "$(id -u)" -eq 0 ] || { echo "capture-ext4.sh: needs root (loop devices, mount, tracefs)" >&2; exit 2; }
for t in fio mkfs.ext4 dumpe2fs losetup python3; do
    command -v "$t" >/dev/null || { echo "capture-ext4.sh: $t is missing" >&2; exit 2; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
img="$imgdir/flashmux-capture.img"
mnt=$(mktemp -d /tmp/flashmux-capture-mnt.XXXXXX)
trace=/sys/kernel/tracing
mountpoint -q "$trace" || mount -t tracefs nodev "$trace"
grep -qw blk "$trace/available_tracers" || { echo "capture-ext4.sh: the kernel has no blk tracer" >&2; exit 2; }

dev=""
readers=()
cleanup() {
    echo 0 > "$trace/tracing_on" 2>/dev/null || true
    [ -n "$dev" ] && echo 0 > "/sys/block/${dev#/dev/}/trace/enable" 2>/dev/null || true
    for p in "${readers[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    echo nop > "$trace/current_tracer" 2>/dev/null || true
    mountpoint -q "$mnt" && umount "$mnt"
    [ -n "$dev" ] && losetup -d "$dev" 2>/dev/null || true
    rmdir "$mnt" 2>/dev/null || true
    rm -f "$img"
}
trap cleanup EXIT

# A fresh ext4 on a fresh loop device: lazy initialisation off, so that no background zeroing of
# inode tables or the journal mixes with the workload's requests.
fresh_fs() {
    mountpoint -q "$mnt" && umount "$mnt"
    [ -n "$dev" ] && losetup -d "$dev"
    rm -f "$img"
    truncate -s 2G "$img"
    dev=$(losetup --find --show --direct-io=on "$img")
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$dev"
    mount -o data=ordered,discard "$dev" "$mnt"
}

start_trace() {
    local name=$1 d=${dev#/dev/}
    sync
    echo 3 > /proc/sys/vm/drop_caches
    echo 0 > "$trace/tracing_on"
    echo blk > "$trace/current_tracer"
    echo 1 > "/sys/block/$d/trace/enable"
    echo bin > "$trace/trace_options"
    echo 1 > "$trace/tracing_on"
    readers=()
    for c in "$trace"/per_cpu/cpu*; do
        cat "$c/trace_pipe" > "$out/$name.raw.${c##*cpu}" &
        readers+=($!)
    done
}

# Stops tracing and turns each CPU's raw pipe into blktrace records (the 16-byte ftrace header
# before each record dropped), gzipped; empty CPUs are left out.
stop_trace() {
    local name=$1 d=${dev#/dev/}
    sync
    sleep 1
    echo 0 > "$trace/tracing_on"
    echo 0 > "/sys/block/$d/trace/enable"
    sleep 1
    # The readers have drained the buffers; the tracer can be changed only once they are gone.
    for p in "${readers[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    readers=()
    echo nop > "$trace/current_tracer"
    local n=0
    for raw in "$out/$name".raw.*; do
        local cpu=${raw##*.}
        python3 - "$raw" "$out/$name.blktrace.$n" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
out, o = bytearray(), 0
while o + 16 + 48 <= len(data):
    o += 16
    pdu = struct.unpack_from("=H", data, o + 46)[0]
    out += data[o:o + 48 + pdu]
    o += 48 + pdu
if out:
    open(sys.argv[2], "wb").write(out)
EOF
        rm -f "$raw"
        if [ -f "$out/$name.blktrace.$n" ]; then
            gzip -9 -f "$out/$name.blktrace.$n"
            n=$((n + 1))
        fi
    done
    echo "$name: $n CPU file(s)" >&2
}

{
    echo "kernel: $(uname -r)"
    echo "fio: $(fio --version)"
    echo "mkfs: mkfs.ext4 -E lazy_itable_init=0,lazy_journal_init=0; mount -o data=ordered,discard"
    echo "image: 2 GiB sparse file, losetup --direct-io=on"
} > "$out/capture.txt"

fresh_fs
d=${dev#/dev/}
{
    echo "loop scheduler: $(cat /sys/block/$d/queue/scheduler)"
    echo "max_sectors_kb: $(cat /sys/block/$d/queue/max_sectors_kb); nomerges: $(cat /sys/block/$d/queue/nomerges)"
    echo "read_ahead_kb: $(cat /sys/block/$d/queue/read_ahead_kb)"
    for k in dirty_background_ratio dirty_ratio dirty_expire_centisecs dirty_writeback_centisecs; do
        echo "vm.$k: $(cat /proc/sys/vm/$k)"
    done
    echo "layout (dumpe2fs -h):"
    dumpe2fs -h "$dev" 2>/dev/null | grep -E "^(Block count|Block size|Blocks per group|Inodes per group|Inode size|Journal size|Journal backup|Reserved GDT blocks|Flex block group size)"
    echo "journal inode (debugfs stat <8>, extents):"
    debugfs -R "stat <8>" "$dev" 2>/dev/null | grep -A2 EXTENTS | tail -n +2
} >> "$out/capture.txt"

start_trace stream
fio --name=stream --directory="$mnt" --rw=write --bs=1m --size=128m --end_fsync=1 --ioengine=psync >/dev/null
stop_trace stream

fresh_fs
start_trace smallfiles
for i in $(seq 0 19); do
    mkdir "$mnt/d$i"
    for j in $(seq 0 99); do head -c 8192 /dev/zero > "$mnt/d$i/f$j"; done
done
sync
rm -rf "$mnt"/d*
sync
stop_trace smallfiles

fresh_fs
start_trace append-fsync
fio --name=append --directory="$mnt" --filename=mbox --rw=write --bs=4k --size=4m --fsync=1 --ioengine=psync >/dev/null
stop_trace append-fsync

fresh_fs
fio --name=prep --directory="$mnt" --filename=data --rw=write --bs=1m --size=64m --end_fsync=1 >/dev/null
# The page cache held to 16 MiB: the reads run in a memory cgroup (v2, else v1) of that size.
cg=""
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    cg=/sys/fs/cgroup/flashmux-capture
    mkdir -p "$cg" && echo 16M > "$cg/memory.max"
elif [ -d /sys/fs/cgroup/memory ]; then
    cg=/sys/fs/cgroup/memory/flashmux-capture
    mkdir -p "$cg" && echo 16M > "$cg/memory.limit_in_bytes"
fi
[ -n "$cg" ] || { echo "capture-ext4.sh: no memory cgroup to hold the page cache small" >&2; exit 2; }
start_trace randread-small
sh -c "echo \$\$ > $cg/cgroup.procs; exec fio --name=rr --directory=$mnt --filename=data --rw=randread --bs=4k --size=64m --number_ios=6000 --randseed=7 --norandommap --ioengine=psync" >/dev/null
stop_trace randread-small
# What the cgroup held at the end: the page cache the reads actually had.
grep -E "^(total_)?(cache|rss|file|anon) " "$cg/memory.stat" | sed 's/^/randread-small cgroup memory.stat: /' >> "$out/capture.txt"
rmdir "$cg"
# start_trace drops the caches: the file is read once inside the trace, then the random reads
# (fio's invalidate=0 keeps it cached; by default fio drops a file's pages before a job).
start_trace randread-large
fio --name=warm --directory="$mnt" --filename=data --rw=read --bs=1m --size=64m >/dev/null
fio --name=rr --directory="$mnt" --filename=data --rw=randread --bs=4k --size=64m --number_ios=6000 --randseed=7 --norandommap --ioengine=psync --invalidate=0 >/dev/null
stop_trace randread-large

ls -l "$out" >&2
