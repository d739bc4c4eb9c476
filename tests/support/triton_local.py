"""What the kernels_triton tests share: triton or a skip (support.triton_small.need_triton), and
the AMDGCN text gfxsim.triton compiled for a launch (the instructions a kernel was lowered to)."""
from __future__ import annotations

from support.triton_small import need_triton

need_triton()

from gfxsim.triton.door import compile_for  # noqa: E402


def asm_text(kernel, *args, num_warps: int = 4, plain: bool = False, options: dict | None = None, **kwargs) -> str:
    """The .s gfxsim.triton.run(kernel, grid, *args, ...) runs."""
    return compile_for(kernel, args, kwargs, num_warps=num_warps, plain=plain, options=options)[2].asm.read_text()
