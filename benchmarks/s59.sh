#!/usr/bin/env bash
# Session 59's GPU calls (device tool, repo root, .whl carried), one GPU. Parts:
#   suite   the whole GPU suite, pytest -n 8, failures listed (-rf)
#   fresh   benchmarks/gtn_fresh.py: CountingMax(2) n = 150 in a fresh process, after the GEMM, after a sleep
#   split   benchmarks/tn_scale_split.py: 32x32 energy (empty store, plan stored), configuration, count (twice)
#   config  benchmarks/config_split.py on this tree: the energy then one configuration
#   gtn     benchmarks/gtn.py rows of $GTN_ROWS (default: every row)
#   latency the 8 x 8 energy in fresh processes with a warm store (spin_glass.py defaults latency)
#   ab      the rows $AB_ROWS on each tree of $AB_TREES (name=path) in turn: A/B in one machine
#   gtnbase the rows $BASE_ROWS on .gpu/base (the tree before the session's changes), A/B in one run
#   abenergy the 32x32 energy rows of tn_scale_split.py on each tree of $AB_TREES, in turn
#   tests   pytest -m gpu over the files of $GPU_TESTS (session 60: the tiled permute's)
#   permute benchmarks/permute_bench.py: plain against tiled bit-permutation copies, CuPy's, and memcpy
# .whl must hold pymatching (tests/test_tropical_instance.py needs it; the image lacks it) beside numpy 2.4.6 etc.
# Usage: OUT=$OUT [SUITE_SECONDS=230] [GTN_ROWS=a,b] [ROW_SECONDS=40] [REPEATS=5] bash benchmarks/s59.sh [parts...]
set -u
source benchmarks/gpu_setup.sh > "$OUT/setup.txt" 2>&1 || exit 1
tail -3 "$OUT/setup.txt"
export PYTHONWARNINGS=ignore COLUMNS=160 LAZYKERN_CACHE_DIR=${LAZYKERN_CACHE_DIR:-/tmp/lkc}
S=$(date +%s)
for part in ${*:-suite fresh split config}; do
case "$part" in
suite)
  timeout ${SUITE_SECONDS:-230} python3 -m pytest -q -m gpu tests/ -n 8 -p no:cacheprovider -rf > "$OUT/gpu-tests.log" 2>&1
  grep -E "^FAILED|^ERROR|passed|failed" "$OUT/gpu-tests.log" | cut -c1-400 | tail -30; echo "suite at $(( $(date +%s) - S )) s" ;;
fresh)
  timeout 90 python3 benchmarks/gtn_fresh.py --out "$OUT/gtn-fresh.json" > "$OUT/gtn-fresh.log" 2>&1
  echo "fresh rc $? at $(( $(date +%s) - S )) s"; tail -c 1500 "$OUT/gtn-fresh.log" ;;
split)
  timeout ${SPLIT_SECONDS:-200} python3 benchmarks/tn_scale_split.py --out "$OUT/tn-scale-split.json" --row-seconds 45 \
      --rows ${SPLIT_ROWS:-energy configuration degeneracy degeneracy-again} > "$OUT/split.log" 2>&1
  echo "split rc $? at $(( $(date +%s) - S )) s"
  python3 - "$OUT/tn-scale-split.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    passes = [(p.get("residues"), p.get("seconds")) for p in r.get("passes", [])]
    print(r["row"], r.get("seconds"), str(r.get("answer"))[:80], "outside", r.get("outside_passes_seconds"), "passes",
          passes[:8], (r.get("error") or "")[-300:])
PY
  ;;
config)
  timeout ${CONFIG_SECONDS:-90} python3 benchmarks/config_split.py --out "$OUT/config.json" --tree main=. --repeats 1 \
      --row-seconds 70 > "$OUT/config.log" 2>&1
  echo "config rc $? at $(( $(date +%s) - S )) s"; grep -v -i warn "$OUT/config.log" | cut -c1-300 | tail -8
  python3 - "$OUT/config.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print({k: r.get(k) for k in ("mode", "energy_seconds", "configuration_seconds", "ratio", "exact", "error")})
PY
  ;;
