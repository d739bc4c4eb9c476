"""A per-tensor factor (an untagged V scale, a literal) applied to a matrix result is no group scale:
the asm front end's dequant recognition lets it pass and checks the group scale that follows it
(gfxsim/asm/semantics/dequant.py). Before, the first multiply was taken as the scale and every such
kernel reported "computed over no tokens"."""
from pathlib import Path

import numpy as np
import pytest
from support import hip_folder

from gfxsim import hip

SOURCE = Path(__file__).parent / "sources" / "pv_scaled_tensor.hip"
TAGS = {"p": {1: "token"}, "v": {1: "token"}, "s_tok": {0: "token"}}


@pytest.fixture
def folder(tmp_path, monkeypatch):
    return hip_folder(tmp_path, monkeypatch, SOURCE)


def _reference(p, v, s, vs, contiguous, tensor_only):
    out = np.zeros((16, 16), np.float64)
    for j in range(2):
        toks = [t for t in range(64) if (t % 16) // 8 == j]
        acc = p[:, toks].astype(np.int64) @ v[:, toks].astype(np.int64).T          # [m, n]
        grp = range(32 * j, 32 * j + 32) if contiguous else toks
        out += acc * vs * (1.0 if tensor_only else s[list(grp)].max())
    return out.reshape(-1)


@pytest.mark.parametrize("defines, kinds", [([], set()), (["CONTIGUOUS"], {"scale-group-mismatch"}),
                                            (["TENSOR_ONLY"], set())])
def test_a_per_tensor_factor_is_no_group_scale_and_the_group_scale_after_it_is_checked(folder, defines, kinds):
    rng = np.random.default_rng(3)
    p, v = rng.integers(-20, 20, (2, 16, 64), dtype=np.int8)
    s = rng.uniform(0.5, 2, 64).astype(np.float32)
    vs = np.array([0.25], np.float32)
    res, run, _ = hip.run("pv_scaled_tensor.hip", "pv_scaled_tensor", 1, 64, tags=TAGS, defines=defines,
                          p=p, v=v, s_tok=s, v_scale=vs, out=np.zeros(256, np.float32))
    want = _reference(p, v, s, 0.25, "CONTIGUOUS" in defines, "TENSOR_ONLY" in defines)
    np.testing.assert_allclose(res["out"], want, rtol=1e-5)
    assert {f.kind for f in run.findings} == kinds, [f.message for f in run.findings]
    if kinds:                  # the group scale is named, not the per-tensor factor
        assert all("computed over tokens {" in f.message for f in run.findings), run.findings[0].message
