"""Capture launches on a Numba stream once, replay them with one submission.

Example (GPU)::

    stream = cuda.stream()
    step = graph.DeviceScalar(np.int32(0), stream=stream)
    with graph.capture(stream) as g:                         # records, runs nothing
        kern_a[grid, block, stream](x, y, step)
        kern_b[grid, block, stream](y, z)
    for i in range(100):
        step.set(i)                                          # async 4-byte copy, same stream
        g.replay()                                           # one cuGraphLaunch

Capture is the driver's stream capture (``cuStreamBeginCapture`` in
thread-local mode) on the stream's handle, so lazykern kernels, ``@lazy_kernel``
kernels, Numba ``@cuda.jit`` kernels and anything else launched on that stream
land in one graph. The graph is instantiated once; :meth:`Graph.update`
re-captures the same topology with new arguments and applies it with
``cuGraphExecUpdate``, instantiating anew (and logging why) only when the
driver refuses.

Buffers: a graph stores raw device addresses. It keeps a reference to every
argument of every launch made in the capturing thread while capturing
(lazykern kernels report their launches, Numba's launch path is wrapped while
a capture is open), so its buffers cannot be freed while it may replay. Memory
that work inside the capture reaches any other way (a CuPy or PyTorch operation,
a kernel reading through a pointer table) is not seen: hand it to
:meth:`Graph.keep`.

Under the simulator (``NUMBA_ENABLE_CUDASIM=1``) nothing is captured by a
driver: launches on the captured stream are recorded as Python calls, in
order, and :meth:`Graph.replay` runs them. The same wrapper logic (errors,
references, updates, :func:`graphed`) thus runs in CI without a GPU. The
simulator forgets the stream of ``kern[grid, block, stream]``, so the capture
wraps that indexing while it is open: configure simulated kernels inside the
block (a ``kern[grid, block, stream]`` made before it would run at once).
lazykern's cubin kernels cannot run under the simulator at all.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .. import _exit
from ..errors import CaptureError
from ..launch import _capture, _device, memory
from . import _capture_hooks, _cugraph
from ._capture_pool import CapturePool
from ._device_scalar import DeviceScalar
from ._graphed import GraphedCallable

__all__ = ["CaptureError", "CapturePool", "DeviceScalar", "Graph", "GraphedCallable", "capture", "graphed"]

log = logging.getLogger("lazykern")

_LEGACY_HANDLES = (0, 1)  # CU_STREAM_LEGACY is 0x1; 0 means the legacy default stream to Numba too


class _Handles:
    """The driver objects of a graph, destroyed with it (weakref.finalize needs them apart from the Graph)."""

    def __init__(self) -> None:
        self.graph: Any = None
        self.exec: Any = None

    def release(self) -> None:
        if _capture.current() is not None:
            # Destroying a graph while this thread captures a stream invalidates that capture (a name
            # rebound by `with capture(s) as g` drops the old graph right there): after the capture.
            _after_capture.append(self)
            return
        if self.exec is not None:
            _cugraph.destroy_exec(self.exec)
            self.exec = None
        if self.graph is not None:
            _cugraph.destroy_graph(self.graph)
            self.graph = None


_after_capture: list[_Handles] = []  # graphs dropped while this process captured: destroyed after it


def _release_dropped() -> None:
    while _after_capture and _capture.current() is None:
        _after_capture.pop().release()


_live: weakref.WeakSet[Graph] = weakref.WeakSet()  # what the exit teardown destroys first (lazykern._exit)


@_exit.on_exit("graphs")
def release_all() -> None:
    """Destroy every live graph's exec and graph, before the modules their kernels come from go."""
    for g in list(_live):
        try:
            with _device.on(g.device):
                g.close()
        except Exception as exc:  # at exit: the other graphs still get their turn
            log.debug("lazykern exit: releasing %r failed: %s", g, exc)


