"""run_on_sim: the hardware harness's call (harness.run_on_gpu) answered by the asm front end.

Same signature and return value as run_on_gpu — arguments by name (numpy arrays for buffers,
numbers for by-value arguments), every buffer argument returned as the kernel left it — so a test
written against the GPU harness runs on the simulator unchanged. A buffer may also be given as a
gfxsim Buffer, whose tags (token, dim, ...) give the run its provenance: the token-level findings
need them (its expect() declarations travel too). ``run=True`` also returns the simulator's Run
(findings, token sets, trace).
"""
from __future__ import annotations

from collections.abc import Mapping

from .project import Project


def run_on_sim(entry: str, grid, args: Mapping[str, object], *, project: Project, arch: str | None = None,
               block: int | None = None, defines=(), provenance: bool = True, trace: bool = False,
               run: bool = False):
    """Launch ``entry`` of ``project`` (built for ``arch``, default gfx942) on the asm front end over
    ``grid`` with ``block`` work-items per workgroup (default the kernel's .max_flat_workgroup_size,
    as run_on_gpu). Returns {buffer argument: array} (and the Run with ``run=True``)."""
    from ..asm.run import run_asm
    from ..machine.memory import Buffer
    from .build import find_kernel
    from .door import bind
    from .harness import check_call
    arch = arch or "gfx942"
    kernel = find_kernel(entry, arch, project=project, defines=tuple(defines))
    _, block = check_call(kernel, args, block)
    bound = bind(kernel, args)          # copies: the caller's arrays and Buffers are not written
    r = run_asm(kernel, grid, block, args=bound, arch=arch, trace=trace, provenance=provenance)
    out = {n: b.array for n, b in bound.items() if isinstance(b, Buffer)}
    return (out, r) if run else out
