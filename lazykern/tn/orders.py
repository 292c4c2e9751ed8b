"""Contraction orders that follow a network's geometry: a boundary sweep along a vertex order.

A generic search does not find the good orders of large lattices within seconds (cotengra on a
32 x 32 lattice: 10^15.35 multiply-adds after two minutes). The geometry knows one: sweep the
vertices in row-major order and keep one boundary tensor over the last row's worth of vertices. Each
step absorbs the tensors that first become complete at the next ``group`` vertices (the vertex
tensor and the bonds back to earlier vertices), pre-contracted among themselves, and sums out every
vertex whose last bond has been absorbed. On an L x L lattice the boundary holds 2^L entries (L = 32:
16 GiB in float32, which fits an 80 GB GPU) and the sweep costs about L^2 2^(L+1) multiply-adds.

>>> inputs = [(0, 1), (1, 2), (2, 3), (0,), (1,), (2,), (3,)]  # a chain of 4 vertices
>>> sweep_ssa(inputs, [0, 1, 2, 3])  # tensor ids; results are numbered on from 7
[(0, 4), (3, 7), (1, 5), (8, 9), (2, 6), (10, 11)]
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

import numpy as np

Label = Hashable


def sweep_ssa(inputs: Sequence[Sequence[Label]], order: Sequence[Label], group: int = 1) -> list[tuple[int, int]]:
    """The sweep as a static-single-assignment path (each pair names tensors by id; every
    contraction's result gets the next id). Tensors carrying no label of ``order`` come last."""
    if group < 1:
        raise ValueError(f"group must be a positive number of vertices, got {group}")
    position = {lab: i for i, lab in enumerate(order)}
    clusters: dict[int, list[int]] = {}
    for t, labels in enumerate(inputs):
        entry = max((position[x] for x in labels if x in position), default=len(order))
        clusters.setdefault(entry // group, []).append(t)
    path: list[tuple[int, int]] = []
    next_id = len(inputs)
    boundary: int | None = None
    for g in sorted(clusters):
        ids = clusters[g]
        tensor = ids[0]
        for other in ids[1:]:
            path.append((tensor, other))
            tensor, next_id = next_id, next_id + 1
        if boundary is None:
            boundary = tensor
            continue
        path.append((boundary, tensor))
        boundary, next_id = next_id, next_id + 1
    return path


def ssa_to_positions(ssa: Sequence[tuple[int, ...]], count: int) -> list[tuple[int, ...]]:
    """An SSA path as opt_einsum's position tuples (each step pops its operands and appends the result).

    The live list stays sorted by id (results get ever larger ids and go last), so an id's position is
    the number of live ids below it: a Fenwick tree counts them in log time (list.index made this
    quadratic: a fifth of a second on a 32 x 32 lattice)."""
    total = count + len(ssa)
    tree = [0] * (total + 1)

    def add(i: int, v: int) -> None:
        i += 1
        while i <= total:
            tree[i] += v
            i += i & -i

    def below(i: int) -> int:
        n = 0
        while i > 0:
            n += tree[i]
            i -= i & -i
        return n

    for i in range(count):
        add(i, 1)
    path = []
    for next_id, step in enumerate(ssa, start=count):
        path.append(tuple(sorted(below(i) for i in step)))
        for i in step:
            add(i, -1)
        add(next_id, 1)
    return path


def sweep_path(inputs: Sequence[Sequence[Label]], order: Sequence[Label], group: int = 1) -> list[tuple[int, ...]]:
    """The boundary sweep of ``inputs`` along ``order`` (every label of the network, in sweep order)
    as opt_einsum position tuples, absorbing ``group`` vertices per step."""
    return ssa_to_positions(sweep_ssa(inputs, order, group), len(inputs))


# ------------------------------------------------------- orders from the graph --
def boundary_sizes(n: int, edges: np.ndarray, order: Sequence[int]) -> np.ndarray:
    """Spins a sweep along ``order`` keeps open after each of its ``n`` vertices: those swept
    already with a neighbour still to come (the boundary tensor holds 2 to that many entries)."""
    position = np.empty(n, dtype=np.int64)
    position[np.asarray(order, dtype=np.int64)] = np.arange(n)
    last = position.copy()
    if len(edges):
        a, b = position[edges[:, 0]], position[edges[:, 1]]
        np.maximum.at(last, edges[:, 0], b)
        np.maximum.at(last, edges[:, 1], a)
    opens = np.bincount(position, minlength=n)
    closes = np.bincount(last, minlength=n)  # a vertex leaves the boundary once its last neighbour is swept
    sizes: np.ndarray = np.cumsum(opens - closes)
    return sizes


def sweep_score(n: int, edges: np.ndarray, order: Sequence[int]) -> float:
    """log2 of the sum of 2^boundary over the sweep: what its steps cost, up to a constant factor,
    whether they are bound by multiply-adds or by passes over the boundary."""
    sizes = boundary_sizes(n, edges, order).astype(np.float64)
    top = float(sizes.max(initial=0.0))
    return top + math.log2(float(np.exp2(sizes - top).sum()))


def graph_order(
    n: int,
    edges: Any,
    positions: Any = None,
    given: Sequence[int] | None = None,
) -> tuple[int, ...]:
    """A vertex order whose boundary sweep is cheap, found from the graph itself, so a network's
    numbering never decides its cost: the best by :func:`sweep_score` among ``given``, the
    numbering itself, sweeps along the axes of ``positions`` (when given) and sweeps along
    coordinates read off graph distances (below). Disconnected parts are swept one after another.

    Without positions, a lattice's coordinates are recovered from breadth-first distances to a few
    far-apart "anchor" vertices: with corners u and w of one side, d(u, x) - d(w, x) is x's column
    and d(u, x) + d(w, x) its row, so sorting by that pair sweeps column by column; sorting by d(u, x)
    alone sweeps along anti-diagonals (the Cuthill-McKee level order).

    >>> rows, cols = np.divmod(np.arange(36), 6)  # a 6 x 6 lattice, its spins numbered at random
    >>> grid = [(i, i + 1) for i in range(36) if cols[i] < 5] + [(i, i + 6) for i in range(30)]
    >>> edges = np.random.default_rng(0).permutation(36)[np.array(grid)]
    >>> int(boundary_sizes(36, edges, range(36)).max()), int(boundary_sizes(36, edges, graph_order(36, edges)).max())
    (20, 6)
    """
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    candidates: list[Sequence[int]] = []
    if given is not None:
        candidates.append(tuple(int(i) for i in given))
    candidates.append(tuple(range(n)))
    if sweep_score(n, edges, candidates[0]) <= SMALL_SWEEP:
        return tuple(candidates[0])  # cheap already: a search would cost more than it could save
    if positions is not None:
        candidates += _position_orders(np.asarray(positions, dtype=np.float64).reshape(n, -1))
    scores = [sweep_score(n, edges, order) for order in candidates]
    for order in _distance_orders(n, edges):  # made one at a time: a tiny graph stops at its first cheap one
        scores.append(sweep_score(n, edges, order))
        candidates.append(order)
        if scores[-1] <= SMALL_SWEEP:
            return tuple(int(i) for i in order)  # cheap already: the rest of the search costs more than it saves
    scored = sorted(zip(scores, range(len(candidates))))  # equals: the first
    adjacent = _adjacency(n, edges)
    best_score, best = scored[0][0], candidates[scored[0][1]]
    for _, k in scored[:_TIGHTENED]:
        tight = tighten(adjacent, candidates[k], _WINDOW)
        score = sweep_score(n, edges, tight)
        if score < best_score:
            best_score, best = score, tight
    return tuple(int(i) for i in best)


SMALL_SWEEP = 16.0  # log2 of boundary entries summed over a sweep under which it is taken as it is (~1 ms on a CPU)
_TIGHTENED = 3  # best candidates re-sequenced by :func:`tighten` (each costs a pass over the graph per window slot)
_WINDOW = 16  # how far ahead :func:`tighten` looks: a chimera cell's eight spins and the next cell's


def _position_orders(positions: np.ndarray) -> list[tuple[int, ...]]:
    """Sweeps along each coordinate axis (ties: along the others), both ways."""
    out = []
    dims = positions.shape[1]
    for axis in range(dims):
        keys = [positions[:, d] for d in range(dims) if d != axis] + [positions[:, axis]]
        order = np.lexsort(keys)  # the last key is the primary one
        out += [tuple(order.tolist()), tuple(order[::-1].tolist())]
    return out


def _adjacency(n: int, edges: np.ndarray) -> list[list[int]]:
    adjacent: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges.tolist():
        if a != b:
            adjacent[a].append(b)
            adjacent[b].append(a)
    return adjacent


def _distances(adjacent: list[list[int]], source: int) -> dict[int, int]:
    """Breadth-first distances from ``source`` to every vertex of its part of the graph."""
    dist = {source: 0}
    frontier = [source]
    while frontier:
        nxt = []
        for v in frontier:
            for u in adjacent[v]:
                if u not in dist:
                    dist[u] = dist[v] + 1
                    nxt.append(u)
        frontier = nxt
    return dist


_ANCHORS = 4  # far-apart vertices per part of the graph: a rectangle's corners


def _distance_orders(n: int, edges: np.ndarray) -> Iterator[tuple[int, ...]]:
    """Sweeps along coordinates made of distances to anchors, per connected part, parts in turn."""
    adjacent = _adjacency(n, edges)
    seen: set[int] = set()
    parts: list[dict[int, int]] = []
    for start in range(n):
        if start in seen:
            continue
        part = _distances(adjacent, start)
        seen.update(part)
        parts.append(part)
    if len(parts) == 1:  # one part (the usual graph): its orders as they are made
        yield from (tuple(order) for order in _part_orders(adjacent, parts[0]))
        return
    per_part = [list(_part_orders(adjacent, part)) for part in parts]
    count = max((len(orders) for orders in per_part), default=0)
    # The k-th order of every part, concatenated (a part with fewer orders repeats its first).
    for k in range(count):
        yield tuple(v for orders in per_part for v in orders[k if k < len(orders) else 0])


def _part_orders(adjacent: list[list[int]], part: dict[int, int]) -> Iterator[list[int]]:
    vertices = sorted(part)
    if len(vertices) <= 2:
        yield vertices
        return
    # Anchors: the far end of a breadth-first search, then each vertex farthest from those so far.
    # Ties go to the vertex of fewest neighbours (a lattice's corner, not the middle of its side).
    verts = np.asarray(vertices, dtype=np.int64)
    degree = np.asarray([len(adjacent[v]) for v in vertices], dtype=np.int64)
    u = max(part, key=lambda v: (part[v], -len(adjacent[v]), -v))
    dists = [_at(_distances(adjacent, u), vertices)]
    while len(dists) < _ANCHORS:
        gap = np.minimum.reduce(dists)
        far = int(np.lexsort((verts, degree, -gap))[0])  # the largest gap, then fewest neighbours, lowest number
        if gap[far] == 0:
            break
        dists.append(_at(_distances(adjacent, vertices[far]), vertices))
    # Each sort is stable over the vertices in increasing order (np.lexsort: the last key is the primary one).
    for i, di in enumerate(dists):
        for j, dj in enumerate(dists):
            if i == j:
                continue
            rest = [d for k, d in enumerate(dists) if k not in (i, j)]  # ties along a level: the other anchors
            ties = rest[::-1]
            yield verts[np.lexsort((*ties, di + dj, di - dj))].tolist()
            yield verts[np.lexsort((*ties, di - dj, di + dj))].tolist()
            yield verts[np.lexsort((*ties, dj, di))].tolist()


def _at(dist: dict[int, int], vertices: list[int]) -> np.ndarray:
    """A part's distances as an array over its ``vertices``."""
    return np.asarray([dist[v] for v in vertices], dtype=np.int64)


def tighten(adjacent: list[list[int]], order: Sequence[int], window: int) -> list[int]:
    """``order`` re-sequenced greedily: each next vertex is, among the first ``window`` not yet
    swept, the one that leaves the smallest boundary (most spins closed, fewest opened; ties:
    earliest in ``order``). Keeps the order's direction and fixes its local steps (within a
    chimera cell, which of eight spins goes first decides whether four stay open).

    A candidate opens a spin when it has a neighbour not yet swept, and closes each swept neighbour
    whose last unswept neighbour it is: both are kept up to date as vertices are swept (``closing``),
    not recounted over each candidate's neighbours at each step."""
    left = {v: len(adjacent[v]) for v in order}  # neighbours not yet swept
    closing = dict.fromkeys(order, 0)  # neighbours swept with one neighbour left: sweeping it closes them
    pending = list(order)
    done: set[int] = set()
    out: list[int] = []
    while pending:
        best, best_score = 0, None
        for k, v in enumerate(pending[:window]):
            score = (1 if left[v] else 0) - closing[v]
            if best_score is None or score < best_score:
                best, best_score = k, score
        v = pending.pop(best)
        done.add(v)
        out.append(v)
        if left[v] == 1:  # swept with one neighbour left: that neighbour would close it
            for w in adjacent[v]:
                closing[w] += 1
        for u in adjacent[v]:
            left[u] -= 1
            if u in done and left[u] <= 1:  # a swept neighbour now closable (1) or closed (0)
                change = 1 if left[u] == 1 else -1
                for w in adjacent[u]:
                    closing[w] += change
    return out
