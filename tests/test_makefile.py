"""`make demo` and `make test` set up .venv first: again where another Python is asked for, or
where .venv's python no longer starts (helper-80: both kept the old .venv). `make -n` shows
what make would run, without running it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
MAKE = shutil.which("make")
VERSION = ".".join(map(str, sys.version_info[:3]))  # as the Makefile names the stamp


@pytest.fixture
def project(tmp_path):
    """A folder with the Makefile and pyproject.toml, and a .venv made with this Python (its
    python a link to it, as venv makes it) and stamped as installed."""
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    os.symlink(sys.executable, tmp_path / ".venv" / "bin" / "python")
    (tmp_path / ".venv" / f".installed-python{VERSION}").touch()
    return tmp_path


def planned(project: Path, *args: str) -> list[str]:
    assert MAKE, "make is not installed; `make test` needs it"
    # Not as a sub-make of the `make test` that runs this suite: that one's flags would carry
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    result = subprocess.run([MAKE, "--no-print-directory", "-n", "test", *args], cwd=project,
                            capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def python_reporting(folder: Path, version: str) -> Path:
    """A `python` that says it is `version`, as another interpreter would."""
    fake = folder / f"python{version}"
    fake.write_text(f"#!/bin/sh\necho {version}\n")
    fake.chmod(0o755)
    return fake


def test_a_venv_of_the_same_python_is_kept(project):
    assert planned(project, f"PYTHON={sys.executable}") == [
        ".venv/bin/ruff check .", ".venv/bin/python -m pytest"]


def test_another_python_makes_the_venv_again(project):
    other = python_reporting(project, "3.99.0")
    steps = planned(project, f"PYTHON={other}")
    assert steps[0] == f"{other} -m venv --clear .venv"
    assert steps[-3:] == ["touch .venv/.installed-python3.99.0", ".venv/bin/ruff check .",
                          ".venv/bin/python -m pytest"]


def test_a_venv_whose_python_no_longer_starts_is_made_again(project):
    (project / ".venv" / "bin" / "python").unlink()
    os.symlink(project / "gone" / "python3", project / ".venv" / "bin" / "python")
    steps = planned(project, f"PYTHON={sys.executable}")
    assert steps[0] == f"{sys.executable} -m venv --clear .venv"
    assert steps[-1] == ".venv/bin/python -m pytest"
