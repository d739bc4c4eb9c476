"""A small SageAttention run (32 queries over 128 tokens, head_dim 64), silent or with the swapped
D layout's findings: the matrix unit's shortcut tests compare it with their switch on and off."""
import numpy as np

from gfxsim.arch import get_instruction
from kernels_py.fp8.sage_attention import run_sage_attention, swapped_d_layout
from kernels_py.fp8.sage_layout import QK_MMA
from kernels_py.fp8.sage_reference import SageConfig


def small_sage_run(seed: int, wrong_layout: bool):
    """(out, run) of a 32-query block over 128 tokens from ``seed``'s data."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(32, 64)).astype(np.float32)
    k = (rng.normal(size=(128, 64)) + rng.normal(size=64) * 3).astype(np.float32)
    v = rng.normal(size=(128, 64)).astype(np.float32)
    lay = swapped_d_layout(get_instruction("sm_89", QK_MMA["int8"]).operand("D")) if wrong_layout else None
    return run_sage_attention(q, k, v, SageConfig(q_block=32), q_layout=lay)
