"""Combinatorial problems as GenericTensorNetworks.jl defines them: constraint and objective tables.

Each problem (one module each) turns a user's graph, sets, clauses or sequence into tables over
its variables (:mod:`._base`: :class:`Table`, :class:`Problem`); :func:`lazykern.tn.solve` contracts
them for a property. What "size" is, the weights and the goal (max or min) follow
ProblemReductions.jl, the definitions GenericTensorNetworks.jl v4 solves, so its published values
carry over (``tests/test_tn_problems.py`` reproduces them).

>>> import networkx as nx
>>> p = IndependentSet(nx.petersen_graph())
>>> p.num_variables, p.goal, len(p.constraints()), len(p.objectives())
(10, 'max', 15, 10)
"""

from __future__ import annotations

from ._base import Problem, Table
from .coloring import Coloring
from .dominating_set import DominatingSet
from .independent_set import IndependentSet
from .matching import Matching
from .max_cut import MaxCut
from .maximal_is import MaximalIS
from .paint_shop import PaintShop
from .satisfiability import Satisfiability
from .set_covering import SetCovering
from .set_packing import SetPacking
from .spin_glass import SPIN, SpinGlass

__all__ = [
    "SPIN",
    "Coloring",
    "DominatingSet",
    "IndependentSet",
    "Matching",
    "MaxCut",
    "MaximalIS",
    "PaintShop",
    "Problem",
    "Satisfiability",
    "SetCovering",
    "SetPacking",
    "SpinGlass",
    "Table",
]
