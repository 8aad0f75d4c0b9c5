#!/usr/bin/env bash
# flashmux serve's benchmarks (docs/PERFORMANCE.md, docs/EXPERIMENTS.md):
#  1. the server's own ceiling: `--timing off` against `nbdkit memory`, 4 KiB random reads
#     through fio's nbd engine over a Unix socket at iodepth 32, interleaved runs;
#  2. IOPS against fio numjobs 1..8 (each job its own connection) for both thread layouts,
#     4 KiB random read and write at iodepth 32, with the model's timing on an aged drive.
# Needs fio, nbdkit and a release build (cargo build --release). Usage: bench/serve.sh [runtime_s]
set -euo pipefail
cd "$(dirname "$0")/.."
FM=${FM:-target/release/flashmux}
T=${1:-5}
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT

wait_for() { for _ in $(seq 600); do [ -S "$1" ] && return 0; sleep 0.1; done; echo "no socket $1" >&2; exit 1; }
iops() { # uri rw numjobs -> total IOPS
    fio --name=b --ioengine=nbd --uri="$1" --rw="$2" --bs=4k --iodepth=32 --numjobs="$3" \
        --size=1g --offset_increment=1g --runtime="$T" --time_based --group_reporting \
        --output-format=json 2>/dev/null |
        sed -n '/^{/,$p' | python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]; d='$2'.replace('rand',''); print(round(j[d]['iops']))"
}

echo "## 1. --timing off vs nbdkit memory (4 KiB randread, QD 32, one connection)"
nbdkit -f -U "$dir/nk.sock" memory 16G & pids+=($!)
"$FM" serve --socket "$dir/fm.sock" -o "$dir/out-off" --stats-interval 0 --timing off >/dev/null 2>"$dir/off.log" & pids+=($!)
wait_for "$dir/nk.sock"; wait_for "$dir/fm.sock"
echo "| run | nbdkit memory | flashmux --timing off | ratio |"
echo "|---|---|---|---|"
ratios=()
for r in 1 2 3 4 5; do
    a=$(iops "nbd+unix:///?socket=$dir/nk.sock" randread 1)
    b=$(iops "nbd+unix:///ssd?socket=$dir/fm.sock" randread 1)
    ratios+=("$(python3 -c "print(f'{$b/$a:.2f}')")")
    echo "| $r | $a | $b | ${ratios[-1]} |"
done
echo "median ratio: $(printf '%s\n' "${ratios[@]}" | sort -n | sed -n 3p) (target ≥ 0.80)"
kill "${pids[@]}"; wait 2>/dev/null || true; pids=()

echo
echo "## 2. IOPS vs numjobs, timing on, aged 16 GiB tlc-nvme"
echo "| io-threads | workload | 1 | 2 | 4 | 8 |"
echo "|---|---|---|---|---|---|"
for mode in per-connection single; do
    rm -f "$dir/fm.sock"
    "$FM" serve --socket "$dir/fm.sock" -o "$dir/out-$mode" --stats-interval 0 --precondition aged --io-threads "$mode" >/dev/null 2>"$dir/$mode.log" & pids+=($!)
    wait_for "$dir/fm.sock"
    for rw in randread randwrite; do
        row="| $mode | $rw"
        for n in 1 2 4 8; do row="$row | $(iops "nbd+unix:///ssd?socket=$dir/fm.sock" $rw $n)"; done
        echo "$row |"
    done
    kill "${pids[@]}"; wait 2>/dev/null || true; pids=()
    grep "served" "$dir/$mode.log" | sed 's/^/    /'
done

echo
echo "## 3. Timing error (reply time − model completion time) at moderate loads, aged drive"
echo "| load | fio clat mean | served p50 | p99 | max |"
echo "|---|---|---|---|---|"
for load in "1 1000" "1 5000" "4 20000"; do
    set -- $load
    rm -f "$dir/fm.sock"
    "$FM" serve --socket "$dir/fm.sock" -o "$dir/out-t" --stats-interval 0 --precondition aged >/dev/null 2>"$dir/t.log" & pids+=($!)
    wait_for "$dir/fm.sock"
    clat=$(fio --name=t --ioengine=nbd --uri="nbd+unix:///ssd?socket=$dir/fm.sock" --rw=randread --bs=4k \
        --iodepth="$1" --rate_iops="$2" --size=1g --runtime="$T" --time_based --output-format=json 2>/dev/null |
        sed -n '/^{/,$p' | python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]; print(f\"{j['read']['clat_ns']['mean']/1e3:.1f} µs\")")
    kill "${pids[@]}"; wait 2>/dev/null || true; pids=()
    python3 - "$dir/out-t/results.json" "$1" "$2" "$clat" <<'PY'
import json, sys
q = json.load(open(sys.argv[1]))["flashmux"]["serve"]["timing_error_ns"]
print(f"| QD {sys.argv[2]}, {sys.argv[3]} IOPS | {sys.argv[4]} | {q['p50']/1e3:.1f} µs | {q['p99']/1e3:.1f} µs | {q['max']/1e3:.1f} µs |")
PY
done
