#!/usr/bin/env bash
# This session's GPU runs (device tool, repo root, .whl carried), each part one call under 10 minutes.
# Usage: bash benchmarks/h100_s43.sh suite|tn|final
set -u
source benchmarks/gpu_setup.sh > "$OUT/setup.txt" 2>&1 || exit 1
export PYTHONWARNINGS=ignore COLUMNS=160 LAZYKERN_CACHE_DIR=${LAZYKERN_CACHE_DIR:-/tmp/lkc}
case "${1:-}" in
suite)
  timeout 260 python3 -m pytest -q -m gpu tests/ -n 8 -p no:cacheprovider -rf 2>&1 | tee "$OUT/gpu-tests.log" | grep -E "^FAILED|^ERROR|passed|failed" | tail -40
  timeout 240 python3 benchmarks/gtn.py --out "$OUT/gtn.json" --row-seconds 35 \
      --only sizemax_n100,sizemax_n150,sizemax_n200,countingmax2_n100,polynomial_n100,configsmax1_n100,kings_sizemax,kings_countingmax1 \
      > "$OUT/gtn.log" 2>&1
  echo "gtn rc $?"; grep -v -i warn "$OUT/gtn.log" | tail -30 ;;
tn)
  timeout 90 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_doc_examples.py 2>&1 | tail -3
  W=$(mktemp -d); timeout 60 python3 -m lazykern --cache-dir "$W" warm --all -j 16 > "$OUT/warm-all.log" 2>&1
  echo "warm --all rc $?"; tail -n 3 "$OUT/warm-all.log"
  timeout 250 python3 benchmarks/spin_glass.py --module cupy --only defaults --defaults-rows energy configuration degeneracy latency \
      --out "$OUT/spin-glass-defaults.json" 2>&1 | grep -v -i warn | tail -30 ;;
final)
  S=$(date +%s)
  timeout 200 python3 -m pytest -q -m gpu tests/ -n 8 -p no:cacheprovider -rf 2>&1 > "$OUT/gpu-tests.log"
  grep -E "^FAILED|^ERROR|passed|failed" "$OUT/gpu-tests.log" | tail -30; echo "suite done at $(( $(date +%s) - S )) s"
  timeout 110 python3 -m benchmarks.startup_table --out "$OUT" > "$OUT/startup-table.log" 2>&1
  grep -E "ready|cold|launch|first" "$OUT/startup-table.log" | tail -16; echo "startup table done at $(( $(date +%s) - S )) s"
  W=$(mktemp -d); timeout 60 python3 -m lazykern --cache-dir "$W" warm --all -j 16 > "$OUT/warm-all.log" 2>&1
  echo "warm --all rc $?"; tail -n 3 "$OUT/warm-all.log"; echo "warm done at $(( $(date +%s) - S )) s"
  timeout 200 python3 benchmarks/gtn.py --out "$OUT/gtn.json" --row-seconds 30 \
      --only sizemax_n100,sizemax_n150,sizemax_n200,countingmax2_n100,polynomial_n100,configsmax1_n100,kings_sizemax,kings_countingmax1 \
      > "$OUT/gtn.log" 2>&1
  echo "gtn rc $? at $(( $(date +%s) - S )) s"; grep -E '^(sizemax|counting|polynomial|configs|kings)' "$OUT/gtn.log" | cut -c1-240 ;;
*) echo "usage: $0 suite|tn|final"; exit 2 ;;
esac
