"""tropical.kernels_for: the kernels a product launches, asked before the call."""

from __future__ import annotations

import numpy as np
import pytest

from lazykern import tropical
from lazykern.tropical.fragments import Spec
from lazykern.tropical.plan import make_plan


@pytest.mark.parametrize(
    "a, b, batched",
    [((4096, 4096), (4096, 4096), False), ((64, 4096), (4096, 64), False), ((2**21, 4), (4, 4), False),
     ((100, 300), (300, 8), False), ((16, 64, 64), (64, 64), True), ((0, 5), (5, 3), False)],
)  # fmt: skip
@pytest.mark.parametrize("argmax", [False, True])
def test_names_are_those_of_the_plan_the_api_makes(a, b, batched, argmax):
    x, y = np.empty(a, np.float32), np.empty(b, np.float32)
    names = tropical.kernels_for(x, y, "minplus", argmax=argmax, batched=batched, sms=132)
    batch = a[0] if len(a) == 3 else 1
    plan = make_plan("minplus", "f32", argmax, "nn", batch, a[-2], b[-1], a[-1], batched, sms=132)
    assert names == [plan.name] + ([plan.reduce] if plan.reduce else [])
    assert all(Spec.parse(n).name == n and n in tropical.family.names() for n in names)


def test_wrong_operands_say_what_is_wrong():
    with pytest.raises(ValueError, match=r"A \(3, 4\) and B \(5, 6\)"):
        tropical.kernels_for(np.empty((3, 4)), np.empty((5, 6)))
    with pytest.raises(TypeError, match="float16 has no tropical kernels"):
        tropical.kernels_for(np.empty((3, 4), np.float16), np.empty((4, 6), np.float16))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(300, 200, 100), (64, 4096, 64), (4096, 4, 4)])
def test_the_named_kernels_are_those_a_product_loads(shape):
    from numba import cuda

    m, k, n = shape
    a = cuda.to_device(np.ones((m, k), np.float32))
    b = cuda.to_device(np.ones((k, n), np.float32))
    names = tropical.kernels_for(a, b, "maxplus", argmax=True)
    tropical.matmul(a, b, "maxplus", argmax=True)
    assert set(names) <= set(tropical.family.compiled())
