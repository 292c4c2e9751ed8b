"""Every launching entry point runs on the GPU that owns its operands (issue 18), whatever
idiom put them there and whatever device is current at the call; mixed devices raise
ValueError before anything runs. Needs 2 GPUs.

The matrix: entry point x array kind (Numba, CuPy, torch; a kind whose library is missing
is skipped) x selection idiom x device 0 and 1, each compared with the NumPy reference.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from numba import cuda

from lazykern import graph, tropical
from lazykern.jit.decorator import lazy_kernel
from lazykern.launch import _device
from lazykern.scale.multigpu import device_count
from lazykern.tropical import reference

pytestmark = pytest.mark.gpu

KINDS = ("numba", "cupy", "torch")
IDIOMS = {
    "numba": ("gpus_with", "made_in_gpus_with", "select_device"),
    "cupy": ("device_with", "made_in_device_with"),
    "torch": ("cuda_i", "torch_device_with"),
}
MATRIX = [(k, i, d) for k in KINDS for i in IDIOMS[k] for d in (0, 1)]


@pytest.fixture(autouse=True)
def _two_gpus():
    if device_count() < 2:
        pytest.skip("needs 2 CUDA GPUs")
    for dev in (0, 1):
        # Retained up front: Numba 0.30's first `cuda.gpus[i]` drops whatever context was current.
        _device.primary_context(dev)


def _need(kind: str) -> Any:
    if kind == "numba":
        return cuda
    if importlib.util.find_spec(kind) is None:
        pytest.skip(f"{kind} is not installed")
    return __import__(kind)


@contextlib.contextmanager
def _select(device: int) -> Iterator[None]:
    cuda.select_device(device)
    ctx = cuda.current_context()
    try:
        yield
    finally:
        ctx.pop()  # select_device pushed it


class Placement:
    """Where and how operands are made (``make``) and what is current at the call (``call``)."""

    def __init__(self, kind: str, idiom: str, device: int) -> None:
        self.lib = _need(kind)
        self.kind, self.idiom, self.device = kind, idiom, device
        self.other = 1 - device

    def _ctx(self, device: int) -> contextlib.AbstractContextManager[Any]:
        if self.kind == "numba":
            return _select(device) if self.idiom == "select_device" else cuda.gpus[device]
        if self.kind == "cupy":
            return self.lib.cuda.Device(device)
        return self.lib.cuda.device(device)

    def make_ctx(self) -> contextlib.AbstractContextManager[Any]:
        if self.kind == "torch" and self.idiom == "cuda_i":
            return contextlib.nullcontext()
        return self._ctx(self.device)

    def call_ctx(self) -> contextlib.AbstractContextManager[Any]:
        """Made inside a block, used outside it: the other device is current at the call."""
        made_elsewhere = self.idiom in ("made_in_gpus_with", "made_in_device_with", "cuda_i")
        return self._ctx(self.other if made_elsewhere else self.device)

    def put(self, host: np.ndarray) -> Any:
        """``host`` on the device the idiom selects (each library's current device, or cuda:i)."""
        host = np.ascontiguousarray(host)
        with self.make_ctx():
            if self.kind == "numba":
                return cuda.to_device(host)
            if self.kind == "cupy":
                return self.lib.asarray(host)
            if self.idiom == "cuda_i":
                return self.lib.from_numpy(host).to(f"cuda:{self.device}")
            return self.lib.tensor(host, device="cuda")

    def put_on(self, host: np.ndarray, device: int) -> Any:
        host = np.ascontiguousarray(host)
        if self.kind == "numba":
            with cuda.gpus[device]:
                return cuda.to_device(host)
        if self.kind == "cupy":
            with self.lib.cuda.Device(device):
                return self.lib.asarray(host)
        return self.lib.from_numpy(host).to(f"cuda:{device}")

    def empty(self, shape: tuple[int, ...], dtype: Any) -> Any:
        return self.put(np.full(shape, 7, dtype=dtype))

    def stream(self, device: int | None = None) -> Any:
        device = self.device if device is None else device
        if self.kind == "numba":
            with cuda.gpus[device]:
                return cuda.stream()
        if self.kind == "cupy":
            with self.lib.cuda.Device(device):
                return self.lib.cuda.Stream(non_blocking=False)
        return self.lib.cuda.Stream(device=device)

    def sync(self) -> None:
        for dev in (0, 1):
            with _device.on(dev):
                cuda.synchronize()

    @staticmethod
    def host(x: Any) -> np.ndarray:
        if hasattr(x, "copy_to_host"):
            return x.copy_to_host()
        if type(x).__module__.startswith("cupy"):
            return x.get()
        return x.detach().cpu().numpy()

    def owner(self, x: Any) -> int:
        return _device.of_array(x)


def rand(shape, dtype="float32", seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-1000, 1000, shape).astype(dtype)


@pytest.fixture(params=MATRIX, ids=[f"{k}-{i}-dev{d}" for k, i, d in MATRIX])
def place(request) -> Placement:
    return Placement(*request.param)


# -- the tropical API -------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(512, 512, 512), (40, 30, 20), (64, 4096, 64)], ids=["512^3", "small", "splitk"])
def test_matmul_runs_on_the_operands_device(place, shape):
    M, K, N = shape
    A, B = rand((M, K)), rand((K, N), seed=1)
    dA, dB = place.put(A), place.put(B)
    with place.call_ctx():
        C, Ix = tropical.matmul(dA, dB, argmax=True)
        place.sync()
    assert place.owner(C) == place.owner(Ix) == place.device
    want_c, want_i = reference.matmul(A, B, "maxplus", argmax=True)
    np.testing.assert_array_equal(place.host(C), want_c)
    np.testing.assert_array_equal(place.host(Ix), want_i)


def test_matmul_out_and_stream_on_the_operands_device(place):
    A, B = rand((200, 300)), rand((300, 150), seed=2)
    dA, dB = place.put(A), place.put(B)
    C, Ix = place.empty((200, 150), np.float32), place.empty((200, 150), np.int32)
    s = place.stream()
    with place.call_ctx():
        got = tropical.matmul(dA, dB, "minplus", argmax=True, out=(C, Ix), stream=s)
        place.sync()
    assert got[0] is C and got[1] is Ix
    want_c, want_i = reference.matmul(A, B, "minplus", argmax=True)
    np.testing.assert_array_equal(place.host(C), want_c)
    np.testing.assert_array_equal(place.host(Ix), want_i)


def test_bmm_and_backward_on_the_operands_device(place):
    A, B = rand((5, 70, 65)), rand((65, 47), seed=3)  # B broadcast over the batch
    G = rand((5, 70, 47), seed=4)
    dA, dB, dG = place.put(A), place.put(B), place.put(G)
    with place.call_ctx():
        C, Ix = tropical.bmm(dA, dB, "maxmul", argmax=True)
        gA, gB = tropical.matmul_backward(dG, Ix, A.shape, B.shape)
        place.sync()
    assert {place.owner(x) for x in (C, Ix, gA, gB)} == {place.device}
    want_c, want_i = reference.bmm(A, B, "maxmul", argmax=True)
    np.testing.assert_array_equal(place.host(C), want_c)
    np.testing.assert_array_equal(place.host(Ix), want_i)
    wA, wB = reference.matmul_backward(G, want_i, A.shape, B.shape)
    np.testing.assert_allclose(place.host(gA), wA, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(place.host(gB), wB, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "shape, tile",
    [((64, 4096, 64), "splitk"), ((256, 256, 256), "splitk"), ((40, 30, 20), "s"), ((2048, 64, 8), "t"),
     ((1000, 4, 3), "r4"), ((1000, 8, 7), "r")],
)  # fmt: skip
@pytest.mark.parametrize("kind", KINDS)
def test_shape_classes_on_device_1_with_device_0_current(kind, shape, tile):
    place = Placement(kind, IDIOMS[kind][1] if kind != "torch" else "cuda_i", 1)
    M, K, N = shape
    assert tropical.choose_tile("f32", False, 1, M, N, K) == tile
    A, B = rand((M, K), seed=5), rand((K, N), seed=6)
    dA, dB = place.put(A), place.put(B)
    with place.call_ctx():
        for argmax in (False, True):
            got = tropical.matmul(dA, dB, argmax=argmax)
            want = reference.matmul(A, B, "maxplus", argmax=argmax)
            for g, w in zip(got if argmax else (got,), want if argmax else (want,), strict=True):
                assert place.owner(g) == 1
                np.testing.assert_array_equal(place.host(g), w)
        batched = tropical.bmm(place.put(np.stack([A, A + 1])), dB)
        np.testing.assert_array_equal(place.host(batched), reference.bmm(np.stack([A, A + 1]), B))


# -- kernels, graphs ----------------------------------------------------------------------
@lazy_kernel
def add_step(x, step, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + step[0]


def test_family_kernel_loads_and_runs_on_the_arrays_device(place, family):
    n = 1000
    data = np.arange(n, dtype=np.float32)
    a = place.put(data)
    kernel = family["scale_f32"]
    with place.call_ctx():
        kernel[(4,), (256,)](a, np.int32(n))
        place.sync()
    np.testing.assert_array_equal(place.host(a), data * 3)
    assert place.device in kernel.loaded_devices


def test_lazy_kernel_runs_on_the_arrays_device(place):
    x = np.arange(300, dtype=np.float32)
    dx, step, out = place.put(x), place.put(np.array([2.5], np.float32)), place.empty((300,), np.float32)
    with place.call_ctx():
        add_step[(2,), (256,)](dx, step, out)
        place.sync()
    np.testing.assert_array_equal(place.host(out), x + 2.5)


def test_capture_replay_device_scalar_and_graphed_on_the_streams_device(place, family):
    x = np.arange(300, dtype=np.float32)
    dx, out = place.put(x), place.empty((300,), np.float32)
    with cuda.gpus[place.device]:
        s = cuda.stream()  # graphs capture on Numba streams
    with place.call_ctx():
        step = graph.DeviceScalar(np.float32(0), stream=s)
        assert step.device == place.device
        with graph.capture(s) as g:
            add_step[(2,), (256,), s](dx, step, out)
        assert g.device == place.device
        for value in (1.0, 4.0):
            step.set(np.float32(value))
            g.replay()
            place.sync()
            np.testing.assert_array_equal(place.host(out), x + value)
        assert step.value == np.float32(4.0)

        def run(a, st, o):
            add_step[(2,), (256,), s](a, st, o)

        fn = graph.graphed(run, stream=s)
        step.set(np.float32(9.0))
        fn(dx, step, out)
        place.sync()
    np.testing.assert_array_equal(place.host(out), x + 9.0)


def test_torch_autograd_on_the_tensors_device():
    torch = _need("torch")
    from lazykern.tropical import torch as ttorch

    A0, B0, G0 = rand((30, 20)), rand((20, 25), seed=1), rand((30, 25), seed=2)
    for dev, current in ((1, 0), (0, 1)):
        A = torch.tensor(A0, device=f"cuda:{dev}", requires_grad=True)
        B = torch.tensor(B0, device=f"cuda:{dev}", requires_grad=True)
        with torch.cuda.device(current):
            C = ttorch.matmul(A, B, "maxplus")
            C.backward(torch.tensor(G0, device=f"cuda:{dev}"))
        torch.cuda.synchronize(dev)
        assert C.device.index == A.grad.device.index == B.grad.device.index == dev
        want_c, want_i = reference.matmul(A0, B0, "maxplus", argmax=True)
        wA, wB = reference.matmul_backward(G0, want_i, A0.shape, B0.shape)
        np.testing.assert_array_equal(C.detach().cpu().numpy(), want_c)
        np.testing.assert_allclose(A.grad.cpu().numpy(), wA, rtol=1e-5, atol=1e-6)  # atomics: any order
        np.testing.assert_allclose(B.grad.cpu().numpy(), wB, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", [0, 1])
def test_dask_chunks_on_one_gpu(device):
    cupy = _need("cupy")
    da = pytest.importorskip("dask.array")
    import dask

    from lazykern.scale import dask as lkdask

    A, B = rand((64, 96)), rand((96, 48), seed=1)

    def on_device(x):  # a chunk made by a task on `device`, as a loader on a GPU worker would
        with cupy.cuda.Device(device):
            return cupy.asarray(x)

    # Not da.from_array(cupy array): dask copies a graph-embedded array (copy.copy) when it
    # computes, and CuPy's copy lands on the *current* device, so chunks would reach the
    # product on GPU 1 - device already (seen on 2 H200s, with or without lazykern).
    def chunks(x, cols):
        parts = [da.from_delayed(dask.delayed(on_device)(x[:, i : i + cols]), (x.shape[0], cols), x.dtype,
                                 meta=cupy.empty((0, 0), x.dtype)) for i in range(0, x.shape[1], cols)]  # fmt: skip
        return da.concatenate(parts, axis=1)

    dA, dB = chunks(A, 48), da.concatenate([chunks(B[:48], 48), chunks(B[48:], 48)], axis=0)
    assert dA.numblocks == (1, 2) and dB.numblocks == (2, 1)
    with cupy.cuda.Device(1 - device):
        C, K = lkdask.matmul(dA, dB, semiring="maxplus", argmax=True)
        assert C.numblocks == (1, 1)  # the one output block itself: no concatenation on the host side
        c, k = dask.compute(C.to_delayed()[0, 0], K.to_delayed()[0, 0], scheduler="sync")
    assert c.device.id == k.device.id == device
    want_c, want_i = reference.matmul(A, B, "maxplus", argmax=True)
    np.testing.assert_array_equal(cupy.asnumpy(c), want_c)
    np.testing.assert_array_equal(cupy.asnumpy(k), want_i)


# -- mixed devices: ValueError before anything runs ----------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_mixed_devices_raise_before_launching(kind, family):
    p0, p1 = Placement(kind, IDIOMS[kind][0], 0), Placement(kind, IDIOMS[kind][0], 1)
    A, B = rand((64, 32)), rand((32, 48), seed=1)
    a0, b0, b1 = p0.put(A), p0.put(B), p1.put(B)
    c1 = p1.empty((64, 48), np.float32)
    with pytest.raises(ValueError, match="device 0 but B is on device 1"):
        tropical.matmul(a0, b1)
    with pytest.raises(ValueError, match="device 1"):
        tropical.matmul(a0, b0, out=c1)
    with pytest.raises(ValueError, match="stream belongs to device 1"):
        tropical.matmul(a0, b0, stream=p1.stream())
    _, ix0 = tropical.matmul(a0, b0, argmax=True)
    with pytest.raises(ValueError, match="device"):
        tropical.matmul_backward(p1.put(rand((64, 48))), ix0, A.shape, B.shape)
    with pytest.raises(ValueError, match="argument 0 is on device 0 but argument 2 is on device 1"):
        add_step[(1,), (64,)](a0, p0.put(np.zeros(1, np.float32)), c1)
    x1 = p1.put(np.arange(10, dtype=np.float32))
    with pytest.raises(ValueError, match="stream belongs to device 0"):
        family["scale_f32"][(1,), (32,), p0.stream()](x1, np.int32(10))
    np.testing.assert_array_equal(p1.host(c1), np.full((64, 48), 7, np.float32))  # untouched
    np.testing.assert_array_equal(p1.host(x1), np.arange(10, dtype=np.float32))


def test_graphs_refuse_another_devices_stream_and_arrays():
    p0, p1 = Placement("numba", "gpus_with", 0), Placement("numba", "gpus_with", 1)
    x0, out0 = p0.put(np.arange(8, dtype=np.float32)), p0.empty((8,), np.float32)
    s0 = p0.stream()
    step = graph.DeviceScalar(np.float32(1), stream=s0)
    with graph.capture(s0) as g:
        add_step[(1,), (32,), s0](x0, step, out0)
    with pytest.raises(ValueError, match="captured on device 0"):
        g.replay(p1.stream())

    def run(a, st, o):
        add_step[(1,), (32,), s0](a, st, o)

    with pytest.raises(ValueError, match="device 1"):
        graph.graphed(run, stream=s0)(p1.put(np.arange(8, dtype=np.float32)), step, out0)


# -- bmm(devices=...) --------------------------------------------------------------------
def _ints(shape, seed) -> np.ndarray:
    return np.random.default_rng(seed).integers(-50, 50, shape, dtype=np.int8).astype(np.float32)


def _check_split(batch: int, n: int) -> None:
    A, B = _ints((batch, n, n), 1), _ints((batch, n, n), 2)
    got = tropical.bmm(A, B, devices=[0, 1])
    with cuda.gpus[0]:
        one = tropical.bmm(A, B)  # one GPU, host to host
    np.testing.assert_array_equal(got, one)
    rows = [0, n // 2, n - 1]
    for b in {0, batch - 1}:
        np.testing.assert_array_equal(got[b, rows], reference.matmul(A[b, rows], B[b]))


@pytest.mark.parametrize("batch", [1, 2, 3, 7, 16, 64])
def test_bmm_devices_1024(batch):
    _check_split(batch, 1024)


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 2, 3, 7, 16, 64])
def test_bmm_devices_4096(batch):
    _check_split(batch, 4096)


def test_bmm_devices_argmax_and_out():
    A, B = rand((7, 96, 80)), rand((7, 80, 72), seed=1)
    C, K = np.empty((7, 96, 72), np.float32), np.empty((7, 96, 72), np.int32)
    got = tropical.bmm(A, B, "minplus", argmax=True, out=(C, K), devices=[0, 1])
    assert got[0] is C and got[1] is K
    want_c, want_i = reference.bmm(A, B, "minplus", argmax=True)
    np.testing.assert_array_equal(C, want_c)
    np.testing.assert_array_equal(K, want_i)
    out = np.empty((7, 96, 72), np.float32)
    assert tropical.bmm(A, B, out=out, devices=[1, 0]) is out
    np.testing.assert_array_equal(out, reference.bmm(A, B))
    with pytest.raises(ValueError, match="shape"):
        tropical.bmm(A, B, out=np.empty((7, 96, 71), np.float32), devices=[0, 1])


@pytest.mark.parametrize("batched", [False, True])
def test_a_first_call_on_device_1_is_read_after_it_is_written(batched):
    """Issue 45's wrong reads under load, made certain: a product of a few milliseconds on device 1's
    legacy stream (Numba arrays), its first call (planned inside a device switch) and its second (the
    hot path), each read back at once by Numba's copy_to_host with device 0 current. Unordered, the
    copy starts before the kernel ends and reads whatever the new buffer held."""
    M, K, N = 1024, 32768 + (3 if batched else 1), 1024  # a shape no other test plans: ~3 ms a product
    A, B = rand((2, M, K) if batched else (M, K), seed=11), rand((K, N), seed=12)
    with cuda.gpus[1]:
        dA, dB = cuda.to_device(A), cuda.to_device(np.broadcast_to(B, (2, K, N)).copy() if batched else B)
    rows = [0, M // 2, M - 1]
    with cuda.gpus[0]:
        for _ in range(2):
            got = (tropical.bmm if batched else tropical.matmul)(dA, dB).copy_to_host()
            for r in rows:
                want = reference.matmul((A[1] if batched else A)[r : r + 1], B)[0]
                np.testing.assert_array_equal(got[1, r] if batched else got[r], want)
