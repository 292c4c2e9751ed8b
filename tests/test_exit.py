"""The exit teardown (lazykern/_exit.py): lazykern's graphs, streams, modules and pools released in that
order, each device's with it current, before Numba's exit finalizers, never raising.

The GPU proof is benchmarks/multigpu_exit.py (20 processes on every visible GPU, rc of each)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import weakref

import pytest

from lazykern import _exit
from lazykern.launch import _device, kernel, memory


@pytest.fixture
def fresh(monkeypatch):
    """An _exit module state of its own: empty phases, installed by this process, not yet run."""
    monkeypatch.setattr(_exit, "_releasers", {phase: [] for phase in _exit.PHASES})
    monkeypatch.setattr(_exit, "_installed_by", os.getpid())
    monkeypatch.setattr(_exit, "_done", False)
    return _exit


def test_phases_run_in_order_once_and_a_failure_does_not_stop_the_rest(fresh):
    ran = []
    for phase in reversed(fresh.PHASES):  # registration order does not matter, the phase does
        fresh.on_exit(phase)(lambda phase=phase: ran.append(phase))

    @fresh.on_exit("streams")
    def broken():
        raise RuntimeError("stream already gone")

    failures = fresh.teardown()
    assert ran == list(fresh.PHASES)
    assert failures == [("streams", broken.__qualname__, "RuntimeError: stream already gone")]
    assert fresh.teardown() == [] and ran == list(fresh.PHASES)  # once only
    with pytest.raises(ValueError, match="exit phase must be one of"):
        fresh.on_exit("contexts")


def test_a_forked_child_does_not_release_its_parents_handles(fresh, monkeypatch):
    ran = []
    fresh.on_exit("modules")(lambda: ran.append("modules"))
    monkeypatch.setattr(_exit, "_installed_by", os.getpid() + 1)  # the parent's registration
    assert not fresh.installed()
    fresh.teardown()
    assert ran == []


def test_the_teardown_runs_before_numbas_exit_finalizers():
    """In a real interpreter exit: installed after numba.cuda's import, ours runs while Numba does not
    yet consider the interpreter shutting down and before any atexit weakref.finalize ran; a
    releaser that raises leaves the exit code 0 and prints nothing."""
    code = textwrap.dedent(
        """
        import weakref
        from numba import cuda
        from numba.cuda import utils
        from lazykern import _exit

        class Module:  # stands for a Numba module with its exit finalizer
            pass

        keep = Module()
        weakref.finalize(keep, print, "numba finalizer", flush=True)

        @_exit.on_exit("graphs")
        def first():
            print("lazykern teardown, numba shutting down:", utils.shutting_down(), flush=True)

        @_exit.on_exit("memory")
        def fails():
            raise RuntimeError("pool gone")

        _exit.install()
        _exit.install()  # once per process
        """
    )
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=os.getcwd())
    env.pop("LAZYKERN_EXIT_TEARDOWN", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["lazykern teardown, numba shutting down: False", "numba finalizer"]
    assert "Traceback" not in proc.stderr


class FakeContext:
    def __init__(self, events, name, usable=True):
        self.events, self.name, self.usable = events, name, usable
        self.device = name
        self.modules = {}

        class Deallocs:  # Numba's queue of a context's pending frees and unloads
            def clear(self):
                events.append((name, "flush"))

        self.deallocations = Deallocs()

    def push(self):
        if not self.usable:
            raise RuntimeError("context destroyed")
        self.events.append((self.name, "push"))

    def pop(self):
        self.events.append((self.name, "pop"))

    def synchronize(self):
        self.events.append((self.name, "sync"))

    def unload_module(self, module):
        del self.modules[module.handle]
        self.events.append((self.name, f"unload {module.handle}"))


class FakeModule:
    def __init__(self, handle):
        self.handle = handle


def test_modules_are_unloaded_per_context_with_it_current_after_its_work(monkeypatch):
    events = []
    gpu0, gpu1, gone = FakeContext(events, "gpu0"), FakeContext(events, "gpu1"), FakeContext(events, "gone", False)
    k = kernel.Kernel("k", "k", b"\0", arch="sm_90")
    k._functions[0] = k._by_context[7] = "fn"
    loaded = []
    for ctx, handle in ((gpu0, 1), (gpu1, 2), (gpu0, 3), (gone, 4)):
        module = FakeModule(handle)
        ctx.modules[handle] = module
        loaded.append((ctx, module, weakref.ref(k)))
    gpu0.modules.pop(3)  # unloaded already by a context reset: skipped quietly
    monkeypatch.setattr(kernel, "_loaded", loaded)
    kernel.unload_all()
    assert events == [
        ("gpu0", "push"), ("gpu0", "sync"), ("gpu0", "unload 1"), ("gpu0", "flush"), ("gpu0", "pop"),
        ("gpu1", "push"), ("gpu1", "sync"), ("gpu1", "unload 2"), ("gpu1", "flush"), ("gpu1", "pop"),
    ]  # fmt: skip
    assert kernel._loaded == [] and k.loaded_devices == () and not k._by_context


def test_a_kernel_load_books_its_module_and_installs_the_teardown(monkeypatch):
    events = []
    ctx = FakeContext(events, "gpu0")

    class Loaded:
        def get_function(self, symbol):
            return type("F", (), {"kernel": f"kernel {symbol}"})()

    ctx.create_module_image = lambda obj: Loaded()
    ctx.device = type("D", (), {"id": 0, "name": "fake", "compute_capability": (9, 0)})()
    monkeypatch.setattr(kernel, "_loaded", [])
    monkeypatch.setattr(kernel, "_relaxed_capture", contextlib.nullcontext)  # asks the driver otherwise
    installs = []
    monkeypatch.setattr(_exit, "install", lambda: installs.append(1))
    k = kernel.Kernel("k", "sym", b"\0" * 16, arch="sm_90")
    assert k._load(ctx) == "kernel sym"
    [(c, module, ref)] = kernel._loaded
    assert c is ctx and isinstance(module, Loaded) and ref() is k and installs == [1]


def test_pools_are_destroyed_per_device_after_its_work_and_later_frees_skip_the_driver(monkeypatch):
    events = []

    class Driver:
        def cuCtxSynchronize(self):
            events.append("sync")
            return (0,)

        def cuMemPoolTrimTo(self, pool, size):
            events.append(f"trim {pool}")
            return (0,)

        def cuMemPoolDestroy(self, pool):
            events.append(f"destroy {pool}")
            return (0 if pool != "p1" else 1,)

    @contextlib.contextmanager
    def on(device):
        events.append(f"on {device}")
        yield

    monkeypatch.setattr(memory, "_drv", Driver())
    monkeypatch.setattr(_device, "on", on)
    monkeypatch.setattr(memory, "_pools", {0: "p0", 1: "p1", 2: "p2"})
    monkeypatch.setattr(memory, "_free_async", memory._free_async)  # restored after the test
    memory.destroy_pools()
    assert events == [
        "on 0", "sync", "trim p0", "destroy p0",
        "on 1", "sync", "trim p1", "destroy p1",  # fails (logged): device 2 still gets its turn
        "on 2", "sync", "trim p2", "destroy p2",
    ]  # fmt: skip
    assert memory._pools == {} and memory._free_async(0x1000, 0) == 0


def test_live_graphs_are_closed_on_their_device(monkeypatch):
    from lazykern import graph

    events = []

    class FakeGraph:
        def __init__(self, device, fails=False):
            self.device, self.fails = device, fails

        def close(self):
            if self.fails:
                raise RuntimeError("exec gone")
            events.append(("close", self.device))

    @contextlib.contextmanager
    def on(device):
        events.append(("on", device))
        yield

    monkeypatch.setattr(_device, "on", on)
    graphs = [FakeGraph(1, fails=True), FakeGraph(0), FakeGraph(None)]
    live = weakref.WeakSet(graphs)
    monkeypatch.setattr(graph, "_live", live)
    graph.release_all()
    assert sorted(e for e in events if e[0] == "close" and e[1] is not None) == [("close", 0)]
    assert ("close", None) in events and ("on", 1) in events


# -- one owner per CUlibrary (issue 45) ----------------------------------------------------------
def test_an_image_a_second_context_loads_is_a_private_copy():
    """numba-cuda hands its one cached ObjectCode to every device's create_module_image; the second
    load gets a fresh, unloaded copy of it (same code, type, name, symbols), so that no two modules
    unload one library. No driver is needed: nothing here loads."""
    from cuda.core import ObjectCode

    from lazykern._numba import internals

    image = ObjectCode.from_cubin(b"\x7fELF not a real cubin", name="k", symbol_mapping={"f": "_Z1fv"})
    assert internals.private_image(image) is image  # the first context: the object itself
    copies = [internals.private_image(image) for _ in range(2)]  # every later context: a copy each
    for c in copies:
        assert c is not image and type(c) is type(image)
        assert (c.code, c.code_type, c.name, c.symbol_mapping) == (image.code, "cubin", "k", {"f": "_Z1fv"})
    assert copies[0] is not copies[1]
    assert internals.private_image(copies[0]) is not copies[0]  # a copy is booked as loaded too
    other = ObjectCode.from_cubin(b"\x7fELF other", name="k2")
    assert internals.private_image(other) is other  # another object, even with equal code, is its own
    plain = object()  # not weak-referenceable, not an ObjectCode: passed through every time
    assert internals.private_image(plain) is plain and internals.private_image(plain) is plain


def test_the_patch_gives_numbas_second_load_of_an_image_a_copy(monkeypatch):
    """Through Numba's own ``Context.create_module_image`` (its loader replaced by a spy: no driver)."""
    from cuda.core import ObjectCode
    from numba.cuda.cudadrv.driver import Context

    from lazykern._numba import internals

    loads = []

    def loader(self, image, setup_callbacks=None, teardown_callbacks=None):  # stands for Numba's
        loads.append((self, image, setup_callbacks))
        return f"module {len(loads)}"

    monkeypatch.setattr(Context, "create_module_image", loader)  # put back after the test
    monkeypatch.setattr(internals, "_one_owner_patched", False)
    internals.one_owner_per_library()
    internals.one_owner_per_library()  # once per process: not wrapped twice
    assert Context.__dict__["create_module_image"].__wrapped__ is loader
    image = ObjectCode.from_cubin(b"\x7fELF cached by a CUDACodeLibrary", name="k")
    assert Context.create_module_image("ctx0", image, ["setup"]) == "module 1"
    assert Context.create_module_image("ctx1", image, ["setup"]) == "module 2"
    (c0, i0, s0), (c1, i1, s1) = loads
    assert (c0, s0, c1, s1) == ("ctx0", ["setup"], "ctx1", ["setup"])
    assert i0 is image and i1 is not image and i1.code == image.code


