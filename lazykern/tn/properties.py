"""What :func:`lazykern.tn.solve` computes about a problem's solution space (GenericTensorNetworks' properties).

A property is a small frozen value; :func:`lazykern.tn.solve` picks the algebra that answers it:

=========================  =====================================================================
``SizeMax(k)``             the k largest distinct sizes that occur, best first: ``[4, 3, 2]``
``SizeMin(k)``             the k smallest
``CountingMax(k)``         ``[(size, count), ...]`` at the k largest sizes, counts exact ints
``CountingMin(k)``         the same at the k smallest
``CountingAll()``          the number of feasible configurations (an exact int)
``GraphPolynomial()``      exact int coefficients, index s holding the count of size s
``PartitionFunction(b)``   log Z, Z = sum of exp(b * size) (exp(-b * size) for a problem whose goal is "min")
``SingleConfigMax()``      ``(size, configuration)`` of one configuration of the largest size
``SingleConfigMax(k)``     ``[(size, configuration), ...]``: one at each of the k largest sizes
``SingleConfigMin()``      the same for the smallest
``ConfigsMax(k)``          ``[(size, configurations (count, n)), ...]`` at the k largest sizes
``ConfigsMin(k)``          the same at the k smallest
``ConfigsAll(limit)``      every feasible configuration, one row each
=========================  =====================================================================

``ConfigsMax/Min(k, tree_storage=True)`` and ``ConfigsAll(tree_storage=True)`` give each set of
configurations as a :class:`lazykern.tn.config_tree.ConfigTree` instead of rows (GenericTensorNetworks'
``SumProductTree``): its exact count, the i-th configuration, uniform samples (``tree.sample(n)``, its
``generate_samples``) and the sorted rows on demand, with no ``limit``: its memory grows with the network,
not with the count.

"Max" and "Min" are the sizes' order, whatever the problem's goal. ``k`` must be at least 1 and
``limit`` (the most configurations a property may list) positive: anything else is a ValueError here,
when the property is made.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import shown

DEFAULT_LIMIT = 10**6  # configurations a Configs* property lists before it refuses


def _integer(x: object) -> int | None:
    """``x`` as a Python int where it is an integer (NumPy's too), not a bool; else None."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        return None
    return int(x)


def _check_k(name: str, k: object) -> int:
    value = _integer(k)
    if value is None or value < 1:
        raise ValueError(f"{name}(k={shown(k)}): k is the number of best sizes wanted, an int of at least 1")
    return value


def check_limit(name: str, limit: object) -> int:
    """``limit`` (the most configurations ``name`` lists) as a Python int of at least 1, else a ValueError."""
    value = _integer(limit)
    if value is None or value < 1:
        raise ValueError(
            f"{name}(limit={shown(limit)}): limit is the most configurations to list, an int of at least 1"
        )
    return value


def _check_beta(beta: object) -> float | int:
    """``beta`` as a Python float or int, exactly: a real number (NumPy's too) within float64's range."""
    whole = _integer(beta)
    if whole is not None:
        try:
            float(whole)
        except OverflowError:
            raise ValueError(
                f"PartitionFunction(beta={_short(whole)}): beta is past float64's range (1.8e308); log Z is "
                "given as a float64, which holds no beta times a size that large"
            ) from None
        return whole
    if isinstance(beta, (float, np.floating)) and math.isfinite(float(beta)):
        value = float(beta)
        if np.longdouble(value) != beta:  # a longdouble finer than float64: rounding it changes Z
            raise ValueError(f"PartitionFunction(beta={beta!r}): beta holds more digits than float64; give a float64")
        return value
    raise ValueError(f"PartitionFunction(beta={beta!r}): beta must be a finite real number (an int or a float)")


def _check_flag(name: str, flag: str, value: object) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}({flag}={shown(value)}): {flag} is True or False")
    return bool(value)


def _short(x: int) -> str:
    return shown(x) if abs(x) >= 10**24 else str(x)


@dataclass(frozen=True)
class Property:
    """Base of every property (``solve`` accepts nothing else)."""


