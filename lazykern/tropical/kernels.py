"""Which kernels of the tropical family a product launches: ask before calling, warm ahead."""

from __future__ import annotations

from typing import Any

import numpy as np

from .api import planned_sms
from .fragments import NUMPY_DTYPES
from .plan import make_plan

_CODES = {np.dtype(v): k for k, v in NUMPY_DTYPES.items()}


def kernels_for(
    A: Any, B: Any, semiring: str = "maxplus", *, argmax: bool = False, batched: bool = False, sms: int | None = None
) -> list[str]:
    """Names of the kernels ``tropical.matmul(A, B, semiring, argmax=...)`` launches (``bmm`` with
    ``batched=True``) for C-contiguous operands of ``A``'s and ``B``'s shapes and dtype, in launch order.

    ``A`` and ``B`` need only ``shape`` and ``dtype`` (any array, or ``np.empty`` stand-ins).
    ``sms`` is the GPU's SM count (default: the current GPU's, an H100's where there is none).
    ``tropical.family.get(name, arch)`` compiles (or loads) each ahead of the call.

    >>> import numpy as np
    >>> x = np.empty((4096, 4096), np.float32)
    >>> kernels_for(x, x, "minplus", argmax=True, sms=132)
    ['minplus_f32_argmax']
    """
    a, b = tuple(A.shape), tuple(B.shape)
    dims = (2, 3) if batched else (2,)
    if len(a) not in dims or len(b) not in dims or a[-1] != b[-2]:
        raise ValueError(f"A {a} and B {b} are not operands of one {'bmm' if batched else 'matmul'}")
    code = _CODES.get(np.dtype(A.dtype))
    if code is None:
        raise TypeError(f"dtype {np.dtype(A.dtype)} has no tropical kernels; use one of {sorted(_CODES, key=str)}")
    batch = max(a[0] if len(a) == 3 else 1, b[0] if len(b) == 3 else 1)
    M, K, N = a[-2], a[-1], b[-1]
    plan = make_plan(semiring, code, bool(argmax), "nn", batch, M, N, K, batched, sms=planned_sms(sms))
    return [plan.name] + ([plan.reduce] if plan.reduce else [])  # split-K of one slice: no reduce