def test_libraries_still_shared_at_exit_are_unloaded_by_their_first_module_only(monkeypatch):
    from lazykern._numba import internals

    class Module:
        def __init__(self, handle):
            self.handle = handle
            self._finalizer = weakref.finalize(self, lambda: None)

    class Ctx:
        def __init__(self, *handles):
            self.modules = {h: Module(h) for h in handles}

    gpu0, gpu1, gpu2 = Ctx(1, 2, 3), Ctx(2, 4), Ctx(2, 3, 5)
    monkeypatch.setattr(internals, "numba_contexts", lambda: [gpu0, gpu1, gpu2])
    assert internals.detach_shared_unloads() == 3  # 2 on gpu1 and gpu2, 3 on gpu2
    alive = {(name, h) for name, c in (("0", gpu0), ("1", gpu1), ("2", gpu2)) for h, m in c.modules.items()
             if m._finalizer.alive}  # fmt: skip
    assert alive == {("0", 1), ("0", 2), ("0", 3), ("1", 4), ("2", 5)}
    assert internals.detach_shared_unloads() == 0  # once detached, nothing more to do
    assert kernel.one_unload_per_library in _exit._releasers["modules"]


def test_every_owner_registered_its_releaser():
    from lazykern import graph
    from lazykern.launch import _batch_split

    assert graph.release_all in _exit._releasers["graphs"]
    assert _batch_split.release_buffers in _exit._releasers["streams"]
    assert kernel.unload_all in _exit._releasers["modules"]
    assert memory.destroy_pools in _exit._releasers["memory"]


