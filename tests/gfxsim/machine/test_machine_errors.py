"""Errors instead of silent fixes, and coordinates that read the same however a run is made."""
import numpy as np
import pytest

from gfxsim import Buffer, GfxSimError, launch
from kernels_py.host.runs import run_kernel


def test_writing_a_value_of_another_size_into_a_register_range_raises():
    buf = Buffer("v", np.arange(64 * 16, dtype=np.int8), tags={"token": np.arange(64 * 16)})

    def k(w):
        vq = w.zeros("i8", 16)
        vq[:] = w.global_load(buf, w.lane_id * 16, 8, "i8")       # 8 bytes into a 16-byte value
    with pytest.raises(GfxSimError, match=r"cannot write 8 x i8 into 16 elements of v\[\d+:\d+\]"):
        launch(k)


def test_shared_and_buffers_accept_isa_type_names():
    out = {}

    def k(w):
        a = w.shared("a", (64,), "i32")
        b = w.shared("b", (64,), np.int32)
        out["dtypes"] = (a.dtype, b.dtype)
    launch(k)
    assert out["dtypes"] == (np.dtype(np.int32), np.dtype(np.int32))
    assert Buffer.empty("o", (4,), "f32").array.dtype == np.float32


def test_an_event_with_an_immediate_operand_prints():
    run = launch(lambda w: w.mma("v_mmac_i32_16x16x32_i8", w.zeros("i8", 8), w.zeros("i8", 8)))
    assert all(str(e) for e in run.events)
    assert repr(run.events[-1]).count("v_mmac_i32_16x16x32_i8") == 1


def test_instruction_numbers_are_the_same_with_and_without_the_trace():
    runs = [run_kernel("paged_attention_decode", context=300, grouping="contiguous", trace=t) for t in (False, True)]
    idx = [[m["index"] for m in r.report()["mmacs"]] for r in runs]
    found = [sorted((f.kind, f.instruction, f.workgroup, f.wave) for f in r.findings) for r in runs]
    assert idx[0] == idx[1] and found[0] == found[1] and found[0]


def test_a_store_names_the_element_its_value_belongs_to():
    """Store provenance (the back-end rule): a PV-like result whose rows are
    written transposed lands in other elements' places; the correct indexing stays silent."""
    rows = np.arange(16)
    x = Buffer("x", np.arange(16 * 64, dtype=np.float32).reshape(16, 64), tags={"head": rows[:, None]})
    for transposed in (False, True):
        out = Buffer.empty("out", (16, 64), "f32", tags={"head": rows[:, None], "dim": np.arange(64)[None, :]})

        def k(w):
            v = w.global_load(x, ((w.lane_id % 16) * 64 + w.lane_id // 16) * 4)     # head lane%16
            dst = (w.lane_id // 16) * 64 + w.lane_id % 16 if transposed else (w.lane_id % 16) * 64 + w.lane_id // 16
            w.global_store(out, dst * 4, v)
        run = launch(k)
        found = run.findings_of("store-mismatch")
        if not transposed:
            assert run.findings == []
        else:
            assert len(found) == 1 and found[0].details["field"] == "head"
            assert found[0].details["buffer"] == "out" and len(found[0].details["element"]) == 2
            assert "writes a value of head" in found[0].message
