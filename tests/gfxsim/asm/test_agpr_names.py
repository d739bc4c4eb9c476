"""Registers are named as the code names them: an accumulator clang allocated in AGPRs is
``a[0:3]`` in findings and in the trace, never the VGPR of the same number."""

from gfxsim.asm.run import kernel_from_text, run_asm

# C of the v_mfma is a[0:3], never written: only a[4:7] was zeroed
BODY = """
  v_mov_b32_e32 v0, 0
  v_mov_b32_e32 v1, 0
  v_accvgpr_write_b32 a4, 0
  v_accvgpr_write_b32 a5, 0
  v_accvgpr_write_b32 a6, 0
  v_accvgpr_write_b32 a7, 0
  v_mfma_i32_16x16x32_i8 a[4:7], v[0:1], v[0:1], a[0:3]
"""


def test_a_never_written_agpr_accumulator_is_named_as_an_agpr():
    run = run_asm(kernel_from_text(BODY, "agpr_acc", agprs=8), args={})
    (f,) = run.findings_of("uninitialized-read")
    assert f.details["name"] == "a[0:3]" and "(a[0:3])" in f.message and "v[0:3]" not in f.message
    mfma = run.mmacs()[0]
    assert [o.name for o in mfma.inputs] == ["v[0:1]", "v[0:1]", "a[0:3]"]