@dataclass(frozen=True)
class _Best(Property):
    k: int = 1
    largest = True  # sizes' order: "Max" properties look at the largest

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", _check_k(type(self).__name__, self.k))  # NumPy's ints as Python's


@dataclass(frozen=True)
class SizeMax(_Best):
    """The k largest distinct sizes that occur, best first (fewer when fewer occur; [] when none is feasible)."""


@dataclass(frozen=True)
class SizeMin(_Best):
    """The k smallest distinct sizes that occur, best first."""

    largest = False


@dataclass(frozen=True)
class CountingMax(_Best):
    """(size, exact count) at each of the k largest sizes, best first."""


@dataclass(frozen=True)
class CountingMin(_Best):
    """(size, exact count) at each of the k smallest sizes, best first."""

    largest = False


@dataclass(frozen=True)
class CountingAll(Property):
    """The number of feasible configurations, an exact int."""


@dataclass(frozen=True)
class GraphPolynomial(Property):
    """Exact int coefficients: index s holds the number of feasible configurations of size s, trailing
    zeros dropped ([] when none is feasible). Needs integer sizes; sizes below 0 need ``laurent=True``,
    which returns ``(lowest, coefficients)`` with index i holding the count of size lowest + i."""

    laurent: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "laurent", _check_flag("GraphPolynomial", "laurent", self.laurent))


@dataclass(frozen=True)
class PartitionFunction(Property):
    """log Z, Z = sum over feasible configurations of exp(beta * size) (exp(-beta * size) when the
    problem's goal is "min"); -inf when none is feasible. ``beta``: a real number, an int or a float
    (NumPy's too, kept exactly as a Python int or float); a ValueError for a bool, NaN, inf, or an int
    past float64's range."""

    beta: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "beta", _check_beta(self.beta))


@dataclass(frozen=True)
class SingleConfigMax(Property):
    """(largest size, one configuration reaching it); a ValueError when none is feasible. With ``k``
    (GenericTensorNetworks' ``SingleConfigMax(k)``): ``[(size, configuration), ...]``, one configuration at
    each of the k largest sizes, best first (fewer when fewer occur; [] when none is feasible)."""

    k: int | None = None
    largest = True

    def __post_init__(self) -> None:
        if self.k is not None:
            object.__setattr__(self, "k", _check_k(type(self).__name__, self.k))


@dataclass(frozen=True)
class SingleConfigMin(SingleConfigMax):
    """(smallest size, one configuration reaching it); with ``k``, one at each of the k smallest sizes."""

    largest = False


@dataclass(frozen=True)
class ConfigsMax(_Best):
    """(size, every configuration of that size as rows) at each of the k largest sizes, best first; a
    ValueError (naming the count) when they are more than ``limit``. ``tree_storage=True``: (size,
    :class:`~lazykern.tn.config_tree.ConfigTree`) pairs instead, with no limit."""

    limit: int = DEFAULT_LIMIT
    tree_storage: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "limit", check_limit(type(self).__name__, self.limit))
        object.__setattr__(self, "tree_storage", _check_flag(type(self).__name__, "tree_storage", self.tree_storage))


@dataclass(frozen=True)
class ConfigsMin(ConfigsMax):
    """The same at each of the k smallest sizes."""

    largest = False


@dataclass(frozen=True)
class ConfigsAll(Property):
    """Every feasible configuration, one row each (sorted); a ValueError naming the count past ``limit``.
    ``tree_storage=True``: one :class:`~lazykern.tn.config_tree.ConfigTree` instead, with no limit."""

    limit: int = DEFAULT_LIMIT
    tree_storage: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "limit", check_limit("ConfigsAll", self.limit))
        object.__setattr__(self, "tree_storage", _check_flag("ConfigsAll", "tree_storage", self.tree_storage))


__all__ = [
    "ConfigsAll",
    "ConfigsMax",
    "ConfigsMin",
    "CountingAll",
    "CountingMax",
    "CountingMin",
    "DEFAULT_LIMIT",
    "GraphPolynomial",
    "PartitionFunction",
    "Property",
    "SingleConfigMax",
    "SingleConfigMin",
    "SizeMax",
    "SizeMin",
]
