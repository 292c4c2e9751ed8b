"""Counts past int64 in one pass of saturating 128-bit counts (lazykern/tn/counts/wide.py, counting.cu's
RING 3): exact wherever no count reads back 2^128 - 1, else the float64 pass and the primes, as before."""

from __future__ import annotations

import contextlib
import logging
from unittest import mock

import numpy as np
import pytest

from lazykern.tn import _arena, _backend, _contract, counting
from lazykern.tn import networks as nw
from lazykern.tn.counts import algebra as counts_algebra
from lazykern.tn.counts import kernels, passes, wide

from ._spin_oracles import transfer_matrix
from .test_tn_arena import CASES, _case
from .test_tn_count_arena import _forced
from .test_tropical_counting import _free_rows
from .test_tropical_einsum import device_route

ROUTE = _backend.Backend("cupy", np)


@pytest.fixture
def short_on(monkeypatch):
    """int16 values beside 128-bit counts where they fit (the default; explicit where a test needs them)."""
    monkeypatch.setattr(passes, "SHORT_VALUES", True)


HOST = _backend.Backend("numpy", np)
EDGES = [0, 1, 2, 3, (1 << 64) - 1, 1 << 64, (1 << 64) + 1, 3 << 100, (1 << 127) + 5, wide.SAT - 1, wide.SAT]


def _big(rng, shape):
    """Counts of ``shape`` as Python ints: small ones, words' edges, and values near 2^128."""
    pick = rng.integers(0, 3, shape)
    small = rng.integers(0, 5, shape)
    edge = rng.integers(0, len(EDGES), shape)
    out = np.empty(shape, dtype=object)
    for i in np.ndindex(*shape):
        out[i] = int(small[i]) if pick[i] else EDGES[int(edge[i])]
    return out


def _exact_product(Av, Ac, Bv, Bc, semiring):
    """The counting product by definition, in Python ints, then SAT where the exact count reaches it."""
    batch, M, K = Av.shape
    N = Bv.shape[2]
    best = max if semiring == "maxplus" else min
    values = np.empty((batch, M, N), Av.dtype)
    counts = np.empty((batch, M, N), object)
    for b, i, j in np.ndindex(batch, M, N):
        sums = [float(Av[b, i, k]) + float(Bv[b, k, j]) for k in range(K)]
        v = best(sums)
        values[b, i, j] = v
        counts[b, i, j] = min(sum(int(Ac[b, i, k]) * int(Bc[b, k, j]) for k in range(K) if sums[k] == v), wide.SAT)
    return values, counts


def test_words_hold_every_count_from_0_to_2_128_minus_1():
    xs = np.array(EDGES, dtype=object)
    held = wide.words(np, xs)
    assert held.dtype == wide.U128 and held.shape == xs.shape
    assert list(wide.integers(held)) == EDGES
    assert list(wide.integers(wide.words(np, np.arange(5, dtype=np.int64)))) == [0, 1, 2, 3, 4]
    assert wide.exact_or_none(held) is None and list(wide.exact_or_none(held[:-1])) == EDGES[:-1]
    with pytest.raises(ValueError, match="from 0 to 2"):
        wide.words(np, np.array([-1], dtype=object))
    with pytest.raises(ValueError, match="from 0 to 2"):
        wide.words(np, np.array([wide.SAT + 1], dtype=object))


@pytest.mark.parametrize("semiring", ["maxplus", "minplus"])
def test_the_saturating_product_is_the_exact_one_below_2_128(semiring):
    """Sums and products past 2^64 carry into the high word; past 2^128 - 1 they give SAT; 0 times SAT is 0."""
    rng = np.random.default_rng(1)
    Av = rng.integers(-2, 3, (2, 5, 6)).astype(np.float32)
    Bv = rng.integers(-2, 3, (2, 6, 4)).astype(np.float32)
    Ac, Bc = _big(rng, Av.shape), _big(rng, Bv.shape)
    v, c = wide.count_bmm(Av, wide.words(np, Ac), Bv, wide.words(np, Bc), semiring)
    wv, wc = _exact_product(Av, Ac, Bv, Bc, semiring)
    np.testing.assert_array_equal(v, wv)
    assert wide.integers(c).tolist() == wc.tolist()
    assert any(x == wide.SAT for x in wc.reshape(-1)) and any(0 < x < wide.SAT and x >= 1 << 64 for x in wc.reshape(-1))


