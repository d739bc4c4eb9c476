"""A compiled fp8 QK^T tile whose Q is quantized in the kernel with one amax scale per wave
(sources/qk_fp8.hip): the scale applied and undone gives no finding; Q divided by the scale that
was meant as a multiplier, the result rescaled the same way, is a dequant-direction; a q_max
reduced with __shfl_down (lane l: the max of lanes l..63) is a scale-group-mismatch on dims."""
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from support import hip_folder

import gfxsim.hip as hip

SOURCES = Path(__file__).parent / "sources"
TAGS = {"q": {0: "head", 1: "dim"}, "k8": {0: "token", 1: "dim"}}
FP8 = ml_dtypes.float8_e4m3fnuz
K_SCALE = np.float32(0.5)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    return hip_folder(tmp_path, monkeypatch, SOURCES / "qk_fp8.hip")


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((16, 32)).astype(FP8)


def model(q, k, same_direction, rcp=False):
    """The kernel's arithmetic: logits [token][head] of fp8 Q (q * s or q / s, s = 224 / q_max),
    the exact sum rounded to fp32, times k_scale / s; ``rcp``: each a / b as a * (1 / b), the
    reciprocal rounded (the simulator's v_rcp_f32 is correctly rounded)."""
    div = (lambda a, b: a * (np.float32(1) / b)) if rcp else (lambda a, b: a / b)
    s = div(np.float32(224), np.abs(q).max())
    q8 = (div(q, s) if same_direction else q * s).astype(FP8).astype(np.float64)
    d = (k.astype(np.float64) @ q8.T).astype(np.float32)
    return d * div(K_SCALE, s)


def run(q, k, *defines):
    res, r, _ = hip.run("qk_fp8.hip", "qk_fp8", 1, 64, tags=TAGS, defines=list(defines), k8=k.view(np.uint8), q=q,
                        k_scale=float(K_SCALE), out=np.zeros(256, np.float32))
    return res["out"].reshape(16, 16), r


@pytest.mark.parametrize("rcp", [False, True], ids=["division", "rcp"])
def test_a_scale_applied_and_undone_is_silent(folder, rcp):
    q, k = inputs()
    out, r = run(q, k, *(["RCP"] if rcp else []))
    np.testing.assert_allclose(out, model(q, k, False, rcp), rtol=1e-6, atol=1e-6)
    assert r.findings == [] and {m.op for m in r.mmacs()} == {"v_mfma_f32_16x16x32_fp8_fp8"}


@pytest.mark.parametrize("rcp", [False, True], ids=["division", "rcp"])
def test_q_divided_by_its_multiplier_is_a_dequant_direction(folder, rcp):
    q, k = inputs()
    out, r = run(q, k, "SAME_DIRECTION", *(["RCP"] if rcp else []))
    np.testing.assert_allclose(out, model(q, k, True, rcp), rtol=1e-6, atol=1e-9)
    right = model(q, k, False, rcp)
    ratio = np.median(out / right)                 # every logit off by (q_max / 224)^2
    assert ratio == pytest.approx((np.abs(q).max() / 224) ** 2, rel=0.05)
    assert [f.kind for f in r.findings] == ["dequant-direction"], r.findings
    d = r.findings[0].details
    assert (d["operand"], d["quantized"], d["rescaled"]) == ("B", "x*amax", "amax")
    assert d["lanes"] == list(range(64)) and d["scale"] == pytest.approx(K_SCALE * np.abs(q).max() / 224)
    assert r.findings[0].source.startswith("_Z6qk_fp8") and "qk_fp8.hip" in r.findings[0].source


def test_a_shfl_down_max_is_a_scale_group_mismatch(folder):
    """__shfl_down leaves lane l the max over lanes l..63: lanes 16-63 hold dims 8..31 of it only,
    while each column of the instruction sums all 32 dims."""
    q, k = inputs()
    q[0, :8] *= 8                                  # lane 0's dims hold the largest |q|
    _, r = run(q, k, "SHFL_DOWN")
    assert {f.kind for f in r.findings} == {"scale-group-mismatch"}, r.findings
    f = r.findings[0].details
    assert f["field"] == "dim" and f["k_set"] == list(range(32))
    missing = {tuple(m["foreign"]) for m in f["mismatches"]}
    assert missing == {tuple(range(8)), tuple(range(16)), tuple(range(24))}
    assert min(f["lanes"]) == 16


@pytest.mark.parametrize("same_direction", [False, True], ids=["undone", "same-direction"])
def test_the_direction_survives_a_saturation_and_a_packing(folder, same_direction):
    """vLLM's form of the quantization: each value clamped to the fp8 range (v_med3_f32 between
    constants) and the converted pairs packed into a word with a shift and an or; the direction
    marks go through both, so the defect is named there too and the fixed kernel stays silent."""
    q, k = inputs()
    defines = ["SATURATE", "PACK"] + (["SAME_DIRECTION"] if same_direction else [])
    out, r = run(q, k, *defines)
    np.testing.assert_allclose(out, model(q, k, same_direction, False), rtol=1e-6, atol=1e-9)
    assert [f.kind for f in r.findings] == (["dequant-direction"] if same_direction else []), r.findings
