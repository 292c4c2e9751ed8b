#!/bin/bash
# GPU call 2 (issue 45): 20 exit-benchmark children, then slice scaling with profiles (1 vs 2 GPUs, one machine)
set -u
F=$PWD/.gpu/multigpu; cd $F
export PYTHONPATH=/tmp/site:$F PYTHONUNBUFFERED=1 LAZYKERN_CACHE_DIR=/tmp/lkc
nvidia-smi -L > $OUT/gpus.txt; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >> $OUT/gpus.txt
S=$(date +%s)
timeout 85 python3 benchmarks/multigpu_exit.py --repeat 20 --parallel 10 --out $OUT/exit20.json > $OUT/exit20.log 2>&1
echo "exit20 rc=$? $(( $(date +%s)-S )) s: $(tail -1 $OUT/exit20.log)"
run() { n=$1; t=$2; shift 2; S=$(date +%s); timeout $t python3 benchmarks/slice_scaling.py --devices 1 2 --out $OUT/scaling-$n.json "$@" > $OUT/scaling-$n.log 2>&1; echo "$n rc=$? $(( $(date +%s)-S )) s"; grep -v WARN $OUT/scaling-$n.log | tail -3; }
run energy32-auto 30 --optimize auto --repeats 2
run energy32-sliced 40 --memory-limit 67108864 --plan-seconds 6
run count24-sliced 25 --L 24 --quantity count --memory-limit 4194304 --plan-seconds 4
