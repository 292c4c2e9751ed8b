"""Bit-addressed counting steps (``lk_count_bits``): binary boundaries read where they lie and, in a
sweep, written over in place; the plans and passes that follow from holding one boundary."""

from __future__ import annotations

import contextlib
import itertools
import math
from unittest import mock

import numpy as np
import pytest

from lazykern.tn import _backend, _contract, _cost, _crt, _strided, counting
from lazykern.tn import networks as nw
from lazykern.tn.contraction.network import Network
from lazykern.tn.counts import kernels
from lazykern.tn.spinglass import planning

from ._spin_oracles import transfer_matrix
from .test_tropical_einsum import device_route  # the GPU route on the host


def _case(rng, n, con, batch, right, low=False):
    """X over n binary labels in a random axis order (C-contiguous), Y over batch + con + right labels
    in a random order; the labels to keep. ``low``: the shared labels are X's last axes (its lowest
    address bits)."""
    x_labels = list(rng.permutation(n))
    shared = list(rng.choice(x_labels, size=con + batch, replace=False))
    if low:
        x_labels = [x for x in x_labels if x not in shared] + [x for x in x_labels if x in shared]
    y_labels = [int(x) for x in shared] + [100 + i for i in range(right)]
    y_labels = [y_labels[i] for i in rng.permutation(len(y_labels))]
    keep = set(x_labels) - set(shared[:con]) | set(shared[con:]) | {100 + i for i in range(right)}
    return [int(x) for x in x_labels], y_labels, {int(x) for x in keep}


def _operands(rng, x_labels, y_labels, moduli):
    """(values, counts...) of X and Y: small integer values (ties), counts below each modulus."""
    xv = rng.integers(-2, 3, (2,) * len(x_labels)).astype(np.float32)
    yv = rng.integers(-2, 3, (2,) * len(y_labels)).astype(np.float32)
    if moduli:
        xc = [rng.integers(0, p, xv.shape).astype(np.int32) for p in moduli]
        yc = [rng.integers(0, p, yv.shape).astype(np.int32) for p in moduli]
    else:
        xc = [rng.integers(2**60, 2**62, xv.shape)]  # products wrap modulo 2^64
        yc = [rng.integers(2**60, 2**62, yv.shape)]
    return (xv, *xc), (yv, *yc)


def _want(X, Y, x_labels, y_labels, out, semiring, moduli):
    """Each count ring's (values, counts) by enumeration, in ``out``'s axis order."""
    sizes = dict.fromkeys([*x_labels, *y_labels], 2)
    summed = [x for x in sizes if x not in out]
    wants = []
    for q in range(len(X) - 1):
        p = moduli[q] if moduli else 0
        v = np.empty((2,) * len(out), np.float32)
        c = np.zeros((2,) * len(out), dtype=object)
        for at in itertools.product(range(2), repeat=len(out)):
            best, total = None, 0
            for rest in itertools.product(range(2), repeat=len(summed)):
                a = dict(zip(out, at)) | dict(zip(summed, rest))
                val = X[0][tuple(a[x] for x in x_labels)] + Y[0][tuple(a[x] for x in y_labels)]
                cnt = int(X[1 + q][tuple(a[x] for x in x_labels)]) * int(Y[1 + q][tuple(a[x] for x in y_labels)])
                if best is None or (val > best if semiring == "maxplus" else val < best):
                    best, total = val, cnt
                elif val == best:
                    total += cnt
            v[at], c[at] = best, total % p if p else (total + 2**63) % 2**64 - 2**63
        wants.append((v, c))
    return wants


CASES = [(7, 1, 1, 1), (7, 2, 1, 2), (8, 3, 2, 3), (6, 1, 0, 2), (7, 2, 2, 0), (6, 0, 1, 1), (9, 4, 1, 4), (8, 4, 0, 3)]


def _largest(rng, x_labels, y_labels, moduli):
    """Every value 0 (every term a tie) and every count p - 1: each result sums K of the largest products."""
    xv, yv = np.zeros((2,) * len(x_labels), np.float32), np.zeros((2,) * len(y_labels), np.float32)
    return (xv, *[np.full(xv.shape, p - 1, np.int32) for p in moduli]), (
        yv,
        *[np.full(yv.shape, p - 1, np.int32) for p in moduli],
    )


