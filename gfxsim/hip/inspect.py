"""`gfxsim hip inspect`: a project's kernel built (if needed) and reported on by gfxsim.asm.inspect.

KERNEL is a file stem of the project's sources (pv_int8: every entry point in it), one entry point
(pv_int8_fragment), the path of any .s file (no build) or of your own HIP source (compiled as
`gfxsim hip run` compiles it).
"""
from __future__ import annotations

from pathlib import Path

from ..asm.inspect import Inspection, inspect_file
from . import build as hipbuild
from .door import HIP_SUFFIXES
from .project import Project
from .source import compile_source
from .toolchain import find_toolchain, get_target
from ..errors import ArgumentError


def inspect(kernel: str, arch: str = "gfx942", *, project: Project | None = None, defines=()) -> Inspection:
    if kernel.endswith(".s"):
        return inspect_file(Path(kernel), label=kernel)
    if kernel.endswith(HIP_SUFFIXES):                # your own source, compiled as gfxsim hip run does
        b = compile_source(kernel, arch, defines=defines)
        target = get_target(arch)
        flags = b.command[1:b.command.index("-MMD")]
        record = {"compiler": {"version": find_toolchain(target.arch).version}, "flags": flags,
                  "stand_in": target.stand_in}
        return inspect_file(b.asm, arch=arch, record=record, label=kernel)
    if project is None:
        raise ArgumentError(f"inspect {kernel!r}: a kernel name needs a Project (its sources and build folder); "
                         "only a .s path needs none")
    if kernel in project.kernels:
        b = hipbuild.build([kernel], arch, project=project, defines=defines)[0]
        names = None
    else:
        b, _ = hipbuild.find_entry(kernel, arch, project=project, defines=defines)
        names = [kernel]
    return inspect_file(b.asm, names, arch=arch, record=hipbuild.load_record(b.asm.parent), label=kernel)
