#!/usr/bin/env bash
# Session 58's closing GPU call on merged main (device tool, repo root, .whl carried), on two GPUs of one host
# where lent. Parts, most needed first:
#   order  the multi-GPU selection in one pytest process each, 20 at once (-k "not 4096": 20 full runs at once
#          need more host RAM than the machine has); the exit benchmark, 20 children; the LocalCUDACluster tests
#   split  benchmarks/tn_scale_split.py: 32x32 energy (empty store, plan stored), configuration, count (twice)
#   gtn    benchmarks/gtn.py rows of $GTN_ROWS
#   suite  the whole GPU suite, pytest -n 8
# Usage: OUT=$OUT [GTN_ROWS=a,b] bash benchmarks/final_s58.sh [parts...]
set -u
source benchmarks/gpu_setup.sh > "$OUT/setup.txt" 2>&1 || exit 1
tail -3 "$OUT/setup.txt"
export PYTHONWARNINGS=ignore COLUMNS=160 LAZYKERN_CACHE_DIR=${LAZYKERN_CACHE_DIR:-/tmp/lkc}
S=$(date +%s)
for part in ${*:-order split gtn suite}; do
case "$part" in
order)
  for i in $(seq 1 20); do
    (LAZYKERN_CACHE_DIR=/tmp/lkc-sel-$i timeout 150 python3 -X faulthandler -m pytest -q -rf -m gpu -p no:cacheprovider \
        -k "not 4096" tests/test_multigpu_devices.py tests/test_multigpu.py > /tmp/sel-$i.log 2>&1
     echo "run $i rc $? ($(( $(date +%s) - S )) s): $(tail -n 1 /tmp/sel-$i.log)" >> "$OUT/selection.txt") &
  done
  wait
  for i in $(seq 1 20); do
    grep -l -i -E "double free|corrupted|Segmentation|Fatal Python|Aborted" /tmp/sel-$i.log >> "$OUT/selection.txt" 2>/dev/null
    grep -E "^FAILED" /tmp/sel-$i.log | sed "s/^/run $i /" >> "$OUT/selection.txt"
  done
  cp /tmp/sel-1.log "$OUT/selection-1.log"; cat "$OUT/selection.txt"; echo "selection at $(( $(date +%s) - S )) s"
  LAZYKERN_CACHE_DIR=/tmp/lkc-exit timeout 120 python3 benchmarks/multigpu_exit.py --repeat 20 --parallel 10 \
      --out "$OUT/multigpu-exit-20.json" > "$OUT/exit.log" 2>&1
  echo "exit benchmark rc $? at $(( $(date +%s) - S )) s"; tail -n 2 "$OUT/exit.log"
  timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests/test_dask.py tests/test_dask_slices.py \
      -k "local_cuda_cluster" > "$OUT/dask-cuda.log" 2>&1; echo "dask-cuda rc $?"; tail -n 4 "$OUT/dask-cuda.log" ;;
split)
  timeout 240 python3 benchmarks/tn_scale_split.py --out "$OUT/tn-scale-split.json" --row-seconds 45 \
      --rows energy configuration degeneracy degeneracy-again > "$OUT/split.log" 2>&1
  echo "split rc $? at $(( $(date +%s) - S )) s"
  python3 - "$OUT/tn-scale-split.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    passes = [(p.get("residues"), p.get("seconds")) for p in r.get("passes", [])]
    print(r["row"], r.get("seconds"), str(r.get("answer"))[:80], "compile", r.get("compile_seconds"), "passes",
          passes[:8], (r.get("error") or "")[-300:])
PY
  ;;
gtn)
  timeout 200 python3 benchmarks/gtn.py --out "$OUT/gtn.json" --row-seconds 30 \
      --only ${GTN_ROWS:-sizemax_n100,countingmax2_n100,polynomial_n100,sizemax_n150,countingmax2_n150,polynomial_n150} \
      > "$OUT/gtn.log" 2>&1
  echo "gtn rc $? at $(( $(date +%s) - S )) s"
  python3 - "$OUT/gtn.json" <<'PY'
import json, sys
for k, v in json.load(open(sys.argv[1])).get("verdict", {}).items():
    print(k, v)
PY
  ;;
suite)
  timeout ${SUITE_SECONDS:-230} python3 -m pytest -q -m gpu tests/ -n 8 -p no:cacheprovider -rf > "$OUT/gpu-tests.log" 2>&1
  grep -E "^FAILED|^ERROR|passed|failed" "$OUT/gpu-tests.log" | tail -30; echo "suite at $(( $(date +%s) - S )) s" ;;
split2)  # energy and count only
  timeout 100 python3 benchmarks/tn_scale_split.py --out "$OUT/tn-scale-split.json" --row-seconds 40 \
      --rows energy degeneracy degeneracy-again > "$OUT/split.log" 2>&1
  echo "split rc $? at $(( $(date +%s) - S )) s"
  python3 - "$OUT/tn-scale-split.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    passes = [(p.get("residues"), p.get("seconds")) for p in r.get("passes", [])]
    print(r["row"], r.get("seconds"), str(r.get("answer"))[:80], "outside", r.get("outside_passes_seconds"), "passes",
          passes[:8], (r.get("error") or "")[-300:])
PY
  ;;
config)  # the branch config-fast, copied to .gpu/config-fast, measured unmerged (energy then configuration)
  (cd .gpu/config-fast && PYTHONPATH=/tmp/site:$PWD timeout ${CONFIG_SECONDS:-90} python3 benchmarks/config_split.py \
      --out "$OUT/config.json" --tree new=. --repeats 1 --row-seconds 60 > "$OUT/config.log" 2>&1)
  echo "config rc $? at $(( $(date +%s) - S )) s"; grep -v -i warn "$OUT/config.log" | cut -c1-300 | tail -12 ;;
*) echo "unknown part $part"; exit 2 ;;
esac
done
