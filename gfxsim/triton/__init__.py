"""Triton kernels on the asm front end: a ``@triton.jit`` function compiled for gfx942 by the
installed triton (an optional dependency: ``pip install 'gfxsim[triton]'``) and run lane by lane.

    from gfxsim import triton as gt
    out, run, kernel = gt.run(add_kernel, (4,), x, y, out, n, BLOCK=256, num_warps=4)

``run`` mirrors ``add_kernel[(4,)](x, y, out, n, BLOCK=256)`` with numpy arrays for tensors
(door.py); compile.py specialises and compiles as a launch from tensors would (cached);
toolchain.py imports triton, or says how to install it. ``gfxsim triton FILE.py:KERNEL`` is the
command-line form.
"""
from __future__ import annotations


def run(kernel, grid, *args, **kwargs):
    """gfxsim.triton.door.run: ``kernel[grid](*args, **kwargs)`` on the asm front end; (outputs, Run, Kernel)."""
    from .door import run as _run
    from .toolchain import triton_module
    triton_module()
    return _run(kernel, grid, *args, **kwargs)


__all__ = ["run"]
