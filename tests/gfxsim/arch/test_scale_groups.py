"""Per-thread scale groups derived from the accumulator layout agree with SageAttention2's formulas."""
import numpy as np
import pytest

from gfxsim.arch import get_instruction
from gfxsim.arch.groups import scale_groups, tiled_groups

NV = ["mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32",
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"]


@pytest.mark.parametrize("arch", ["sm_89", "sm_90"])
@pytest.mark.parametrize("mn", NV)
def test_sageattention2_groups_follow_from_the_mma_layout(arch, mn):
    """thu-ml/SageAttention quant_per_thread.py: Q row r -> scale r % 8 (WARPQ = 32 rows),
    K token n -> (n % 8) // 2 (a 64-token block)."""
    rg, cg = tiled_groups(get_instruction(arch, mn), 32, 64)
    r, n = np.arange(32), np.arange(64)
    assert np.array_equal(rg, r % 8) and np.array_equal(cg, (n % 8) // 2)


def test_cdna_groups_are_rows_of_four_and_single_columns():
    rg, cg = scale_groups(get_instruction("gfx942", "v_mfma_i32_16x16x32_i8"))
    assert np.array_equal(rg, np.arange(16) // 4) and np.array_equal(cg, np.arange(16))
    rg, cg = scale_groups(get_instruction("gfx936", "v_mmac_i32_16x16x32_i8"))     # the jump layout: transposed
    assert np.array_equal(rg, np.arange(16)) and np.array_equal(cg, np.arange(16) % 4)


def test_groups_need_a_result_operand_and_whole_tiles():
    insn = get_instruction("sm_90", NV[0])
    with pytest.raises(ValueError, match="result"):
        scale_groups(insn, "A")
    with pytest.raises(ValueError, match="whole 16x8 tiles"):
        tiled_groups(insn, 24, 64)
