#!/usr/bin/env bash
# Session 53's closing GPU run on merged main (device tool, repo root, .whl carried): one call under 10 minutes.
# Usage: OUT=$OUT bash benchmarks/h100_s53.sh [suite] [split] [gtn]   (default: all three)
set -u
source benchmarks/gpu_setup.sh > "$OUT/setup.txt" 2>&1 || exit 1
cat "$OUT/setup.txt" | tail -3
export PYTHONWARNINGS=ignore COLUMNS=160 LAZYKERN_CACHE_DIR=${LAZYKERN_CACHE_DIR:-/tmp/lkc}
PARTS="${*:-suite split gtn}"
S=$(date +%s)
for part in $PARTS; do
case "$part" in
suite)
  timeout 230 python3 -m pytest -q -m gpu tests/ -n 8 -p no:cacheprovider -rf 2>&1 > "$OUT/gpu-tests.log"
  grep -E "^FAILED|^ERROR|passed|failed" "$OUT/gpu-tests.log" | tail -30; echo "suite done at $(( $(date +%s) - S )) s" ;;
split)
  timeout 200 python3 benchmarks/tn_scale_split.py --out "$OUT/tn-scale-split.json" --row-seconds 45 --chimera-seconds 50 \
      > "$OUT/split.log" 2>&1
  echo "split rc $? at $(( $(date +%s) - S )) s"
  python3 - "$OUT/tn-scale-split.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    passes = [(p.get("residues"), p.get("seconds")) for p in r.get("passes", [])]
    print(r["row"], r.get("seconds"), r.get("answer"), "compile", r.get("compile_seconds"), "passes", passes[:8],
          (r.get("error") or "")[-300:])
PY
  ;;
gtn)
  timeout 170 python3 benchmarks/gtn.py --out "$OUT/gtn.json" --row-seconds 25 \
      --only ${GTN_ROWS:-sizemax_n100,countingmax2_n100,polynomial_n100,sizemax_n150,countingmax2_n150,sizemax_n200,countingmax2_n200} \
      > "$OUT/gtn.log" 2>&1
  echo "gtn rc $? at $(( $(date +%s) - S )) s"; grep -v -i warn "$OUT/gtn.log" | cut -c1-240 | tail -30 ;;
x2)  # on two GPUs, most needed first: the k-best split's GPU tests, GTN n=200, chimera over devices="all", spread tests
  timeout 70 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_tn_algebras.py tests/test_tn_memory.py \
      > "$OUT/x2-tests.log" 2>&1; tail -n 3 "$OUT/x2-tests.log"; echo "tests at $(( $(date +%s) - S )) s"
  timeout 90 python3 benchmarks/gtn.py --out "$OUT/gtn-x2.json" --row-seconds 40 --only sizemax_n200,countingmax2_n200 \
      > "$OUT/gtn-x2.log" 2>&1
  python3 - "$OUT/gtn-x2.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for name, r in d["results"].items():
    print(name, "first", r.get("first"), "again", r.get("again"), "result", str(r.get("result"))[:60], r.get("error", ""))
PY
  echo "gtn at $(( $(date +%s) - S )) s"
  LAZYKERN_CACHE_DIR=/tmp/lkc-chimera timeout 70 python3 - <<'PY' 2>&1 | grep -v -i warn | tee "$OUT/chimera-all.txt"
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
  timeout 60 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_tropical_spread.py tests/test_tn_arena.py \
      -k "two_gpus or devices_all or every_gpu" > "$OUT/x2-spread.log" 2>&1; tail -n 3 "$OUT/x2-spread.log" ;;
*) echo "unknown part $part"; exit 2 ;;
esac
done
