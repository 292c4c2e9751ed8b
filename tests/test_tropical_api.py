"""The public API on the CPU: argument checks, layouts, shape classes, the NumPy fallback."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from lazykern import tropical
from lazykern.tropical import api, reference


@pytest.fixture(autouse=True)
def host_path(monkeypatch):
    """NumPy inputs take the CPU reference path here, on GPU machines too (the GPU suite covers the device)."""
    monkeypatch.setattr(api, "gpu_available", lambda: False)


def rand(shape, dtype="float32", seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_numpy_without_gpu_uses_the_reference_and_logs(caplog):
    A, B = rand((5, 3)), rand((3, 4), seed=1)
    with caplog.at_level(logging.INFO, logger="lazykern"):
        C = tropical.matmul(A, B, semiring="minplus")
    np.testing.assert_array_equal(C, reference.matmul(A, B, "minplus"))
    assert "NumPy reference" in caplog.text


def test_argmax_out_and_bmm_on_host():
    A, B = rand((2, 5, 3)), rand((3, 4), seed=1)
    C = np.empty((2, 5, 4), np.float32)
    Ix = np.empty((2, 5, 4), np.int32)
    got = tropical.bmm(A, B, semiring="maxmul", argmax=True, out=(C, Ix))
    assert got[0] is C and got[1] is Ix
    want = reference.bmm(A, B, "maxmul", argmax=True)
    np.testing.assert_array_equal(C, want[0])
    np.testing.assert_array_equal(Ix, want[1])


def test_backward_on_host():
    A, B = rand((4, 6)), rand((6, 3), seed=2)
    _, Ix = tropical.matmul(A, B, argmax=True)
    G = rand((4, 3), seed=5)
    gA, gB = tropical.matmul_backward(G, Ix, A.shape, B.shape)
    wA, wB = reference.matmul_backward(G, Ix, A.shape, B.shape)
    np.testing.assert_allclose(gA, wA)
    np.testing.assert_allclose(gB, wB)
    out = (np.full(A.shape, 7, G.dtype), np.full(B.shape, 7, G.dtype))  # overwritten, not added to
    got = tropical.matmul_backward(G, Ix, A.shape, B.shape, out=out)
    assert got[0] is out[0] and got[1] is out[1]
    np.testing.assert_allclose(out[0], wA)
    np.testing.assert_allclose(out[1], wB)


@pytest.mark.parametrize(
    "call, exc, words",
    [
        (lambda: tropical.matmul(rand((2, 3)), rand((3, 2)), semiring="plusmax"), ValueError, "semiring"),
        (lambda: tropical.matmul(rand((2, 3)), rand((4, 2))), ValueError, "shape mismatch"),
        (lambda: tropical.matmul(rand((2, 2, 3)), rand((3, 2))), ValueError, "2-D A"),
        (lambda: tropical.matmul(rand((2, 3)), rand((3,))), ValueError, "2-D B"),
        (lambda: tropical.matmul(rand((2, 3)), rand((3, 2), "float64")), TypeError, "same dtype"),
        (lambda: tropical.matmul(rand((2, 3), "float16"), rand((3, 2), "float16")), TypeError, "float16"),
        (lambda: tropical.matmul([[1.0]], rand((1, 1))), TypeError, "A must be"),
        (lambda: tropical.matmul(rand((2, 3)), rand((3, 2)), argmax="yes"), TypeError, "argmax"),
        (lambda: tropical.matmul(rand((2, 3)), rand((3, 2)), out=np.empty((3, 3), np.float32)), ValueError, "out"),
        (lambda: tropical.matmul(rand((2, 3)), rand((3, 2)), out=np.empty((2, 2), np.int32)), TypeError, "out"),
        (lambda: tropical.matmul(rand((2, 3)), rand((3, 2)), argmax=True, out=np.empty((2, 2))), TypeError, "pair"),
        (lambda: tropical.bmm(rand((2, 3)), rand((3, 2))), ValueError, "3-D"),
        (lambda: tropical.bmm(rand((2, 2, 3)), rand((3, 3, 2))), ValueError, "batch mismatch"),
        (lambda: tropical.matmul_backward(rand((2, 2)), np.zeros((2, 2), np.int64), (2, 3), (3, 2)), TypeError,
         "int32"),
        (lambda: tropical.matmul_backward(rand((2, 2)), np.zeros((2, 2), np.int32), (2, 3), (4, 2)), ValueError,
         "does not give"),
        (lambda: tropical.matmul_backward(rand((2, 2)), np.zeros((2, 2), np.int32), (2, 3), (3, 2),
                                          out=rand((2, 3))), TypeError, "pair"),
        (lambda: tropical.matmul_backward(rand((2, 2)), np.zeros((2, 2), np.int32), (2, 3), (3, 2),
                                          out=(rand((2, 3)), rand((2, 3)))), ValueError, r"out\[1\] has shape"),
        (lambda: tropical.matmul_backward(rand((2, 2)), np.zeros((2, 2), np.int32), (2, 3), (3, 2),
                                          out=(rand((2, 3)).astype(np.float64), rand((3, 2)))), TypeError, "dtype"),
    ],
)  # fmt: skip
def test_bad_arguments(call, exc, words):
    with pytest.raises(exc, match=words):
        call()


def test_shape_classes():
    assert tropical.choose_tile("f32", False, 1, 4096, 4096) == ""
    assert tropical.choose_tile("f32", False, 1, 4, 4) == "s"
    assert tropical.choose_tile("f32", False, 1, 2**21, 4) == "t"
    # a 128x128 tile would be 3/4 padding: the split-K kernel's 64x64 tile over the whole K
    assert tropical.choose_tile("f32", False, 1000, 64, 64, 64, sms=132) == "m"
    assert tropical.choose_tile("f32", True, 1000, 64, 64, 64, sms=132) == ""  # argmax keeps its own tiles
    assert tropical.choose_tile("f32", False, 1000, 32, 32, 32, sms=132) == "s"  # a 64x64 tile: 3/4 padding
    assert tropical.choose_tile("f32", False, 1000, 256, 64, 256, sms=132) == "m"  # 128x128: half padding
    assert tropical.choose_tile("f32", False, 64, 256, 256, 256, sms=132) == ""
    assert tropical.choose_tile("f32", False, 1000, 200, 300) == ""
    assert tropical.choose_tile("f32", False, 2**21, 4, 4) == "s"
    assert tropical.choose_tile("f64", True, 1, 100, 300) == "s"


def test_torch_cpu_through_the_reference():
    torch = pytest.importorskip("torch")
    from lazykern.tropical import torch as ttorch

    A = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    B = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    C = ttorch.matmul(A, B, "maxplus")
    C.sum().backward()
    Cn, In = reference.matmul(A.detach().numpy(), B.detach().numpy(), "maxplus", argmax=True)
    np.testing.assert_array_equal(C.detach().numpy(), Cn)
    gA, gB = reference.matmul_backward(np.ones_like(Cn), In, (4, 5), (5, 3))
    np.testing.assert_allclose(A.grad.numpy(), gA)
    np.testing.assert_allclose(B.grad.numpy(), gB)


@pytest.mark.parametrize("semiring", ["maxplus", "minplus", "maxmul"])
@pytest.mark.parametrize("batched", [False, True])
def test_torch_gradcheck_cpu(semiring, batched):
    """Finite differences agree with the autograd Function (random f64: no ties, so C is smooth)."""
    torch = pytest.importorskip("torch")
    from lazykern.tropical import torch as ttorch

    gen = torch.Generator().manual_seed(3)
    A = torch.randn((2, 4, 5) if batched else (4, 5), dtype=torch.float64, generator=gen, requires_grad=True)
    B = torch.randn(5, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: ttorch.matmul(a, b, semiring), (A, B), eps=1e-6, atol=1e-6)


def test_host_products_follow_the_device_layout_rule():
    """The host path refuses (or with copy=True copies) exactly what the kernels cannot read."""
    rng = np.random.default_rng(0)
    A0, B0 = (rng.integers(-5, 5, (2, 2, 2)).astype(np.float32) for _ in range(2))
    A, B = np.asfortranarray(A0), np.asfortranarray(B0)  # strides (1, 2, 4) in elements
    with pytest.raises(ValueError, match=r"A has strides \(1, 2, 4\)"):
        tropical.bmm(A, B)
    with pytest.raises(ValueError, match=r"B has strides \(1, 2, 4\)"):
        tropical.bmm(A0, B)
    np.testing.assert_array_equal(tropical.bmm(A, B, copy=True), reference.bmm(A0, B0))  # both copied
    np.testing.assert_array_equal(tropical.bmm(A0, B0.transpose(0, 2, 1).copy().transpose(0, 2, 1)),
                                  reference.bmm(A0, B0))  # a transposed view is read as it is  # fmt: skip