class Graph:
    """Work captured from one stream, instantiated once, replayed with one launch.

    Make one with :func:`capture` (or ``Graph(stream)`` and :meth:`update`).
    Counters say how the latest capture was applied: ``instantiations`` (1 after
    the first capture; more only when an update was refused) and ``updates``.
    """

    def __init__(self, stream: Any, pool: CapturePool | None = None) -> None:
        self.stream = stream
        self.pool = pool  # None: a fresh CapturePool per capture (see capture())
        self.simulated = _capture_hooks.simulated()
        if stream is None or (isinstance(stream, int) and stream in _LEGACY_HANDLES):
            raise CaptureError(_legacy_message(stream))
        self._handle: int | None = None
        self._hstream: Any = None
        self.device: int | None = None  # the stream's GPU (None simulated): captures, instantiates, replays there
        if not self.simulated:
            self._handle = _device.stream_handle(stream)
            if self._handle in _LEGACY_HANDLES:
                raise CaptureError(_legacy_message(stream))
            self._hstream = _cugraph.stream(self._handle)
            self.device = _device.resolve_or_current(_device.of_stream(stream))
            _exit.install()
        _live.add(self)
        self._handles = _Handles()
        self._finalizer = weakref.finalize(self, self._handles.release)
        self._launches: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self._topology: list[Any] = []
        self._refs: dict[int, Any] = {}
        self._ready = False
        self._recorder: _capture.Recorder | None = None
        self.instantiations = 0
        self.updates = 0
        self.last_apply: str | None = None  # "instantiated", "updated" or "reinstantiated"

    # -- capturing --------------------------------------------------------------
    def recapture(self, fn: Callable[[], Any] | None = None) -> Any:
        """Capture again, applied as an update when the topology allows.

        ``with g.recapture(): ...`` captures the block; ``g.recapture(fn)`` is
        :meth:`update`. If the capture raises, it is discarded, the stream
        leaves capture mode, and the graph keeps replaying what it had before.
        """
        if fn is not None:
            return self.update(fn)
        return self._capturing()

    def update(self, fn: Callable[[], Any]) -> Any:
        """Capture ``fn()`` (same kernels, new arguments) and apply it; returns what ``fn`` returned.

        Uses ``cuGraphExecUpdate``: no re-instantiation unless the driver
        refuses the new graph (topology or kernels changed), in which case it
        instantiates anew and logs why; ``instantiations``/``updates`` tell.
        """
        with self._capturing():
            result = fn()
        return result

    @contextlib.contextmanager
    def _capturing(self) -> Iterator[Graph]:
        if self._recorder is not None:
            raise CaptureError("this graph is already being captured; captures of one graph cannot nest")
        session = _Session(self)
        try:
            yield self
        except BaseException as exc:
            session.abort()
            translated = None if self.simulated else _cugraph.capture_failure(exc)
            if translated is not None:
                raise translated from exc
            raise
        self._apply(session.recorder, session.finish())

    def _apply(self, rec: _capture.Recorder, graph: Any) -> None:
        if self.simulated:
            self._apply_simulated(rec)
        else:
            with _device.on(self.device):
                self._apply_driver(graph)
        self._refs = rec.refs
        self._ready = True

    def _apply_simulated(self, rec: _capture.Recorder) -> None:
        if self._ready and rec.topology == self._topology:
            self.updates += 1
            self.last_apply = "updated"
        else:
            if self._ready:
                log.info("recaptured graph launches other kernels than before: instantiating it anew")
            self.instantiations += 1
            self.last_apply = "reinstantiated" if self._ready else "instantiated"
        self._launches, self._topology = rec.launches, rec.topology

    def _apply_driver(self, graph: Any) -> None:
        handles = self._handles
        try:
            if handles.exec is None:
                handles.exec = _cugraph.instantiate(graph, _cugraph.AUTO_FREE_ON_LAUNCH)
                self.instantiations += 1
                self.last_apply = "instantiated"
            else:
                refused = _cugraph.exec_update(handles.exec, graph)
                if refused is None:
                    self.updates += 1
                    self.last_apply = "updated"
                else:
                    log.info("cuGraphExecUpdate refused the recaptured graph (%s): instantiating it anew", refused)
                    new_exec = _cugraph.instantiate(graph, _cugraph.AUTO_FREE_ON_LAUNCH)
                    _cugraph.destroy_exec(handles.exec)
                    handles.exec = new_exec
                    self.instantiations += 1
                    self.last_apply = "reinstantiated"
        except BaseException:
            _cugraph.destroy_graph(graph)
            raise
        if handles.graph is not None:
            _cugraph.destroy_graph(handles.graph)
        handles.graph = graph

    # -- using ------------------------------------------------------------------
    def replay(self, stream: Any = None) -> None:
        """Enqueue all captured work with one launch on ``stream`` (default: the captured stream)."""
        if self.simulated:
            if not self._ready:
                raise CaptureError(_nothing_captured())
            for fn, args in self._launches:
                fn(*args)
            return
        gexec = self._handles.exec
        if gexec is None:
            raise CaptureError(_nothing_captured())
        hstream = self._hstream if stream is None else self._other_stream(stream)
        token = _device.enter(self.device) if _device.several() else None
        try:
            _cugraph.launch(gexec, hstream)
        finally:
            _device.leave(token)

    def upload(self, stream: Any = None) -> None:
        """Upload the executable graph ahead of its first replay (takes that cost off the first replay)."""
        if self.simulated:
            return
        if self._handles.exec is None:
            raise CaptureError(_nothing_captured())
        hstream = self._hstream if stream is None else self._other_stream(stream)
        with _device.on(self.device):
            _cugraph.upload(self._handles.exec, hstream)

    def _other_stream(self, stream: Any) -> Any:
        dev = _device.of_stream(stream)
        if dev is not None and dev != self.device:
            raise ValueError(
                f"this graph was captured on device {self.device} and cannot run on a stream of device {dev}: "
                "replay it on a stream of its own device"
            )
        return _cugraph.stream(_device.stream_handle(stream))

    def keep(self, *objs: Any) -> None:
        """Keep objects alive as long as this capture may replay (memory the launches did not show)."""
        target = self._recorder.refs if self._recorder is not None else self._refs
        for obj in objs:
            target[id(obj)] = obj

    @property
    def kept(self) -> list[Any]:
        """What the graph holds on to: launch arguments and :meth:`keep`-ed objects."""
        return list(self._refs.values())

    @property
    def kernel_count(self) -> int:
        """Kernel nodes in the latest capture (all recorded launches, under the simulator)."""
        if self.simulated:
            return len(self._launches)
        if self._handles.graph is None:
            return 0
        return _cugraph.kernel_count(self._handles.graph)

    def debug_dot(self, path: str | Path) -> Path:
        """Write the captured graph as Graphviz dot (``cuGraphDebugDotPrint``); returns the path."""
        path = Path(path)
        if not self._ready:
            raise CaptureError(_nothing_captured())
        if self.simulated:
            lines = ["digraph lazykern_simulated {"]
            for i, (fn, _) in enumerate(self._launches):
                lines.append(f'  n{i} [label="{_label(fn)}"];')
                if i:
                    lines.append(f"  n{i - 1} -> n{i};")
            path.write_text("\n".join([*lines, "}"]) + "\n")
            return path
        _cugraph.dot_print(self._handles.graph, path)
        return path

    def close(self) -> None:
        """Free the driver objects and drop the references now instead of at garbage collection."""
        self._finalizer()
        self._handles = _Handles()
        self._finalizer = weakref.finalize(self, self._handles.release)
        self._launches, self._topology, self._refs = [], [], {}
        self._ready = False

    def __repr__(self) -> str:
        state = f"{self.kernel_count} kernel{'' if self.kernel_count == 1 else 's'}" if self._ready else "empty"
        sim = ", simulated" if self.simulated else ""
        return f"<lazykern Graph {state}, instantiations={self.instantiations}, updates={self.updates}{sim}>"


