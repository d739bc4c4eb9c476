"""Hand-written MUBUF kernels: two V# descriptors built from the pointer arguments x and y
(x in s[8:11], y in s[12:15]) and a body of buffer instructions, run over one wave."""
from __future__ import annotations

import numpy as np

from gfxsim import Buffer
from gfxsim.asm.run import kernel_from_text, run_asm

ARGS = [("x", "global_buffer", 8), ("y", "global_buffer", 8)]


def desc(first: int, kernarg: int, num_records: int, stride: int = 0, word3: int = 0x20000) -> str:
    """Build a V# in s[first:first+3] from the pointer at kernarg byte ``kernarg``."""
    return f"""
s_load_dwordx2 s[{first}:{first + 1}], s[0:1], {kernarg:#x}
s_waitcnt lgkmcnt(0)
s_and_b32 s{first + 1}, s{first + 1}, 0xffff
s_or_b32 s{first + 1}, s{first + 1}, {stride << 16:#x}
s_mov_b32 s{first + 2}, {num_records:#x}
s_mov_b32 s{first + 3}, {word3:#x}
"""


def run(body: str, x, y=None, nr_x=256, nr_y=256, stride=0, word3=0x20000, name="test_buffer"):
    """(y as the kernel left it, the Run)."""
    y = Buffer("y", np.full(64, -1, np.int32)) if y is None else y
    k = kernel_from_text(desc(8, 0, nr_x, stride, word3) + desc(12, 8, nr_y) + body, name, args=ARGS)
    return y, run_asm(k, 1, 64, args=dict(x=x, y=y))


# lane l copies word l of x to word l of y
COPY = """
v_lshlrev_b32_e32 v1, 2, v0
buffer_load_dword v2, v1, s[8:11], 0 offen
s_waitcnt vmcnt(0) lgkmcnt(0)
buffer_store_dword v2, v1, s[12:15], 0 offen
"""

# Triton's raw-buffer masking: lanes 40.. get offset 0x80000000
MASKED = """
v_lshlrev_b32_e32 v1, 2, v0
v_cmp_gt_u32_e32 vcc, 40, v0
v_mov_b32_e32 v3, 0x80000000
v_cndmask_b32_e32 v4, v3, v1, vcc
buffer_load_dword v2, v4, s[8:11], 0 offen
s_waitcnt vmcnt(0) lgkmcnt(0)
buffer_store_dword v2, v4, s[12:15], 0 offen
"""


def compile_hip(source: str, tmp_path) -> str:
    """clang -S of a HIP source written the twins' way (gfxsim_hip.h, the twins' flags) for
    gfx942: the .s text; the test is skipped where no suitable clang is installed."""
    import subprocess
    from pathlib import Path

    import pytest

    from gfxsim.hip.build import compile_flags
    from gfxsim.hip.toolchain import ToolchainError, find_toolchain, get_target
    try:
        tc = find_toolchain("gfx942")
    except ToolchainError as e:
        pytest.skip(str(e))
    src, out = tmp_path / "k.hip", tmp_path / "k.s"
    src.write_text(source)
    inc = Path(__file__).resolve().parents[2] / "kernels_hip"
    subprocess.run([str(tc.clang), *compile_flags(get_target("gfx942")), f"-I{inc}", "-S", str(src), "-o", str(out)],
                   check=True, capture_output=True)
    return out.read_text()
