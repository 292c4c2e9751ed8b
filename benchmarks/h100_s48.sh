#!/usr/bin/env bash
# Session 48's closing GPU run (device tool, repo root, .whl carried): one call under 10 minutes.
# Usage: OUT=$OUT bash benchmarks/h100_s48.sh final
set -u
source benchmarks/gpu_setup.sh > "$OUT/setup.txt" 2>&1 || exit 1
export PYTHONWARNINGS=ignore COLUMNS=160 LAZYKERN_CACHE_DIR=${LAZYKERN_CACHE_DIR:-/tmp/lkc}
case "${1:-}" in
final)
  S=$(date +%s)
  timeout 240 python3 -m pytest -q -m gpu tests/ -n 8 -p no:cacheprovider -rf 2>&1 > "$OUT/gpu-tests.log"
  grep -E "^FAILED|^ERROR|passed|failed" "$OUT/gpu-tests.log" | tail -30; echo "suite done at $(( $(date +%s) - S )) s"
  timeout 150 python3 -m benchmarks.startup_table --repeats 7 --out "$OUT" > "$OUT/startup-table.log" 2>&1
  grep -E "ready|cold|launch|first" "$OUT/startup-table.log" | tail -16; echo "startup table done at $(( $(date +%s) - S )) s"
  timeout 170 python3 benchmarks/gtn.py --out "$OUT/gtn.json" --row-seconds 25 \
      --only sizemax_n100,countingmax2_n100,sizemax_n150,countingmax2_n150,sizemax_n200,countingmax2_n200,polynomial_n100,configsmax1_n100,kings_sizemax,kings_countingmax1 \
      > "$OUT/gtn.log" 2>&1
  echo "gtn rc $? at $(( $(date +%s) - S )) s"; grep -v -i warn "$OUT/gtn.log" | cut -c1-240 | tail -40 ;;
*) echo "usage: $0 final"; exit 2 ;;
esac
