"""The README's accumulator accuracy table: its command and what it shows."""
from gfxsim.arch import get_instruction
from kernels_py.accuracy import errors, markdown, pv, pv_inputs, table

SM90_BF16 = ("sm_90", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32")


def test_a_truncating_adder_loses_more_one_level_than_two_level_at_4k():
    insn = get_instruction(*SM90_BF16)
    p, v = pv_inputs(insn, 4096)
    one = errors(pv(insn, p, v), p @ v)[0]
    two = errors(pv(insn, p, v, block=256), p @ v)[0]
    assert one > 4 * two > 0


def test_the_table_renders_one_row_per_record_and_level():
    rows = table(records=(SM90_BF16, ("gfx942", "v_mfma_f32_16x16x16_bf16")), lengths=(32, 64))
    text = markdown(rows, (32, 64))
    assert len(rows) == 4 and text.count("\n") == 1 + len(rows) and "two-level (256)" in text
    assert all(0 < r < 1e-3 for *_, errs in rows for r, _ in errs)
