"""gfxsim's accumulator models against MMA-Sim (hw_probes/mmasim/golden_mmasim.npz, written by
hw_probes/mmasim/make_golden.py where torch and mmasim are installed): every float matrix record
MMA-Sim models, over random, attention-like, adversarial (ties, cancellation, exponent gaps,
denormals, inf/NaN) and 16-step chained inputs, with 0 differing bits."""
import json
from dataclasses import replace

import numpy as np
import pytest

from gfxsim.arch import ARCHS, accumulators
from support.mmasim_golden import load, replay

Z, META = load()
EXPERIMENTS = META["experiments"]
SERIAL = ("fma", "ftz_tree")


def _insn_acc(e):
    from gfxsim.arch import get_instruction, nvidia
    if e["insn"].startswith("accumulator:"):
        return nvidia.ACCUMULATORS[e["insn"].split(":", 1)[1]]
    return get_instruction(e["arch"], e["insn"]).accumulator


@pytest.mark.parametrize("e", EXPERIMENTS, ids=[e["key"] for e in EXPERIMENTS])
def test_gfxsim_reproduces_mmasim_bit_for_bit(e):
    got, want = replay(Z, e)
    differ = got != want
    if _insn_acc(e).c_entry in SERIAL:
        # these datapaths are IEEE operations MMA-Sim runs on its host CPU: a NaN's payload there is
        # the host's, so a NaN matches a NaN (gfxsim writes AMD's canonical 0x7fc00000 for ftz_tree)
        dt = np.float64 if want.dtype == np.uint64 else np.float32
        differ &= ~(np.isnan(got.view(dt)) & np.isnan(want.view(dt)))
    assert not differ.any(), (f"{int(differ.sum())} of {differ.size} differ; first gfxsim "
                              f"{hex(int(got[differ].ravel()[0]))} MMA-Sim {hex(int(want[differ].ravel()[0]))}")


TWO_STAGE = [e for e in EXPERIMENTS if _insn_acc(e).c_entry == "two_stage"]


@pytest.mark.parametrize("e", TWO_STAGE, ids=[e["key"] for e in TWO_STAGE])
def test_the_compiled_two_stage_path_reproduces_mmasim(e, monkeypatch):
    """The "two_stage" records as a process running numba computes them (accum_jit, quanta
    counted from a table of powers of two): the same bits, NaN, infinities and denormals included
    (those leave the compiled path for the loop)."""
    from gfxsim.machine import accum
    monkeypatch.setattr(accum, "running", lambda: True)
    got, want = replay(Z, e)
    assert np.array_equal(got, want), f"{int((got != want).sum())} of {got.size} differ"


def test_the_golden_file_covers_every_float_record_mmasim_models():
    covered = {(e["arch"], e["insn"]) for e in EXPERIMENTS}
    cases = {e["case"] for e in EXPERIMENTS}
    assert {"random", "attention", "ties", "cancel", "gap", "denormal", "special", "chain16"} <= cases
    assert not META["failed"], META["failed"]
    for arch in ("gfx942", "gfx90a", "sm_89", "sm_90"):
        for mn, insn in ARCHS[arch].instructions.items():
            if insn.cd_type not in ("f32", "f64") or getattr(insn, "index", None) is not None:
                continue
            if arch == "sm_90" and insn.a_type == "fp8_e4m3":
                continue            # MMA-Sim has no sm_90 mma.sync e4m3; the H200 golden file covers it
            assert (arch, mn) in covered, f"{arch} {mn} is not in the MMA-Sim golden file"
            assert insn.accumulator.measured, f"{arch} {mn}: its accumulator record does not say what checked it"


def test_chained_experiments_carry_c_through_16_instructions():
    chained = [e for e in EXPERIMENTS if e["case"] == "chain16"]
    assert len(chained) >= 8 and all(Z[e["key"] + "|A"].shape[1] == 16 for e in chained)


def test_hygon_mmac_is_cdna3s_model_and_says_it_is_unmeasured():
    for t in ("f16", "bf16"):
        acc = ARCHS["gfx936"].instruction(f"v_mmac_f32_16x16x16_{t}").accumulator
        assert replace(acc, note="", measured="") == replace(accumulators.CDNA3_F16, note="", measured="")
        assert not acc.measured and "not measured" in acc.note


def test_layout_detail_says_whether_the_accumulator_was_checked(capsys):
    from gfxsim.cli import main
    assert main(["layout", "gfx936", "v_mmac_f32_16x16x16_f16", "--detail"]) == 0
    assert "NOT measured or validated" in capsys.readouterr().out
    assert main(["layout", "gfx942", "v_mfma_f32_16x16x16_bf16", "--detail", "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert "MMA-Sim" in info["accumulator_checked"] and info["accumulator_record"]["c_entry"] == "two_stage"