def _wide_step(xp, be, n, con, batch, right, semiring, inside, seed=0, short=False):
    """One arena step with 128-bit counts (as tests/test_tn_count_arena.py's), against the exact product;
    ``short``: int16 values, some of them the semiring's zero (+-infinity)."""
    rng, x_labels, y_labels, keep, xv, yv = _case(n, con, batch, right, seed)
    if short:
        zero = -np.inf if semiring == "maxplus" else np.inf
        xv = np.where(rng.random(xv.shape) < 0.2, zero, xv).astype(np.float32)
        yv = np.where(rng.random(yv.shape) < 0.2, zero, yv).astype(np.float32)
    xc, yc = _big(rng, xv.shape), _big(rng, yv.shape)
    cast = wide.to_short if short else (lambda v: v)
    x_parts, y_parts = (cast(xv), wide.words(np, xc)), (cast(yv), wide.words(np, yc))
    arena = _arena.Arena(n + right + 2)
    if inside:
        where = [int(p) for p in rng.choice(arena.bits, size=n, replace=False)]
        X = arena.view(be, tuple(xp.asarray(p) for p in x_parts), where)
        for view, part in zip(X, x_parts):
            view[...] = xp.asarray(part)
        arena.held = True
    else:
        X = tuple(xp.asarray(p.copy()) for p in x_parts)
    alg = counts_algebra.SaturatingCounting(semiring, be)
    alg.rank = {lab: i for i, lab in enumerate(sorted(set(x_labels) | set(y_labels)))}
    alg.arena = arena
    Y = tuple(xp.asarray(p) for p in y_parts)
    with mock.patch.object(_contract, "STRIDED_MIN", 0):
        term, _ = _contract.contract(
            alg, _contract.Term(X, tuple(x_labels)), _contract.Term(Y, tuple(y_labels)), keep, False, (True, False)
        )
    host = counting.CountingAlgebra(semiring, HOST)
    want, _ = _contract.contract(
        host,
        _contract.Term((xv.astype(np.float64), xc), tuple(x_labels)),
        _contract.Term((yv.astype(np.float64), yc), tuple(y_labels)),
        keep,
        False,
    )
    perm = [want.labels.index(x) for x in term.labels]
    wv, wc = (np.transpose(p, perm) for p in want.parts)
    got = [np.asarray(p.get() if hasattr(p, "get") else p) for p in term.parts]
    np.testing.assert_array_equal(wide.from_short(got[0], wv.dtype) if short else got[0], wv)
    assert got[0].dtype == (wide.SHORT if short else np.float32)
    assert wide.integers(got[1]).tolist() == np.minimum(wc, wide.SAT).tolist()


@pytest.mark.parametrize(("n", "con", "batch", "right"), CASES)
@pytest.mark.parametrize("inside", [True, False])
@pytest.mark.parametrize("short", [False, True])
def test_a_128_bit_arena_step_is_the_exact_product(n, con, batch, right, inside, short):
    _wide_step(np, ROUTE, n, con, batch, right, "maxplus", inside, seed=n + con, short=short)
    _wide_step(np, ROUTE, n, con, batch, right, "minplus", inside, seed=n + right, short=short)


def test_values_ride_as_int16_only_where_every_sum_fits():
    """Integer values whose operands' largest |value|s sum to at most 32766, infinities only of the semiring's
    zero, no NaN; +-32767 stands for +-infinity both ways."""
    a, b = np.array([1.0, -3.0, -np.inf], np.float32), np.full(4, 16000.0, np.float32)
    assert wide.short_fits([a, b], "maxplus") and not wide.short_fits([a, b], "minplus")
    c = np.full(2, 17000.0)
    assert wide.short_fits([b, -b], "maxplus") and not wide.short_fits([c, -c], "maxplus")  # 32000; 34000
    assert not wide.short_fits([np.array([0.5])], "maxplus") and not wide.short_fits([np.array([np.nan])], "maxplus")
    assert not wide.short_fits([np.array([1], np.int64)], "maxplus")
    assert wide.short_fits([np.array([32766.0]), np.array([-np.inf])], "maxplus")
    assert wide.to_short(a).tolist() == [1, -3, -32767] and wide.to_short(np.array([np.inf])).tolist() == [32767]
    back = wide.from_short(wide.to_short(a), np.dtype(np.float32))
    assert back.dtype == np.float32 and back.tolist() == a.tolist()
    assert wide.from_short(np.array(-32767, np.int16), np.dtype(np.float64)) == -np.inf


@contextlib.contextmanager
def _passes():
    """The algebra of each pass a count runs, in order (``counting.count_network``'s contractions)."""
    seen: list[str] = []
    real = counting.contract_network

    def contract_network(*a, **kw):
        seen.append(kw["algebra"].__name__)
        return real(*a, **kw)

    with mock.patch.object(counting, "contract_network", contract_network):
        yield seen


