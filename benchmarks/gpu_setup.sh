# Source this on the GPU machine (device tool): installs the carried wheels, points PYTHONPATH at the repo.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
# Bytecode as a user's pip install leaves it (compiled in parallel, about a second): without it a machine's first
# process compiled every .pyc it imported, 0.8 s of a first 32 x 32 energy (benchmarks/results/s68-h200, call 4).
python3 -m compileall -q -j 0 /tmp/site lazykern > /dev/null 2>&1 || true
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 - <<'PY'
import importlib.metadata as md
for p in ("numba", "numba-cuda", "cuda-core", "cuda-bindings", "numpy", "cupy-cuda13x", "torch", "diskcache"):
    try:
        print(p, md.version(p))
    except Exception as e:
        print(p, "missing")
PY
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
