"""The driver calls behind a captured graph, through ``cuda.bindings.driver``.

Thin on purpose: each function is one or two driver calls plus the check that
turns a ``CUresult`` into a lazykern error naming the call. Capture-related
driver errors raised by other layers (Numba, cuda.core) are recognised by
:func:`capture_failure` and turned into ``CaptureError``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from cuda.bindings import driver as drv

from ..errors import CaptureError, LazykernError

SUCCESS = drv.CUresult.CUDA_SUCCESS
THREAD_LOCAL = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
#: a replay frees what the previous one allocated and did not free (graph outputs): no growth per replay
AUTO_FREE_ON_LAUNCH = int(drv.CUgraphInstantiate_flags.CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
KERNEL_NODE = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL
#: cudaStreamCaptureUnsupported ... WrongThread (900-908): what the driver says when capture rules are broken.
CAPTURE_ERRORS = frozenset(range(900, 909))
_CAPTURE_NAME = re.compile(r"CUDA_ERROR_(STREAM_CAPTURE_\w+|CAPTURED_EVENT)")
_CALL_NAME = re.compile(r"Call to (cu\w+)")


def _name(err: Any) -> str:
    try:
        return str(drv.CUresult(err).name)
    except ValueError:
        return f"CUresult {int(err)}"


def check(result: tuple[Any, ...], what: str, error: type[LazykernError] = CaptureError) -> Any:
    """The value(s) of a driver call, or ``error`` naming the call and the CUresult."""
    err = result[0]
    if err != SUCCESS:
        raise error(f"{what} failed with {_name(err)}")
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


def stream(handle: int) -> Any:
    return drv.CUstream(handle)


def is_capturing(hstream: Any) -> bool:
    status = check(drv.cuStreamIsCapturing(hstream), "cuStreamIsCapturing")
    return bool(status != drv.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE)


def begin_capture(hstream: Any) -> None:
    check(drv.cuStreamBeginCapture(hstream, THREAD_LOCAL), "cuStreamBeginCapture")


def end_capture(hstream: Any) -> tuple[Any, Any]:
    """End the capture: ``(CUresult, graph or None)``; the stream is out of capture mode either way."""
    err, graph = drv.cuStreamEndCapture(hstream)
    if err != SUCCESS or graph is None or int(graph) == 0:
        return err, None
    return err, graph


def end_failure(err: Any) -> CaptureError:
    if err == drv.CUresult.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
        return CaptureError(
            "the capture was invalidated by an operation not allowed while capturing (an allocation, a "
            "synchronous copy, a synchronize, or work on the legacy default stream) that the code inside "
            "the capture caught or ignored: the captured work was discarded; move that operation out of "
            "the capture"
        )
    return CaptureError(f"cuStreamEndCapture failed with {_name(err)}: the captured work was discarded")


def instantiate(graph: Any, flags: int = 0) -> Any:
    return check(drv.cuGraphInstantiate(graph, flags), "cuGraphInstantiate")


def exec_update(gexec: Any, graph: Any) -> str | None:
    """Apply ``graph``'s parameters to ``gexec`` in place; None, or why the driver refused."""
    err, info = drv.cuGraphExecUpdate(gexec, graph)
    if err == SUCCESS:
        return None
    reason = getattr(getattr(info, "result", None), "name", None)
    return f"{_name(err)} ({reason})" if reason else _name(err)


def launch(gexec: Any, hstream: Any) -> None:
    err = drv.cuGraphLaunch(gexec, hstream)[0]
    if err != SUCCESS:
        raise LazykernError(f"cuGraphLaunch failed with {_name(err)}")


def upload(gexec: Any, hstream: Any) -> None:
    check(drv.cuGraphUpload(gexec, hstream), "cuGraphUpload")


def node_types(graph: Any) -> list[Any]:
    _, count = check(drv.cuGraphGetNodes(graph, 0), "cuGraphGetNodes")
    if not count:
        return []
    nodes, _ = check(drv.cuGraphGetNodes(graph, count), "cuGraphGetNodes")
    return [check(drv.cuGraphNodeGetType(node), "cuGraphNodeGetType") for node in nodes]


def kernel_count(graph: Any) -> int:
    return sum(1 for t in node_types(graph) if t == KERNEL_NODE)


def dot_print(graph: Any, path: Path) -> None:
    flags = drv.CUgraphDebugDot_flags.CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE
    check(drv.cuGraphDebugDotPrint(graph, str(path).encode(), int(flags)), "cuGraphDebugDotPrint")


def destroy_graph(graph: Any) -> None:
    drv.cuGraphDestroy(graph)


def destroy_exec(gexec: Any) -> None:
    drv.cuGraphExecDestroy(gexec)


def _operation(text: str) -> str:
    call = _CALL_NAME.search(text)
    if call is None:
        return "an operation not allowed while capturing"
    fn = call.group(1)
    if fn.startswith(("cuMemAlloc", "cuMemHostAlloc", "cuMemFree", "cuMemHostRegister")):
        return f"an allocation or free ({fn})"
    if fn.startswith(("cuMemcpy", "cuMemset")) and "Async" not in fn:
        return f"a synchronous copy ({fn})"
    if fn.endswith(("Synchronize", "Query")):
        return f"a synchronization ({fn})"
    return fn


def capture_failure(exc: BaseException) -> CaptureError | None:
    """A CaptureError describing ``exc`` when a capture rule caused it (anywhere in its chain)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, CaptureError):
            return None
        code = getattr(cur, "code", None)
        text = str(cur)
        try:
            is_capture = int(code) in CAPTURE_ERRORS if code is not None else False
        except (TypeError, ValueError):
            is_capture = False
        if is_capture or _CAPTURE_NAME.search(text):
            return CaptureError(
                f"{_operation(text)} is not allowed while a CUDA graph is being captured ({text.strip()}); "
                "the capture was ended and its work discarded. Allocate, copy synchronously and synchronize "
                "outside the capture; pass only device arrays to kernels"
            )
        cur = cur.__cause__ or cur.__context__
    return None