def test_a_count_past_2_63_is_one_pass_of_128_bit_counts():
    """A 10 x 10 lattice with 70 free spins (about 2^75 ground states) on the GPU route: one pass of 128-bit
    counts, no float64 bound and no prime; its count the transfer matrix's, a Python int."""
    sg = _free_rows(10, 7, seed=2)
    E0, count = transfer_matrix(sg, 10)
    assert count > 2**70
    for forced in (False, True):  # the plan's steps, and every step in the arena
        with _forced() if forced else device_route(), _passes() as seen:
            got = nw.degeneracy(sg, memory_limit=2**28)
        assert got == (E0, count) and type(got[1]) is int
        assert [s for s in seen if s != "CountingAlgebra"] == ["SaturatingCounting"], seen


def test_the_128_bit_pass_takes_float_values_while_int16_ones_are_off(monkeypatch):
    sg = _free_rows(10, 7, seed=2)
    taken = []
    real = counts_algebra.SaturatingCounting.prepare.__func__

    def prepare(cls, be, parts, position):
        taken.append(np.dtype(parts[0].dtype))
        return real(cls, be, parts, position)

    monkeypatch.setattr(passes, "SHORT_VALUES", False)
    with device_route(), mock.patch.object(counts_algebra.SaturatingCounting, "prepare", classmethod(prepare)):
        assert nw.degeneracy(sg, memory_limit=2**28) == transfer_matrix(sg, 10)
    assert set(taken) == {np.dtype(np.float32)}


def test_the_128_bit_pass_takes_int16_values_where_they_fit(short_on):
    """+-J couplings (sums within +-32766): the pass's values are int16 (18 bytes an entry); decimal ones are
    scaled to integers first (int16 too); couplings of 1 and 4001, whose sums could pass int16: float32 values
    (20 bytes). Every count exact."""
    taken = []
    real = counts_algebra.SaturatingCounting.prepare.__func__

    def prepare(cls, be, parts, position):
        taken.append(np.dtype(parts[0].dtype))
        return real(cls, be, parts, position)

    pm = _free_rows(10, 7, seed=2)
    decimal = nw.SpinGlass(pm.n, pm.edges, pm.J * 1.25)  # scaled to integers (5 and -5)
    big = nw.SpinGlass(pm.n, pm.edges, pm.J * np.where(np.arange(len(pm.J)) % 2, 4001.0, 1.0))
    for sg, want in ((pm, wide.SHORT), (decimal, wide.SHORT), (big, np.float32)):
        taken.clear()
        with (
            device_route(),
            mock.patch.object(counts_algebra.SaturatingCounting, "prepare", classmethod(prepare)),
            _passes() as seen,
        ):
            got = nw.degeneracy(sg, memory_limit=2**28)
        assert got == transfer_matrix(sg, 10)
        assert "SaturatingCounting" in seen and set(taken) == {np.dtype(want)}, (seen, set(taken))


def test_a_count_past_2_128_saturates_and_is_counted_modulo_primes():
    """12 x 12 with every coupling 0: 2^144 ground states. The 128-bit pass saturates; the float64 pass and
    the primes give the count."""
    sg = _free_rows(12, 12, seed=3)
    E0, count = transfer_matrix(sg, 12)
    assert count == 2**144
    with _forced(), _passes() as seen:
        assert nw.degeneracy(sg, memory_limit=2**28) == (E0, count)
    assert seen[0] == "SaturatingCounting" and any(s.startswith("CountingModulo") for s in seen), seen


