"""The install README gives contributors (`pip install -e .`) works with the tools they run.

setuptools makes an editable install either a plain ``.pth`` naming the checkout or an import
hook. mypy cannot follow import hooks (it then finds no lazykern, and no ``py.typed``), and with
the hook ``python -m lazykern`` run from the directory above a checkout named ``lazykern`` imports
that directory as a namespace package. The test installs this checkout as a contributor does, into
a throw-away environment made without pip (fast), and runs both.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_pyproject_asks_setuptools_for_a_plain_pth():
    """setuptools writes a static .pth for package-dir {"": DIR} with the packages where that says."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {"": "."}


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH") and not k.startswith("LAZYKERN")}


@pytest.fixture(scope="module")
def editable(tmp_path_factory) -> Path:
    """A Python environment sharing this one's packages (venv or not), with this checkout `pip install -e`d."""
    env_dir = tmp_path_factory.mktemp("editable") / "env"
    # Not system_site_packages: inside a venv (or a conda env) that exposes the base interpreter's packages, not
    # this environment's (no typer, no mypy).
    venv.create(env_dir, system_site_packages=False, with_pip=False)
    python = env_dir / "bin" / "python"
    # This environment's pip installs into the new one (`--python`); the new one has nothing yet that could shadow
    # the isolated build's setuptools, nor a lazykern that pip would uninstall.
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "-e", str(ROOT)],
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0 and "No matching distribution found for setuptools" in done.stderr:
        pytest.skip("pip cannot fetch setuptools>=77 for the isolated build here (no package index)")
    assert done.returncode == 0, done.stderr
    # Then this environment's packages (typer, mypy ...), .pth files included, after the checkout.
    ours = site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])
    (_site_packages(python) / "zz_parent_environment.pth").write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in ours if os.path.isdir(d))
    )
    return python


def _site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True,
                         text=True, check=True).stdout.strip()  # fmt: skip
    return Path(out)


@pytest.mark.slow
def test_the_editable_install_is_a_plain_path(editable):
    pth = [p for p in _site_packages(editable).glob("*.pth") if "lazykern" in p.name]
    assert len(pth) == 1
    lines = [ln for ln in pth[0].read_text().splitlines() if ln.strip()]
    assert lines == [str(ROOT)], lines  # not `import __editable___lazykern_finder`: tools other than Python see it


@pytest.mark.slow
def test_python_m_lazykern_from_the_directory_above_a_checkout_named_lazykern(editable, tmp_path):
    above = tmp_path / "src"
    (above / "lazykern").mkdir(parents=True)  # what the directory above a checkout ~/src/lazykern looks like
    done = subprocess.run([str(editable), "-m", "lazykern", "--version"], cwd=above, env=_clean_env(),
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("lazykern ")


@pytest.mark.slow
def test_mypy_in_a_users_project_finds_lazykern_and_its_types(editable, tmp_path):
    (tmp_path / "app.py").write_text(
        textwrap.dedent(
            """\
            from lazykern import KernelCache

            cache = KernelCache("/tmp/somewhere")
            limit: str = cache.size_limit  # an int: mypy must say so, which it can only with lazykern's types
            """
        )
    )
    done = subprocess.run([str(editable), "-m", "mypy", "--cache-dir=/dev/null", "--no-error-summary", "app.py"],
                          cwd=tmp_path, env=_clean_env(), capture_output=True, text=True, timeout=300)  # fmt: skip
    assert "import-not-found" not in done.stdout and "missing library stubs" not in done.stdout, done.stdout
    assert 'app.py:4: error: Incompatible types in assignment (expression has type "int"' in done.stdout, done.stdout
