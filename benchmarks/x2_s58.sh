#!/usr/bin/env bash
# Session 58's call on two GPUs of one host (device tool, repo root, .whl carried), issue 45, in one call:
#  (in this order: 3, 4, 2, 1)
#  1. the multi-GPU test selection in one pytest process each: 10 full runs at once, then 10 runs of the
#     selection without its three slow 4096^2 tests (the host RAM of 10 full runs at once is the limit);
#  2. the exit benchmark, 20 children, 10 at a time;
#  3. chimera 8x8x4 energy from a shuffled edge list, defaults, devices="all" (both H100s offered);
#  4. 32x32 energy and exact count, devices=[0] against devices="all" (benchmarks/spread_procs.py).
# Usage: OUT=$OUT bash benchmarks/x2_s58.sh
set -u
source benchmarks/gpu_setup.sh > "$OUT/setup.txt" 2>&1 || exit 1
tail -3 "$OUT/setup.txt"
export PYTHONWARNINGS=ignore
S=$(date +%s)
sel() {  # run index, extra pytest args
  local i=$1; shift
  LAZYKERN_CACHE_DIR=/tmp/lkc-sel-$i timeout 300 python3 -X faulthandler -m pytest -q -rf -m gpu -p no:cacheprovider \
      "$@" tests/test_multigpu_devices.py tests/test_multigpu.py > /tmp/sel-$i.log 2>&1
  echo "run $i rc $? ($(( $(date +%s) - S )) s): $(tail -n 1 /tmp/sel-$i.log)" >> "$OUT/selection.txt"
}
LAZYKERN_CACHE_DIR=/tmp/lkc-chimera timeout 90 python3 - <<'PY' 2>&1 | grep -v -i warn | tee "$OUT/chimera.txt"
import time
from benchmarks.spin_glass import edge_list_instance
from lazykern.launch import _device
from lazykern.tn import networks as nw
sg = edge_list_instance(["chimera", 8, 8, 4], shuffle=True, positions=False)
t = time.perf_counter()
e = nw.ground_state_energy(sg, module="cupy", devices="all")
print(f"chimera 8x8x4 shuffled edge list, devices='all' ({_device.count()} GPUs): E0 = {e}, {time.perf_counter() - t:.1f} s")
PY
echo "chimera at $(( $(date +%s) - S )) s"
LAZYKERN_CACHE_DIR=/tmp/lkc-spread timeout 170 python3 benchmarks/spread_procs.py --repeats 2 --out "$OUT/spread.json" \
    > "$OUT/spread.log" 2>&1
echo "spread rc $? at $(( $(date +%s) - S )) s"
python3 - "$OUT/spread.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k, v in d.items():
    if k not in ("rows",):
        print(k, str(v)[:300])
for r in d.get("rows", []):
    print({a: b for a, b in r.items() if not isinstance(b, (list, dict))})
PY
LAZYKERN_CACHE_DIR=/tmp/lkc-exit timeout 150 python3 benchmarks/multigpu_exit.py --repeat 20 --parallel 10 \
    --out "$OUT/multigpu-exit-20.json" > "$OUT/exit.log" 2>&1
echo "exit benchmark rc $? at $(( $(date +%s) - S )) s"; tail -n 4 "$OUT/exit.log"
for i in $(seq 1 10); do sel "$i" & done; wait
for i in $(seq 11 20); do sel "$i" -k "not 4096" & done; wait
for i in $(seq 1 20); do
  grep -l -i -E "double free|corrupted|Segmentation|Fatal Python|Aborted" /tmp/sel-$i.log >> "$OUT/selection.txt" 2>/dev/null
  grep -E "^FAILED" /tmp/sel-$i.log | sed "s/^/run $i /" >> "$OUT/selection.txt"
done
cp /tmp/sel-1.log /tmp/sel-11.log "$OUT/"
cat "$OUT/selection.txt"; echo "selection done at $(( $(date +%s) - S )) s"