def test_the_128_bit_pass_runs_only_where_it_is_exact_and_fits(short_on):
    """Not on the host (its int64 or object counts are exact already), not for a count int64 holds, not
    where 16-byte counts do not fit the memory; negative counts given are counted modulo primes."""
    sg = _free_rows(10, 7, seed=2)
    want = transfer_matrix(sg, 10)
    with _passes() as seen:
        assert nw.degeneracy(sg) == want
    assert "SaturatingCounting" not in seen
    with device_route(), _passes() as seen:
        assert nw.degeneracy(nw.square_lattice(6, seed=1), memory_limit=2**28) == transfer_matrix(
            nw.square_lattice(6, seed=1), 6
        )
    assert "SaturatingCounting" not in seen
    real = counting.passes.fits_memory
    big = nw.SpinGlass(sg.n, sg.edges, sg.J * np.where(np.arange(len(sg.J)) % 2, 4001.0, 1.0))  # float32 values
    for most, instance, runs in ((17, sg, False), (19, sg, True), (19, big, False), (20, big, True)):

        def fits(net, plan, b, most=most):  # entries of ``most`` bytes fit, no wider
            return b <= most and real(net, plan, b)

        with (
            device_route(),
            mock.patch.object(counting.passes, "fits_memory", fits),
            _passes() as seen,
        ):
            assert nw.degeneracy(instance, memory_limit=2**28) == transfer_matrix(instance, 10)
        assert ("SaturatingCounting" in seen) == runs and ("CountingAlgebra" in seen) != runs, (most, seen)
    rng = np.random.default_rng(0)
    a, b = rng.integers(-1, 2, (4, 8)).astype(np.float32), rng.integers(-1, 2, (8, 3)).astype(np.float32)
    ac, bc = np.full(a.shape, -(2**40), np.int64), np.full(b.shape, 2**40, np.int64)
    with device_route(), _passes() as seen:
        v, c = counting.einsum("ij,jk->ik", (a, ac), (b, bc))
    assert "SaturatingCounting" not in seen
    hv, hc = counting.einsum("ij,jk->ik", (a, ac), (b, bc))  # on the host
    np.testing.assert_array_equal(v, hv)
    assert [int(x) for x in np.ravel(c)] == [int(x) for x in np.ravel(hc)]


def test_the_128_bit_kernels_are_lazy_and_compile_for_sm90(cache):
    fam = counting.make_family(cache)
    names = [
        kernels.kernel_name("maxplus", np.dtype("float32"), wide.U128),
        kernels.kernel_name("minplus", np.dtype("float32"), wide.U128, rows="rows2"),
        kernels.kernel_name("maxplus", np.dtype("float32"), wide.U128, rows="bits21"),
        kernels.kernel_name("maxplus", np.dtype("float32"), wide.U128, rows="arena11"),
        kernels.kernel_name("minplus", np.dtype("float64"), wide.U128, rows="arena22"),
    ]
    assert names[0] == "count_max_f32_u128" and names[3] == "count_arena11_max_f32_u128"
    assert fam.compiled() == []
    built = fam.warm(names, arch="sm_90")
    assert [k.name for k in built] == names


@pytest.mark.gpu
@pytest.mark.parametrize("semiring", ["maxplus", "minplus"])
def test_the_128_bit_product_on_the_gpu(semiring):
    cupy = pytest.importorskip("cupy")
    be = _backend.Backend("cupy", cupy)
    rng = np.random.default_rng(3)
    Av = rng.integers(-2, 3, (3, 33, 7)).astype(np.float32)
    Bv = rng.integers(-2, 3, (3, 7, 5)).astype(np.float32)
    Ac, Bc = _big(rng, Av.shape), _big(rng, Bv.shape)
    v, c = counting.count_bmm(
        be, *(cupy.asarray(x) for x in (Av, wide.words(np, Ac), Bv, wide.words(np, Bc))), semiring
    )
    wv, wc = _exact_product(Av, Ac, Bv, Bc, semiring)
    np.testing.assert_array_equal(v.get(), wv)
    assert wide.integers(c.get()).tolist() == wc.tolist()


@pytest.mark.gpu
@pytest.mark.parametrize(("n", "con", "batch", "right"), CASES)
@pytest.mark.parametrize("inside", [True, False])
@pytest.mark.parametrize("short", [False, True])
def test_128_bit_arena_steps_on_the_gpu(n, con, batch, right, inside, short):
    cupy = pytest.importorskip("cupy")
    be = _backend.Backend("cupy", cupy)
    _wide_step(cupy, be, n, con, batch, right, "maxplus", inside, seed=n + con, short=short)
    _wide_step(cupy, be, n, con, batch, right, "minplus", inside, seed=n + right, short=short)


