"""Counting tropical numbers: (value, count) pairs, so one contraction gives an optimum and
how many assignments reach it (a spin glass's ground-state energy and degeneracy).

(a, m) (+) (b, n) is the better value with its count, or (a, m + n) on a tie;
(a, m) (x) (b, n) = (a + b, m * n). Values are float32/float64 (max-plus or min-plus).
Integer counts are exact, never wrapped: :func:`einsum` counts modulo 2^64 and, when a count may
not fit in int64, modulo 31-bit primes, and rebuilds every count by the Chinese remainder
theorem (:mod:`._crt`). float64 counts (weights) add and multiply as floats.

>>> import numpy as np
>>> from lazykern.tropical import counting
>>> v, c = counting.einsum("i,i->", np.array([1.0, 3.0, 3.0]), np.array([0.0, 0.0, 0.0]))
>>> float(v), int(c)
(3.0, 2)

The GPU kernel (``counting.cu``: one thread per output entry, every operand read and written through
element strides, so a sweep's boundary is read in place and no step copies it, as in the max-plus
row kernels of :mod:`._strided`) is its own lazily compiled
:class:`~lazykern.families.family.KernelFamily`, ``tropical_counting``, one fragment per
(semiring, value dtype, count dtype); NumPy operands use the NumPy kernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import LazykernWarning, warn_user
from ..families.family import KernelFamily
from ..launch import _device
from . import _crt, _reference_einsum
from ._backend import Backend
from ._contract import Algebra
from .einsum import build_network, contract_network, parse

if TYPE_CHECKING:
    from ..store.cache import KernelCache

VALUE_DTYPES = {"f32": ("float", np.dtype("float32")), "f64": ("double", np.dtype("float64"))}
# counts: (C type, dtype, ring of counting.cu): float64 floats, int64 modulo 2^64, int32 residues modulo p
COUNT_DTYPES = {
    "i64": ("long long", np.dtype("int64"), 1),
    "f64": ("double", np.dtype("float64"), 0),
    "m32": ("int", np.dtype("int32"), 2),
}
THREADS = 256
_MAX_BLOCKS = 132 * 32
SIGNATURE = ["ptr"] * 6 + ["int64", "int32", "int32", "int32"] + ["int64"] * 8 + ["uint64"]


def kernel_name(semiring: str, value: np.dtype, count: np.dtype) -> str:
    """``count_{max|min}_{f32|f64}_{i64|f64|m32}``; int32 counts are residues modulo a prime."""
    v = next(k for k, (_, d) in VALUE_DTYPES.items() if d == value)
    c = next(k for k, (_, d, _) in COUNT_DTYPES.items() if d == count)
    return f"count_{'max' if semiring == 'maxplus' else 'min'}_{v}_{c}"


def make_family(cache: KernelCache | None = None) -> KernelFamily:
    """The counting family: counting.cu plus one two-line fragment per instantiation."""
    preamble = resources.files(__package__).joinpath("counting.cu").read_text(encoding="utf-8")
    fam = KernelFamily("tropical_counting", preamble, options=("-std=c++17",), cache=cache)
    for semiring in ("maxplus", "minplus"):
        for vt, vd in VALUE_DTYPES.values():
            for ct, cd, ring in COUNT_DTYPES.values():
                name = kernel_name(semiring, vd, cd)
                args = "av, ac, bv, bc, cv, cc, total, M, N, K, sa, ars, acs, sb, brs, bcs, sc, ldc, mod"
                code = (
                    f'extern "C" __global__ void {name}(const {vt} *av, const {ct} *ac, const {vt} *bv, '
                    f"const {ct} *bc, {vt} *cv, {ct} *cc, long long total, int M, int N, int K, long long sa, "
                    "long long ars, long long acs, long long sb, long long brs, long long bcs, long long sc, "
                    "long long ldc, unsigned long long mod) { lk_count_bmm"
                    f"<{vt}, {ct}, {'true' if semiring == 'maxplus' else 'false'}, {ring}>({args}); }}\n"
                )
                fam.add(name, code, signature=SIGNATURE)
    return fam


family = make_family()


def einsum(
    subscripts: str,
    *operands: Any,
    semiring: str = "maxplus",
    optimize: Any = "auto",
    slices: Sequence[Any] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    devices: Sequence[int] | str | None = None,
) -> tuple[Any, Any]:
    """(values, counts) of the counting contraction. An operand is an array (every entry counts
    once) or a pair (values, counts); counts are int64 or float64. Arguments as for
    :func:`lazykern.tn.einsum` (with ``devices``, the groups' results are added in the counting
    semiring: counts of tied values sum).

    Integer counts are exact: when every count provably fits in int64 (the product of the summed
    labels' sizes and of each operand's largest |count| is below 2^63) one pass gives them as an
    int64 array on the operands' device; otherwise further passes modulo primes rebuild them
    (:mod:`._crt`) and the result comes back on the host: values as a NumPy array, counts as a
    NumPy object array of Python ints (a Python int for a scalar result). float64 counts are
    floats: they round past 2^53 (a warning says when)."""
    inputs, output = parse(subscripts, len(operands))
    return count_network(
        inputs,
        output,
        operands,
        semiring=semiring,
        optimize=optimize,
        slices=slices,
        memory_limit=memory_limit,
        max_time=max_time,
        devices=devices,
    )


def count_network(
    inputs: Sequence[Sequence[Any]],
    output: Sequence[Any],
    operands: Sequence[Any],
    *,
    semiring: str = "maxplus",
    optimize: Any = "auto",
    slices: Sequence[Any] = (),
    memory_limit: int | None = None,
    max_time: float | None = None,
    devices: Sequence[int] | str | None = None,
) -> tuple[Any, Any]:
    """:func:`einsum` with any hashable labels, as :func:`lazykern.tn.einsum.contract_network`."""
    net = build_network(inputs, output, operands, semiring, CountingAlgebra)
    if any(net.be.dtype(t.parts[1]).kind == "f" for t in net.leaves):  # weights: one pass of floats
        floats: tuple[Any, Any] = contract_network(
            inputs,
            output,
            operands,
            semiring=semiring,
            optimize=optimize,
            slices=slices,
            memory_limit=memory_limit,
            max_time=max_time,
            algebra=CountingAlgebra,
            devices=devices,
        )
        largest = float(_largest(net.be, floats[1]))
        if largest >= 2.0**53:
            warn_user(
                f"counting.einsum: float64 counts up to {largest:.6g} round past 2^53; pass int64 counts "
                "(or plain arrays) for exact integers",
                LazykernWarning,
            )
        return floats
    plan = net.plan(optimize, slices, memory_limit, max_time)  # planned once, for the widest counts

    def run(modulus: int) -> tuple[Any, Any]:
        out: tuple[Any, Any] = contract_network(
            inputs, output, operands, semiring=semiring, optimize=plan, algebra=algebra(modulus), devices=devices
        )
        return out

    return exact(net.be, [t.labels for t in net.leaves], output, operands, net.sizes, run)


def exact(
    be: Backend,
    labels: Sequence[Sequence[Any]],
    output: Sequence[Any],
    operands: Sequence[Any],
    sizes: dict[Any, int],
    run: _crt.Pass,
) -> tuple[Any, Any]:
    """Exact integer counts from passes ``run(modulus)`` of one plan (0: int64 modulo 2^64, else the
    algebra :func:`algebra` (modulus)), wherever the passes run (one device, ``devices=`` groups,
    Dask workers): every group of a pass counts in the same ring and adds in it, so a pass's result is
    the count modulo that number, and :func:`._crt.solve` rebuilds the integers. One pass when the
    :func:`count_bound` proves int64 holds every count (the result left where ``run`` gives it)."""
    given = [op[1] for op in operands if isinstance(op, tuple)]  # the others count 1 per entry
    bound = count_bound(be, given, labels, output, sizes)
    if bound < 1 << 63:
        return run(0)  # exact in int64, left where the operands are
    values, counts = _crt.solve(lambda m: tuple(_host(be, x) for x in run(m)), bound)
    return values, counts


def count_bound(
    be: Backend, counts: Sequence[Any], labels: Sequence[Sequence[Any]], output: Sequence[Any], sizes: dict[Any, int]
) -> int:
    """An upper bound on every |count| of the result: each is a sum over the assignments of the
    summed labels of a product of one count per operand (``counts``: the operands' counts that
    are not all 1)."""
    bound = math.prod(sizes[lab] for lab in {x for t in labels for x in t} - set(output))
    for c in counts:
        bound *= int(_largest(be, c))
    return bound


def _largest(be: Backend, x: Any) -> int | float:
    """max |x|, exactly (a Python int for integers; 0 for an empty array). From the extremes, not
    abs(): int64's abs(-2^63) wraps."""
    if math.prod(int(n) for n in x.shape) == 0:
        return 0
    if hasattr(x, "copy_to_host"):  # a Numba array: read on the host
        x, be = x.copy_to_host(), Backend("numpy", np)
    big, small = be.item(x.max()), be.item(x.min())
    largest: int | float = max(abs(big), abs(small))
    return largest


