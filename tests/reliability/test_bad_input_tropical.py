"""tropical.matmul / bmm under generated arguments: a correct answer or a clear ValueError/TypeError.

Runs on the CPU (NumPy operands and no GPU: the reference path), so it checks the
argument validation every backend shares.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lazykern import tropical
from lazykern.tropical import reference

GOOD_DTYPES = ["float32", "float64", "int32", "int64"]
DTYPES = [*GOOD_DTYPES * 3, "float16", "complex64", "bool", "uint8"]  # mostly valid, some not
SEMIRINGS = ["maxplus", "minplus", "maxmul"] * 3 + ["plus", "", "MAXPLUS"]


@st.composite
def operands(draw):
    dtype_a = draw(st.sampled_from(DTYPES))
    dtype_b = draw(st.sampled_from([dtype_a] * 6 + DTYPES))
    nd_a, nd_b = draw(st.sampled_from([1, 2, 2, 3, 3])), draw(st.sampled_from([1, 2, 2, 3, 3]))
    dims = st.integers(0, 5)
    shape_a = tuple(draw(dims) for _ in range(nd_a))
    shape_b = tuple(draw(dims) for _ in range(nd_b))
    if draw(st.integers(0, 4)) and nd_a >= 2 and nd_b >= 2:
        shape_b = (*shape_b[:-2], shape_a[-1], shape_b[-1])  # make inner dims agree most of the time
        if nd_a == nd_b == 3 and draw(st.integers(0, 4)):
            shape_b = (shape_a[0], *shape_b[1:])
    special = st.sampled_from([np.inf, -np.inf, np.nan, 0.0, 1.0, -2.5])
    a = np.asarray(draw(st.lists(special, min_size=int(np.prod(shape_a)), max_size=int(np.prod(shape_a)))))
    b = np.asarray(draw(st.lists(special, min_size=int(np.prod(shape_b)), max_size=int(np.prod(shape_b)))))
    with np.errstate(invalid="ignore", over="ignore"):
        a = np.nan_to_num(a, nan=0.0, posinf=7, neginf=-7) if np.dtype(dtype_a).kind in "iub" else a
        b = np.nan_to_num(b, nan=0.0, posinf=7, neginf=-7) if np.dtype(dtype_b).kind in "iub" else b
        return a.reshape(shape_a).astype(dtype_a), b.reshape(shape_b).astype(dtype_b)


ANSWERED: list[int] = []


@given(operands(), st.sampled_from(SEMIRINGS), st.booleans(), st.booleans())
@settings(max_examples=600, deadline=None, derandomize=True)  # the same calls each run: the count below is stable
def test_matmul_answers_or_refuses_clearly(ab, semiring, argmax, batched):
    a, b = ab
    fn, ref = (tropical.bmm, reference.bmm) if batched else (tropical.matmul, reference.matmul)
    try:
        got = fn(a, b, semiring=semiring, argmax=argmax)
    except (ValueError, TypeError) as exc:
        assert str(exc), "an error must say what was wrong"
        return
    want = ref(a, b, semiring=semiring, argmax=argmax)
    for g, w in zip(got if argmax else (got,), want if argmax else (want,), strict=True):
        np.testing.assert_array_equal(g, w)
    ANSWERED.append(1)


def test_the_generator_reaches_valid_calls_too():
    ANSWERED.clear()
    test_matmul_answers_or_refuses_clearly()
    assert len(ANSWERED) >= 20, f"only {len(ANSWERED)} generated calls were valid: the property tested little"
