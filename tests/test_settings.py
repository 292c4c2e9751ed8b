"""Every setting and argument is checked where it enters, in one wording: the setting, the bad value,
what is accepted. Each case runs the command a user types, in a fresh process."""

from __future__ import annotations

import json
import os
import re
import textwrap

import pytest

from lazykern import KernelCache, KernelFamily
from tests._cli_run import env_for, lazykern, run

ONE_WORDING = re.compile(r"^warning: (LAZYKERN_\w+)='(.*)' is not valid; accepted: .+; using .+$")
BAD_ENV = {
    "LAZYKERN_LOG": "LOUD",
    "LAZYKERN_PYTEST": "maybe",
    "LAZYKERN_CACHE_SIZE": "-1",
    "LAZYKERN_CACHE": "perhaps",
    "LAZYKERN_ARCH": "sm_x",
    "LAZYKERN_LOCK_TIMEOUT": "-3",
    "LAZYKERN_SPREAD": "fibers",
}


@pytest.fixture
def store(tmp_path):
    """A directory holding a (small) store."""
    path = tmp_path / "store"
    kc = KernelCache(path)
    kc.store("ab" * 32, b"\x7fELF" + b"\0" * 64, {"family": "f", "kernel": "k"})
    kc.close()
    return path


def test_every_bad_variable_is_one_warning_line_in_the_one_wording(store):
    done = lazykern("cache", "info", env=env_for(store, **BAD_ENV))
    found = [ONE_WORDING.match(ln) for ln in done.stderr.splitlines() if ln.startswith("warning:")]
    assert done.returncode == 0 and all(found) and "Traceback" not in done.stderr, done.stderr
    assert sorted(m.groups() for m in found if m) == sorted(BAD_ENV.items())


def test_a_bad_log_level_in_a_script_is_reported_at_the_users_line(tmp_path):
    script = tmp_path / "user_script.py"
    script.write_text("import lazykern\ncache = lazykern.default_cache()\n")
    done = run([str(script)], env_for(tmp_path / "c", LAZYKERN_LOG="LOUD"))
    assert done.returncode == 0, done.stderr
    assert f"{script}:2: LazykernWarning: LAZYKERN_LOG='LOUD' is not valid; accepted: DEBUG" in done.stderr
    assert done.stderr.count("LazykernWarning") == 1