def test_the_switch_leaves_everything_to_numba(monkeypatch):
    monkeypatch.setattr(_exit, "_installed_by", None)
    registered = []
    monkeypatch.setattr(_exit.atexit, "register", registered.append)
    monkeypatch.setenv("LAZYKERN_EXIT_TEARDOWN", "0")
    _exit.install()
    assert registered == [] and not _exit.installed()
    monkeypatch.setenv("LAZYKERN_EXIT_TEARDOWN", "on")
    _exit.install()
    _exit.install()
    assert registered == [_exit.teardown] and _exit.installed()


@pytest.mark.gpu
def test_processes_that_used_every_gpu_exit_cleanly(tmp_path):
    """benchmarks/multigpu_exit.py, twice: Numba arrays, CuPy, torch (as installed) and graphs on
    every visible GPU, then a plain exit; each child must exit 0 (issue 31's SIGSEGV was rc -11)."""
    import json

    out = tmp_path / "exit.json"
    script = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "multigpu_exit.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, script, "--repeat", "2", "--out", str(out)], capture_output=True, text=True, env=env,
        timeout=600,
    )  # fmt: skip
    assert out.exists(), proc.stderr[-3000:]
    record = json.loads(out.read_text())
    assert record["exit_codes"] == [0, 0], proc.stderr[-3000:]
    assert all(v.get("correct", True) for r in record["runs"] for v in r["summary"].values() if isinstance(v, dict))
