"""The counting kernels as a lazily compiled family, ``tropical_counting``: ``counting.cu`` (beside
this folder, in :mod:`lazykern.tn`) as the preamble and one short generated fragment per instantiation:
the product of any shape, the strided steps' row kernel and the bit-addressed step, per semiring, value
dtype, count ring, residues and tile; their names (:func:`kernel_name`) and signatures.
"""

from __future__ import annotations

import itertools
import re
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np

from ...families.family import KernelFamily
from .._strided import BITS_MAX
from . import wide

if TYPE_CHECKING:
    from ...store.cache import KernelCache

VALUE_DTYPES = {"f32": ("float", np.dtype("float32")), "f64": ("double", np.dtype("float64"))}
# values of 16-bit integers beside 128-bit counts only (:mod:`.wide`: sums proven within +-32766, +-32767 the
# infinities), never an operand's own
SHORT_VALUES = {"i16": ("short", np.dtype("int16"))}
# counts: (C type, dtype, ring of counting.cu): float64 floats, int64 modulo 2^64, int32 residues modulo p,
# unsigned 128-bit counts that saturate (held in 16-byte items, :mod:`.wide`)
COUNT_DTYPES = {
    "i64": ("long long", np.dtype("int64"), 1),
    "f64": ("double", np.dtype("float64"), 0),
    "m32": ("int", np.dtype("int32"), 2),
    "u128": ("lk_u128", wide.U128, 3),
}
THREADS = 256
MAX_BLOCKS = 132 * 32
SIGNATURE = ["ptr"] * 6 + ["int64", "int32", "int32", "int32"] + ["int64"] * 8 + ["uint64"]
# the row kernel: values and 4 count pointers per operand (R of them read), sizes, strides, 4 moduli
ROWS_SIGNATURE = ["ptr"] * 15 + ["int64", "int64", "int32", "int32"] + ["int64"] * 6 + ["uint64"] * 4
# a row kernel's tile -> its K and N bound: 8 (the strided steps' bound, _strided.KMAX), 4 and 2 (a
# sweep's usual step: one spin out, one in). Fewer registers (sm_90, float32 values, one residue:
# 61, 48, 38; four: 128 with a spill, 86, 60) let more threads of a memory-bound step wait on loads.
ROWS_KMAX = {"rows": 8, "rows4": 4, "rows2": 2}
RESIDUES_MAX = 4  # residues one pass can carry (the row kernel's count pointers)
# the bit-addressed kernel: values and 4 count pointers of X, Y and C, the rows, batch bits, the bit
# masks and positions, 4 moduli
BITS_SIGNATURE = ["ptr"] * 15 + ["int64", "int32"] + ["uint64"] * 10


def kernel_name(semiring: str, value: np.dtype, count: np.dtype, rows: str = "", residues: int = 1) -> str:
    """``count[_rows|_rows4|_bitsKN]_{max|min}_{f32|f64|i16}_{i64|f64|m32|u128}[x R]``; int32 counts are residues
    modulo a prime, R of them (R > 1: a row kernel carrying one count array per prime); ``rows``: a row
    kernel's tile (ROWS_KMAX), ``bitsKN`` (the bit-addressed step summing out K spins and bringing in
    N, 0 to 4 each) or ``arenaKN`` (the same step reading every row where it lies, no tile: an arena's,
    :mod:`lazykern.tn._arena`), "" for the product of any shape."""
    v = next(k for k, (_, d) in (VALUE_DTYPES | SHORT_VALUES).items() if d == value)
    c = next(k for k, (_, d, _) in COUNT_DTYPES.items() if d == count)
    more = f"x{residues}" if residues > 1 else ""
    return f"count{'_' + rows if rows else ''}_{'max' if semiring == 'maxplus' else 'min'}_{v}_{c}{more}"


def make_family(cache: KernelCache | None = None) -> KernelFamily:
    """The counting family: counting.cu plus one short fragment per instantiation (the product of
    any shape, and the row kernel of the strided steps with 1 to RESIDUES_MAX residues)."""
    preamble = resources.files("lazykern.tn").joinpath("counting.cu").read_text(encoding="utf-8")
    fam = KernelFamily("tropical_counting", preamble, options=("-std=c++17",), cache=cache)
    for semiring in ("maxplus", "minplus"):
        for vt, vd, ct, cd, ring in _pairs():
            _add_products(fam, semiring, vt, vd, ct, cd, ring)
            for residues in range(1, (RESIDUES_MAX if ring == 2 else 1) + 1):
                for tile in ROWS_KMAX:
                    _add_rows(fam, semiring, vt, vd, ct, cd, ring, residues, tile)
    fam.add_generator(_bits_fragment, _bits_names)  # hundreds of them: each made when first asked for
    return fam


def _pairs() -> list[tuple[str, np.dtype, str, np.dtype, int]]:
    """(value C type, dtype, count C type, dtype, ring) of every kernel: each value dtype with each count
    dtype, and 16-bit values with 128-bit counts."""
    pairs = [(vt, vd, ct, cd, ring) for vt, vd in VALUE_DTYPES.values() for ct, cd, ring in COUNT_DTYPES.values()]
    ct, cd, ring = COUNT_DTYPES["u128"]
    return pairs + [(vt, vd, ct, cd, ring) for vt, vd in SHORT_VALUES.values()]


