"""Errors instead of silent fixes, and coordinates that read the same however a run is made."""
import numpy as np
import pytest

from gfxsim import Buffer, GfxSimError, launch
from kernels_py.runs import run_kernel


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
