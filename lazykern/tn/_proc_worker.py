"""One worker process of :mod:`lazykern.tn._procs`: calls from its parent, answered one at a time.

Started by ``_procs`` (``python -c``: a fresh interpreter, ``CUDA_VISIBLE_DEVICES`` naming its GPU,
so that GPU is device 0 here). It dies with its parent (``PR_SET_PDEATHSIG``; a parent gone before
that was set is caught by its pid) and exits when its stdin closes. Each call is ``(module, function,
args)``; the answer is ``("ok", value)`` or ``("error", encoded exception)``. Its stdout is the
channel alone: anything printed goes to its stderr. The calls a spread makes are the functions below:
a group of slices (:func:`slices`) and a counting pass (:func:`counting_pass`), each on this
process's device, its result as host arrays.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from typing import IO, Any

import numpy as np


def _bound_to_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # no prctl: stdin's end still ends this process when idle
            pass
    if parent and os.getppid() != parent:
        os._exit(0)


def _channel() -> tuple[IO[bytes], IO[bytes]]:
    """(calls in, answers out): the answers on a private copy of fd 1, and fd 1 itself pointed at
    stderr, so a library's print can never corrupt a frame."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return sys.stdin.buffer, out


def main() -> int:
    _bound_to_parent(int(os.environ.get("LAZYKERN_WORKER_PARENT", "0")))
    from . import _procs

    calls, answers = _channel()
    while True:
        try:
            module, function, args = _procs.receive(calls)
        except EOFError:  # the parent closed the channel (or is gone): done
            return 0
        try:
            value = getattr(importlib.import_module(module), function)(*args)
            answer: tuple[str, Any] = ("ok", value)
        except BaseException as exc:  # noqa: BLE001 (every failure is the caller's to raise)
            answer = ("error", _procs.encode_error(exc))
        try:
            _procs.send(answers, answer)
        except BrokenPipeError:
            return 0


def _to_module(x: np.ndarray, module: str) -> Any:
    if module == "cupy":
        import cupy

        return cupy.asarray(x)
    if module == "torch":
        import torch

        return torch.as_tensor(x, device="cuda")
    return x


def slices(shipped: dict[str, Any], module: str, plan: Any, start: int, stop: int) -> dict[str, Any]:
    """Slices ``start`` to ``stop`` of the network :func:`lazykern.tn.contraction.ship.ship` described, contracted
    along ``plan`` with ``module``'s arrays on this process's device (under that device's memory guard):
    ``value`` is the partial's arrays on the host and its labels (see :func:`_timed`)."""
    from .einsum import contract_range

    def run(net: Any) -> Any:
        term = contract_range(net, plan, start, stop)
        return tuple(net.be.to_host(p) for p in term.parts), term.labels

    return _timed(shipped, module, run)


def slice_optima(shipped: dict[str, Any], module: str, plan: Any, start: int, stop: int) -> dict[str, Any]:
    """The optimum of each of slices ``start`` to ``stop`` (argmax_einsum's search over a group), as
    :func:`lazykern.tn.einsum.search_range` gives them: ``value`` is a list of (sliced labels' values,
    optimum as a Python number)."""
    from .einsum import search_range

    return _timed(shipped, module, lambda net: search_range(net, plan, start, stop))


def _timed(shipped: dict[str, Any], module: str, run: Any) -> dict[str, Any]:
    """``run(network)`` on the network rebuilt here: ``value``, and the wall and CPU ``seconds`` /
    ``cpu_seconds`` it took (the spread's profile)."""
    from .einsum import unship

    began, cpu = time.perf_counter(), time.process_time()
    recipe = shipped["algebra"]
    if isinstance(recipe, tuple):  # ("counting", moduli): a ring made at run time, made again here
        from .counting import algebra

        recipe = algebra(*recipe[1])
    net = unship(shipped, lambda x: _to_module(x, module), recipe)
    value = run(net)
    return {"value": value, "seconds": time.perf_counter() - began, "cpu_seconds": time.process_time() - cpu}


def counting_pass(
    inputs: Any, output: Any, operands: list[Any], semiring: str, moduli: tuple[int, ...], module: str, plan: Any
) -> tuple[np.ndarray, list[np.ndarray]]:
    """One whole counting pass (modulo ``moduli``; none: int64 counts) of the network on this process's
    device: (values, one count array per modulus) on the host, as :func:`lazykern.tn.counting.exact`'s
    passes give them."""
    from .counting import algebra
    from .einsum import contract_network

    here = [
        tuple(_to_module(p, module) for p in op) if isinstance(op, tuple) else _to_module(op, module) for op in operands
    ]
    # contract_network returns Any: a counting algebra's result is (values, counts...)
    out: tuple[Any, ...] = contract_network(
        inputs, output, here, semiring=semiring, optimize=plan, algebra=algebra(*moduli)
    )
    values, *counts = out
    return _host(values), [_host(c) for c in counts]


def _host(x: Any) -> np.ndarray:
    if isinstance(x, (np.ndarray, np.generic)):
        return np.asarray(x)
    if hasattr(x, "copy_to_host"):
        host: np.ndarray = x.copy_to_host()
        return host
    if hasattr(x, "detach"):
        tensor: np.ndarray = x.detach().cpu().numpy()
        return tensor
    import cupy

    array: np.ndarray = cupy.asnumpy(x)
    return array
