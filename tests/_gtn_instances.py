"""GenericTensorNetworks.jl's published instances, as plain data for lazykern.tn.problems (0-based).

Sources: GenericTensorNetworks.jl v4.0.1 test/ (commit 0942d7a), ProblemReductions.jl src/models/
(commit 8b29f55). Graphs.jl vertex v is index v - 1 here, and edge lists follow Graphs.jl's
``edges(g)`` order (sorted, src < dst) wherever weights are given per edge.
"""

from __future__ import annotations

import math

# Graphs.jl's smallgraph(:petersen) in its edges(g) order.
PETERSEN_EDGES = [
    (0, 1), (0, 4), (0, 5), (1, 2), (1, 6), (2, 3), (2, 7), (3, 4),
    (3, 8), (4, 9), (5, 7), (5, 8), (6, 8), (6, 9), (7, 9),
]  # fmt: skip
PETERSEN = (10, PETERSEN_EDGES)

# test/networks/MaxCut.jl and Coloring.jl: (1,2) (2,3) (3,4) (4,1) (1,5) (2,4).
FIVE = (5, [(0, 1), (1, 2), (2, 3), (3, 0), (0, 4), (1, 3)])

# test/networks/Matching.jl, "match polynomial": (1,2) (2,3) (3,4) (4,5) (5,6) (6,1) (1,7).
SEVEN = (7, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (0, 6)])

# test/networks/Coloring.jl, "planar gadget checking" (graph_crossing_gadget), open vertices 3 and 5.
_CROSSING = [
    (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (7, 8), (8, 1), (9, 10), (10, 11), (11, 12), (12, 9),
    (1, 9), (3, 10), (5, 11), (7, 12), (2, 10), (4, 11), (6, 12), (8, 9), (13, 9), (13, 10), (13, 11), (13, 12),
]  # fmt: skip
CROSSING_GADGET = (13, [(u - 1, v - 1) for u, v in _CROSSING])

# test/networks/SetPacking.jl and SetCovering.jl.
SETS = [[1, 2, 5], [1, 3], [2, 4], [3, 6], [2, 3, 6]]

# test/networks/Satisfiability.jl: c1 = x ∨ ¬y, c2 = c ∨ ¬a ∨ b, c3 = z ∨ ¬a ∨ y, c4 = c ∨ z ∨ ¬b,
# cnf = (c1 ∧ c4) ∧ (c2 ∧ c3), with x, y, z, a, b, c as DIMACS 1..6.
X, Y, Z, A, B, C = 1, 2, 3, 4, 5, 6
CNF = [[X, -Y], [C, Z, -B], [C, -A, B], [Z, -A, Y]]

# test/networks/PaintShop.jl.
PAINT = "abaccb"

# test/configurations.jl, "configs bug fix": vertices c d e f g; open c, f, g.
CDEFG_EDGES = ["cd", "ce", "cf", "de", "ef", "fg"]


def fullerene() -> list[tuple[float, float, float]]:
    """test/interfaces.jl, "partition function": C60's 60 atoms, in GTN's order."""
    phi = (1 + math.sqrt(5)) / 2
    out: list[tuple[float, float, float]] = []
    for x, y, z in ((0.0, 1.0, 3 * phi), (1.0, 2 + phi, 2 * phi), (phi, 2.0, 2 * phi + 1.0)):
        for a, b, g in ((x, y, z), (y, z, x), (z, x, y)):
            for loc in (
                (a, b, g),
                (a, b, -g),
                (a, -b, g),
                (a, -b, -g),
                (-a, b, g),
                (-a, b, -g),
                (-a, -b, g),
                (-a, -b, -g),
            ):
                if loc not in out:
                    out.append(loc)
    return out


def fullerene_graph() -> tuple[int, list[tuple[int, int]]]:
    """UnitDiskGraph(fullerene(), sqrt(5)): atoms within distance sqrt(5) (90 bonds)."""
    pts = fullerene()
    edges = [
        (i, j)
        for i in range(len(pts))
        for j in range(i + 1, len(pts))
        if sum((p - q) ** 2 for p, q in zip(pts[i], pts[j])) <= 5
    ]
    return len(pts), edges


# test/interfaces.jl: SpinGlass(C60, J = 1, h = 0) (GTN's sign, so our J = -1):
# log(PartitionFunction(1.0)) / 60 ≈ this.
C60_LOG_Z_PER_SPIN = 1.3073684577607942

# test/networks/MaximalIS.jl, "counting minimum maximal IS", smallgraph(:tutte): polynomial from x^13 on.
TUTTE_MAXIMAL_IS_POLYNOMIAL = [0] * 13 + [2, 150, 7510, 71669, 66252, 14925, 571]

# OEIS A006506: independent sets of the n x n grid graph (hard squares), n = 1..12 (about 2^87 at 12).
A006506 = [
    2, 7, 63, 1234, 55447, 5598861, 1280128950, 660647962955, 770548397261707, 2030049051145980050,
    12083401651433651945979, 162481813349792588536582997,
]  # fmt: skip
