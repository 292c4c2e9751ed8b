#!/bin/bash
# GPU call 3 (issue 45): exact count 28x28, defaults' plan, GPU 0 alone vs GPUs 0 and 1 (paired passes), one machine
set -u
F=$PWD/.gpu/multigpu; cd $F
export PYTHONPATH=/tmp/site:$F PYTHONUNBUFFERED=1 LAZYKERN_CACHE_DIR=/tmp/lkc
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpus.txt
S=$(date +%s)
timeout 50 python3 benchmarks/slice_scaling.py --L 28 --optimize auto --quantity count --devices 1 2 --repeats 2 --out $OUT/scaling-count28.json > $OUT/scaling-count28.log 2>&1
echo "count28 rc=$? $(( $(date +%s)-S )) s"; grep -v -i warn $OUT/scaling-count28.log | tail -4
