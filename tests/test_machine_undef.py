"""Undefined registers and LDS (issue 10 item 5): a missing zero-init shows in findings and numbers."""
import numpy as np

from gfxsim import Buffer, launch


def acc_kernel(zero_init):
    out = Buffer.empty("out", (64,), "f32")
    x = Buffer("x", np.ones(64, np.float32))

    def k(w):
        acc = w.zeros("f32") if zero_init else w.undef("f32")
        for _ in range(3):
            acc += w.global_load(x, w.lane_id * 4)
        w.global_store(out, w.lane_id * 4, acc)
    return k, out


def test_a_missing_zero_init_is_a_finding_and_poisons_the_numbers():
    k, out = acc_kernel(zero_init=False)
    run = launch(k)
    kinds = [f.kind for f in run.findings]
    assert kinds == ["uninitialized-read"] and "never-written" in run.findings[0].message
    assert np.isnan(out.array).all()
    k, out = acc_kernel(zero_init=True)
    run = launch(k)
    assert run.findings == [] and (out.array == 3).all()


def test_an_undefined_accumulator_fed_to_a_matrix_instruction_names_operand_c():
    def k(w, fix):
        c = w.zeros("i32", 4) if fix else w.undef("i32", 4)
        w.mma("v_mmac_i32_16x16x32_i8", w.zeros("i8", 8), w.zeros("i8", 8), c)
    bad = launch(lambda w: k(w, False))
    assert [f.details["what"] for f in bad.findings] == ["operand C"]
    assert launch(lambda w: k(w, True)).findings == []


def test_lds_is_poison_until_written():
    out = {}

    def k(w, write):
        lds = w.shared("acc", (64,), "f32")
        if write:
            w.lds_store(lds, w.lane_id * 4, w.zeros("f32"))
        out["v"] = w.lds_load(lds, w.lane_id * 4, 4, "f32").numpy()
    bad = launch(lambda w: k(w, False))
    assert [f.kind for f in bad.findings] == ["uninitialized-read"] and np.isnan(out["v"]).all()
    assert launch(lambda w: k(w, True)).findings == [] and (out["v"] == 0).all()