def _host(be: Backend, x: Any) -> np.ndarray:
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "copy_to_host"):  # results handed back as Numba arrays
        host: np.ndarray = x.copy_to_host()
        return host
    return be.to_host(x)


class CountingAlgebra(Algebra):
    """(value, count) arrays; the product is :func:`count_bmm`. Integer counts are int64, counted
    modulo 2^64; :func:`algebra` gives the variant that counts modulo a prime."""

    nparts = 2
    counting = True
    modulus = 0  # 0: the counts' own arithmetic (int64 modulo 2^64, or floats)

    @classmethod
    def prepare(cls, be: Backend, parts: tuple[Any, ...], position: int) -> tuple[Any, ...]:
        ones = len(parts) == 1
        if ones:  # every entry counts once (made in the pass's count type: modulo p, int32 residues)
            parts = (parts[0], be.full(parts[0], tuple(parts[0].shape), 1, be.xp.int32 if cls.modulus else _int64(be)))
        if len(parts) != 2:
            raise ValueError(f"counting operand {position} must be an array or a (values, counts) pair")
        value, count = be.dtype(parts[0]), be.dtype(parts[1])
        counts_allowed = (np.int32,) if ones and cls.modulus else (np.int64, np.float64)
        if value not in (d for _, d in VALUE_DTYPES.values()) or count not in counts_allowed:
            raise TypeError(
                f"counting operand {position} has values {value} and counts {count}; "
                "values must be float32/float64 and counts int64/float64"
            )
        if tuple(parts[0].shape) != tuple(parts[1].shape):
            raise ValueError(f"counting operand {position}: values {parts[0].shape} and counts {parts[1].shape} differ")
        if cls.modulus and not ones:
            if count.kind == "f":
                raise TypeError(f"counting operand {position}: counts modulo a prime must be integers, got {count}")
            parts = (parts[0], _cast(be, parts[1] % cls.modulus, "int32"))
        return parts

    def unit(self, like: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...]:
        return (self.be.full(like[0], shape, 0), self.be.full(like[1], shape, 1))

    def bmm(self, A: tuple[Any, ...], B: tuple[Any, ...], argmax: bool) -> tuple[tuple[Any, ...], Any]:
        if argmax:
            raise ValueError("counting contractions keep no argmax; use tropical.argmax_einsum for a configuration")
        return count_bmm(self.be, *A, *B, self.semiring, self.modulus), None

    def rows(self, X: tuple[Any, ...], Y: tuple[Any, ...], lay: dict[str, Any]) -> tuple[Any, ...]:
        """A strided step (:mod:`._strided`): X's values and counts read in place through the layout's
        strides, Y's contiguous (batch, con, right), the result in X's axis order."""
        batch, M, N, K = lay["dims"]
        shape = tuple(lay["out_shape"])
        out = (self.be.empty(X[0], shape), self.be.empty(X[1], shape))
        strides = (lay["a"], (K * N if batch > 1 else 0, N, 1), lay["c"])
        _launch(self.be, X, Y, out, lay["dims"], strides, self.semiring, self.modulus)
        return out

    def add(self, X: tuple[Any, ...], Y: tuple[Any, ...]) -> tuple[Any, ...]:
        """Combine two slices: the better value, counts added where both reach it."""
        v = self.be.fmax(X[0], Y[0], self.semiring == "minplus")
        zero = self.be.full(X[1], tuple(X[1].shape), 0)
        x, y = self.be.where(X[0] == v, X[1], zero), self.be.where(Y[0] == v, Y[1], zero)
        if self.modulus:
            return v, _cast(self.be, (_cast(self.be, x, "int64") + y) % self.modulus, "int32")
        with np.errstate(over="ignore"):  # int64 counts are counted modulo 2^64
            return v, x + y


