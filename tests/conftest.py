from __future__ import annotations

import os
import tempfile

import pytest

# Never touch the user's real cache from the tests.
os.environ.setdefault("LAZYKERN_CACHE_DIR", tempfile.mkdtemp(prefix="lazykern-test-cache-"))

from tests._warm_cache import tropical_cache  # noqa: E402, F401  (a session fixture; imports lazykern)


def _has_gpu() -> bool:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    try:
        from numba import cuda

        return cuda.is_available() and len(cuda.gpus) > 0
    except Exception:
        return False


HAS_GPU = _has_gpu()


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; none found (run `pytest -m gpu` on a machine with one)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def cache(tmp_path):
    from lazykern import KernelCache

    kc = KernelCache(tmp_path / "cache")
    yield kc
    kc.close()


# Only fill_max includes a CCCL header: parsing it costs ~0.9 s a compile, against ~0.02 s for
# scale_*, and the tests compile scale_f32 dozens of times.
PREAMBLE = """
#define SCALE 3
template <typename T> __device__ T scaled(T x) { return x * SCALE; }
"""

FRAGMENTS = {
    "scale_f32": 'extern "C" __global__ void scale_f32(float *a, int n) {'
    " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = scaled(a[i]); }",
    "scale_i32": 'extern "C" __global__ void scale_i32(int *a, int n) {'
    " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] = scaled(a[i]); }",
    "fill_max": "#include <cuda/std/limits>\n"
    'extern "C" __global__ void fill_max(float *a, int n) {'
    " int i = blockIdx.x * blockDim.x + threadIdx.x;"
    " if (i < n) a[i] = cuda::std::numeric_limits<float>::max(); }",
}


@pytest.fixture
def family(cache):
    from lazykern import KernelFamily

    fam = KernelFamily("tiny", PREAMBLE, cache=cache)
    for name, code in FRAGMENTS.items():
        fam.add(name, code, signature=["ptr", "int32"])
    return fam
