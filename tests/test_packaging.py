"""What a packager and a type checker see: one version, an SPDX license with its text, py.typed."""

from __future__ import annotations

import configparser
import importlib.metadata
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10: pytest itself depends on tomli there
    import tomli as tomllib

import lazykern

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_version_is_written_once():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "lazykern.__version__"}
    assert importlib.metadata.version("lazykern") == lazykern.__version__


def test_license_is_an_spdx_string_with_its_text_shipped():
    project = PYPROJECT["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    setuptools_req = next(r for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools"))
    assert setuptools_req == "setuptools>=77"  # the first to accept both fields
    assert not any(c.startswith("License ::") for c in project["classifiers"])  # PEP 639: the SPDX string only


def test_typed_and_classified():
    assert (ROOT / "lazykern" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["lazykern"]
    assert "Typing :: Typed" in PYPROJECT["project"]["classifiers"]
    assert any(c.startswith("Programming Language :: Python :: 3.1") for c in PYPROJECT["project"]["classifiers"])


def test_pytest_settings_live_in_pyproject_only():
    options = PYPROJECT["tool"]["pytest"]["ini_options"]
    assert "--strict-markers" in options["addopts"] and any(m.startswith("gpu:") for m in options["markers"])
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    assert "tool:pytest" not in cfg.sections() and cfg.sections()


def test_the_readme_names_every_package_of_the_test_extra():
    """README's "Other extras: `test` (...)" list is what a contributor installs: kept whole."""
    import re

    readme = " ".join((ROOT / "README.md").read_text().split())
    listed = re.search(r"Other extras: `test` \(([^)]*)\)", readme)
    assert listed is not None, "README lost its list of the test extra"
    named = listed.group(1).lower()
    for requirement in PYPROJECT["project"]["optional-dependencies"]["test"]:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower()
        assert name in named, f"README's test extra does not name {name}"
