"""The arena's step on the GPU: the counting family's bit-addressed body with no count array, its own family.

:mod:`._arena` runs an energy's steps over a boundary held in one buffer with ``lk_count_bits``
(``counting.cu``) at R = 0: values only, no count array read or written (its arrays are sized
``R > 0 ? R : 1``). The body is the counting kernel's, unchanged; only the names and the short fragments
that instantiate it live here, in a family of their own (``tn_values_bits``, counting.cu as its preamble),
so that :mod:`._arena` needs nothing of :mod:`.counting`, which imports the executor that imports it.
One fragment per (semiring, value dtype, spins summed out, spins brought in), made when first asked for.
"""

from __future__ import annotations

import itertools
import re
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np

from ..families.family import KernelFamily
from ._strided import BITS_MAX

if TYPE_CHECKING:
    from ..store.cache import KernelCache

THREADS = 256
VALUE_TYPES: dict[str, tuple[str, np.dtype]] = {
    "f32": ("float", np.dtype("float32")),
    "f64": ("double", np.dtype("float64")),
}
# values of X, Y and C, the rows, batch bits, the bit masks (holes) and positions
SIGNATURE = ["ptr"] * 3 + ["int64", "int32"] + ["uint64"] * 6
_NAME = re.compile(r"values_bits(\d)(\d)_(max|min)_(f32|f64)")


def kernel_name(semiring: str, value: np.dtype, kb: int, nb: int) -> str:
    """``values_bitsKN_{max|min}_{f32|f64}``: the step summing out K spins and bringing in N (0 to BITS_MAX)."""
    v = next(k for k, (_, d) in VALUE_TYPES.items() if d == value)
    return f"values_bits{kb}{nb}_{'max' if semiring == 'maxplus' else 'min'}_{v}"


def _names() -> list[str]:
    return [
        kernel_name(semiring, vd, kb, nb)
        for semiring in ("maxplus", "minplus")
        for _, vd in VALUE_TYPES.values()
        for kb, nb in itertools.product(range(BITS_MAX + 1), repeat=2)
    ]


def _fragment(name: str) -> tuple[str, list[str]] | None:
    """(code, signature) of the kernel ``name`` (:func:`kernel_name`), None for another name."""
    found = _NAME.fullmatch(name)
    if found is None:
        return None
    kb, nb, semiring, v = found.groups()
    if max(int(kb), int(nb)) > BITS_MAX:
        return None
    vt = VALUE_TYPES[v][0]
    code = (
        f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}(const {vt} *xv, const {vt} *yv, '
        f"{vt} *cv, long long rows, int nb, unsigned long long holes_in, unsigned long long holes_out, "
        "unsigned long long conpos, unsigned long long batch_in, unsigned long long batch_out, "
        "unsigned long long rightpos) {\n"
        "    const int *const none[4] = {nullptr, nullptr, nullptr, nullptr};\n"
        "    int *const out[4] = {nullptr, nullptr, nullptr, nullptr};\n"
        "    const unsigned long long mod[4] = {0, 0, 0, 0};\n"
        f"    lk_count_bits<{vt}, int, {'true' if semiring == 'max' else 'false'}, 0, {kb}, {nb}, 0>(xv, none, yv, "
        "none, cv, out, rows, nb, holes_in, holes_out, conpos, batch_in, batch_out, rightpos, mod);\n"
        "}\n"
    )
    return code, list(SIGNATURE)


def make_family(cache: KernelCache | None = None) -> KernelFamily:
    """The family: counting.cu as the preamble, one generated fragment per kernel name."""
    preamble = resources.files(__package__).joinpath("counting.cu").read_text(encoding="utf-8")
    fam = KernelFamily("tn_values_bits", preamble, options=("-std=c++17",), cache=cache)
    fam.add_generator(_fragment, _names)
    return fam


_family: KernelFamily | None = None


def family() -> KernelFamily:
    """The process's ``tn_values_bits`` family, made on first use (an energy that never needs an arena
    never reads counting.cu for it)."""
    global _family
    if _family is None:
        _family = make_family()
    return _family
