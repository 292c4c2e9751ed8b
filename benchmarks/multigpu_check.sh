#!/usr/bin/env bash
# Issue 45 on a machine of 2 GPUs (device tool, repo root, .whl carried), in one call:
#  1. the multi-GPU test selection in one pytest process each, N processes at once (exit code per run);
#  2. the widened exit benchmark, 20 children, 10 at a time;
#  3. chimera 8x8x4 energy from a shuffled edge list, defaults, module="cupy", devices="all" vs one GPU.
# Usage: bash benchmarks/multigpu_check.sh [N [W]]   (N runs of the selection, W at once; W defaults to N)
set -u
source benchmarks/gpu_setup.sh > "$OUT/setup.txt" 2>&1 || exit 1
export PYTHONWARNINGS=ignore
N=${1:-10}
W=${2:-$N}
S=$(date +%s)
for i in $(seq "$N"); do
  (LAZYKERN_CACHE_DIR=/tmp/lkc-sel-$i timeout 420 python3 -X faulthandler -m pytest -q -rf -m gpu -p no:cacheprovider \
      --durations=5 tests/test_multigpu_devices.py tests/test_multigpu.py > /tmp/sel-$i.log 2>&1
   echo "run $i rc $? ($(( $(date +%s) - S )) s): $(tail -n 1 /tmp/sel-$i.log)" >> "$OUT/selection.txt") &
  if (( i % W == 0 )); then wait; fi
done
wait
for i in $(seq "$N"); do
  grep -l -i -E "double free|corrupted|Segmentation|Fatal Python|Aborted" /tmp/sel-$i.log >> "$OUT/selection.txt" 2>/dev/null
  grep -E "^FAILED" /tmp/sel-$i.log | sed "s/^/run $i /" >> "$OUT/selection.txt"
  cp /tmp/sel-$i.log "$OUT/selection-$i.log"
done
cat "$OUT/selection.txt"
LAZYKERN_CACHE_DIR=/tmp/lkc-exit python3 benchmarks/multigpu_exit.py --repeat 20 --parallel 10 \
    --out "$OUT/multigpu-exit-20.json" > "$OUT/exit.log" 2>&1
echo "exit benchmark rc $?"; tail -n 5 "$OUT/exit.log"
for devices in all; do
  LAZYKERN_CACHE_DIR=/tmp/lkc-chimera timeout 120 python3 - "$devices" <<'PY' 2>&1 | grep -v -i warn | tee -a "$OUT/chimera.txt"
import sys, time
from benchmarks.spin_glass import edge_list_instance
from lazykern.tn import networks as nw
devices = "all" if sys.argv[1] == "all" else [int(sys.argv[1])]
sg = edge_list_instance(["chimera", 8, 8, 4], shuffle=True, positions=False)
t = time.perf_counter()
e = nw.ground_state_energy(sg, module="cupy", devices=devices)
print(f"chimera 8x8x4 shuffled edge list, devices={devices}: E0 = {e}, {time.perf_counter() - t:.1f} s end to end")
PY
done