@pytest.mark.gpu
@pytest.mark.parametrize("arena", [False, True])
@pytest.mark.parametrize("short", [False, True])
def test_counts_past_2_63_and_past_2_128_on_the_gpu(caplog, monkeypatch, arena, short):
    """The 128-bit pass on the GPU (not routed to the host), its steps as planned or every boundary in the
    arena: a 16 x 16 lattice with 96 free spins (one pass, the transfer matrix's count), and 12 x 12 all free
    (2^144: it saturates, the primes count)."""
    pytest.importorskip("cupy")
    from lazykern.tn.contraction.network import Network
    from lazykern.tn.spinglass import counts as spin_counts

    monkeypatch.setattr(spin_counts, "route", lambda sg, module, dtype, optimize, *rest: (module, optimize))
    monkeypatch.setattr(passes, "SHORT_VALUES", short)
    if arena:
        monkeypatch.setattr(Network, "fits", lambda *a, **kw: False)
    for L, rows, one in ((16, 6, True), (12, 12, False), (16, 0, True)):
        sg = _free_rows(L, rows, seed=L)
        want = transfer_matrix(sg, L)
        with _passes() as seen, caplog.at_level(logging.DEBUG, logger="lazykern"):
            assert nw.degeneracy(sg, module="cupy") == want
        said = [r.getMessage() for r in caplog.records if "128" in r.getMessage()]
        if want[1] < 2**63:
            continue
        assert seen[0] == "SaturatingCounting", (seen, said)
        if one:
            assert seen == ["SaturatingCounting"], seen
        else:
            assert any(s.startswith("CountingModulo") for s in seen), seen


def test_the_launches_pass_128_bit_counts_to_their_kernels():
    """Each launch (the product, the row kernel, the tiled and the arena's step) describes 16-byte count
    arrays as the kernel's own items and names the u128 kernel (a host array stands for device memory)."""

    from lazykern.tropical import _arrays

    real = _arrays.as_operand
    launched = []

    def fake(name, arch):
        return mock.MagicMock(__getitem__=lambda self, grid: lambda *args: launched.append((name, len(args))))

    be = ROUTE
    c = wide.words(np, np.ones((2, 2, 2), np.int64))
    for v in (np.zeros((2, 2, 2), np.float32), np.zeros((2, 2, 2), wide.SHORT)):
        _launch_all(be, v, c, fake, real)
    v = "f32", "i16"
    assert [name for name, _ in launched] == [
        f"count_{kind}_{'max' if kind != 'bits11' else 'min'}_{t}_u128"
        for t in v for kind in ("arena11", "bits11", "rows2")
    ]  # fmt: skip
    with pytest.raises(TypeError, match="complex128"):
        _arrays.as_operand(c, "Ac")


def _launch_all(be, v, c, fake, real):
    import dataclasses

    from lazykern.launch import _device
    from lazykern.tn.counts import launch
    from lazykern.tropical import _arrays

    with (
        mock.patch.object(_arrays, "as_operand", lambda x, n, also=(): dataclasses.replace(real(x, n, also), device=0)),
        mock.patch.object(kernels.family, "get", fake),
        mock.patch.object(_device, "on", lambda d: contextlib.nullcontext()),
        mock.patch.object(_device, "arch", lambda d: "sm_90"),
        mock.patch.object(_device, "resolve_or_current", lambda d: 0),
    ):
        lay = {"rows": 2, "con": [0], "batch_in": [], "batch_out": [], "right_pos": [0], "holes_in": [0],
               "holes_out": [0]}  # fmt: skip
        launch.launch_arena(be, (v, c), (v, c), (v, c), lay, "maxplus", ())
        launch.launch_bits(be, (v, c), (v, c), (v, c), lay, "minplus", ())
        strides = ((4, 2, 1), (4, 2, 1), (4, 2))
        launch.launch_rows(be, (v, c), (v, c), (v, c), (2, 2, 2, 2), strides, "maxplus", ())


@pytest.mark.parametrize("short", [False, True])
def test_a_counting_einsum_past_2_63_with_an_output_is_one_128_bit_pass(monkeypatch, short):
    """Counts given past 2^40 (their products past 2^63): on the GPU route one pass of 128-bit counts whose
    object array of Python ints is the host's, values and -inf included."""
    monkeypatch.setattr(passes, "SHORT_VALUES", short)
    rng = np.random.default_rng(4)
    a = rng.integers(-1, 2, (4, 8)).astype(np.float32)
    a[0] = -np.inf  # a row no assignment reaches
    b = rng.integers(-1, 2, (8, 3)).astype(np.float32)
    ac = rng.integers(1, 2**45, a.shape).astype(np.int64)
    bc = rng.integers(1, 2**45, b.shape).astype(np.int64)
    with device_route(), _passes() as seen:
        v, c = counting.einsum("ij,jk->ik", (a, ac), (b, bc))
    assert seen == ["SaturatingCounting"]
    hv, hc = counting.einsum("ij,jk->ik", (a, ac), (b, bc))  # on the host: int64, then primes
    np.testing.assert_array_equal(v, hv)
    assert c.dtype == object and c.shape == (4, 3) and c.tolist() == np.asarray(hc).tolist()
    assert max(int(x) for x in c.reshape(-1)) > 2**63