def _run(xp, be, n, con, batch, right, semiring, moduli, owned, operands=_operands):
    rng = np.random.default_rng(n * 100 + con * 10 + batch + right)
    x_labels, y_labels, keep = _case(rng, n, con, batch, right)
    X, Y = operands(rng, x_labels, y_labels, moduli)
    alg = counting.algebra(*moduli)(semiring, be, False)
    alg.rank = {lab: i for i, lab in enumerate(sorted(set(x_labels) | set(y_labels)))}
    dX = tuple(xp.array(x, copy=True) for x in X)  # X itself stays for the enumeration
    with mock.patch.object(_contract, "STRIDED_MIN", 0):
        term, _ = _contract.contract(alg, _contract.Term(dX, tuple(x_labels)), _contract.Term(
            tuple(xp.asarray(y) for y in Y), tuple(y_labels)), keep, False, (owned, False))  # fmt: skip
    got = [np.asarray(p.get() if hasattr(p, "get") else p) for p in term.parts]
    for q, (v, c) in enumerate(_want(X, Y, x_labels, y_labels, list(term.labels), semiring, moduli)):
        np.testing.assert_array_equal(got[0], v)
        np.testing.assert_array_equal(got[1 + q].astype(object), c)
    inplace = owned and con == right
    assert (term.parts[0] is dX[0]) == inplace  # written over X exactly when X is the step's own and as large
    return term


@pytest.mark.parametrize(("n", "con", "batch", "right"), CASES)
@pytest.mark.parametrize("moduli", [(), (2147483647,), (2147483647, 2147483629, 2147483587)])
@pytest.mark.parametrize("owned", [True, False])
def test_bit_addressed_step_counts_as_enumeration(n, con, batch, right, moduli, owned):
    """The kernel's addressing (in NumPy, as the GPU route on the host runs it) gives every count ring's
    exact result, in any axis order of X, in place or into a new array."""
    _run(np, _backend.Backend("cupy", np), n, con, batch, right, "maxplus", moduli, owned)


def test_bits_layout_refuses_what_the_kernel_cannot_address():
    base = dict(x_labels=[0, 1, 2], x_shape=[2, 2, 2], contiguous=True, y_labels=[2, 9], y_shape=[2, 2], keep={0, 1, 9})
    assert _strided.bits_layout(**base)["inplace"]
    assert _strided.bits_layout(**(base | {"contiguous": False})) is None
    assert _strided.bits_layout(**(base | {"x_shape": [2, 3, 2]})) is None
    assert _strided.bits_layout(**(base | {"keep": {0, 1}})) is None  # Y's own label summed: not this kernel's
    five = dict(base, x_labels=list(range(6)), x_shape=[2] * 6, y_labels=[0, 1, 2, 3, 4], y_shape=[2] * 5, keep={5})
    assert _strided.bits_layout(**five) is None  # five spins summed out at once
    sizes = dict.fromkeys(range(12), 2)
    assert _strided.bits_tile([0, 1, 2], [2, 9], {0, 1, 9}, sizes) == (1, 1)  # in place: one out, one in
    assert _strided.bits_tile([0, 1, 2], [2], {0, 1}, sizes) == (1, 0)
    assert _strided.bits_tile([0, 1, 2], [2, 9], {0, 1, 9}, sizes | {1: 3}) is None
    assert _strided.bits_tile([0, 1, 2], [2, 9], {0, 1, 9}, sizes | {1: 1}) is None  # an axis of one entry: no bit


def test_a_step_written_in_place_allocates_nothing_in_the_peak():
    grow = _cost.Step(flops=8, operands=(1024, 4), result=2048, depends=False, leaves=(False, True), bits=1)
    same = grow._replace(result=1024, bits=2)
    # bit-addressed: the large operand (1024 entries of 8 bytes) is not copied; in place, no result is made
    for step, saved in ((same, 2 * 1024 * 8), (grow, 1024 * 8)):
        base = _cost.peak_bytes([step._replace(bits=0)], 4, 8, 0)
        assert _cost.peak_bytes([step], 4, 8, 0, inplace=True) == base - saved
        assert _cost.peak_bytes([step], 4, 8, 0) == base  # an executor without the kernel: as before


