"""Trace queries, register history, replay forward and back, tracing off."""
import numpy as np

from gfxsim import launch
from support.pv_tile import run_pv
from support import ROOT


def test_queries_and_coordinates():
    run, *_ = run_pv()
    mm = run.mmacs()
    assert [m.op for m in mm] == ["v_mmac_i32_16x16x32_i8"] * 2
    assert all(m.source.startswith("pv_tile.py:") for m in mm)
    assert mm[0].workgroup == (0, 0, 0) and mm[0].wave == 0
    assert mm[0].inputs[0].values.shape == (8, 64) and mm[0].outputs[0].values.shape == (4, 64)
    assert mm[0].slot_tags("A").shape == (1, 16, 32)


def test_register_history_and_replay():
    def k(w):
        x = w.lane_id.to("f32")
        x += 1.0
        x *= 2.0
    run = launch(k, arch="gfx942")
    conv = [e for e in run.events if e.op == "v_cvt_f32_i32"][0]
    reg = conv.outputs[0].regs[0]
    hist = run.history(0, 0, lane=3, reg=reg)
    vals = [np.uint32(v).view(np.float32) for _, v in hist]
    assert vals == [3.0, 4.0, 8.0]
    st = run.replay()
    st.goto(len(run.events))
    assert st.register(reg, lane=3, dtype="f32")[0] == 8.0
    st.back()
    assert st.register(reg, lane=3, dtype="f32")[0] == 4.0
    st.back(100)
    assert st.pos == 0 and st.current is run.events[0]
    st.step(2)
    assert st.previous is run.events[1]


def test_tracing_off_keeps_findings_and_counts():
    run = launch(lambda w: (w.lane_id * 3) + 1, arch="gfx942", trace=False)
    assert len(run.events) == 0 and run.trace.n_events > 0


def test_readme_example_runs():
    import re
    import subprocess
    import sys
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(# example: a small kernel.*?)```", readme, re.S).group(1)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "{0-7,16-23,32-39,48-55}" in out.stdout and "{8-15,24-31,40-47,56-63}" in out.stdout


def test_operand_halves_name_the_loaded_registers():
    """vq.bytes(8, 8) is v[n+2:n+3] of the 16-byte load, so the stepper's register file has it."""
    import numpy as np
    from gfxsim import Buffer
    v = Buffer("v", np.arange(64 * 16, dtype=np.int8).reshape(64, 16))

    def k(w):
        vq = w.global_load(v, w.lane_id * 16, 16, "i8")
        w.mma("v_mmac_i32_16x16x32_i8", vq.bytes(0, 8), vq.bytes(8, 8))
    run = launch(k, arch="gfx936")
    load, mma = run.events[-2], run.events[-1]
    base = load.outputs[0].regs[0]
    assert [o.regs for o in mma.inputs[:2]] == [(base, 2), (base + 2, 2)]
    st = run.replay().goto(len(run.events))
    assert np.array_equal(st.register(base + 2, dtype="u32").view(np.uint8).reshape(64, 4), v.array[:, 8:12].view(np.uint8))
    assert "v_mmac" in repr(mma) and len(repr(mma)) < 300