def _add_products(fam: KernelFamily, semiring: str, vt: str, vd: np.dtype, ct: str, cd: np.dtype, ring: int) -> None:
    """The product of any shape (``lk_count_bmm``: one thread per output entry)."""
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


def _add_rows(
    fam: KernelFamily,
    semiring: str,
    vt: str,
    vd: np.dtype,
    ct: str,
    cd: np.dtype,
    ring: int,
    residues: int,
    tile: str,
) -> None:
    """The strided step's row kernel (``lk_count_rows``) carrying ``residues`` count arrays."""
    name = kernel_name(semiring, vd, cd, rows=tile, residues=residues)
    ptrs, arrays = _count_arrays(ct, "ac", "bc")
    code = (
        f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}(const {vt} *av, const {vt} *bv, {vt} *cv, '
        f"{ptrs}, long long rows, long long M, int N, int K, long long sa, long long ars, long long acs, "
        "long long sb, long long sc, long long ldc, unsigned long long m0, unsigned long long m1, "
        "unsigned long long m2, unsigned long long m3) {\n"
        f"{arrays}"
        "    const unsigned long long mod[4] = {m0, m1, m2, m3};\n"
        f"    lk_count_rows<{vt}, {ct}, {'true' if semiring == 'maxplus' else 'false'}, {ring}, {ROWS_KMAX[tile]}, "
        f"{residues}>(av, ac, bv, bc, cv, cc, rows, M, N, K, sa, ars, acs, sb, sc, ldc, mod);\n"
        "}\n"
    )
    fam.add(name, code, signature=ROWS_SIGNATURE)


def _count_arrays(ct: str, a: str, b: str) -> tuple[str, str]:
    """A counting kernel's four count pointers per operand (``a``, ``b``) and result (``cc``): the
    parameter list, and the arrays the kernel body indexes by residue."""
    kinds = (("const ", a), ("const ", b), ("", "cc"))
    ptrs = ", ".join(f"{const}{ct} *{x}{q}" for const, x in kinds for q in range(4))
    arrays = "".join(f"    {const}{ct} *const {x}[4] = {{{x}0, {x}1, {x}2, {x}3}};\n" for const, x in kinds)
    return ptrs, arrays


def _bits_names() -> list[str]:
    """Every bit-addressed step's kernel (``lk_count_bits``): K, N spins 0 to BITS_MAX, each count ring,
    tiled (``bits``) or direct (``arena``)."""
    names = []
    for semiring in ("maxplus", "minplus"):
        for _, vd, _, cd, ring in _pairs():
            for residues in range(1, (RESIDUES_MAX if ring == 2 else 1) + 1):
                for kind in ("bits", "arena"):
                    for kb, nb in itertools.product(range(BITS_MAX + 1), repeat=2):
                        names.append(kernel_name(semiring, vd, cd, rows=f"{kind}{kb}{nb}", residues=residues))
    return names


_BITS_NAME = re.compile(r"count_(bits|arena)(\d)(\d)_(max|min)_(f32|f64|i16)_(i64|f64|m32|u128)(?:x(\d))?")


def _bits_fragment(name: str) -> tuple[str, list[str]] | None:
    """(code, signature) of the bit-addressed kernel ``name`` (:func:`kernel_name`), None for another name."""
    found = _BITS_NAME.fullmatch(name)
    if found is None:
        return None
    kind, kb, nb, semiring, v, c, more = found.groups()
    vt, ct, ring = (VALUE_DTYPES | SHORT_VALUES)[v][0], COUNT_DTYPES[c][0], COUNT_DTYPES[c][2]
    residues = int(more or 1)
    if (
        (v in SHORT_VALUES and c != "u128")
        or max(int(kb), int(nb)) > BITS_MAX
        or not 1 <= residues <= (RESIDUES_MAX if ring == 2 else 1)
        or (more and residues == 1)
    ):
        return None
    ptrs, arrays = _count_arrays(ct, "xc", "yc")
    code = (
        f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}(const {vt} *xv, const {vt} *yv, '
        f"{vt} *cv, {ptrs}, long long rows, int nb, unsigned long long holes_in, unsigned long long holes_out, "
        "unsigned long long conpos, unsigned long long batch_in, unsigned long long batch_out, "
        "unsigned long long rightpos, unsigned long long m0, unsigned long long m1, unsigned long long m2, "
        "unsigned long long m3) {\n"
        f"{arrays}"
        "    const unsigned long long mod[4] = {m0, m1, m2, m3};\n"
        f"    lk_count_bits<{vt}, {ct}, {'true' if semiring == 'max' else 'false'}, {ring}, {kb}, {nb}, "
        f"{residues}, {'true' if kind == 'arena' else 'false'}>(xv, xc, yv, yc, cv, cc, rows, nb, holes_in, "
        "holes_out, conpos, batch_in, batch_out, rightpos, mod);\n"
        "}\n"
    )
    return code, list(BITS_SIGNATURE)


family = make_family()
