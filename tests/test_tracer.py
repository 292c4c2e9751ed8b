"""NVRTC's traced pass runs in a child process (lazykern.compile._tracer): a crash there costs a
warning and a binary kept in memory, never the user's process (issue 35, class 4)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import warnings

import pytest

from lazykern.compile import _tracer, compiler
from lazykern.errors import LazykernWarning

from . import _servers
from ._file_clock import step_past

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNEL = 'extern "C" __global__ void k(int *a) { *a = VAL; }\n'

_FAMILY = r"""
import os, sys
from lazykern import KernelCache, KernelFamily
inc, store = sys.argv[1], sys.argv[2]
for run in range(2):
    fam = KernelFamily("gen", "#include <gen.h>\n", options=[f"-I{inc}"], cache=KernelCache(store))
    fam.add("k1", 'extern "C" __global__ void k1(int *a) { *a = A; }\n')
    fam.add("k2", 'extern "C" __global__ void k2(int *a) { *a = A + 1; }\n')
    metas = [fam.get(n, "sm_80").meta for n in ("k1", "k2")]
    print(run, fam.compile_calls, [m.get("memory_only", "") for m in metas], flush=True)
"""


def test_a_generated_header_in_a_two_fragment_family_neither_crashes_nor_recompiles(tmp_path):
    """The reproducer of DESIGN.md: traced in-process, the second fragment's compile died (SIGSEGV or
    "LLVM ERROR: out of memory"). Run in a child: a crash kills it, not pytest."""
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "gen.h").write_text('#line 1 "gen.tmpl"\n#define A 1\n')
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-c", _FAMILY, str(tmp_path / "inc"), str(tmp_path / "store")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # both compiled and stored on the first run; the second run is served from the store
    assert proc.stdout.splitlines() == ["0 2 ['', '']", "1 0 ['', '']"], proc.stdout


def _fake_server(tmp_path, body: str) -> str:
    """A compile server that runs ``body`` before each request (the real one must not be crashed on purpose)."""
    return _servers.boot(tmp_path, body)


@pytest.fixture
def servers(monkeypatch):
    _tracer.shutdown()
    yield monkeypatch
    _tracer.shutdown()


def test_a_server_that_crashes_every_time_leaves_the_binary_in_memory_with_one_warning(tmp_path, servers):
    servers.setattr(_tracer, "_BOOT", _fake_server(tmp_path, "os.abort()"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = compiler.compile_source("#define VAL 1\n" + KERNEL, name="k", arch="sm_80")
    assert result.code[:4] == b"\x7fELF" and result.headers is None
    assert "crashed" in result.memory_only and "signal 6" in result.memory_only, result.memory_only
    ours = [w for w in caught if issubclass(w.category, LazykernWarning)]
    assert len(ours) == 1 and "'k'" in str(ours[0].message), [str(w.message) for w in caught]


def test_a_server_that_crashes_once_is_replaced_and_the_trace_taken(tmp_path, servers):
    """A traced compile can poison NVRTC for the next one: the request is tried once in a fresh server."""
    marker = tmp_path / "crashed-once"
    servers.setattr(
        _tracer,
        "_BOOT",
        _fake_server(
            tmp_path,
            f"""
        if not os.path.exists({str(marker)!r}):
            open({str(marker)!r}, "w").close()
            os._exit(139)
    """,
        ),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", LazykernWarning)
        result = compiler.compile_source("#define VAL 1\n" + KERNEL, name="k", arch="sm_80")
    assert marker.exists() and result.memory_only == "" and result.headers is not None


def test_a_server_that_hangs_is_ended_and_the_binary_kept_in_memory_with_one_log_line(tmp_path, servers, caplog):
    servers.setattr(_tracer, "_BOOT", _fake_server(tmp_path, "import time; time.sleep(60)"))
    servers.setattr(_tracer, "TIMEOUT_S", 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LazykernWarning)  # memory-only is not an error
        with caplog.at_level("INFO", logger="lazykern"):
            result = compiler.compile_source("#define VAL 1\n" + KERNEL, name="k", arch="sm_80")
    assert result.code[:4] == b"\x7fELF" and result.headers is None and "did not answer" in result.memory_only
    said = [r.getMessage() for r in caplog.records if "did not answer" in r.getMessage()]
    assert len(said) == 1, said
    assert _tracer.servers() == []  # the stuck server was ended


def test_idle_servers_are_reused_not_restarted(servers):
    started = []
    real = _tracer._Server.__init__

    def counting(self, nice=True):
        started.append(1)
        real(self, nice)

    servers.setattr(_tracer._Server, "__init__", counting)
    for value in range(3):
        result = compiler.compile_source(f"#define VAL {value}\n" + KERNEL, name="k", arch="sm_80")
        assert result.headers is not None, result.memory_only
    assert len(started) == 1


def test_the_server_searches_the_callers_working_directory_of_now(tmp_path, servers):
    """The server outlives a chdir of its parent: each request carries the working directory."""
    compiler.compile_source("#define VAL 1\n" + KERNEL, name="k", arch="sm_80")  # the server starts here
    (tmp_path / "h.h").write_text("#define VAL 2\n")
    step_past()  # a header written in the compile's clock tick is not trusted
    servers.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LazykernWarning)
        result = compiler.compile_source('#include "h.h"\n' + KERNEL, name="k", arch="sm_80")
    assert [f[0] for f in result.headers["files"]] == ["h.h"], result.memory_only


_ON_DEVICE = r"""
import sys
import numpy as np
from numba import cuda
from lazykern import KernelCache, KernelFamily
inc, store = sys.argv[1], sys.argv[2]
fam = KernelFamily("gen_gpu", "#include <gen.h>\n", options=[f"-I{inc}"], cache=KernelCache(store))
fam.add("k1", 'extern "C" __global__ void k1(int *a) { a[threadIdx.x] = A + threadIdx.x; }', signature=["ptr"])
fam.add("k2", 'extern "C" __global__ void k2(int *a) { a[threadIdx.x] = 2 * A; }', signature=["ptr"])
stream = cuda.stream()
out = []
for name in ("k1", "k2"):
    d = cuda.device_array(4, dtype=np.int32, stream=stream)
    fam[name][1, 4, stream](d)
    out.append(d.copy_to_host(stream=stream).tolist())
