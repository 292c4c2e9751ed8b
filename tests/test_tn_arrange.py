"""How a contraction step arranges a large operand that is not in either product order (issue 47: an
n = 200 plan's 2^29-entry operand copy ran at 620 GB/s on an H200, 3.5x its product): a view where
either order gives one, else the order whose innermost axes read the source's smallest strides;
answers are the same whichever order is taken."""

from __future__ import annotations

import string

import numpy as np
import pytest

from lazykern.tn import _contract
from lazykern.tn._backend import Backend
from lazykern.tn._contract import Algebra, Term

L = list(string.ascii_letters[:18])  # 18 axes of 2: 2^18 entries, past COALESCE_MIN


def test_inner_run_counts_the_innermost_axes_that_read_the_smallest_strides():
    assert _contract._inner_run([2] * 6, [32, 16, 8, 4, 2, 1]) == 5  # in order: capped at a warp's 5 bits
    assert _contract._inner_run([2] * 6, [4, 8, 16, 32, 1, 2]) == 2
    assert _contract._inner_run([2] * 6, [1, 2, 4, 8, 16, 32]) == 0  # innermost reads the largest stride
    assert _contract._inner_run([2, 1, 2], [2, 7, 1]) == 2  # axes of one entry do not count


def test_the_copy_keeps_the_source_innermost_axes_innermost():
    be = Backend("numpy", np)
    x = np.zeros((2,) * len(L), np.float32)
    term = Term((x,), tuple(L))
    left, con = L[:9] + L[12:], L[9:12]  # the source's innermost axes are left labels
    orders = [((), tuple(left), tuple(con)), ((), tuple(con), tuple(left))]
    assert _contract._cheaper(be, term, orders) == 1  # (con, left): the innermost 5 stay innermost
    left, con = L[:6], L[6:]  # now the contracted labels hold the innermost axes: as they are
    orders = [((), tuple(left), tuple(con)), ((), tuple(con), tuple(left))]
    assert _contract._cheaper(be, term, orders) == 0


def test_a_view_is_taken_before_a_copy():
    be = Backend("numpy", np)
    x = np.zeros((2,) * len(L), np.float32)
    # the term's own order is (con, left) with con's axes outermost; (left, con) would be a copy
    term = Term((x,), tuple(L))
    orders = [((), tuple(L[3:]), tuple(L[:3])), ((), tuple(L[:3]), tuple(L[3:]))]
    assert _contract._cheaper(be, term, orders) == 1


@pytest.mark.parametrize("seed", range(4))
def test_a_large_step_gives_the_same_answer_in_any_layout(seed):
    be = Backend("numpy", np)
    alg = Algebra("maxplus", be)
    rng = np.random.default_rng(seed)
    a_labels = list(L[:16])
    rng.shuffle(a_labels)
    b_labels = [a_labels[i] for i in rng.choice(16, 3, replace=False)] + ["y", "z"]
    rng.shuffle(b_labels)
    A = rng.integers(-8, 8, (2,) * 16).astype(np.float32)
    B = rng.integers(-8, 8, (2,) * 5).astype(np.float32)
    keep = set(a_labels[:8]) | {"y", "z"} | ({b_labels[0]} if seed % 2 else set())
    out, _ = _contract.contract(alg, Term((A,), tuple(a_labels)), Term((B,), tuple(b_labels)), keep, False)
    every = sorted(set(a_labels) | set(b_labels))
    # brute force over the union of labels
    grid = {x: i for i, x in enumerate(every)}
    shape = [2] * len(every)
    a_full = np.broadcast_to(_expand(A, a_labels, every), shape)
    b_full = np.broadcast_to(_expand(B, b_labels, every), shape)
    total = a_full + b_full
    shared = set(a_labels) & set(b_labels)  # a label of one operand is never summed by the step
    summed = tuple(grid[x] for x in every if x in shared and x not in keep)
    want = total.max(axis=summed)
    kept = [x for x in every if x not in shared or x in keep]
    got = np.transpose(out.parts[0], [out.labels.index(x) for x in kept])
    np.testing.assert_array_equal(got, want)


def _expand(x: np.ndarray, labels: list[str], every: list[str]) -> np.ndarray:
    """``x`` with its axes moved to ``every``'s order and a unit axis for each label it lacks."""
    order = sorted(range(len(labels)), key=lambda i: every.index(labels[i]))
    y = np.transpose(x, order)
    shape = [2 if lab in labels else 1 for lab in every]
    return y.reshape(shape)
