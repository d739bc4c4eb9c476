"""Undefined registers and LDS: a missing zero-init shows in findings and numbers."""
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


def test_a_batched_lds_read_of_never_written_bytes_names_its_own_workgroups_address():
    """Workgroup 2 leaves lane 5's slot of the second region unwritten: batched or not, the finding
    names workgroup 2, lane 5 and the address in that workgroup's own LDS (the region's offset +
    20), not a column of the batch's LDS."""
    seen = []
    for batch in (1, 3):
        def k(w):
            x = w.workgroup_id[0]
            w.shared("a", (64,), "f32")
            b = w.shared("b", (64,), "f32")
            skip = (x.eq(2) if batch > 1 else w.const(x == 2, "i32").ne(0)) & w.lane_id.eq(5)
            with w.if_(~skip):
                w.lds_store(b, w.lane_id * 4, w.zeros("f32"))
            w.lds_load(b, w.lane_id * 4, 4, "f32")
            seen.append(b.offset)
        f = launch(k, grid=3, batch=batch).findings_of("uninitialized-read")
        assert [(x.workgroup, x.lane, x.address) for x in f] == [((2, 0, 0), 5, seen[-1] + 20)], batch
        assert seen[-1] == 256
