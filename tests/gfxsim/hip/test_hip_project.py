"""gfxsim.hip knows no repository: a Project names the sources and the build folder, and
`gfxsim hip build --sources DIR` builds every kernel from a gfxsim that is not this checkout (a
copy of the package elsewhere; `pip install .` into a target folder where setuptools can build a
wheel here)."""
from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
from support import need_toolchain

from gfxsim.hip.project import Project
from support import ROOT

KERNELS = sorted(p.stem for p in (ROOT / "kernels_hip").glob("*.hip"))


def test_a_project_is_its_folders():
    p = Project(ROOT / "kernels_hip", "build/hip")
    assert p.kernels == tuple(KERNELS) and p.source("pv_int8") == ROOT / "kernels_hip" / "pv_int8.hip"
    assert {h.name for h in p.headers} == {"gfxsim_hip.h", "int8_attention.h"}
    assert p.build == (pathlib.Path.cwd() / "build" / "hip").resolve()
    with pytest.raises(ValueError, match="unknown HIP kernel 'pv_int4'.*has: int8_kv_cache"):
        p.source("pv_int4")


def test_bad_projects_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such folder"):
        Project(tmp_path / "nope", tmp_path)
    with pytest.raises(FileNotFoundError, match="no .hip files"):
        Project(tmp_path, tmp_path)


def test_the_library_never_imports_the_cli():
    code = ("import sys, gfxsim.hip.build, gfxsim.hip.inspect, gfxsim.hip.harness, gfxsim.asm.inspect; "
            "print(sorted(m for m in sys.modules if m.startswith('gfxsim.cli')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    assert out.strip() == "[]"


def _gfxsim(site, cwd, *argv):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, "-m", "gfxsim", *argv], capture_output=True, text=True, cwd=cwd, env=env)


def _builds_every_kernel(site, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT / "kernels_hip", src)
    where = subprocess.run([sys.executable, "-c", "import gfxsim; print(gfxsim.__file__)"], capture_output=True,
                           text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(site)}, check=True)
    assert pathlib.Path(where.stdout.strip()).is_relative_to(site)          # not this checkout's gfxsim
    r = _gfxsim(site, tmp_path, "hip", "build", "--sources", str(src), "--arch", "gfx942")
    assert r.returncode == 0, r.stderr
    for k in KERNELS:
        assert (tmp_path / "build" / "hip" / "gfx942" / f"{k}.co").is_file(), k
        assert f"{k} " in r.stdout
    r = _gfxsim(site, tmp_path, "hip", "inspect", "pv_int8_fragment", "--sources", str(src), "--arch", "gfx942")
    assert r.returncode == 0 and "v_mfma_i32_16x16x32_i8" in r.stdout, r.stderr
    r = _gfxsim(site, tmp_path, "hip", "build")                            # no checkout beside it
    assert r.returncode != 0 and "--sources DIR" in r.stderr


def test_hip_build_from_a_copy_of_the_package_outside_the_checkout(tmp_path):
    need_toolchain("gfx942")
    site = tmp_path / "site"
    shutil.copytree(ROOT / "gfxsim", site / "gfxsim", ignore=shutil.ignore_patterns("__pycache__"))
    _builds_every_kernel(site, tmp_path)


@pytest.mark.skipif(importlib.util.find_spec("wheel") is None,
                    reason="setuptools cannot build a wheel here (no 'wheel' package), so no non-editable pip install")
def test_hip_build_from_a_non_editable_install(tmp_path):
    need_toolchain("gfx942")
    site, tree = tmp_path / "site", tmp_path / "tree"      # built from a copy: setuptools writes build/ in it
    for d in ("gfxsim", "kernels_py", "visualize"):
        shutil.copytree(ROOT / d, tree / d, ignore=shutil.ignore_patterns("__pycache__"))
    for f in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / f, tree / f)
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                    "--quiet", "--target", str(site), str(tree)], check=True)
    _builds_every_kernel(site, tmp_path)