def test_operands_and_sliced_results_are_never_written_over():
    """Leaves and the results kept for later slices are not the steps' own: a sliced counting
    contraction on the GPU route leaves its operands as they were and counts exactly."""
    sg = nw.square_lattice(5, seed=3)
    labels, tensors = sg.network(np.float32)
    before = [t.copy() for t in tensors]
    want = counting.count_network(labels, (), tensors, slices=[12, 7])
    with device_route(), mock.patch.object(_contract, "STRIDED_MIN", 0):
        got = counting.count_network(labels, (), tensors, slices=[12, 7])
        again = counting.count_network(labels, (), tensors, slices=[12, 7])
    assert [float(got[0]), int(got[1])] == [float(want[0]), int(want[1])] == [float(again[0]), int(again[1])]
    assert all(np.array_equal(a, b) for a, b in zip(tensors, before))


def test_primes_alone_rebuild_a_count():
    """Without the int64 pass (it would not fit the device) the residues alone give the count, and the
    first prime never stops the search by itself."""
    count = 3**70 + 11
    passes = []

    def run(moduli):
        passes.append(moduli)
        return np.zeros(()), [np.array(count % p) for p in moduli]

    _, got = _crt.solve(run, bound=2**200, residues=2, wide=False)
    assert int(got) == count and () not in passes
    with pytest.raises(ValueError, match="one int64 pass"):
        _crt.solve(run, bound=2**40, wide=False)


def test_the_passes_carry_the_primes_the_bound_needs():
    """The bound sets the primes: a count of 2^114 bounded by itself takes 4 primes (2^124), in passes of
    two, and nothing more; bounded by 2^1024, 33."""
    primes = list(itertools.islice(_crt.primes(), 40))
    count = 3**72 + 5  # about 2^114
    passes = []

    def run(moduli):
        passes.append(moduli)
        return np.zeros(()), [np.array(count % p) for p in moduli]

    _, got = _crt.solve(run, bound=count, residues=2, wide=False)
    assert int(got) == count and passes == [tuple(primes[:2]), tuple(primes[2:4])]
    passes.clear()
    _, got = _crt.solve(run, bound=2**1024, residues=2, wide=False)
    assert int(got) == count and [q for m in passes for q in m] == primes[: len(_crt.primes_for(1, 2**1024))]


@pytest.mark.parametrize("wide", [True, False])
def test_counts_whose_residues_repeat_across_primes_are_exact(wide):
    """Counts whose reconstruction is the same after one more prime (what a rule "stop when two agree"
    takes for settled): 2^64 * (2^31 - 1) is 0 modulo 2^64 and modulo 2^64 * (2^31 - 1); the others
    repeat their residue after the first primes. Only the bound stops the search."""
    primes = list(itertools.islice(_crt.primes(), 8))
    counts = [
        2**64 * (2**31 - 1),
        2**64 * (2**31 - 1) * 7 + 5,
        math.prod(primes[:4]) * 5 + 3**70 + 11,
        math.prod(primes[:3]) * primes[3] * 3 - 1,
        (2**63 - 1) ** 2,
    ]
    for count in counts:

        def run(moduli, count=count):
            if not moduli:
                return np.zeros(()), [np.array((count + 2**63) % 2**64 - 2**63, dtype=np.int64)]
            return np.zeros(()), [np.array(count % p) for p in moduli]

        _, got = _crt.solve(run, bound=2**300, residues=2, wide=wide)
        assert int(got) == count


def test_a_pass_of_several_residues_that_does_not_fit_is_run_one_residue_at_a_time():
    """The device refusing a pass of two residues (its peak was predicted to fit) costs narrower passes
    of the same primes, not the answer."""
    from lazykern.errors import DeviceMemoryError
    from lazykern.tn._backend import Backend

    count = 3**50 + 1  # past 2^63: residues modulo primes
    passes = []

    def run(moduli):
        passes.append(moduli)
        if len(moduli) > 1:
            raise DeviceMemoryError(f"a pass of {len(moduli)} residues does not fit")
        return (np.zeros(()), *[np.array(count % p) for p in moduli])

    labels = [(i,) for i in range(80)]
    ops = [np.zeros(2, np.float32) for _ in labels]
    sizes = dict.fromkeys(range(80), 2)
    be = Backend("numpy", np)
    values, got = counting.exact(be, labels, (), ops, sizes, run, residues=lambda: 2, wide=lambda: False)
    primes = list(itertools.islice(_crt.primes(), 4))
    assert int(got) == count
    assert passes[:3] == [tuple(primes[:2]), (primes[0],), (primes[1],)]


