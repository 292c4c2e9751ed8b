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
``SingleConfigMin()``      the same for the smallest
``ConfigsMax(k)``          ``[(size, configurations (count, n)), ...]`` at the k largest sizes
``ConfigsMin(k)``          the same at the k smallest
``ConfigsAll(limit)``      every feasible configuration, one row each
=========================  =====================================================================

"Max" and "Min" are the sizes' order, whatever the problem's goal. ``k`` must be at least 1 and
``limit`` (the most configurations a property may list) positive: anything else is a ValueError here,
when the property is made.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_LIMIT = 10**6  # configurations a Configs* property lists before it refuses


def _check_k(name: str, k: object) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"{name}(k={k!r}): k is the number of best sizes wanted, an int of at least 1")


def _check_limit(name: str, limit: object) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"{name}(limit={limit!r}): limit is the most configurations to list, an int of at least 1")


@dataclass(frozen=True)
class Property:
    """Base of every property (``solve`` accepts nothing else)."""


@dataclass(frozen=True)
class _Best(Property):
    k: int = 1
    largest = True  # sizes' order: "Max" properties look at the largest

    def __post_init__(self) -> None:
        _check_k(type(self).__name__, self.k)


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


@dataclass(frozen=True)
class PartitionFunction(Property):
    """log Z, Z = sum over feasible configurations of exp(beta * size) (exp(-beta * size) when the
    problem's goal is "min"); -inf when none is feasible."""

    beta: float = 1.0

    def __post_init__(self) -> None:
        beta = self.beta
        if isinstance(beta, bool) or not isinstance(beta, (int, float)) or beta != beta or abs(beta) == float("inf"):
            raise ValueError(f"PartitionFunction(beta={beta!r}): beta must be a finite number")


@dataclass(frozen=True)
class SingleConfigMax(Property):
    """(largest size, one configuration reaching it); a ValueError when none is feasible."""

    largest = True


@dataclass(frozen=True)
class SingleConfigMin(Property):
    """(smallest size, one configuration reaching it)."""

    largest = False


@dataclass(frozen=True)
class ConfigsMax(_Best):
    """(size, every configuration of that size as rows) at each of the k largest sizes, best first; a
    ValueError (naming the count) when they are more than ``limit``."""

    limit: int = DEFAULT_LIMIT

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_limit(type(self).__name__, self.limit)


@dataclass(frozen=True)
class ConfigsMin(ConfigsMax):
    """The same at each of the k smallest sizes."""

    largest = False


@dataclass(frozen=True)
class ConfigsAll(Property):
    """Every feasible configuration, one row each (sorted); a ValueError naming the count past ``limit``."""

    limit: int = DEFAULT_LIMIT

    def __post_init__(self) -> None:
        _check_limit("ConfigsAll", self.limit)


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
