"""Every LAZYKERN_* variable is validated: a bad value is one warning and the default, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazykern import LazykernWarning, config
from lazykern.compile.compiler import current_arch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = int(os.environ.get("LAZYKERN_FUZZ_EXAMPLES", "150"))
# What os.environ can hold: no NUL, no lone surrogates.
ENV_TEXT = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=40),
    st.sampled_from(["-1", "nan", "NaN", "inf", "-inf", "1e400", "99999999999999999999T", "1" * 400, " ", "0x10"]),
    st.builds(lambda n, u: f"{n}{u}", st.integers(-(10**30), 10**30), st.sampled_from(["", "K", "M", "G", "T", "E"])),
)
READERS = {
    "LAZYKERN_CACHE_DIR": config.default_cache_dir,
    "LAZYKERN_CACHE_SIZE": config.cache_size_limit,
    "LAZYKERN_CACHE": config.disk_cache_enabled,
    "LAZYKERN_ARCH": current_arch,
    "LAZYKERN_LOG": config.log_level,
}


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch):
    monkeypatch.setattr(config, "_warned", set())


@pytest.mark.parametrize("var", sorted(READERS))
@settings(max_examples=EXAMPLES, deadline=None)
@given(value=ENV_TEXT)
def test_any_value_gives_a_usable_setting_and_at_most_one_warning(var, value):
    config._warned.clear()
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mp.setenv(var, value)
        results = [READERS[var]() for _ in range(3)]  # asked again: still one warning
    assert results[0] == results[1] == results[2]
    ours = [w for w in caught if issubclass(w.category, LazykernWarning)]
    assert len(ours) <= 1 and all(var in str(w.message) for w in ours)
    if var == "LAZYKERN_CACHE_SIZE":
        assert 0 <= results[0] <= config.MAX_SIZE
        assert (results[0] == config.DEFAULT_SIZE) or not ours


@pytest.mark.parametrize(
    ("value", "expected"),
    [("500M", 500 << 20), ("2GiB", 2 << 30), ("1.5K", 1536), ("0", 0), ("1E", 1 << 60)],
)
def test_good_sizes_are_read(monkeypatch, value, expected):
    monkeypatch.setenv("LAZYKERN_CACHE_SIZE", value)
    assert config.cache_size_limit() == expected


@pytest.mark.parametrize("value", ["99999999999999999999T", "-1", "NaN", "inf", "2E", "1" * 400, "1e30", "G"])
def test_bad_sizes_warn_once_and_use_the_default(monkeypatch, value):
    monkeypatch.setenv("LAZYKERN_CACHE_SIZE", value)
    with pytest.warns(LazykernWarning, match="LAZYKERN_CACHE_SIZE"):
        assert config.cache_size_limit() == config.DEFAULT_SIZE
    with pytest.raises(ValueError, match="size"):  # an explicit argument is refused, clearly
        config.parse_size(value)


def test_explicit_sizes_out_of_range_are_refused():
    for bad in (-1, 1 << 61, True, 1.5):
        with pytest.raises(ValueError, match="size"):
            config.parse_size(bad)  # type: ignore[arg-type]


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120)


# A bad LAZYKERN_LOG is reported at the package's first use, with the other settings (config.check_settings).
LOG_PROBE = "import logging, lazykern; lazykern.KernelCache; logging.getLogger('lazykern').debug('probe-debug-line')"


@pytest.mark.parametrize("value", ["NOTALEVEL", "debugg", "-5", "99999999999999999999", "\u00e9"])
def test_unknown_log_level_is_a_warning_not_a_crash(value):
    proc = _run(LOG_PROBE, LAZYKERN_LOG=value)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("LAZYKERN_LOG") == 1 and "probe-debug-line" not in proc.stderr


@pytest.mark.parametrize("value", ["DEBUG", "debug", "10"])
def test_debug_log_is_visible_on_stderr(value):
    proc = _run(LOG_PROBE, LAZYKERN_LOG=value)
    assert proc.returncode == 0, proc.stderr
    assert "probe-debug-line" in proc.stderr


def test_log_is_silent_when_unset():
    env = {k: v for k, v in os.environ.items() if k != "LAZYKERN_LOG"}
    env["PYTHONPATH"] = ROOT
    proc = subprocess.run([sys.executable, "-c", LOG_PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == ""


def test_every_bad_variable_at_once_in_a_cli_command(tmp_path):
    from lazykern import KernelCache

    KernelCache(tmp_path / "c").close()  # `cache info` needs a store to look at
    proc = _run(
        "import sys; from lazykern.tools.cli import main; sys.argv = ['lazykern', 'cache', 'info', '--json']; main()",
        LAZYKERN_CACHE_DIR=str(tmp_path / "c"),
        LAZYKERN_CACHE_SIZE="99999999999999999999T",
        LAZYKERN_CACHE="maybe",
        LAZYKERN_ARCH="sm_banana",
        LAZYKERN_LOG="NOTALEVEL",
    )
    assert "Traceback" not in proc.stderr and "OverflowError" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    for var in ("LAZYKERN_CACHE_SIZE", "LAZYKERN_CACHE=", "LAZYKERN_ARCH", "LAZYKERN_LOG"):
        assert var in proc.stderr, var
