"""Counting tropical numbers: (value, count) pairs, so one contraction gives an optimum and
how many assignments reach it (a spin glass's ground-state energy and degeneracy).

(a, m) (+) (b, n) is the better value with its count, or (a, m + n) on a tie;
(a, m) (x) (b, n) = (a + b, m * n). Values are float32/float64 (max-plus or min-plus),
counts int64 (exact up to 2^63) or float64 (for astronomically many optima).

>>> import numpy as np
>>> from lazykern.tropical import counting
>>> v, c = counting.einsum("i,i->", np.array([1.0, 3.0, 3.0]), np.array([0.0, 0.0, 0.0]))
>>> float(v), int(c)
(3.0, 2)

The GPU kernel (``counting.cu``: one thread per output entry) is its own lazily compiled
:class:`~lazykern.families.family.KernelFamily`, ``tropical_counting``, one fragment per
(semiring, value dtype, count dtype); NumPy operands use the NumPy kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from ..families.family import KernelFamily
from ..launch import _device
from . import _reference_einsum
from ._backend import Backend
from ._contract import Algebra
from .einsum import contract_network, parse

if TYPE_CHECKING:
    from ..store.cache import KernelCache

VALUE_DTYPES = {"f32": ("float", np.dtype("float32")), "f64": ("double", np.dtype("float64"))}
COUNT_DTYPES = {"i64": ("long long", np.dtype("int64")), "f64": ("double", np.dtype("float64"))}
THREADS = 256
_MAX_BLOCKS = 132 * 32
SIGNATURE = ["ptr"] * 6 + ["int64", "int32", "int32", "int32", "int64", "int64"]


def kernel_name(semiring: str, value: np.dtype, count: np.dtype) -> str:
    v = next(k for k, (_, d) in VALUE_DTYPES.items() if d == value)
    c = next(k for k, (_, d) in COUNT_DTYPES.items() if d == count)
    return f"count_{'max' if semiring == 'maxplus' else 'min'}_{v}_{c}"


def make_family(cache: KernelCache | None = None) -> KernelFamily:
    """The counting family: counting.cu plus one two-line fragment per instantiation."""
    preamble = resources.files(__package__).joinpath("counting.cu").read_text(encoding="utf-8")
    fam = KernelFamily("tropical_counting", preamble, options=("-std=c++17",), cache=cache)
    for semiring in ("maxplus", "minplus"):
        for vt, vd in VALUE_DTYPES.values():
            for ct, cd in COUNT_DTYPES.values():
                name = kernel_name(semiring, vd, cd)
                args = "av, ac, bv, bc, cv, cc, total, M, N, K, sa, sb"
                code = (
                    f'extern "C" __global__ void {name}(const {vt} *av, const {ct} *ac, const {vt} *bv, '
                    f"const {ct} *bc, {vt} *cv, {ct} *cc, long long total, int M, int N, int K, long long sa, "
                    f"long long sb) {{ lk_count_bmm<{vt}, {ct}, {'true' if semiring == 'maxplus' else 'false'}>"
                    f"({args}); }}\n"
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
) -> tuple[Any, Any]:
    """(values, counts) of the counting contraction. An operand is an array (every entry counts
    once) or a pair (values, counts). Arguments as for :func:`lazykern.tropical.einsum`."""
    inputs, output = parse(subscripts, len(operands))
    values_and_counts: tuple[Any, Any] = contract_network(
        inputs,
        output,
        operands,
        semiring=semiring,
        optimize=optimize,
        slices=slices,
        memory_limit=memory_limit,
        max_time=max_time,
        algebra=CountingAlgebra,
    )
    return values_and_counts


class CountingAlgebra(Algebra):
    """(value, count) arrays; the product is :func:`count_bmm`."""

    nparts = 2
    counting = True

    @classmethod
    def prepare(cls, be: Backend, parts: tuple[Any, ...], position: int) -> tuple[Any, ...]:
        if len(parts) == 1:
            parts = (parts[0], be.full(parts[0], tuple(parts[0].shape), 1, _int64(be)))
        if len(parts) != 2:
            raise ValueError(f"counting operand {position} must be an array or a (values, counts) pair")
        value, count = be.dtype(parts[0]), be.dtype(parts[1])
        if value not in (d for _, d in VALUE_DTYPES.values()) or count not in (d for _, d in COUNT_DTYPES.values()):
            raise TypeError(
                f"counting operand {position} has values {value} and counts {count}; "
                "values must be float32/float64 and counts int64/float64"
            )
        if tuple(parts[0].shape) != tuple(parts[1].shape):
            raise ValueError(f"counting operand {position}: values {parts[0].shape} and counts {parts[1].shape} differ")
        return parts

    def unit(self, like: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, ...]:
        return (self.be.full(like[0], shape, 0), self.be.full(like[1], shape, 1))

    def bmm(self, A: tuple[Any, ...], B: tuple[Any, ...], argmax: bool) -> tuple[tuple[Any, ...], Any]:
        if argmax:
            raise ValueError("counting contractions keep no argmax; use tropical.argmax_einsum for a configuration")
        return count_bmm(self.be, *A, *B, self.semiring), None

    def add(self, X: tuple[Any, ...], Y: tuple[Any, ...]) -> tuple[Any, ...]:
        """Combine two slices: the better value, counts added where both reach it."""
        v = self.be.fmax(X[0], Y[0], self.semiring == "minplus")
        zero = self.be.full(X[1], tuple(X[1].shape), 0)
        c = self.be.where(X[0] == v, X[1], zero) + self.be.where(Y[0] == v, Y[1], zero)
        return v, c


def _int64(be: Backend) -> Any:
    return be.xp.int64


def count_bmm(be: Backend, Av, Ac, Bv, Bc, semiring: str = "maxplus") -> tuple[Any, Any]:
    """(b|1, M, K) x (b|1, K, N) counting product on the operands' backend."""
    if be.on_host:
        return _reference_einsum.count_bmm(Av, Ac, Bv, Bc, semiring)
    from . import _arrays

    if be.dtype(Av) != be.dtype(Bv) or be.dtype(Ac) != be.dtype(Bc):
        raise TypeError(f"counting operands differ in dtype: {be.dtype(Av)}/{be.dtype(Bv)} values")
    Av, Ac, Bv, Bc = (be.contiguous(x) for x in (Av, Ac, Bv, Bc))
    batch = max(int(Av.shape[0]), int(Bv.shape[0]))
    M, K, N = int(Av.shape[1]), int(Av.shape[2]), int(Bv.shape[2])
    Cv = be.full(Av, (batch, M, N), 0)
    Cc = be.full(Ac, (batch, M, N), 0)
    total = batch * M * N
    if total == 0:
        return Cv, Cc
    ops = [
        _arrays.as_operand(x, name) for x, name in zip((Av, Ac, Bv, Bc, Cv, Cc), ("Av", "Ac", "Bv", "Bc", "Cv", "Cc"))
    ]
    sa = M * K if int(Av.shape[0]) > 1 else 0
    sb = K * N if int(Bv.shape[0]) > 1 else 0
    name = kernel_name(semiring, be.dtype(Av), be.dtype(Ac))
    device = _device.resolve_or_current(_device.common([(n, o.device) for n, o in zip("AaBbCc", ops)]))
    blocks = min(-(-total // THREADS), _MAX_BLOCKS)
    stream = ops[4].stream or 0
    with _device.on(device):  # the operands' device, which need not be the current one
        kernel = family.get(name, arch=_device.arch(device))
        kernel[(blocks,), (THREADS,), stream](*(o.ptr for o in ops), total, M, N, K, sa, sb)
    return Cv, Cc