def test_a_count_past_int64_plans_for_one_residue_when_int64_would_slice():
    """As on an 80 GB GPU with a 32 x 32 lattice: the int64 pass's peak needs a slice, one residue a
    pass does not. The plan is then unsliced, the passes are primes alone, and the count exact. Where the
    boundary may be held in one buffer (:mod:`lazykern.tn._arena`) the float64 pass fits it on the same
    plan, and its intervals alone prove this count: no prime pass."""
    sg = nw.square_lattice(10, seed=4)
    labels, sizes = sg.labels(), dict.fromkeys(range(sg.n), 2)
    with mock.patch.object(_contract, "STRIDED_MIN", 0):
        sweep, steps = nw._sweep(sg, labels, sizes, _cost.H100_F32, 4)
    leaves = 4 * len(sg.edges) + 2 * sg.n

    def peak(width):
        return _cost.peak_bytes(steps, leaves, width, 0, inplace=True)

    free = int(peak(8) * _cost.POOL_MARGIN) + 4096  # one residue (4 + 4 bytes) fits, int64 (4 + 8) does not
    assert peak(12) * _cost.POOL_MARGIN > free
    calls = []
    real = counting.contract_network

    def counted(*a, **kw):
        calls.append(kw["algebra"].moduli)
        return real(*a, **kw)

    for arena in (False, True):
        calls.clear()
        with (
            device_route(),
            mock.patch.object(planning, "backend_of", lambda x: (_backend.Backend("cupy", np), np.asarray(x))),
            mock.patch.object(_contract, "STRIDED_MIN", 0),
            mock.patch.object(_backend.Backend, "free_bytes", lambda self: free),
            mock.patch.object(counting, "contract_network", counted),
            contextlib.nullcontext() if arena else mock.patch.object(Network, "arena_run", lambda *a: None),
        ):
            plan = nw.plan(sg, module=np, dtype=np.float32, count_dtype=np.int64)
            got = nw.degeneracy(sg, optimize=plan)
        assert plan.nslices == 1
        assert got == transfer_matrix(sg, 10)
        if arena:  # the float64 pass in one buffer on the plan: each count's interval is one integer
            assert calls == [()]
        else:  # the float64 pass that bounds the counts (by a plan of its own, sliced to fit its 8-byte
            # counts), then one residue a pass, no int64 pass
            assert calls[0] == () and calls[1:] and all(len(m) == 1 for m in calls[1:])


@pytest.mark.gpu
@pytest.mark.parametrize(("n", "con", "batch", "right"), CASES)
@pytest.mark.parametrize("moduli", [(), (2147483647, 2147483629, 2147483587, 2147483579)])
@pytest.mark.parametrize("semiring", ["maxplus", "minplus"])
def test_bit_addressed_kernel_on_the_gpu(n, con, batch, right, moduli, semiring):
    cupy = pytest.importorskip("cupy")
    for owned in (True, False):
        _run(cupy, _backend.Backend("cupy", cupy), n, con, batch, right, semiring, moduli, owned)


@pytest.mark.gpu
@pytest.mark.parametrize("moduli", [(2147483647, 3), (2147483629,)])
@pytest.mark.parametrize(("n", "con", "batch", "right"), [(9, 4, 1, 4), (8, 4, 0, 3), (7, 2, 1, 2)])
def test_bit_addressed_kernel_sums_the_largest_residues_on_the_gpu(n, con, batch, right, moduli):
    """Sixteen tied products of p - 1 by p - 1 a result, the largest sum of products a residue sees: every
    residue is exact."""
    cupy = pytest.importorskip("cupy")
    _run(cupy, _backend.Backend("cupy", cupy), n, con, batch, right, "maxplus", moduli, True, _largest)


# Boundaries of 2^14 to 2^18 entries: a tile of many rows, the summed and batch spins at the lowest bits or
# anywhere; (17, 4, 8, 4) has rows of 4096 entries, past the tile of two residues (the direct path).
LARGE = [(18, 3, 1, 3, True), (18, 3, 1, 3, False), (18, 1, 1, 1, True), (17, 2, 0, 4, False), (16, 4, 2, 1, True),
         (17, 4, 8, 4, False), (14, 0, 2, 2, True)]  # fmt: skip