_algebras: dict[int, type[CountingAlgebra]] = {0: CountingAlgebra}


def algebra(modulus: int) -> type[CountingAlgebra]:
    """The counting algebra modulo ``modulus`` (a prime below 2^31: int32 residues; 0: int64 counts)."""
    found = _algebras.get(modulus)
    if found is None:
        if not 2 <= modulus < 1 << 31:
            raise ValueError(f"counts are taken modulo a prime below 2^31, got {modulus}")
        found = _algebras[modulus] = type(f"CountingModulo{modulus}", (CountingAlgebra,), {"modulus": modulus})
    return found


def _cast(be: Backend, x: Any, dtype: str) -> Any:
    if be.name == "torch":
        return x.to(getattr(be.xp, dtype))
    return x.astype(dtype)


def _int64(be: Backend) -> Any:
    return be.xp.int64


def count_bmm(
    be: Backend, Av: Any, Ac: Any, Bv: Any, Bc: Any, semiring: str = "maxplus", modulus: int = 0
) -> tuple[Any, Any]:
    """(b|1, M, K) x (b|1, K, N) counting product on the operands' backend, each operand read through
    its own strides (a transposed or permuted view is not copied unless its values and counts are laid
    out differently); the result is C-contiguous. ``modulus``: int32 counts are residues modulo it."""
    if be.on_host:
        return _reference_einsum.count_bmm(Av, Ac, Bv, Bc, semiring, modulus)
    if be.dtype(Av) != be.dtype(Bv) or be.dtype(Ac) != be.dtype(Bc):
        raise TypeError(f"counting operands differ in dtype: {be.dtype(Av)}/{be.dtype(Bv)} values")
    (Av, Ac), (Bv, Bc) = _alike(be, Av, Ac), _alike(be, Bv, Bc)
    batch = max(int(Av.shape[0]), int(Bv.shape[0]))
    M, K, N = int(Av.shape[1]), int(Av.shape[2]), int(Bv.shape[2])
    out = (be.empty(Av, (batch, M, N)), be.empty(Ac, (batch, M, N)))  # the kernel writes every entry
    if batch * M * N == 0:
        return out
    sa, sb = (s if int(x.shape[0]) > 1 else (0, *s[1:]) for x, s in ((Av, be.strides(Av)), (Bv, be.strides(Bv))))
    _launch(be, (Av, Ac), (Bv, Bc), out, (batch, M, N, K), (sa, sb, (M * N, N)), semiring, modulus)
    return out


