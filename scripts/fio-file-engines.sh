#!/usr/bin/env bash
# Runs fio's file and directory operation engines (filecreate, filestat, filedelete, dircreate,
# dirstat, dirdelete) on a real ext4 and the same jobs through flashmux, side by side
# (docs/EXPERIMENTS.md, "fio's file operation engines"): one job of NR files (default 2,000) of
# 4 KiB per engine, on a freshly made ext4 (mke2fs defaults) over a 2 GiB loop device, RUNS
# times (default 5). Prints per engine the medians of fio's completion latency (the call's time)
# and of the time per file (the job's runtime over its files), real and modelled.
# Needs root, a loop device, e2fsprogs, python3 and fio (FIO=path to pick one; an fio without
# the dir* engines, such as Debian 12's 3.33, runs the file* ones only). FLASHMUX=path to the
# flashmux binary (default: target/release/flashmux, built if missing).
#
# Usage: scripts/fio-file-engines.sh [RUNS] [NR]
set -euo pipefail

runs=${1:-5}
nr=${2:-2000}
fio=${FIO:-fio}
root=$(cd "$(dirname "$0")/.." && pwd)
flashmux=${FLASHMUX:-$root/target/release/flashmux}
[ "$(id -u)" -eq 0 ] || { echo "fio-file-engines.sh: needs root (loop devices, mount)" >&2; exit 2; }
for t in "$fio" mkfs.ext4 losetup python3; do
    command -v "$t" >/dev/null || { echo "fio-file-engines.sh: $t is missing" >&2; exit 2; }
done
[ -x "$flashmux" ] || (cd "$root" && cargo build --release --locked -q)
work=$(mktemp -d /tmp/flashmux-engines.XXXXXX)
dev=""
cleanup() {
    mountpoint -q "$work/mnt" 2>/dev/null && umount "$work/mnt"
    [ -n "$dev" ] && losetup -d "$dev" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# One job per engine, as fio's examples/<engine>-ioengine.fio set them (create_on_open and
# openfiles=1 for the creating engines), with one job and NR files.
job() {
    local engine=$1
    printf '[global]\ndirectory=${DIR}\nioengine=%s\nfilesize=4k\nnrfiles=%s\nunlink=0\n' "$engine" "$nr"
    case $engine in
        filecreate|dircreate) printf 'create_on_open=1\nopenfiles=1\nfallocate=none\n' ;;
    esac
    printf '[t0]\n'
}

# Median clat (ns) and time per file (us) of fio's JSON output: "clat per_file".
summary() {
    python3 - "$@" <<'PY'
import json, statistics, sys
clat, per_file = [], []
for path in sys.argv[1:]:
    j = json.load(open(path))["jobs"][0]
    d = j["read"] if j["read"]["total_ios"] else j["write"]
    clat.append(d["clat_ns"]["mean"])
    per_file.append(j["job_runtime"] * 1000.0 / d["total_ios"] if "job_runtime" in j else d["runtime"] * 1000.0 / d["total_ios"])
print(f"{statistics.median(clat):.0f} {statistics.median(per_file):.1f}")
PY
}

truncate -s 2G "$work/img"
dev=$(losetup -f --show "$work/img")
mkdir -p "$work/mnt"
printf '%-11s %14s %14s %7s %18s %18s\n' engine "real clat ns" "model clat ns" "err %" "real us/file" "model us/file"
for engine in filecreate filestat filedelete dircreate dirstat dirdelete; do
    if ! "$fio" --enghelp 2>&1 | grep -qw "$engine"; then
        printf '%-11s %s\n' "$engine" "(this fio has no such engine)"
        continue
    fi
    job "$engine" > "$work/$engine.fio"
    outs=()
    for r in $(seq "$runs"); do
        mountpoint -q "$work/mnt" && umount "$work/mnt"
        mkfs.ext4 -q -F "$dev"
        mount "$dev" "$work/mnt"
        DIR="$work/mnt" "$fio" --output-format=json --output="$work/$engine.$r.json" "$work/$engine.fio" >/dev/null
        outs+=("$work/$engine.$r.json")
    done
    read -r real_clat real_file <<<"$(summary "${outs[@]}")"
    DIR=/ "$flashmux" run --fio "$work/$engine.fio" -o "$work/model-$engine" >/dev/null 2>&1
    read -r model_clat model_file <<<"$(summary "$work/model-$engine/results.json")"
    err=$(python3 -c "print(f'{($model_clat - $real_clat) / $real_clat * 100:+.0f}')")
    printf '%-11s %14s %14s %7s %18s %18s\n' "$engine" "$real_clat" "$model_clat" "$err" "$real_file" "$model_file"
done
