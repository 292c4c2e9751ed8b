"""Hostile round on the CPU of the tropical einsum, its argmax, exact counting, plans and spin glasses,
each checked against a brute force written here: every assignment of every label enumerated, products
computed exactly (Python ints, saturated to the dtype's range as the kernels document), counts as Python
ints, spin-glass energies as Fractions over all 2^n states.

One bug it found, fixed in session 74 (the products' kernels and the reference): under float max-times
the zero -inf was not absorbing, so two zeros multiplied gave +inf: a contraction with two empty summed
labels, or with two operands whose every product is NaN (which never wins), answered +inf where no
assignment has a value. And max-times over nonnegative entries that include inf and 0 depended on the
order: a label summed out alone first (max(inf, 0) = inf) then met a 0 (inf * 0 = NaN, which never
wins), so an assignment reaching 0 * 0 = 0 was lost. The product now absorbs -inf and takes 0 * inf = 0."""

from __future__ import annotations

import itertools
import math
import random
import warnings
from fractions import Fraction

import numpy as np
import pytest

from lazykern.tn import argmax_einsum, contraction_plan, counting, einsum
from lazykern.tn import networks as N


def _product(values: list[object], semiring: str, dtype: np.dtype) -> object:
    """One assignment's product, by the kernels' rules: integers saturate, their bounds absorb."""
    if dtype.kind == "f":
        if semiring != "maxmul":
            return sum(values)  # type: ignore[arg-type]
        floats = [float(v) for v in values]  # type: ignore[arg-type]
        if -math.inf in floats:  # the zero absorbs
            return -math.inf
        if any(math.isnan(v) for v in floats):
            return math.nan
        return 0.0 if 0.0 in floats else math.prod(floats)  # 0 * inf = 0
    lo, hi = int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)
    ints = [int(v) for v in values]  # type: ignore[call-overload]
    if semiring == "minplus":
        return hi if hi in ints else max(sum(ints), lo)
    if lo in ints:
        return lo
    return min(math.prod(ints) if semiring == "maxmul" else sum(ints), hi)


def _brute(ins: list[str], out: str, sizes: dict[str, int], ops: list[np.ndarray], semiring: str) -> tuple:
    """(values, counts) of every output entry, over all assignments."""
    used = sorted(sizes)
    best: dict[tuple[int, ...], tuple[object, int]] = {}
    for assign in itertools.product(*(range(sizes[x]) for x in used)):
        a = dict(zip(used, assign))
        p = _product([op[tuple(a[x] for x in s)].item() for s, op in zip(ins, ops)], semiring, ops[0].dtype)
        if p != p:  # a NaN product never wins: as the zero
            p = math.inf if semiring == "minplus" else -math.inf
        key = tuple(a[x] for x in out)
        if key not in best:
            best[key] = (p, 1)
        else:
            b, c = best[key]
            if (p < b) if semiring == "minplus" else (p > b):  # type: ignore[operator]
                best[key] = (p, 1)
            elif p == b:
                best[key] = (b, c + 1)
    shape = tuple(sizes[x] for x in out)
    values, counts = np.empty(shape, dtype=object), np.empty(shape, dtype=object)
    for key in itertools.product(*(range(s) for s in shape)):
        values[key], counts[key] = best[key]
    return values, counts


def _network(rng: random.Random, pool: list[object], dtype: type) -> tuple[list[str], str, dict, list]:
    """A random equation: repeated labels, labels of one operand alone, scalars, outputs in any order."""
    labels = "abcde"[: rng.randint(1, 5)]
    ins = ["".join(rng.choice(labels) for _ in range(rng.randint(0, 4))) for _ in range(rng.randint(1, 4))]
    used = sorted(set("".join(ins)))
    out = [x for x in used if rng.random() < 0.4]
    rng.shuffle(out)
    sizes = {x: rng.randint(1, 3) for x in used}
    ops = [
        np.array(rng.choices(pool, k=math.prod(sizes[x] for x in s)), dtype=dtype).reshape([sizes[x] for x in s])
        for s in ins
    ]
    return ins, "".join(out), sizes, ops