def _alike(be: Backend, values: Any, counts: Any) -> tuple[Any, Any]:
    """Values and counts with the same element strides (the kernel reads both through one set)."""
    if be.strides(values) == be.strides(counts):
        return values, counts
    return be.contiguous(values), be.contiguous(counts)


def _launch(be: Backend, A: Any, B: Any, C: Any, dims: Any, strides: Any, semiring: str, modulus: int = 0) -> None:
    """C(b, i, j) = (+)_k A(b, i, k) (x) B(b, k, j) for (values, counts) triples, through element
    strides ((sa, ars, acs), (sb, brs, bcs), (sc, ldc)); a NumPy ``be`` that is not the host path
    (tests of the GPU route on the host) computes the same through the same strides."""
    batch, M, N, K = dims
    (sa, ars, acs), (sb, brs, bcs), (sc, ldc) = strides
    if be.xp is np:
        views = [
            _strided(x, shape, st)
            for x, shape, st in (
                (A[0], (batch, M, K), (sa, ars, acs)),
                (A[1], (batch, M, K), (sa, ars, acs)),
                (B[0], (batch, K, N), (sb, brs, bcs)),
                (B[1], (batch, K, N), (sb, brs, bcs)),
            )
        ]
        v, c = _reference_einsum.count_bmm(*(np.ascontiguousarray(x) for x in views), semiring, modulus)
        _strided(C[0], (batch, M, N), (sc, ldc, 1), True)[...] = v
        _strided(C[1], (batch, M, N), (sc, ldc, 1), True)[...] = c
        return
    from ..tropical import _arrays

    names = ("Av", "Ac", "Bv", "Bc", "Cv", "Cc")
    ops = [_arrays.as_operand(x, name) for x, name in zip((*A, *B, *C), names)]
    name = kernel_name(semiring, be.dtype(A[0]), be.dtype(A[1]))
    device = _device.resolve_or_current(_device.common([(n, o.device) for n, o in zip(names, ops)]))
    total = batch * M * N
    blocks = min(-(-total // THREADS), _MAX_BLOCKS)
    with _device.on(device):  # the operands' device, which need not be the current one
        kernel = family.get(name, arch=_device.arch(device))
        kernel[(blocks,), (THREADS,), ops[4].stream or 0](
            *(o.ptr for o in ops), total, M, N, K, sa, ars, acs, sb, brs, bcs, sc, ldc, np.uint64(modulus)
        )


def _strided(x: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...], writeable: bool = False) -> np.ndarray:
    return np.lib.stride_tricks.as_strided(x, shape, tuple(s * x.itemsize for s in strides), writeable=writeable)
