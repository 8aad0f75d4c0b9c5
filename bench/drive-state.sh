#!/usr/bin/env bash
# Saved drives against aging in place (docs/PERFORMANCE.md, "Saved drives"): for each capacity,
# `flashmux age --save` once, then the same scenario run aging its drive and run loading the
# saved one (three times each way; the file's first read may come from disk), wall time and
# peak memory, and a check that both give the same results.json.
# Needs a release build (cargo build --release) and, for 1 TiB, ~3 GiB of memory and disk.
# Usage: bench/drive-state.sh [capacity ...]   (default: 64GiB 1TiB)
set -euo pipefail
cd "$(dirname "$0")/.."
FM=$PWD/${FM:-target/release/flashmux}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
caps=("$@")
[ ${#caps[@]} -gt 0 ] || caps=(64GiB 1TiB)
for cap in "${caps[@]}"; do
    cat > "$dir/$cap.toml" <<EOT
name = "drive-state-bench"
[device]
preset = "tlc-nvme"
capacity = "$cap"
[precondition]
state = "aged"
[stop]
requests = 1000
[[tenant]]
name = "t"
fio = """
[w]
rw=randwrite
bs=4k
iodepth=32
direct=1
norandommap
"""
EOT
    sed 's/^\[precondition\]$/[precondition]\nstate_file = "drive.fmstate"/' "$dir/$cap.toml" > "$dir/$cap-loaded.toml"
    echo "== $cap"
    /usr/bin/time -f "age --save: %e s wall, %M KB peak" "$FM" age "$dir/$cap.toml" --save "$dir/drive.fmstate" | grep saved
    ls -l "$dir/drive.fmstate" | awk '{printf "state file: %.1f MB\n", $5 / 1e6}'
    for i in 1 2 3; do
        /usr/bin/time -f "run, aging in place: %e s wall, %M KB peak" "$FM" run "$dir/$cap.toml" -o "$dir/a" --no-progress > /dev/null
    done
    for i in 1 2 3; do
        /usr/bin/time -f "run, loading the saved drive: %e s wall, %M KB peak" "$FM" run "$dir/$cap-loaded.toml" -o "$dir/b" --no-progress > /dev/null
    done
    cmp "$dir/a/results.json" "$dir/b/results.json" && echo "results.json identical"
    rm -f "$dir/drive.fmstate"
done