@pytest.mark.gpu
@pytest.mark.parametrize(("n", "con", "batch", "right", "low"), LARGE)
@pytest.mark.parametrize("moduli", [(), (2147483647,), (2147483647, 2147483629)])
def test_bit_addressed_kernel_on_large_boundaries_on_the_gpu(n, con, batch, right, low, moduli):
    """The kernel's tiles (shared memory, any hole layout) against its addressing run on the host, every
    count ring, in place and into a new array, over two axis orders: Y's counts at random (products of
    counts), then all 1 (a sweep's new spins: no product made)."""
    cupy = pytest.importorskip("cupy")
    for seed in range(2):
        rng = np.random.default_rng(1000 * seed + n)
        x_labels, y_labels, keep = _case(rng, n, con, batch, right, low)
        X, Y = _operands(rng, x_labels, y_labels, moduli)
        if seed:
            Y = (Y[0], *(np.ones_like(c) for c in Y[1:]))
        for owned in (True, False):
            results = []
            for xp in (np, cupy):
                alg = counting.algebra(*moduli)("maxplus", _backend.Backend("cupy", xp), False)
                alg.rank = {lab: i for i, lab in enumerate(sorted(set(x_labels) | set(y_labels)))}
                dX = _contract.Term(tuple(xp.array(x, copy=True) for x in X), tuple(x_labels))
                dY = _contract.Term(tuple(xp.asarray(y) for y in Y), tuple(y_labels))
                term, _ = _contract.contract(alg, dX, dY, keep, False, (owned, False))
                assert (term.parts[0] is dX.parts[0]) == (owned and con == right)
                results.append((term.labels, [np.asarray(p.get() if hasattr(p, "get") else p) for p in term.parts]))
            (want_labels, want), (got_labels, got) = results
            assert got_labels == want_labels
            for w, g in zip(want, got):
                np.testing.assert_array_equal(g, w)


def test_fit_in_place_is_never_worse_than_the_four_array_start():
    """Started four times higher (one boundary held), the halvings may stop at a costly slicing with
    nothing that fits; then the plan is the one the four-array start finds, as before."""
    from lazykern.tn.einsum import ContractionPlan, fit_in_place, fit_to_memory

    def make(limit):  # slicing below 2^21 entries costs a thousand times more
        return ContractionPlan((), {}, largest=limit, flops=1 if limit >= 2**21 else 1000)

    def peak(plan):
        return plan.largest

    free = int(2**20 * _cost.POOL_MARGIN) + 1  # fits 2^20 entries, not 2^21
    assert peak(fit_to_memory(make, 2**22, peak, free)) > 2**20  # alone, the high start stops unfit
    assert fit_in_place(make, 2**20, peak, free) == fit_to_memory(make, 2**20, peak, free) == make(2**20)
    assert fit_in_place(make, 2**20, peak, int(2**22 * _cost.POOL_MARGIN) + 1) == make(2**22)  # room: the high start


def test_bit_addressed_kernels_compile_for_sm_90_with_counts_and_without(cache):
    """NVRTC with no GPU: the tiled step written over its entries (3 x 3, two residues), one into a second
    region (2 x 3, int64 counts), and the values-only step (R = 0: no count array read or written, the
    tropical sweep's) through a fragment of its own."""
    from importlib import resources

    from lazykern.families.family import KernelFamily

    fam = counting.make_family(cache=cache)
    for name in ("count_bits33_max_f32_m32x2", "count_bits23_min_f32_i64"):
        assert fam.warm([name], arch="sm_90")[0].meta["kernel"] == name
    code, signature = kernels._bits_fragment("count_bits33_max_f32_m32")
    values = code.replace("count_bits33_max_f32_m32", "values_bits33_max_f32").replace(
        ", 1, false>(xv", ", 0, false>(xv"
    )
    assert ", 0, false>(xv" in values
    preamble = resources.files("lazykern.tn").joinpath("counting.cu").read_text(encoding="utf-8")
    only = KernelFamily("tropical_values_bits", preamble, options=("-std=c++17",), cache=cache)
    only.add("values_bits33_max_f32", values, signature=signature)
    assert only.warm(["values_bits33_max_f32"], arch="sm_90")[0].meta["kernel"] == "values_bits33_max_f32"
