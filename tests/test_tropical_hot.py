"""The tropical call path (lazykern/tropical/_hot.py) counted, not timed, on the fake driver stage.

Two profile hooks (``sys.setprofile``) follow a ``tropical.matmul``:

* the walk of operand ``A``: every lazykern frame whose arguments hold ``A``, its address, or
  an ``Operand`` describing it, in call order. A *stop* is one such frame; a *return* is a stop
  in a module the walk had already left (api -> _hot -> api counts one). The path must read top
  to bottom: at most 10 stops and 3 returns, on the first call (the general path) as on a
  repeated one;
* the work of a repeated call: every Python function it runs, which must be the table lookup,
  the pointer reads, the allocation (when it allocates) and one launch, nothing else (no
  validation, planning, kernel lookup, stream resolution or pool creation).
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from lazykern.launch import _launch, memory
from lazykern.tropical import _hot, api
from tests._tropical_fakes import FakeDeviceArray, stage

CALLS = {"out=": {"out": True}, "allocating": {}, "argmax allocating": {"argmax": True}}


@pytest.fixture
def st(monkeypatch):
    st = stage(monkeypatch, reuse=True)
    # The real launch layer down to the driver call: the walk ends in launch_packed.
    monkeypatch.setattr(_hot, "launch_packed", _launch.launch_packed)
    monkeypatch.setattr(_launch, "launch_buffer", lambda *args: st.launches.append(args) or (0,))
    return st


def _arrays(kw: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    A, B = FakeDeviceArray((64, 64)), FakeDeviceArray((64, 64))
    args = {"argmax": kw.get("argmax", False)}
    if kw.get("out"):
        args["out"] = FakeDeviceArray((64, 64))
    return A, B, args


def walk_of(A: Any, call: Any) -> list[tuple[str, str]]:
    """(module, function) of each lazykern frame that touches ``A`` while ``call()`` runs."""
    address = A.gpu_data.device_pointer

    def is_a(v: Any) -> bool:
        if v is A or (v.__class__ is int and v == address):
            return True
        return v.__class__ is api.Operand and getattr(v, "obj", None) is A  # an Operand being built has no obj yet

    def touches(v: Any) -> bool:
        return is_a(v) or (v.__class__ is tuple and any(is_a(x) for x in v))

    stops: list[tuple[str, str]] = []

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if module.startswith("lazykern.") and any(touches(v) for v in frame.f_locals.values()):
            stops.append((module, frame.f_code.co_name))

    sys.setprofile(hook)
    try:
        call()
    finally:
        sys.setprofile(None)
    return stops


def returns(stops: list[tuple[str, str]]) -> int:
    """Stops in a module the walk had left before."""
    modules = [m for m, _ in stops]
    return sum(1 for i, m in enumerate(modules) if i and m != modules[i - 1] and m in modules[:i])


@pytest.mark.parametrize("name", list(CALLS))
def test_the_walk_of_A_reads_top_to_bottom(st, name):
    A, B, kw = _arrays(CALLS[name])
    first = walk_of(A, lambda: api.matmul(A, B, **kw))  # a miss: the general path plans and remembers
    again = walk_of(A, lambda: api.matmul(A, B, **kw))  # a hit
    assert len(st.launches) == 2
    for stops in (first, again):
        assert stops[0] == ("lazykern.tropical.api", "matmul")
        assert stops[-1] == ("lazykern.launch._launch", "launch_packed")
        assert len(stops) <= 10 and returns(stops) <= 3, stops
    # a hit on Numba arrays: their description codes and addresses are kept on them
    assert again == [
        ("lazykern.tropical.api", "matmul"), ("lazykern.tropical._hot", "product"),
        ("lazykern.tropical._hot", "run"), ("lazykern.launch._launch", "launch_packed"),
    ]  # fmt: skip


def test_returns_counts_modules_left_before():
    walk = [("api", "f"), ("_hot", "g"), ("api", "h"), ("api", "i"), ("_arrays", "j"), ("_hot", "k")]
    assert returns(walk) == 2


# What a repeated call on Numba arrays may run, by the kind of call: anything else is work it
# should not do (their descriptions and addresses are read once, then kept on the arrays).
_LOOKUP = {
    ("lazykern.tropical.api", "matmul"),
    ("lazykern.tropical._hot", "product"),
    ("lazykern.tropical._arrays", "fast_kind"),
    ("lazykern.tropical._hot", "ProductCall.run"),
    ("lazykern.launch._launch", "launch_packed"),
}
_ALLOCATE = {
    ("lazykern.launch.memory", "NumbaOutputs.new"),
    ("lazykern._numba.internals", "device_array_maker.<locals>.make_one"),
    ("lazykern._numba.internals", "device_array_maker.<locals>.make_two"),
    ("lazykern.launch.memory", "allocate"),
    # the previous call's outputs, dropped when the result is replaced: their buffer's owner frees it
    ("lazykern._numba.internals", "_owning_pointer_class.<locals>.OwningPointer.__del__"),
    ("lazykern.launch.memory", "free"),
    ("lazykern.launch.memory", "_keep"),
}
# lazykern frames per call (an allocating call's count includes freeing its dropped result)
_BOUND = {"out=": 5, "allocating": 10, "argmax allocating": 11}


def _lazykern_calls(call: Any) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []

    def hook(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if module.startswith("lazykern."):
                seen.append((module, frame.f_code.co_qualname))

    sys.setprofile(hook)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


@pytest.mark.parametrize("name", list(CALLS))
def test_a_repeated_call_does_only_the_work_of_a_hit(st, name):
    A, B, kw = _arrays(CALLS[name])
    api.matmul(A, B, **kw)  # plans; an allocating call's outputs are dropped at once: a free list keeps them
    driver = (dict(st.allocs), list(st.frees))
    reused = memory.stats()["reused"]
    seen = _lazykern_calls(lambda: api.matmul(A, B, **kw))
    allowed = _LOOKUP | (set() if "out" in kw else _ALLOCATE)
    assert set(seen) <= allowed, sorted(set(seen) - allowed)
    assert seen.count(("lazykern.launch._launch", "launch_packed")) == 1
    assert len(seen) <= _BOUND[name], seen
    assert len(st.launches) == 2 and len(_hot._entries) == 1
    assert (dict(st.allocs), list(st.frees)) == driver  # no driver allocation or free: a free-list pop
    assert memory.stats()["reused"] == reused + (0 if "out" in kw else 1)


def test_a_fixed_stream_is_resolved_once_per_call_not_per_launch(st, monkeypatch):
    resolved: list[int] = []
    monkeypatch.setattr(_hot, "custream", lambda handle: resolved.append(handle) or ("stream", handle))
    A, B, C = FakeDeviceArray((64, 64)), FakeDeviceArray((64, 64)), FakeDeviceArray((64, 64))
    for _ in range(3):
        api.matmul(A, B, out=C, stream=7)
    assert resolved == [7] and [launch[8] for launch in st.launches] == [("stream", 7)] * 3  # cuLaunchKernel's hStream


def test_numba_descriptions_are_kept_codes_never_reused_after_the_table_starts_over(st, monkeypatch):
    kind = _hot._arrays.fast_kinds()["numba"]
    a, b, c = FakeDeviceArray((64, 64)), FakeDeviceArray((64, 64)), FakeDeviceArray((64, 32))
    ka, kb, kc = (_hot._kept(x, kind) for x in (a, b, c))
    assert ka[0] == kb[0] != kc[0] and ka[1] == a.gpu_data.device_pointer
    monkeypatch.setattr(_hot, "_CACHE_SIZE", 1)  # a new description clears the code table
    _hot._kept(FakeDeviceArray((8, 8)), kind)
    d = FakeDeviceArray((64, 64))  # a's description, but a new code: a miss, never a wrong hit
    assert _hot._kept(d, kind)[0] not in (ka[0], kc[0])


def test_outputs_dropped_inside_a_capture_are_never_handed_out_after_it(st):
    """The H100 benchmark's scenario: 200 allocating calls captured (each result dropped at once:
    a free node), then allocating calls outside the capture must get real memory, not the graph's."""
    from lazykern import graph

    A, B = FakeDeviceArray((64, 4096)), FakeDeviceArray((4096, 64))  # split-K: a workspace too
    api.matmul(A, B, stream=4)
    memory.begin_capture(4, graph.CapturePool())
    try:
        for _ in range(3):
            api.matmul(A, B, stream=4)
            api.matmul(A, B, argmax=True, stream=4)
    finally:
        memory.end_capture(4)
    assert len(st.graph_allocs) == 12 and set(st.graph_allocs) <= set(st.frees)  # every one a free node
    after = [api.matmul(A, B, stream=4) for _ in range(3)] + [api.matmul(A, B, argmax=True, stream=4)[0]]
    assert not {c.gpu_data.device_pointer for c in after} & set(st.graph_allocs)