def test_a_bad_pytest_switch_is_reported_not_silently_ignored(tmp_path):
    (tmp_path / "test_user.py").write_text("def test_one():\n    pass\n")
    done = run(["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"], env_for(LAZYKERN_PYTEST="maybe"),
               cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "LAZYKERN_PYTEST='maybe' is not valid; accepted: 1, on, true, yes or 0, off, false, no" in done.stdout


@pytest.mark.parametrize(
    ("command", "where"),
    [(["cache", "info"], "other"), (["cache", "info", "--json"], "other"), (["cache", "ls"], "other"),
     (["cache", "prune", "--older-than", "1d"], "empty"), (["cache", "export", "out.tar.gz"], "missing")],
)  # fmt: skip
def test_looking_at_a_path_without_a_store_says_so_and_creates_nothing(tmp_path, command, where):
    target = tmp_path / "typo" / "cache"
    if where != "missing":
        target.mkdir(parents=True)
    if where == "other":  # a mistyped --cache-dir: a directory holding something else than a store
        (target / "notes.txt").write_text("mine")
    held = sorted(target.iterdir()) if target.exists() else None
    done = lazykern("--cache-dir", str(target), *command, env=env_for(), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"error: no lazykern cache at '{target}'" in done.stderr and "nothing was created" in done.stderr
    if where == "other":
        assert "a directory of 1 other entry (notes.txt)" in done.stderr, done.stderr
    if "--json" in command:  # a script reading --json gets JSON even then
        assert json.loads(done.stdout) == {"location": str(target), "error": done.stderr.strip()[len("error: ") :]}
    assert (sorted(target.iterdir()) == held) if held is not None else not (tmp_path / "typo").exists()
    assert not (tmp_path / "out.tar.gz").exists()


@pytest.mark.parametrize(
    ("command", "where"),
    [(["cache", "info"], "default"), (["cache", "info", "--json"], "default"), (["cache", "info", "--json"], "missing"),
     (["cache", "ls"], "empty"), (["cache", "ls", "--json"], "missing"),
     (["cache", "ls", "--family", "tropical"], "default")],
)  # fmt: skip
def test_a_fresh_machine_has_an_empty_store_not_an_error(tmp_path, command, where):
    """No store yet (no kernel compiled): exit 0, where it will be, that it is empty; nothing is created."""
    home = tmp_path / "home"
    home.mkdir()
    target = tmp_path / "fresh" / "cache"
    if where == "empty":
        target.mkdir(parents=True)
    env = env_for(HOME=str(home), XDG_CACHE_HOME="")
    if where == "default":
        env.pop("LAZYKERN_CACHE_DIR", None)
        target = home / ".cache" / "lazykern"
        args = command
    else:
        args = ["--cache-dir", str(target), *command]
    done = lazykern(*args, env=env, cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    out = " ".join(done.stdout.split())  # Rich wraps at the terminal's width
    if command == ["cache", "info", "--json"]:
        data = json.loads(done.stdout)
        assert (data["location"], data["exists"], data["entries"]) == (str(target), False, 0)
        assert data["health"].startswith("empty") and data["arch"].startswith("sm_") and data["nvrtc"], data
    elif command == ["cache", "ls", "--json"]:
        assert json.loads(done.stdout) == []
    elif command == ["cache", "info"]:
        assert str(target) in out and "empty: no store yet" in out and "NVRTC" in out and "arch here" in out, out
    else:
        assert f"in {target}: no store yet; it is made when a kernel is first compiled" in out, out
    assert (list(target.iterdir()) == []) if where == "empty" else not target.exists()


def test_ls_of_a_family_that_does_not_exist_says_so_and_lists_the_known_ones(store):
    done = lazykern("cache", "ls", "--family", "nosuch", env=env_for(store))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no kernel family is named 'nosuch'" in done.stderr and "known families: f, tropical" in done.stderr
    listed = lazykern("cache", "ls", "--family", "f", env=env_for(store))
    assert listed.returncode == 0 and "1 cached kernel" in listed.stdout and "kernels" not in listed.stdout


@pytest.mark.parametrize("value", ["30", "30x", ""])
def test_a_duration_needs_a_unit(store, value):
    done = lazykern("cache", "prune", "--older-than", value, env=env_for(store))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"--older-than={value!r} is not valid; accepted: a number with a unit: s, m, h, d" in done.stderr


def test_a_duration_with_a_unit_prunes(store):
    done = lazykern("cache", "prune", "--older-than", "30d", env=env_for(store))
    assert done.returncode == 0 and "removed 0 entries" in done.stdout, done.stderr


@pytest.mark.parametrize("command", [["ls"], ["clear", "--yes"]])
def test_a_mistyped_arch_filter_is_refused_not_matched_to_nothing(store, command):
    done = lazykern("cache", *command, "--arch", "sm_9O", env=env_for(store))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--arch='sm_9O' is not valid; accepted: an arch such as sm_80, sm_90 or 90" in done.stderr
    assert KernelCache(store).stats()["entries"] == 1  # clear refused before deleting anything


@pytest.mark.parametrize(("option", "value"), [("-k", ""), ("--arch", " , ")])
def test_warm_refuses_an_option_that_names_nothing(tmp_path, option, value):
    done = lazykern("warm", option, value, env=env_for(tmp_path / "c"))
    assert done.returncode == 2, done.stdout + done.stderr
    name = "--kernels" if option in ("-k", "--kernels") else "--arch"
    assert f"{name}={value!r} is not valid; accepted:" in done.stderr
    assert not (tmp_path / "c").exists()  # refused before anything was compiled or stored


def test_a_bad_signature_is_refused_when_the_fragment_is_added(tmp_path):
    script = tmp_path / "mine.py"
    script.write_text(
        textwrap.dedent(
            """\
            from lazykern import KernelFamily
            fam = KernelFamily("mine")
            fam.add("neg", 'extern "C" __global__ void neg(float *a) { }', signature=["pointer"])
            print("registered")
            """
        )
    )
    done = run([str(script)], env_for(tmp_path / "c"))
    assert done.returncode == 1 and "registered" not in done.stdout
    assert "signature[0]='pointer' is not valid; accepted: 'ptr' (a device pointer) or a NumPy scalar" in done.stderr


@pytest.mark.parametrize("signature", [["pointer"], ["ptr", "object"], ["ptr", "U8"], ["ptr", 3], "ptr"])
def test_signatures_are_checked_at_add(signature):
    fam = KernelFamily("sigs")
    with pytest.raises((ValueError, TypeError), match="signature"):
        fam.add("k", 'extern "C" __global__ void k(float *a) { }', signature=signature)
    assert fam.names() == []


def test_good_signatures_are_kept():
    fam = KernelFamily("sigs_ok")
    fam.add("k", 'extern "C" __global__ void k(float *a, int n, double x) { }', signature=["ptr", "int32", "float64"])
    assert fam.source.fragment("k").signature == ("ptr", "int32", "float64")


@pytest.mark.parametrize("kind", ["mode 000", "read-only"])
def test_an_unwritable_directory_is_one_warning_and_memory_for_new_kernels(store, kind):
    """A mode-000 directory and a read-only one: the same outcome (one warning; new kernels in memory)."""
    if kind == "mode 000":
        os.chmod(store, 0)
    else:
        for path in [store, *store.rglob("*")]:
            os.chmod(path, 0o555 if path.is_dir() else 0o444)
    before = sorted((str(p), p.stat().st_mtime_ns) for p in store.rglob("*")) if kind == "read-only" else None
    script = textwrap.dedent(
        """\
        import warnings
        warnings.simplefilter("always")
        from lazykern import KernelFamily, default_cache
        fam = KernelFamily("fresh")
        fam.add("k", 'extern "C" __global__ void k(float *a) { a[0] = 1; }', signature=["ptr"])
        fam.get("k", "sm_80")
        fam.get("k", "sm_80")
        print("compiled", fam.compile_calls, default_cache().backend)
        """
    )
    try:
        done = run(["-c", script], env_for(store), user=True)
        info = lazykern("cache", "info", env=env_for(store), user=True)
    finally:
        for path in [store, *store.rglob("*")] if kind == "read-only" else [store]:
            os.chmod(path, 0o700)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:2] == ["compiled", "1"]  # compiled once, then served from memory
    assert done.stderr.count("LazykernWarning") == 1, done.stderr
    assert info.returncode == 0 and info.stderr.count("warning:") == 1, info.stderr
    assert "kept in memory for this process only" in done.stderr
    if kind == "read-only":
        assert done.stdout.split()[2] == "read-only" and "entries                    │ 1 " in info.stdout
        assert sorted((str(p), p.stat().st_mtime_ns) for p in store.rglob("*")) == before
    else:
        assert done.stdout.split()[2] == "memory"