class _Session:
    """One open capture of a graph: begun on construction, then either finished or aborted.

    The stream always leaves capture mode before the hooks come off and before
    Numba may free deferred memory (a free during capture would invalidate it).
    """

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.pool = graph.pool if graph.pool is not None else CapturePool()
        self.recorder = _capture.Recorder(graph.stream, graph._handle, simulate=graph.simulated)
        self._stack = contextlib.ExitStack()
        self._stack.callback(_release_dropped)  # last out: graphs dropped during the capture
        try:
            if not graph.simulated:
                self._prepare_driver()
            _capture_hooks.install()
            self._stack.callback(_capture_hooks.uninstall)
            _capture.push(self.recorder)
            self._stack.callback(_capture.pop, self.recorder)
            graph._recorder = self.recorder
            self._stack.callback(setattr, graph, "_recorder", None)
            if not graph.simulated:
                handle = graph._handle
                assert handle is not None  # set for every graph that is not simulated
                _cugraph.begin_capture(graph._hstream)
                # allocations on the stream become graph allocation nodes booked in the pool
                memory.begin_capture(handle, self.pool)
                self._stack.callback(memory.end_capture, handle)
        except BaseException:
            self._stack.close()
            raise

    def _prepare_driver(self) -> None:
        # The stream's device is current for the whole block, so Numba kernels launched in it
        # (they run on the current context) land on the captured stream's device too.
        device = self.graph.device
        assert device is not None  # set for every graph that is not simulated
        self._stack.enter_context(_device.on(device))
        if _cugraph.is_capturing(self.graph._hstream):
            raise CaptureError(f"stream {self.graph._handle:#x} is already being captured; end that capture first")
        self._stack.enter_context(_device.primary_context(device).defer_cleanup())

    def _end(self) -> tuple[Any, Any]:
        if self.graph.simulated:
            self._stack.close()
            return None, None
        try:
            return _cugraph.end_capture(self.graph._hstream)
        finally:
            self.pool.seal()
            self._stack.close()

    def abort(self) -> None:
        _, graph = self._end()
        if graph is not None:
            _cugraph.destroy_graph(graph)

    def finish(self) -> Any:
        """The captured driver graph (None when simulated); CaptureError if the driver invalidated it."""
        err, graph = self._end()
        if graph is None and not self.graph.simulated:
            raise _cugraph.end_failure(err)
        return graph


