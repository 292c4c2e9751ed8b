"""The strided row-kernel step: layouts it accepts, what it computes, and a sweep that no longer copies."""

from __future__ import annotations

import importlib
import itertools
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from lazykern.tn import _backend, _contract, _reference_einsum, _strided, orders
from lazykern.tn import networks as nw

from ._spin_oracles import transfer_matrix
from .test_tropical_einsum import device_route, networks

einsum_module = importlib.import_module("lazykern.tn.einsum")


def _device_route():
    """The GPU route on the host: a backend that is not NumPy's over NumPy arrays (tropical.bmm and the
    strided step then compute with their references, through the same layout rules)."""
    return device_route()


@pytest.mark.parametrize("semiring", ["maxplus", "minplus", "maxmul"])
def test_any_axis_order_computes_the_contraction(semiring):
    """Every axis order of X: where the layout fits, the strided step equals the brute-force
    contraction; where it does not, layout() says so (None) rather than reading wrong strides."""
    rng = np.random.default_rng(0)
    x_labels, y_labels, keep = ("a", "b", "c", "d", "e"), ("d", "e", "f"), {"a", "b", "c", "e", "f"}
    sizes = dict(a=2, b=3, c=2, d=2, e=2, f=3)
    y = rng.integers(0 if semiring == "maxmul" else -5, 5, [sizes[x] for x in y_labels]).astype(np.float32)
    fitted = 0
    for perm in itertools.permutations(range(5)):
        labels = tuple(x_labels[i] for i in perm)
        base = rng.integers(0 if semiring == "maxmul" else -5, 5, [sizes[x] for x in labels]).astype(np.float32)
        inv = tuple(labels.index(x) for x in x_labels)
        x = base.transpose(inv)  # a view: X's labels in x_labels order, memory in ``labels`` order
        strides = tuple(s // 4 for s in x.strides)
        lay = _strided.layout(x_labels, x.shape, strides, y_labels, y.shape, keep)
        if lay is None:
            continue
        fitted += 1
        perm_y = tuple(y_labels.index(lab) for lab in lay["batch"] + lay["con"] + lay["right"])
        be = _backend.Backend("cupy", np)
        out = _strided.launch(be, x, np.ascontiguousarray(y.transpose(perm_y)), lay, semiring)
        want = _reference_einsum.einsum_brute(
            ["".join(x_labels), "".join(y_labels)], "".join(lay["out"]), [x, y], semiring
        )
        np.testing.assert_array_equal(out, want)
    assert fitted >= 24  # the orders whose groups are runs: a good share of the 120


def test_merged_strides():
    size = dict(a=2, b=3, c=4, one=1)
    stride = dict(a=12, b=4, c=1, one=7)
    order = ["a", "one", "b", "c"]
    assert _strided.merged(["b", "c"], order, stride, size) == 1
    assert _strided.merged(["a", "b"], order, stride, size) == 4  # the size-1 axis between does not matter
    assert _strided.merged(["a", "c"], order, stride, size) is None  # not one run
    assert _strided.merged([], order, stride, size) == 0
    assert _strided.merged(["a"], order, dict(stride, a=13), size) == 13


@pytest.mark.parametrize("L", [9, 12])
def test_lattice_sweeps_through_the_strided_step(L):
    sg = nw.square_lattice(L, seed=L, field=0.3 if L == 9 else 0.0)
    E0, _ = transfer_matrix(sg, L)
    copies = []
    contiguous = _backend.Backend.contiguous

    def counting_copy(self, x):
        if x.ndim >= L and not x.flags.c_contiguous:  # the boundary (L spins), not a group's tensor (<= 7)
            copies.append(x.shape)
        return contiguous(self, x)

    with (
        _device_route(),
        mock.patch.object(_contract, "STRIDED_MIN", 0),
        mock.patch.object(_backend.Backend, "contiguous", counting_copy),
        mock.patch.object(_backend.Backend, "memory_limit", lambda self, b: 2**28),
    ):
        plan = nw.plan(sg, memory_limit=2**28)
        assert nw.ground_state_energy(sg, optimize=plan, dtype=np.float32) == pytest.approx(E0, abs=1e-4)
        energy_copies = list(copies)
        E, spins = nw.ground_state(sg, optimize=plan, dtype=np.float32, checkpoint=True)  # backtracking: argmax steps
        assert E == pytest.approx(E0, abs=1e-4) and sg.energy(spins) == pytest.approx(E0, abs=1e-4)
    assert len(energy_copies) <= 8, energy_copies  # a few, not one per step


def test_the_energy_pass_copies_the_boundary_a_few_times_only():
    L = 16
    sg = nw.square_lattice(L, seed=1)
    labels, tensors = sg.network(np.float32)
    copies, launches = [], []
    contiguous, launch = _backend.Backend.contiguous, _strided.launch

    def counting_copy(self, x):
        if x.size >= 2 ** (L - 1) and not x.flags.c_contiguous:
            copies.append(x.shape)
        return contiguous(self, x)

    def counting_launch(be, x, y, lay, semiring):
        launches.append(x.size)
        return launch(be, x, y, lay, semiring)

    with (
        _device_route(),
        mock.patch.object(_backend.Backend, "contiguous", counting_copy),
        mock.patch.object(_strided, "launch", counting_launch),
        mock.patch.object(_backend.Backend, "memory_limit", lambda self, b: 2**28),
    ):
        # The row sweep, 3 spins a step: every step past the first row carries the whole 2^L boundary.
        row_sweep = orders.sweep_path(labels, sg.order, 3)
        out = einsum_module.contract_network(labels, (), tensors, optimize=row_sweep)
    assert -out == transfer_matrix(sg, L)[0]
    big = sum(1 for n in launches if n >= 2 ** (L - 1))
    assert big >= sg.n // 3 - L and len(copies) <= 4, (big, copies)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(networks())
def test_random_networks_through_the_strided_step(net):
    """Every step that fits the strided row kernel takes it (threshold 0), any subscripts: same answers."""
    inputs, output, ops, semiring = net
    with _device_route(), mock.patch.object(_contract, "STRIDED_MIN", 0):
        got = einsum_module.einsum(",".join(inputs) + "->" + output, *ops, semiring=semiring)
    np.testing.assert_array_equal(got, _reference_einsum.einsum_brute(inputs, output, ops, semiring))


def test_a_batch_past_int32_is_launched_in_chunks(monkeypatch):
    """The row kernels count the batch (and batch * M rows) in int32: a step whose batch is larger
    (the chimera sweep's 2^31) is launched in chunks, each with its pointers moved on."""
    import contextlib
    from types import SimpleNamespace

    from lazykern.launch import _device
    from lazykern.tn import _strided
    from lazykern.tropical import _arrays, api

    calls = []

    class FakeKernel:
        def __getitem__(self, config):
            return lambda *args: calls.append((config, args))

    operands = iter([0x1000, 0x2000, 0x3000])
    monkeypatch.setattr(
        _arrays,
        "as_operand",
        lambda v, name: SimpleNamespace(ptr=next(operands), device=0, dtype=np.float32, stream=None),
    )
    monkeypatch.setattr(_device, "common", lambda named: 0)
    monkeypatch.setattr(_device, "resolve_or_current", lambda d: 0)
    monkeypatch.setattr(_device, "on", lambda d: contextlib.nullcontext())
    monkeypatch.setattr(api, "loaded_kernel", lambda name, device: FakeKernel())
    monkeypatch.setattr(api, "sm_count", lambda device: 132)
    monkeypatch.setattr(_strided, "_INT32_MAX", 6)  # chunks of 6 // M = 3 batch entries
    be = SimpleNamespace(xp=None, empty=lambda x, shape: object())
    M, N, K, batch, sA, sC = 2, 2, 2, 8, 100, 10
    lay = {"dims": (batch, M, N, K), "a": (sA, 1, 1), "c": (sC, 2), "out_shape": (batch, M, N)}
    _strided.launch(be, object(), object(), lay, "maxplus")
    counts = [args[12] for _, args in calls]
    assert counts == [3, 3, 2]
    starts = [0, 3, 6]
    assert [args[0] for _, args in calls] == [0x1000 + b * sA * 4 for b in starts]
    assert [args[1] for _, args in calls] == [0x2000 + b * K * N * 4 for b in starts]
    assert [args[2] for _, args in calls] == [0x3000 + b * sC * 4 for b in starts]