stream.synchronize()
print(fam.compile_calls, out)
"""


@pytest.mark.gpu
def test_a_generated_header_family_runs_on_the_device_and_is_served_by_the_next_process(tmp_path):
    """The reproducer of class 4 on the GPU machine's NVRTC, launched: right values, then a warm store."""
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "gen.h").write_text('#line 1 "gen.tmpl"\n#define A 3\n')
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    args = [sys.executable, "-c", _ON_DEVICE, str(tmp_path / "inc"), str(tmp_path / "store")]
    runs = [subprocess.run(args, capture_output=True, text=True, env=env, timeout=300) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), [r.stderr[-2000:] for r in runs]
    assert [r.stdout.strip() for r in runs] == ["2 [[3, 4, 5, 6], [6, 6, 6, 6]]", "0 [[3, 4, 5, 6], [6, 6, 6, 6]]"]


def _begin(source: str, tmp_path, **options) -> _tracer.Pending:
    here = os.stat(tmp_path)
    return _tracer.begin(
        source, name="k.cu", arch="sm_80", options=options, target="cubin", cwd=str(tmp_path),
        cwd_id=(here.st_dev, here.st_ino),
    )  # fmt: skip


def test_the_real_server_answers_a_failed_compile_with_nvrtcs_log(tmp_path, servers):
    """The server runs NVRTC through its binding alone: a source that does not compile is an answer
    naming NVRTC's error, not a dead server; a good one gives NVRTC's binary and header events."""
    answer, why = _begin("this is not C++\n", tmp_path).wait()
    assert answer is None and why.startswith("the observed compile failed") and "k.cu" in why and "error" in why, why
    (tmp_path / "v.h").write_text("#define VAL 1\n")
    answer, why = _begin('#include "v.h"\n' + KERNEL, tmp_path).wait()
    assert why == "" and answer is not None
    assert base64.b64decode(answer["code"])[:4] == b"\x7fELF"
    assert [e[2] for e in answer["events"] if not e[2].startswith("__nv_nvrtc_builtin")] == ["v.h"]


def test_the_server_refuses_a_working_directory_replaced_since_the_start(tmp_path, servers):
    """A relative name means the directory of the compile's start: one swapped in since (mv) is refused."""
    (tmp_path / "a").mkdir()
    here = os.stat(tmp_path / "a")
    (tmp_path / "a").rename(tmp_path / "old")
    (tmp_path / "a").mkdir()
    pending = _tracer.begin(
        KERNEL, name="k", arch="sm_80", options={"define_macro": ["VAL=1"]}, target="cubin",
        cwd=str(tmp_path / "a"), cwd_id=(here.st_dev, here.st_ino),
    )  # fmt: skip
    answer, why = pending.wait()
    assert answer is None and "was replaced" in why, why