gtn)
  timeout ${GTN_SECONDS:-300} python3 benchmarks/gtn.py --out "$OUT/gtn.json" --row-seconds ${ROW_SECONDS:-40} \
      --repeats ${REPEATS:-5} ${GTN_ROWS:+--only $GTN_ROWS} > "$OUT/gtn.log" 2>&1
  echo "gtn rc $? at $(( $(date +%s) - S )) s"
  python3 - "$OUT/gtn.json" <<'PY'
import json, sys
for k, v in json.load(open(sys.argv[1])).get("verdict", {}).items():
    print(k, str(v)[:300])
PY
  ;;
latency)  # the 8 x 8 energy in fresh processes, warm store
  timeout 120 python3 benchmarks/spin_glass.py --module cupy --only defaults --defaults-rows latency \
      --out "$OUT/latency.json" > "$OUT/latency.log" 2>&1
  echo "latency rc $? at $(( $(date +%s) - S )) s"; grep -i -E "latency|ms" "$OUT/latency.log" | tail -5 ;;
ab)  # the rows $AB_ROWS on each tree of $AB_TREES (name=path), in turn, in one machine
  for spec in ${AB_TREES:-base=.gpu/base new=.}; do
    name=${spec%%=*}; tree=${spec#*=}
    (cd "$tree" && PYTHONPATH=/tmp/site:$PWD timeout ${AB_SECONDS:-100} python3 benchmarks/gtn.py --out "$OUT/ab-$name.json" \
        --row-seconds ${ROW_SECONDS:-40} --repeats ${REPEATS:-5} --steps ${AB_STEPS:-sizemax_n200} --only $AB_ROWS \
        > "$OUT/ab-$name.log" 2>&1)
    echo "ab $name rc $? at $(( $(date +%s) - S )) s"
    python3 - "$OUT/ab-$name.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k, r in d["results"].items():
    print(sys.argv[2], k, r.get("again"), r.get("again_samples"), r.get("first"), r.get("error"), (r.get("steps") or {}).get("bulk"))
PY
  done ;;
gtnbase)  # the same rows on .gpu/base (a copy of the tree before this session), for A/B in one run
  (cd .gpu/base && PYTHONPATH=/tmp/site:$PWD timeout ${BASE_SECONDS:-120} python3 benchmarks/gtn.py \
      --out "$OUT/gtn-base.json" --row-seconds 40 ${BASE_ROWS:+--only $BASE_ROWS} > "$OUT/gtn-base.log" 2>&1)
  echo "gtnbase rc $? at $(( $(date +%s) - S )) s"
  python3 - "$OUT/gtn-base.json" <<'PY'
import json, sys
for k, v in json.load(open(sys.argv[1])).get("verdict", {}).items():
    print("base", k, str(v)[:300])
PY
  ;;
abenergy)  # the 32x32 energy (empty store, then plan stored) on each tree of $AB_TREES, in turn
  for spec in ${AB_TREES:-base=.gpu/base new=.}; do
    name=${spec%%=*}; tree=${spec#*=}
    (cd "$tree" && PYTHONPATH=/tmp/site:$PWD timeout ${AB_SECONDS:-100} python3 benchmarks/tn_scale_split.py \
        --out "$OUT/energy-$name.json" --row-seconds 45 --rows energy > "$OUT/energy-$name.log" 2>&1)
    echo "abenergy $name rc $? at $(( $(date +%s) - S )) s"
    python3 - "$OUT/energy-$name.json" "$name" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print(sys.argv[2], r["row"], r.get("seconds"), "outside", r.get("outside_passes_seconds"), "compile", r.get("compile_seconds"))
PY
  done ;;
tests)
  timeout ${TESTS_SECONDS:-120} python3 -m pytest -q -m gpu $GPU_TESTS -p no:cacheprovider -rf > "$OUT/gpu-tests.log" 2>&1
  grep -E "^FAILED|^ERROR|passed|failed" "$OUT/gpu-tests.log" | cut -c1-400 | tail -20; echo "tests at $(( $(date +%s) - S )) s" ;;
permute)
  timeout ${PERMUTE_SECONDS:-90} python3 benchmarks/permute_bench.py --out "$OUT/permute.json" > "$OUT/permute.log" 2>&1
  echo "permute rc $? at $(( $(date +%s) - S )) s"; cut -c1-600 "$OUT/permute.log" | tail -12 ;;
*) echo "unknown part $part"; exit 2 ;;
esac
done
