#!/usr/bin/env bash
# Times the metadata system calls on a real ext4, for `[kernel.calls]` (docs/MODEL.md §3c, "The
# metadata calls' CPU time"): a C program makes 2,000 calls of each kind (create, close, open,
# close, stat, unlink, mkdir, stat of a directory, rmdir), each timed with clock_gettime, on a
# freshly made ext4 (mke2fs defaults) over a 2 GiB loop device, and prints the mean per call in
# ns, one line per run. Needs root, a loop device, a C compiler and e2fsprogs.
#
# Usage: scripts/time-ext4-calls.sh [RUNS] [IMAGE_DIR]   (default 5 runs; the image in /tmp)
set -euo pipefail

runs=${1:-5}
imgdir=${2:-/tmp}
[ "$(id -u)" -eq 0 ] || { echo "time-ext4-calls.sh: needs root (loop devices, mount)" >&2; exit 2; }
for t in cc mkfs.ext4 losetup; do
    command -v "$t" >/dev/null || { echo "time-ext4-calls.sh: $t is missing" >&2; exit 2; }
done
work=$(mktemp -d /tmp/flashmux-calls.XXXXXX)
img="$imgdir/flashmux-calls.img"
dev=""
cleanup() {
    mountpoint -q "$work/mnt" 2>/dev/null && umount "$work/mnt"
    [ -n "$dev" ] && losetup -d "$dev" 2>/dev/null || true
    rm -rf "$work" "$img"
}
trap cleanup EXIT

cat > "$work/calls.c" <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
static long long now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
#define TIME(acc, call) do { long long t0 = now(); call; acc += now() - t0; } while (0)
int main(void) {
    enum { N = 2000 };
    static int fd[N];
    char p[32], buf[4096];
    struct stat st;
    long long create = 0, close_w = 0, open_ = 0, close_ = 0, stat_ = 0, unlink_ = 0, mkdir_ = 0, statdir = 0, rmdir_ = 0;
    memset(buf, 1, sizeof buf);
    if (mkdir("d", 0700) || chdir("d")) return 1;
    for (int i = 0; i < N; i++) {
        sprintf(p, "f%d", i);
        TIME(create, fd[i] = open(p, O_CREAT | O_RDWR | O_EXCL, 0600));
        if (fd[i] < 0 || write(fd[i], buf, sizeof buf) != sizeof buf) return 1;
        TIME(close_w, close(fd[i]));
    }
    for (int i = 0; i < N; i++) { sprintf(p, "f%d", i); TIME(open_, fd[i] = open(p, O_RDWR)); TIME(close_, close(fd[i])); }
    for (int i = 0; i < N; i++) { sprintf(p, "f%d", i); TIME(stat_, stat(p, &st)); }
    for (int i = 0; i < N; i++) { sprintf(p, "f%d", i); TIME(unlink_, unlink(p)); }
    for (int i = 0; i < N; i++) { sprintf(p, "g%d", i); TIME(mkdir_, mkdir(p, 0700)); }
    for (int i = 0; i < N; i++) { sprintf(p, "g%d", i); TIME(statdir, stat(p, &st)); }
    for (int i = 0; i < N; i++) { sprintf(p, "g%d", i); TIME(rmdir_, rmdir(p)); }
    printf("create %lld close-after-write %lld open %lld close %lld stat %lld unlink-4k %lld mkdir %lld stat-dir %lld rmdir %lld\n",
           create / N, close_w / N, open_ / N, close_ / N, stat_ / N, unlink_ / N, mkdir_ / N, statdir / N, rmdir_ / N);
    return 0;
}
C
cc -O2 -o "$work/calls" "$work/calls.c"
truncate -s 2G "$img"
dev=$(losetup -f --show "$img")
mkfs.ext4 -q "$dev"
mkdir "$work/mnt"
mount "$dev" "$work/mnt"
echo "# $(uname -r), ext4 (mke2fs defaults) on a 2 GiB loop device; mean ns per call"
for _ in $(seq "$runs"); do
    (cd "$work/mnt" && "$work/calls" && rm -rf d)
done
