#!/usr/bin/env bash
# Every GPU check and benchmark of the project, in parts that each fit one 10-minute device call.
# Usage (device tool, repo root, .whl carried): bash benchmarks/h100_all.sh tests|gemm|rest|speed|tn
set -u
source benchmarks/gpu_setup.sh >/dev/null || exit 1
export PYTHONWARNINGS=ignore COLUMNS=160 LAZYKERN_CACHE_DIR=${LAZYKERN_CACHE_DIR:-/tmp/lkc}
OUT=${OUT:-benchmarks/results}
case "${1:-}" in
tests)
  python3 -m pytest -q -m gpu tests/ -p no:cacheprovider -rfs 2>&1 | tee "$OUT/gpu-tests.log" | tail -25 ;;
gemm)
  python3 -m benchmarks.gemm --out "$OUT" 2>&1 | tee "$OUT/gemm.log" | tail -70 ;;
rest)
  python3 -m benchmarks.foundation --out "$OUT" 2>&1 | tail -14
  python3 benchmarks/launch_overhead.py --out "$OUT/launch-overhead.json" 2>&1 | tail -6
  python3 benchmarks/graph_replay.py --kernels 200 --reps 50 --out "$OUT/graph-replay.json" 2>&1 | tail -6
  python3 -m benchmarks.startup --out "$OUT" 2>&1 | tee "$OUT/startup.log" | tail -25
  D=$(mktemp -d)
  python3 -m lazykern.cli --cache-dir "$D" demo > "$OUT/demo-cold.log" 2>&1
  python3 -m lazykern.cli --cache-dir "$D" demo 2>&1 | tee "$OUT/demo-warm.log" | tail -30 ;;
speed)
  python3 benchmarks/tropical_launch.py --out "$OUT" 2>&1 | tail -40
  python3 benchmarks/launch_overhead.py --out "$OUT/launch-overhead.json" 2>&1 | tail -8 ;;
tn)
  python3 benchmarks/spin_glass.py --only energy chimera degeneracy --out "$OUT/spin-glass.json" 2>&1 | tail -30
  python3 benchmarks/counting_routes.py --out "$OUT/counting-routes.json" 2>&1 | tail -4 ;;
*) echo "usage: $0 tests|gemm|rest|speed|tn"; exit 2 ;;
esac
