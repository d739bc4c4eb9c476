"""`python -m bench --quick` produces every figure and writes its JSON (no timing is asserted)."""
import json
import math
import os
import subprocess
import sys

import numpy as np
from support import ROOT



def test_numpy_decode_matches_the_reference():
    from bench.decode_numpy import build_cache, decode_int8
    from kernels_py.reference import attention as R
    from kernels_py.workloads.data import make_attention_inputs
    from kernels_py.reference.int8_cache import build_paged_cache
    d = make_attention_inputs(seed=1, num_heads=8, num_kv_heads=2, head_dim=64, context_lens=[300])
    c = build_paged_cache(d["k"], d["v"], d["context_lens"], block_size=16, smooth_k=True, seed=1)
    out = decode_int8(d["q"], c.k_cache, c.v_cache, c.k_scale, c.v_scale, c.block_tables, c.context_lens)
    assert np.abs(out - R.attention_int8(d["q"], c)).max() < 1e-6
    kc, vc, ks, vs = build_cache(d["k"][0, :300], d["v"][0, :300], 300, c.block_tables[0], c.k_cache.shape[0])
    blk = c.block_tables[0, :19]
    assert np.array_equal(kc[blk][..., :12, :], c.k_cache[blk][..., :12, :])   # 300 = 18*16 + 12 tokens
    assert np.array_equal(vc[blk][..., :12], c.v_cache[blk][..., :12])


def test_quick_bench_produces_every_figure(tmp_path):
    out = tmp_path / "results.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GFXSIM_AMD_CALCULATOR")}
    # No figure may depend on the machine's load or free memory at the moment: a per-figure limit
    # far above any quick figure, and the children's memory check sees the bench's budget
    # (test_children_see_the_budget_not_memavailable), not MemAvailable.
    r = subprocess.run([sys.executable, "-m", "bench", "--quick", "--timeout", "3000", "-o", str(out)], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(out.read_text())
    m = res["machine"]
    for key in ("cpu", "cores", "memory_bytes", "os", "python", "numpy", "numba", "gfxsim_commit"):
        assert m.get(key), key
    figs = res["figures"]
    failed = [(f["figure"], f["error"]) for f in figs if f["error"]]
    assert not failed, failed
    for f in figs:
        assert isinstance(f["seconds"], float) and math.isfinite(f["seconds"]) and f["seconds"] > 0, f
    labels = [f["figure"] for f in figs]
    for ctx in (256, 512):
        for mode in ("provenance off", "provenance on", "full trace"):
            assert f"decode {ctx}: gfxsim run, {mode}" in labels
        assert any(lab.startswith(f"decode {ctx}: numpy INT8 implementation") for lab in labels)
    kernels = ["int8_kv_cache 256", "qk_int8 256", "pv_int8 256", "pv_bf16 256", "prefix_prefill 64 over 192",
               "sage_attention 256", "fp8_qk 256"]
    for name in kernels:                             # every shipped kernel, each mode, beside its numpy twin
        assert f"{name}: numpy" in labels, name
        for mode in ("provenance off", "provenance on", "full trace"):
            assert any(lab.startswith(f"{name}: ") and lab.endswith(f", {mode}") for lab in labels), (name, mode)
    for f in figs:
        if f["group"] in ("decode", "kernels") and f["mode"] in ("off", "on", "trace"):
            assert f["ratio_min"] <= f["ratio"] <= f["ratio_max"], f["figure"]
            assert len(f["load_before"]) == 3 and len(f["load_after"]) == 3
            assert "--report" not in f["command"]     # the text report, as users run it
    assert sum(lab.startswith("PV tile, gfxsim") for lab in labels) == 4
    assert sum(lab.startswith("PV tile, numba CUDA simulator") for lab in labels) == 2
    assert sum(lab.startswith("gfxsim layout") for lab in labels) == 4
    for mode in ("off", "on"):                      # the asm front end's lane-instructions per second
        (asm,) = [f for f in figs if f["figure"] == f"asm decode 512: lane-instructions/s, provenance {mode}"]
        assert asm["lane_instructions"] > 0 and asm["lane_instructions_per_second"] > 0
    (call,) = [f for f in figs if f["figure"].startswith("run_on_sim: overhead per call")]
    assert call["target"] == "<= 50 ms" and len(call["runs"]) >= 3 and call["first_call_seconds"] > call["seconds"]
    try:                                            # a Triton kernel on the asm front end, where triton is
        import triton  # noqa: F401
        for mode in ("off", "on"):
            (tf,) = [f for f in figs if f["figure"] == f"Triton flash-attention forward 256: lane-instructions/s, "
                     f"provenance {mode}"]
            assert tf["lane_instructions"] > 0 and tf["lane_instructions_per_second"] > 0
    except ImportError:
        assert any("Triton figure skipped" in n for n in res["notes"])
    for f in figs:
        if f["group"] in ("tile", "layout") or f.get("mode") in ("off", "on", "trace", "numpy"):
            assert f["peak_rss_bytes"] > 0, f["figure"]
        if "max_abs_vs_numpy" in f:
            assert f["max_abs_vs_numpy"] < 1e-5, f["figure"]
        if f.get("mode") == "numpy":
            assert f["max_abs_vs_reference"] <= 1e-6 * max(1.0, f["reference_max_abs"]), f["figure"]
    assert "figure" in r.stdout and "met?" in r.stdout           # the table
    assert any("calculator not given" in n for n in res["notes"])
    assert any("tinygrad figure skipped" in n for n in res["notes"])
    assert len(m["load_at_start"]) == 3


def test_children_see_the_budget_not_memavailable():
    from bench.common import run_child
    code = "from gfxsim.procmem import mem_available; print(mem_available())"
    r = run_child([sys.executable, "-c", code], timeout=120, mem_limit_bytes=6 << 30)
    assert r["rc"] == 0, r["stderr_tail"]
    assert int(r["stdout"]) == 6 << 30


def test_mem_available_override_is_validated(monkeypatch):
    import pytest
    from gfxsim.errors import ArgumentError
    from gfxsim.procmem import mem_available
    monkeypatch.setenv("GFXSIM_MEM_AVAILABLE", "lots")
    with pytest.raises(ArgumentError, match="GFXSIM_MEM_AVAILABLE='lots'"):
        mem_available()
    monkeypatch.delenv("GFXSIM_MEM_AVAILABLE")
    assert mem_available() is None or mem_available() > 0