def capture(stream: Any, pool: CapturePool | None = None) -> contextlib.AbstractContextManager[Graph]:
    """``with capture(stream) as g:`` records the block's work on ``stream`` into graph ``g``.

    Nothing runs during the block. Inside it, only launches and asynchronous
    work on device memory are allowed: an allocation, a synchronous copy or a
    host array raises :class:`~lazykern.errors.CaptureError`, which ends the
    capture and leaves the stream usable. The stream must be a created stream
    (``cuda.stream()``): the legacy default stream cannot be captured.

    The tropical API may allocate inside the block (outputs, argmax, split-K
    workspaces, gradients): those become allocation nodes of the graph, booked
    in ``pool`` (a fresh :class:`CapturePool` when None) and sealed after it.
    Arrays they return are the graph's outputs, rewritten in place by each replay.
    """
    return Graph(stream, pool)._capturing()


def _legacy_message(stream: Any) -> str:
    return (
        f"cannot capture on the legacy default stream ({stream!r}): CUDA forbids it. "
        "Capture on a created stream: s = numba.cuda.stream(); with graph.capture(s): kern[grid, block, s](...)"
    )


def _nothing_captured() -> str:
    return "this graph holds no successful capture yet: capture into it (graph.capture / Graph.update) first"


def _label(fn: Any) -> str:
    kernel = getattr(fn, "kernel", fn)
    name = getattr(getattr(kernel, "py_func", None), "__name__", None) or getattr(kernel, "name", None)
    return str(name or type(kernel).__name__)


def graphed(fn: Callable[..., Any] | None = None, *, stream: Any) -> Any:
    """Make ``fn`` (which launches its work on ``stream``) capture on first call and replay afterwards.

    Works as ``graphed(fn, stream=s)`` or as a decorator ``@graphed(stream=s)``.
    See :class:`GraphedCallable`.
    """
    if fn is None:
        return functools.partial(graphed, stream=stream)
    return GraphedCallable(fn, stream, Graph)
