"""`ruff check` passes over the Python sources, with the rules of pyproject.toml's [tool.ruff]."""
import shutil
import subprocess
import sys

import pytest

from support import ROOT

PATHS = ("gfxsim", "kernels_py", "visualize", "bench", "public_kernels", "tests", "hw_probes", "docs", "examples")


def _ruff() -> list[str]:
    if shutil.which("ruff"):
        return ["ruff"]
    probe = subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True)
    if probe.returncode == 0:
        return [sys.executable, "-m", "ruff"]
    pytest.skip("ruff is not installed (pip install -e '.[test]' installs it)")


def test_ruff_check_passes():
    out = subprocess.run([*_ruff(), "check", "--no-cache", "--output-format", "concise", *PATHS],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"ruff check found problems (ruff check --fix repairs the [*] ones):\n{out.stdout}{out.stderr}"


def test_ruff_reads_the_house_rules():
    out = subprocess.run([*_ruff(), "check", "--no-cache", "--show-settings", "gfxsim/__init__.py"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "linter.line_length = 130" in out.stdout