@pytest.mark.parametrize("semiring", ["maxplus", "minplus", "maxmul"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_einsum_and_argmax_match_a_brute_force(semiring: str, dtype: type) -> None:
    rng = random.Random(f"{semiring}{np.dtype(dtype)}")
    for _ in range(40):
        pool = list(range(0, 4)) if semiring == "maxmul" else list(range(-4, 5))
        ins, out, sizes, ops = _network(rng, pool, dtype)
        eq = ",".join(ins) + "->" + out
        want, _ = _brute(ins, out, sizes, ops, semiring)
        kw = {"optimize": rng.choice(["auto", "greedy", "optimal"])}
        if rng.random() < 0.3:
            kw["memory_limit"] = rng.randint(1, 4)  # slices
        got = np.asarray(einsum(eq, *ops, semiring=semiring, **kw))
        assert got.dtype == np.dtype(dtype) and got.tolist() == want.tolist(), eq
        at = tuple(rng.randrange(sizes[x]) for x in out) if out else None
        value, assignment = argmax_einsum(eq, *ops, semiring=semiring, at=at, **kw)
        assert value == want[at or ()], eq
        assert set(assignment) == set(sizes) and all(assignment[x] == i for x, i in zip(out, at or ()))
        reached = _product([op[tuple(assignment[x] for x in s)].item() for s, op in zip(ins, ops)], semiring, got.dtype)
        assert reached == want[at or ()], eq


@pytest.mark.parametrize("semiring", ["maxplus", "minplus", "maxmul"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integers_near_their_bounds_saturate_never_wrap(semiring: str, dtype: type) -> None:
    """Values whose sums (products) pass the dtype on one side only: saturation is the exact answer."""
    lo, hi = int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)
    pool = {
        "maxplus": [0, 1, 5, hi // 2, hi // 2 + 1, hi - 1, hi, lo],
        "minplus": [0, -1, -5, lo // 2, lo // 2 + 1, lo + 1, lo, hi],
        "maxmul": [1, 2, 3, 2 ** (np.iinfo(dtype).bits // 2), hi // 2, hi, lo],
    }[semiring]
    rng = random.Random(f"bounds{semiring}{np.dtype(dtype)}")
    for _ in range(40):
        ins, out, sizes, ops = _network(rng, pool, dtype)
        want, _ = _brute(ins, out, sizes, ops, semiring)
        got = einsum(",".join(ins) + "->" + out, *ops, semiring=semiring, optimize=rng.choice(["greedy", "optimal"]))
        assert np.asarray(got).tolist() == want.tolist()
    x = np.array([hi // 2 + 1], dtype=dtype)
    assert int(einsum("i,i->", x, x)) == hi  # 2^31 (2^63) saturates, never -2^31
    assert int(einsum("i,i->", -x, -x, semiring="minplus")) == lo


def test_empty_labels_and_nan_for_the_additive_semirings() -> None:
    z = np.zeros((2, 0))
    assert einsum("ab,cb->", z, np.zeros((3, 0))) == -np.inf
    assert einsum("ab,cb->a", z, np.zeros((3, 0)), semiring="minplus").tolist() == [np.inf, np.inf]
    assert einsum("ab,cd->ac", z, np.zeros((3, 0))).shape == (2, 3)
    assert einsum("ab,cd->ab", z, np.zeros((3, 0))).shape == (2, 0)
    assert int(einsum("ab->", z.astype(np.int64))) == np.iinfo(np.int64).min
    nan = np.array([np.nan, 1.0])
    assert einsum("a,a->", nan, np.array([0.0, np.nan])) == -np.inf  # a NaN product never wins
    assert einsum("a,a->", nan, np.array([2.0, 3.0])) == 4.0
    assert einsum("a,b->", nan, nan, semiring="minplus") == 2.0


def test_counting_matches_a_brute_force_with_counts_past_2_63() -> None:
    rng = random.Random("counting")
    for _ in range(60):
        ins, out, sizes, values = _network(rng, [0.0, 1.0, -1.0], np.float64)
        semiring = rng.choice(["maxplus", "minplus"])
        big = rng.choice([2**62, 2**63 - 1, 3])
        counts = [
            np.array(rng.choices([big, 1, 0, big - 1], k=v.size), dtype=np.int64).reshape(v.shape) for v in values
        ]
        eq = ",".join(ins) + "->" + out
        kw = {"memory_limit": rng.randint(1, 3)} if rng.random() < 0.3 else {}
        got_v, got_c = counting.einsum(eq, *zip(values, counts), semiring=semiring, **kw)
        used = sorted(sizes)
        best: dict[tuple[int, ...], tuple[float, int]] = {}
        for assign in itertools.product(*(range(sizes[x]) for x in used)):
            a = dict(zip(used, assign))
            idx = [tuple(a[x] for x in s) for s in ins]
            v = sum(float(op[i]) for op, i in zip(values, idx))
            c = math.prod(int(op[i]) for op, i in zip(counts, idx))
            key = tuple(a[x] for x in out)
            b, k = best.get(key, (math.inf if semiring == "minplus" else -math.inf, 0))
            if (v < b) if semiring == "minplus" else (v > b):
                best[key] = (v, c)
            else:
                best[key] = (b, k + c if v == b else k)
        got_v, got_c = np.asarray(got_v, dtype=object), np.asarray(got_c, dtype=object)
        for key, (v, c) in best.items():
            assert int(got_c[key]) == c, eq
            assert c == 0 or got_v[key] == v, eq
    v, c = counting.einsum("a,b,c->", *[(np.zeros(3), np.full(3, 2**62, dtype=np.int64))] * 3)
    assert float(v) == 0.0 and c == 27 * 2**186 and type(c) is int


def test_a_plan_reused_with_other_sizes_and_explicit_paths() -> None:
    rng = np.random.default_rng(0)
    plan = contraction_plan([["i", "j"], ["j", "k"]], ["i", "k"], {"i": 3, "j": 4, "k": 2})
    A, B = rng.integers(-5, 5, (3, 5)).astype(float), rng.integers(-5, 5, (5, 2)).astype(float)
    want = (A[:, :, None] + B[None, :, :]).max(axis=1)
    assert einsum("ij,jk->ik", A, B, optimize=plan).tolist() == want.tolist()
    C = rng.random((2, 2))
    full = einsum("ij,jk,kl->il", A, B, C)
    for path in ([(0, 1), (0, 1)], [(0, 1, 2)], [(2,), (0, 1), (0, 1)], [(1, 2), (0, 1)]):
        assert einsum("ij,jk,kl->il", A, B, C, optimize=path).tolist() == full.tolist()
    for path in ([(0, 1)], [(0, 0), (0, 1)], [(0, 5), (0, 1)]):
        with pytest.raises(ValueError):
            einsum("ij,jk,kl->il", A, B, C, optimize=path)


def test_spin_glasses_match_every_state() -> None:
    rng = random.Random("spins")
    for _ in range(40):
        n = rng.randint(1, 6)
        edges = rng.sample([(i, j) for i in range(n) for j in range(i + 1, n)], rng.randint(0, n * (n - 1) // 2))
        J = [rng.choice([-1, 1, 2, -3]) * 2 ** rng.choice([0, 40, 60]) for _ in edges]
        h = [rng.choice([-1, 0, 1, 2**50]) for _ in range(n)] if rng.random() < 0.5 else None
        sg = N.SpinGlass(n, np.array(edges, dtype=np.int64).reshape(-1, 2), J, h)
        energies = {
            s: -sum(Fraction(j) * s[a] * s[b] for (a, b), j in zip(edges, J))
            - sum(Fraction(x) * s[i] for i, x in enumerate(h or [0] * n))
            for s in itertools.product([1, -1], repeat=n)
        }
        e0 = min(energies.values())
        degenerate = sum(e == e0 for e in energies.values())
        kw = {"memory_limit": 2} if rng.random() < 0.3 else {}
        energy, spins = N.ground_state(sg, **kw)
        assert Fraction(N.ground_state_energy(sg, **kw)) == Fraction(energy) == e0
        assert energies[tuple(int(x) for x in spins)] == e0
        assert N.degeneracy(sg, **kw) == (e0, degenerate)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert N.degeneracy(N.SpinGlass(70, np.zeros((0, 2), dtype=np.int64), [])) == (0.0, 2**70)
        pairs = N.SpinGlass(66, [(i, i + 1) for i in range(0, 64, 2)], [0] * 32)
        assert N.degeneracy(pairs)[1] == 2**66


def test_counts_of_plain_arrays_past_2_63_sliced_and_float_ties_exact() -> None:
    labels = [f"s{i}" for i in range(70)]
    chain = [[labels[i], labels[i + 1]] for i in range(69)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value, count = counting.count_network(chain, [], [np.zeros((2, 2))] * 69, memory_limit=4, slices=["s10"])
        assert float(value) == 0.0 and count == 2**70 and type(count) is int
        threes = [(np.zeros((2, 2)), np.full((2, 2), 3, dtype=np.int64))] * 69
        _, counts = counting.count_network(chain, ["s5"], threes, memory_limit=4)
        assert counts.tolist() == [3**69 * 2**69] * 2
        # -1 - 2^-60 and -1 + 2^-60 are both -1.0 as floats: two ground states, not four
        assert N.degeneracy(N.SpinGlass(3, [(0, 1), (1, 2)], [1.0, 2.0**-60])) == (-1.0, 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_maxmul_with_infinities_zeros_and_nan_matches_a_brute_force(dtype: type) -> None:
    """Nonnegative values with inf, 0, -inf (the zero) and NaN (never wins): max-times distributes, so every
    order, slicing and the argmax agree with the brute force over assignments (a NaN product never wins,
    an output entry of no summed label may say NaN or -inf: either is no value)."""
    rng = random.Random(f"maxmul-inf{np.dtype(dtype)}")
    pool = [0.0, 0.5, 1.0, 2.0, 3.0, math.inf, -math.inf, math.nan]
    for _ in range(80):
        ins, out, sizes, ops = _network(rng, pool, dtype)
        eq = ",".join(ins) + "->" + out
        want, _ = _brute(ins, out, sizes, ops, "maxmul")
        kw = {"optimize": rng.choice(["auto", "greedy", "optimal"])}
        if rng.random() < 0.3:
            kw["memory_limit"] = rng.randint(1, 4)
        got = np.asarray(einsum(eq, *ops, semiring="maxmul", **kw))
        none = np.where(np.isnan(want.astype(dtype)), -np.inf, want.astype(dtype))  # NaN: no value, as -inf
        assert got.dtype == np.dtype(dtype) and np.where(np.isnan(got), -np.inf, got).tolist() == none.tolist(), eq
        at = tuple(rng.randrange(sizes[x]) for x in out) if out else None
        if math.isnan(want[at or ()]) or want[at or ()] == -math.inf:
            continue  # no assignment has a value there (or only NaN): nothing to reach
        value, assignment = argmax_einsum(eq, *ops, semiring="maxmul", at=at, **kw)
        assert value == want[at or ()], eq
        reached = _product([op[tuple(assignment[x] for x in s)].item() for s, op in zip(ins, ops)], "maxmul", got.dtype)
        assert reached == want[at or ()], eq


def test_maxmul_two_empty_summed_labels_give_the_zero() -> None:
    assert einsum("ab,cd->", np.zeros((2, 0)), np.zeros((3, 0)), semiring="maxmul") == -np.inf


def test_maxmul_nan_operands_never_give_a_number() -> None:
    nan = np.array([np.nan])
    assert einsum("a,b->", nan, nan, semiring="maxmul") == -np.inf


def test_maxmul_inf_and_zero_do_not_depend_on_the_order() -> None:
    """Every entry is nonnegative; the assignment a = 1 reaches 0 * 0 = 0 (a = 0's inf * 0 is NaN and
    never wins), as ``a,a->`` over the same numbers answers; summing ``a`` out of ``ca`` first loses it."""
    ca = np.array([[np.inf, 0.0], [2.0, 3.0]])
    assert einsum("a,a->", ca[0], np.zeros(2), semiring="maxmul") == 0.0
    assert einsum("ca,b->bc", ca, np.zeros(1), semiring="maxmul").tolist() == [[0.0, 0.0]]


def test_argmax_of_a_network_with_an_empty_label_is_a_clear_error() -> None:
    """A label of size 0 leaves no assignment: argmax_einsum says so (it raised numpy's "index -1 is out of
    bounds for array with size 0" from its backtracking); the einsum's value is the semiring zero."""
    a, b = np.zeros((2, 0)), np.zeros((0,))
    assert einsum("ab,b->", a, b) == -np.inf
    with pytest.raises(ValueError, match=r"labels \['b'\] hold no values"):
        argmax_einsum("ab,b->", a, b)
