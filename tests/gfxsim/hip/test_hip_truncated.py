"""An assembly file cut short in the build folder (a full disk, an interrupted copy) is compiled
again, not read as a kernel without arguments."""
import shutil

from support import ROOT, need_toolchain, repo_project

from gfxsim.hip import build as hipbuild
from gfxsim.hip.project import Project


def test_a_truncated_assembly_is_rebuilt(tmp_path):
    need_toolchain("gfx942")
    hipbuild.build(["pv_int8"], "gfx942", project=repo_project())        # up to date (cached)
    shutil.copytree(ROOT / "build" / "hip" / "gfx942", tmp_path / "gfx942")
    project = Project(ROOT / "kernels_hip", tmp_path)
    asm = tmp_path / "gfx942" / "pv_int8.s"
    assert not hipbuild.build(["pv_int8"], "gfx942", project=project)[0].rebuilt
    text = asm.read_text()
    asm.write_text(text[:len(text) // 2])
    assert not hipbuild.complete_asm(asm)
    (b,) = hipbuild.build(["pv_int8"], "gfx942", project=project)
    assert b.rebuilt and hipbuild.complete_asm(asm)
    args = hipbuild.find_kernel("pv_int8_fragment", "gfx942", project=project).metadata[".args"]
    assert "context_len" in [a[".name"] for a in args]


def test_find_entry_answers_again_only_while_nothing_changed(tmp_path, monkeypatch):
    """find_entry remembers its answer; a build folder or source folder that changed (here the
    assembly cut short) is built again, as the first call would."""
    need_toolchain("gfx942")
    hipbuild.build(["pv_int8"], "gfx942", project=repo_project())
    shutil.copytree(ROOT / "build" / "hip" / "gfx942", tmp_path / "gfx942")
    project = Project(ROOT / "kernels_hip", tmp_path)
    builds = []
    real = hipbuild.build
    monkeypatch.setattr(hipbuild, "build", lambda *a, **k: builds.append(a) or real(*a, **k))
    b, f = hipbuild.find_entry("pv_int8_fragment", "gfx942", project=project)
    again, f2 = hipbuild.find_entry("pv_int8_fragment", "gfx942", project=project)
    assert len(builds) == 1 and f2 is f and not again.rebuilt
    asm = tmp_path / "gfx942" / "pv_int8.s"
    asm.write_text(asm.read_text()[:len(asm.read_text()) // 2])
    b3, f3 = hipbuild.find_entry("pv_int8_fragment", "gfx942", project=project)
    assert len(builds) == 2 and b3.rebuilt and hipbuild.complete_asm(asm)
    assert "pv_int8_fragment" in f3.kernels
