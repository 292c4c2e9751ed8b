"""The ``lazykern demo``: shortest paths and a Viterbi decode on the tropical family.

What it shows, and how it checks itself:

* all-pairs shortest paths on a generated road-like grid by repeated min-plus
  squaring ``D <- D (x) D`` with argmax (the winning ``k``), from which a
  next-hop matrix gives every path; answers are checked against Dijkstra from
  a sample of sources (independent of any tropical code) and against
  ``tropical.reference``;
* a Viterbi decode of a small hidden Markov model (the occasionally dishonest
  casino) with max-plus products, checked against the same decode on
  ``tropical.reference`` (NumPy);
* which of the family's kernels were compiled (only those ``tropical.kernels_for``
  names for its two products), what
  that cost on a cold cache and what loading them cost on a warm one;
* with a GPU, the squaring loop as eager launches vs one replayed CUDA graph.

Without a GPU the kernels are still compiled to real cubins for the default
arch (NVRTC needs no GPU) and the answers come from the NumPy reference.
The functions return dataclasses; the CLI and the notebooks render them.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from numba import cuda

from .. import graph
from .. import tropical as tropical_module
from ..compile.compiler import current_arch, device_compute_capability
from ..store.cache import KernelCache, default_cache, set_default_cache

Progress = Callable[[str, int, int], None]
MatmulArgmax = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


# -- the graph ------------------------------------------------------------------
@dataclasses.dataclass
class RoadGraph:
    """A directed, weighted graph: ``weights[i, j]`` is the edge cost or +inf."""

    weights: np.ndarray  # (n, n) float32, +inf where there is no edge, 0 on the diagonal
    coords: np.ndarray  # (n, 2) positions, for pictures

    @property
    def n(self) -> int:
        return int(self.weights.shape[0])

    @property
    def edges(self) -> int:
        w = self.weights
        return int(np.isfinite(w).sum() - np.isfinite(np.diag(w)).sum())


def road_graph(side: int = 24, *, seed: int = 7, drop: float = 0.08, one_way: float = 0.05) -> RoadGraph:
    """A ``side x side`` jittered street grid with a few diagonals (fast roads),
    some closed streets and some one-way streets. Costs are travel times."""
    if side < 2:
        raise ValueError(f"side must be at least 2, got {side}")
    rng = np.random.default_rng(seed)
    n = side * side
    ij = np.stack(np.divmod(np.arange(n), side), axis=1).astype(np.float64)
    coords = ij + rng.uniform(-0.25, 0.25, size=(n, 2))
    w = np.full((n, n), np.inf, dtype=np.float64)
    pairs: list[tuple[int, int, float]] = []
    for r in range(side):
        for c in range(side):
            u = r * side + c
            if c + 1 < side:
                pairs.append((u, u + 1, 1.0))
            if r + 1 < side:
                pairs.append((u, u + side, 1.0))
            if r + 1 < side and c + 1 < side and rng.random() < 0.06:
                pairs.append((u, u + side + 1, 0.6))  # a fast diagonal road
    for u, v, speed in pairs:
        if rng.random() < drop:
            continue  # a closed street
        cost = float(np.linalg.norm(coords[u] - coords[v])) * speed * rng.uniform(0.8, 1.6)
        w[u, v] = cost
        if rng.random() >= one_way:
            w[v, u] = cost * rng.uniform(0.95, 1.05)
    np.fill_diagonal(w, 0.0)
    return RoadGraph(w.astype(np.float32), coords)


# -- shortest paths by min-plus squaring ------------------------------------------
@dataclasses.dataclass
class ApspResult:
    dist: np.ndarray  # (n, n) float32 shortest distances (+inf: unreachable)
    next_hop: np.ndarray  # (n, n) int32 first node after i on a shortest path to j (-1: none)
    steps: int

    def path(self, i: int, j: int) -> list[int]:
        """The nodes of a shortest path from ``i`` to ``j`` ([] when unreachable)."""
        if self.next_hop[i, j] < 0:
            return []
        out = [i]
        while out[-1] != j:
            out.append(int(self.next_hop[out[-1], j]))
            if len(out) > self.dist.shape[0]:
                raise RuntimeError(f"next-hop matrix has a cycle on the way from {i} to {j}")
        return out


def apsp(
    weights: np.ndarray,
    matmul: MatmulArgmax,
    *,
    steps: int | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> ApspResult:
    """All-pairs shortest paths by ``D <- D (x) D`` in the min-plus semiring.

    ``matmul(A, B)`` returns the min-plus product and, per entry, the winning
    ``k``. With the winner of each squaring, the next hop toward ``j`` is the
    next hop toward ``k`` (or unchanged when ``k == i``), so one int32 matrix
    carries every path. Stops early once ``D`` no longer changes, unless
    ``steps`` fixes the count (as a captured graph must).
    """
    d = np.array(weights, dtype=np.float32, copy=True)
    n = d.shape[0]
    np.fill_diagonal(d, 0.0)
    cols = np.broadcast_to(np.arange(n, dtype=np.int32), (n, n))
    nxt = np.where(np.isfinite(d), cols, -1).astype(np.int32)
    limit = squarings(n) if steps is None else steps
    rows = np.arange(n, dtype=np.int32)[:, None]
    done = 0
    for s in range(limit):
        d2, k = matmul(d, d)
        k = np.asarray(k, dtype=np.int64)
        via = np.take_along_axis(nxt, np.clip(k, 0, n - 1), axis=1)
        nxt2 = np.where(k == rows, nxt, via)
        nxt2 = np.where(np.isfinite(d2), nxt2, -1).astype(np.int32)
        converged = np.array_equal(d2, d)
        d, nxt, done = np.asarray(d2, dtype=np.float32), nxt2, s + 1
        if on_step is not None:
            on_step(done, limit)
        if converged and steps is None:
            break
    return ApspResult(d, nxt, done)


def dijkstra(weights: np.ndarray, source: int) -> np.ndarray:
    """Distances from ``source`` in float64: the independent check of :func:`apsp`."""
    n = weights.shape[0]
    adj = [np.flatnonzero(np.isfinite(weights[u]) & (np.arange(n) != u)) for u in range(n)]
    dist = np.full(n, np.inf)
    dist[source] = 0.0
    heap = [(0.0, source)]
    while heap:
        du, u = heapq.heappop(heap)
        if du > dist[u]:
            continue
        for v in adj[u]:
            nd = du + float(weights[u, v])
            if nd < dist[v]:
                dist[v] = nd
                heapq.heappush(heap, (nd, int(v)))
    return dist


@dataclasses.dataclass
class ApspCheck:
    sources: int
    pairs: int
    max_rel_error: float
    paths_checked: int
    reference_rows: int
    reference_ok: bool

    @property
    def ok(self) -> bool:
        return self.max_rel_error < 1e-4 and self.reference_ok


def check_apsp(
    graph: RoadGraph, result: ApspResult, *, samples: int = 12, seed: int = 0, reference: Any = None
) -> ApspCheck:
    """Dijkstra from ``samples`` sources; every sampled path re-summed; and, when
    ``reference`` (tropical.reference) is given, one more squaring of a slice of
    rows compared with it (a fixpoint: it must give D back)."""
    rng = np.random.default_rng(seed)
    w = graph.weights.astype(np.float64)
    sources = rng.choice(graph.n, size=min(samples, graph.n), replace=False)
    worst, pairs, paths = 0.0, 0, 0
    for s in sources:
        truth = dijkstra(w, int(s))
        got = result.dist[s].astype(np.float64)
        if not np.array_equal(np.isinf(truth), np.isinf(got)):
            return ApspCheck(len(sources), pairs, math.inf, paths, 0, False)
        fin = np.isfinite(truth)
        rel = np.abs(got[fin] - truth[fin]) / np.maximum(truth[fin], 1.0)
        worst = max(worst, float(rel.max(initial=0.0)))
        pairs += int(fin.sum())
        for t in rng.choice(np.flatnonzero(fin), size=min(5, int(fin.sum())), replace=False):
            p = result.path(int(s), int(t))
            cost = sum(w[a, b] for a, b in zip(p, p[1:]))
            worst = max(worst, abs(cost - truth[t]) / max(truth[t], 1.0))
            paths += 1
    rows, ref_ok = 0, True
    if reference is not None:
        rows = min(64, graph.n)
        ref = reference.matmul(result.dist[:rows], result.dist, semiring="minplus", argmax=False)
        ref_ok = bool(np.allclose(np.asarray(ref), result.dist[:rows], rtol=1e-6, equal_nan=False))
    return ApspCheck(len(sources), pairs, worst, paths, rows, ref_ok)


# -- Viterbi by max-plus products ------------------------------------------------
@dataclasses.dataclass
class Hmm:
    """The occasionally dishonest casino: a fair die and a loaded one (six: 1/2)."""

    log_start: np.ndarray  # (S,)
    log_trans: np.ndarray  # (S, S): from row state to column state
    log_emit: np.ndarray  # (S, O)
    states: tuple[str, ...]


def casino() -> Hmm:
    trans = np.array([[0.95, 0.05], [0.10, 0.90]])
    emit = np.array([[1 / 6] * 6, [0.1] * 5 + [0.5]])
    start = np.array([0.5, 0.5])

    def log(x: np.ndarray) -> np.ndarray:
        logged: np.ndarray = np.log(x).astype(np.float32)
        return logged

    return Hmm(log(start), log(trans), log(emit), ("fair", "loaded"))


def sample_hmm(hmm: Hmm, batch: int, length: int, *, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """(hidden states, observations), each (batch, length)."""
    rng = np.random.default_rng(seed)
    trans, emit = np.exp(hmm.log_trans.astype(np.float64)), np.exp(hmm.log_emit.astype(np.float64))
    s_count, o_count = emit.shape
    states = np.empty((batch, length), dtype=np.int64)
    obs = np.empty((batch, length), dtype=np.int64)
    states[:, 0] = rng.choice(s_count, size=batch, p=np.exp(hmm.log_start.astype(np.float64)))
    for t in range(length):
        if t:
            u = rng.random(batch)[:, None]
            states[:, t] = (u > np.cumsum(trans[states[:, t - 1]], axis=1)).sum(axis=1)
        u = rng.random(batch)[:, None]
        obs[:, t] = (u > np.cumsum(emit[states[:, t]], axis=1)).sum(axis=1)
    return np.minimum(states, s_count - 1), np.minimum(obs, o_count - 1)


def viterbi(hmm: Hmm, obs: np.ndarray, matmul: MatmulArgmax) -> np.ndarray:
    """Most likely state paths, (batch, length): ``delta <- delta (x) log_trans`` in max-plus."""
    batch, length = obs.shape
    delta = (hmm.log_start[None, :] + hmm.log_emit[:, obs[:, 0]].T).astype(np.float32)
    back = np.empty((length, batch, delta.shape[1]), dtype=np.int64)
    for t in range(1, length):
        best, k = matmul(delta, hmm.log_trans)
        back[t] = np.asarray(k)
        delta = (np.asarray(best, dtype=np.float32) + hmm.log_emit[:, obs[:, t]].T).astype(np.float32)
    path = np.empty((batch, length), dtype=np.int64)
    path[:, -1] = np.argmax(delta, axis=1)
    for t in range(length - 1, 0, -1):
        path[:, t - 1] = back[t][np.arange(batch), path[:, t]]
    return path


# -- the family's kernels -----------------------------------------------------------
@dataclasses.dataclass
class KernelUse:
    name: str
    arch: str
    status: str  # "compiled", "loaded from cache" or "already in memory"
    seconds: float  # what getting it cost in this run
    compile_seconds: float  # what compiling it cost when it was compiled
    bytes: int
    load_ms: float | None = None  # loading the cubin into the GPU context


def fetch_kernels(family: Any, names: list[str], arch: str, *, gpu: bool) -> list[KernelUse]:
    """Get each kernel through the family (compile or cache) and time it."""
    out = []
    for name in names:
        in_memory = name in family.compiled()
        start = time.perf_counter()
        kernel = family.get(name, arch)
        seconds = time.perf_counter() - start
        meta = kernel.meta
        if in_memory:
            status = "already in memory"
        elif meta.get("compiled_now"):
            status = "compiled"
        else:
            status = "loaded from cache"
        load_ms = None
        if gpu:
            t0 = time.perf_counter()
            kernel.function()
            load_ms = (time.perf_counter() - t0) * 1e3
        out.append(
            KernelUse(name, arch, status, seconds, float(meta.get("compile_seconds", 0.0)), len(kernel.code), load_ms)
        )
    return out


# -- graph capture vs eager (GPU only) ----------------------------------------------------
@dataclasses.dataclass
class GraphTiming:
    steps: int
    eager_ms: float
    graph_ms: float
    same_answer: bool

    @property
    def speedup(self) -> float:
        return self.eager_ms / self.graph_ms if self.graph_ms > 0 else math.inf


def time_graph_vs_eager(tropical: Any, weights: np.ndarray, steps: int, *, repeats: int = 5) -> GraphTiming:
    """The squaring loop on device arrays: launched one by one, then as one captured graph."""
    d0 = np.array(weights, dtype=np.float32)
    np.fill_diagonal(d0, 0.0)
    stream = cuda.stream()
    bufs = [cuda.to_device(d0, stream=stream), cuda.device_array_like(d0, stream=stream)]
    k = cuda.device_array(d0.shape, dtype=np.int32, stream=stream)

    def loop() -> None:
        for s in range(steps):
            src, dst = bufs[s % 2], bufs[(s + 1) % 2]
            tropical.matmul(src, src, semiring="minplus", argmax=True, out=(dst, k), stream=stream)

    def timed(fn: Callable[[], None]) -> float:
        fn()
        stream.synchronize()
        start = time.perf_counter()
        for _ in range(repeats):
            bufs[0].copy_to_device(d0, stream=stream)
            fn()
        stream.synchronize()
        return (time.perf_counter() - start) / repeats * 1e3

    eager_ms = timed(loop)
    eager = bufs[steps % 2].copy_to_host(stream=stream)
    with graph.capture(stream) as g:
        loop()
    graph_ms = timed(g.replay)
    stream.synchronize()
    replayed = bufs[steps % 2].copy_to_host(stream=stream)
    stream.synchronize()
    return GraphTiming(steps, eager_ms, graph_ms, bool(np.array_equal(eager, replayed)))


# -- the whole demo ---------------------------------------------------------------
@dataclasses.dataclass
class DemoReport:
    gpu: bool
    device: str
    arch: str
    cache_dir: str | None
    family: str
    family_size: int
    compiled: list[str]
    kernels: list[KernelUse]
    graph: RoadGraph
    apsp: ApspResult
    apsp_seconds: float
    apsp_check: ApspCheck
    example_path: list[int]
    viterbi_batch: int
    viterbi_length: int
    viterbi_seconds: float
    viterbi_matches_numpy: bool
    viterbi_accuracy: float
    timing: GraphTiming | None
    timing_skipped: str
    seconds: float
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        timing_ok = self.timing is None or self.timing.same_answer
        return self.apsp_check.ok and self.viterbi_matches_numpy and timing_ok


def squarings(n: int) -> int:
    """The most min-plus squarings :func:`apsp` runs for ``n`` nodes."""
    return max(1, math.ceil(math.log2(max(n - 1, 2))))


def estimate_cpu_seconds(side: int, *, tropical: Any = None, sample: int = 160) -> float:
    """About how long the demo takes where there is no GPU (the NumPy reference does the products).

    Times one ``sample``-sized min-plus product with argmax and scales it by the
    multiply-adds of the run: a road grid settles after about ``log2(2 * side) + 1``
    squarings of an ``n x n`` matrix (``n = side**2``). The rest (Dijkstra, Viterbi,
    compiling two kernels) costs a few seconds at most.
    """
    tropical = tropical_module if tropical is None else tropical
    n = side * side
    m = min(n, sample)
    a = np.random.default_rng(0).random((m, m), dtype=np.float32)
    start = time.perf_counter()
    tropical.reference.matmul(a, a, semiring="minplus", argmax=True)
    rate = m**3 / max(time.perf_counter() - start, 1e-6)
    steps = min(squarings(n), math.ceil(math.log2(2 * side)) + 1)
    return steps * float(n) ** 3 / rate + 3.0


def gpu_present() -> bool:
    return device_compute_capability() is not None


def _device_name() -> tuple[bool, str]:
    if device_compute_capability() is None:
        return False, "no GPU found (answers computed by the NumPy reference)"
    name = cuda.get_current_device().name
    return True, name.decode() if isinstance(name, bytes) else str(name)


@contextmanager
def _fresh_cache() -> Iterator[str]:
    """A cold cache in a temporary directory, the default cache for the duration of the demo."""
    with tempfile.TemporaryDirectory(prefix="lazykern-demo-") as tmp:
        cache = KernelCache(tmp)
        set_default_cache(cache)
        try:
            yield tmp
        finally:
            cache.close()
            set_default_cache(None)


def run(
    *,
    side: int = 24,
    seed: int = 7,
    fresh_cache: bool = False,
    progress: Progress | None = None,
    tropical: Any = None,
) -> DemoReport:
    """Run every part of the demo and return what happened (nothing is printed)."""
    if fresh_cache:
        with _fresh_cache():
            return _run(side, seed, progress, tropical)
    return _run(side, seed, progress, tropical)


def _run(side: int, seed: int, progress: Progress | None, tropical: Any) -> DemoReport:
    tropical = tropical_module if tropical is None else tropical
    tick = progress or (lambda stage, done, total: None)
    start = time.perf_counter()
    gpu, device = _device_name()
    arch = current_arch()
    family = tropical.family
    notes: list[str] = []

    g = road_graph(side, seed=seed)
    hmm = casino()
    batch, length = 32, 200
    states, obs = sample_hmm(hmm, batch, length, seed=seed)
    tick("compiling or loading kernels", 0, 1)
    # The kernels the two products launch, asked of the family's API (with no GPU: those an H100 would use).
    delta = np.empty((batch, hmm.log_trans.shape[0]), np.float32)
    wanted = [
        *tropical.kernels_for(g.weights, g.weights, "minplus", argmax=True),
        *tropical.kernels_for(delta, hmm.log_trans, "maxplus", argmax=True),
    ]
    kernels = fetch_kernels(family, list(dict.fromkeys(wanted)), arch, gpu=gpu)
    tick("compiling or loading kernels", 1, 1)

    def maxplus(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        C, K = tropical.matmul(a, b, semiring="maxplus", argmax=True)
        return C, K

    def reference_maxplus(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        C, K = tropical.reference.matmul(a, b, semiring="maxplus", argmax=True)
        return C, K

    # On the CPU a squaring can take minutes: do it in row blocks so progress (and its ETA) moves.
    minplus = _SquaringMeter(tropical, tick, squarings(g.n), blocks=1 if gpu else max(1, g.n // 256))
    t0 = time.perf_counter()
    result = apsp(g.weights, minplus)
    tick("min-plus squarings", minplus.total, minplus.total)
    apsp_seconds = time.perf_counter() - t0
    tick("checking against Dijkstra and the reference", 0, 1)
    check = check_apsp(g, result, seed=seed, reference=tropical.reference)
    tick("checking against Dijkstra and the reference", 1, 1)
    example = result.path(0, g.n - 1)

    t0 = time.perf_counter()
    decoded = viterbi(hmm, obs, _ticking(maxplus, tick, length))
    viterbi_seconds = time.perf_counter() - t0
    expected = viterbi(hmm, obs, reference_maxplus)

    timing, skipped = None, "no GPU found"
    if gpu:
        tick("eager launches vs CUDA graph", 0, 1)
        try:
            timing = time_graph_vs_eager(tropical, g.weights, result.steps)
            skipped = ""
        except Exception as exc:  # the rest of the demo stands on its own
            skipped = f"{type(exc).__name__}: {exc}"
            notes.append(f"graph comparison failed: {skipped}")
        tick("eager launches vs CUDA graph", 1, 1)
    return DemoReport(
        gpu=gpu,
        device=device,
        arch=arch,
        cache_dir=default_cache().directory,
        family=family.name,
        family_size=len(family.names()),
        compiled=family.compiled(),
        kernels=kernels,
        graph=g,
        apsp=result,
        apsp_seconds=apsp_seconds,
        apsp_check=check,
        example_path=example,
        viterbi_batch=batch,
        viterbi_length=length,
        viterbi_seconds=viterbi_seconds,
        viterbi_matches_numpy=bool(np.array_equal(decoded, expected)),
        viterbi_accuracy=float((decoded == states).mean()),
        timing=timing,
        timing_skipped=skipped,
        seconds=time.perf_counter() - start,
        notes=notes,
    )


class _SquaringMeter:
    """The min-plus product with argmax, row block by row block, reporting each block done."""

    def __init__(self, tropical: Any, tick: Progress, limit: int, blocks: int) -> None:
        self.tropical, self.tick, self.limit, self.blocks = tropical, tick, limit, blocks
        self.total = limit * blocks
        self.step = 0

    def __call__(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = -(-a.shape[0] // self.blocks)
        parts: list[tuple[np.ndarray, np.ndarray]] = []
        for i, r in enumerate(range(0, a.shape[0], rows)):
            parts.append(self.tropical.matmul(a[r : r + rows], b, semiring="minplus", argmax=True))
            self.tick(f"min-plus squaring {self.step + 1}/{self.limit}", self.step * self.blocks + i + 1, self.total)
        self.step += 1
        if len(parts) == 1:
            return parts[0]
        return np.concatenate([np.asarray(p[0]) for p in parts]), np.concatenate([np.asarray(p[1]) for p in parts])


def _ticking(fn: MatmulArgmax, tick: Progress, total: int) -> MatmulArgmax:
    counter = {"n": 0}

    def wrapped(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        counter["n"] += 1
        if counter["n"] % 20 == 0:
            tick("Viterbi decode (max-plus)", counter["n"], total - 1)
        return fn(a, b)

    return wrapped
