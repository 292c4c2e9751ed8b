"""A plan or path made for another network, and integer counting values that would wrap, are refused
(session 61's hostile round: both gave silent wrong answers)."""

from __future__ import annotations

import numpy as np
import pytest

from lazykern import tropical
from lazykern.tropical import counting

SUB = "ij,jk,kl->il"


def _operands():
    rng = np.random.default_rng(61)
    return (
        rng.integers(-3, 4, (2, 3)).astype(float),
        rng.integers(-3, 4, (3, 2)).astype(float),
        rng.integers(-3, 4, (2, 2)).astype(float),
    )


@pytest.mark.parametrize(
    "path, why",
    [
        ([(0, 0), (0, 1)], "distinct"),
        ([(0, 5)], "below 3"),
        ([(0, 1)], "leaves 2 operands"),
        (42, "strategy name, a path"),
    ],
)
def test_a_path_that_does_not_contract_this_network_is_refused(path, why):
    with pytest.raises(ValueError, match=why):
        tropical.einsum(SUB, *_operands(), optimize=path)


def test_a_plan_sliced_for_other_sizes_is_refused():
    A, B, C = _operands()  # j has size 3
    plan = tropical.contraction_plan(["ij", "jk", "kl"], "il", dict(i=2, j=2, k=2, l=2), slices=["j"])
    scalar = tropical.contraction_plan(["ij", "jk", "kl"], "", dict(i=2, j=2, k=2, l=2), slices=["j"])
    for run in (
        lambda: tropical.einsum(SUB, A, B, C, optimize=plan),
        lambda: tropical.argmax_einsum("ij,jk,kl->", A, B, C, optimize=scalar),
        lambda: counting.einsum(SUB, A, B, C, optimize=plan),
    ):
        with pytest.raises(ValueError, match="made for another network"):
            run()
    good = tropical.contraction_plan(["ij", "jk", "kl"], "il", dict(i=2, j=3, k=2, l=2), slices=["j"])
    assert np.array_equal(tropical.einsum(SUB, A, B, C, optimize=good), tropical.einsum(SUB, A, B, C))


def test_integer_counting_values_that_would_wrap_are_refused():
    big = 2**63 - 1
    with pytest.raises(ValueError, match="bound"):  # MIN/MAX are not -inf/+inf for counting values
        counting.einsum("i,j->", np.array([big]), np.array([big]))
    with pytest.raises(ValueError, match="would wrap"):  # 2^62 + 2^62 passes int64
        counting.einsum("i,j->", np.array([2**62, 0]), np.array([2**62]))
    values, count = counting.einsum("i,j->", np.array([2**61, 0]), np.array([2**61]))
    assert int(values) == 2**62 and int(count) == 1


def test_one_operand_with_no_product_turns_nan_into_the_zero_as_every_product_does():
    nan = np.nan
    assert tropical.einsum("i->i", np.array([nan, 1.0])).tolist() == [-np.inf, 1.0]
    assert tropical.einsum("->", np.array(nan)) == -np.inf
    assert tropical.einsum("ii->i", np.array([[nan, 1.0], [2.0, 3.0]]), semiring="minplus").tolist() == [np.inf, 3.0]
    values, counts = counting.einsum("i->i", np.array([nan, 1.0]))
    assert values.tolist() == [-np.inf, 1.0] and counts.tolist() == [0, 1]
    x = np.array([nan, 1.0])
    tropical.einsum("i->i", x)
    assert np.isnan(x[0])  # the caller's array is left as it was


@pytest.mark.parametrize(
    "output, sizes, why",
    [
        ("ik", dict(i=2, j=2), "label 'k' needs a size"),
        ("ikz", dict(i=2, j=2, k=2), "output label 'z' is in no input"),
        ("ik", dict(i=2, j=-3, k=2), "label 'j' needs a size"),
        ("ik", dict(i=2, j=1.5, k=2), "label 'j' needs a size"),
    ],
)
def test_a_plan_of_sizes_that_do_not_describe_the_network_is_refused(output, sizes, why):
    with pytest.raises(ValueError, match=why):
        tropical.contraction_plan(["ij", "jk"], output, sizes)


def test_an_unknown_strategy_is_a_value_error_naming_it():
    with pytest.raises(ValueError, match="optimize='bogus'"):
        tropical.einsum("ij,jk,kl->il", *_operands(), optimize="bogus")
