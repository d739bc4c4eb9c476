"""Every factor of a compiled dequant chain is checked (gfxsim/asm/semantics/dequant.py): an int8
QK^T tile (sources/qk_chain.hip, twin of support/qk_chain.py) dequantized by a Q row scale, a K
token scale and a K channel-group scale. The channel-group scale taken over half the dims the
instruction summed is a scale-group-mismatch wherever it sits in the chain — last, first, or
inside a scale product computed first (checked as its parts: the other two cover every dim);
with a constant before them, the correct kernel is silent."""
from pathlib import Path

import numpy as np
import pytest
from support import hip_folder
from support.qk_chain import DIMS, ORDERS, ROWS, SM_SCALE, check_findings, inputs, reference

from gfxsim import hip

SOURCE = Path(__file__).parent / "sources" / "qk_chain.hip"
TAGS = {"q8": {0: "row", 1: "dim"}, "k8": {0: "token", 1: "dim"}, "sq_d": {0: "row", 1: "dim"},
        "sk_d": {0: "token", 1: "dim"}, "kc": {0: "dim"}}
DEFINE = {"last": [], "first": ["FIRST"], "combined": ["COMBINED"], "literal": ["LITERAL"]}


@pytest.fixture
def folder(tmp_path, monkeypatch):
    return hip_folder(tmp_path, monkeypatch, SOURCE)


@pytest.mark.parametrize("wrong", [False, True], ids=["fixed", "wrong-group"])
@pytest.mark.parametrize("order", ORDERS)
def test_each_factor_of_a_compiled_dequant_chain_is_checked(folder, order, wrong):
    assert TAGS["q8"] == {0: "row", 1: "dim"} and ROWS.shape == DIMS.shape      # the twin's tags
    q8, k8, sq, sk, kc = inputs()
    res, run, _ = hip.run("qk_chain.hip", "qk_chain", 1, 64, tags=TAGS,
                          defines=DEFINE[order] + (["WRONG_GROUP"] if wrong else []),
                          q8=q8, k8=k8, sq_d=sq, sk_d=sk, kc=kc, out=np.zeros(256, np.float32))
    want = reference(q8, k8, sq, sk, kc, wrong) * (SM_SCALE if order == "literal" else 1)
    np.testing.assert_allclose(res["out"].reshape(16, 16), want, rtol=1e-5)
    found = check_findings(run, wrong)
    if found is not None:
        assert found.details["k_set"] == list(range(32)) and found.details["lanes"] == list(range(64))


@pytest.mark.parametrize("wrong", [False, True], ids=["fixed", "wrong-group"])
def test_a_result_rounded_to_f16_and_back_is_still_the_matrix_result(folder, wrong):
    """v_cvt_f16_f32 then v_cvt_f32_f16 before the chain: the scales after them are checked."""
    q8, k8, sq, sk, kc = inputs()
    res, run, _ = hip.run("qk_chain.hip", "qk_chain", 1, 64, tags=TAGS,
                          defines=["HALF"] + (["WRONG_GROUP"] if wrong else []), q8=q8, k8=k8, sq_d=sq, sk_d=sk,
                          kc=kc, out=np.zeros(256, np.float32))
    want = reference(q8, k8, sq, sk, kc, wrong, half=True)
    np.testing.assert_allclose(res["out"].reshape(16, 16), want, rtol=1e-5)
    assert [f.kind for f in run.findings] == (["scale-group-mismatch"] if wrong else []), \
        [f.message for f in run.findings]
