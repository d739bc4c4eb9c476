"""Every factor of a dequant chain is checked against the matrix instruction's K set, in the Python
front end as in compiled code (tests/gfxsim/hip/test_dequant_chain.py): a channel-group scale over
half the summed dims is found last in the chain, first, or inside a product of scales computed
first (scaleparts.py: the product is checked as its parts, though the union of their footprints
covers every dim); the correct kernel is silent in every order."""
import numpy as np
import pytest

from gfxsim.machine.provenance import Mask, WideSets
from gfxsim.machine.scaleparts import intersection
from support.qk_chain import ORDERS, SM_SCALE, check_findings, inputs, reference, run_chain


@pytest.mark.parametrize("wrong", [False, True], ids=["fixed", "wrong-group"])
@pytest.mark.parametrize("order", ORDERS)
def test_each_factor_of_a_dequant_chain_is_checked(order, wrong):
    run, out = run_chain(order, wrong)
    want = reference(*inputs(), wrong_group=wrong) * (SM_SCALE if order == "literal" else 1)
    np.testing.assert_allclose(out, want, rtol=1e-5)
    found = check_findings(run, wrong)
    if found is not None:
        assert "computed over dims {0-15}" in found.message


def test_a_product_of_two_marked_scales_is_a_scale():
    """sQ * sK of two group scales is the scale applied (its mark kept); a number times a scale too."""
    from gfxsim.testing import run_small
    seen = {}

    def kernel(w, x):
        a = w.group_scale(w.global_load(x, w.lane_id * 4, 4, "f32"))
        b = w.group_scale(w.global_load(x, w.lane_id * 4, 4, "f32"))
        seen.update(product=(a * b).is_scale(), by_number=(a * 2.0).is_scale(),
                    by_value=(a * w.global_load(x, w.lane_id * 4, 4, "f32")).is_scale())
    run_small(kernel, inputs={"x": (np.ones(64, np.float32), {"token": np.arange(64)})})
    assert seen == {"product": True, "by_number": True, "by_value": False}


def test_the_intersection_of_masks_by_window_and_exactly():
    wide = WideSets()
    a = Mask.of_values(np.array([3, 300, 5, -1]))
    b = Mask.of_values(np.array([3, 300, 6, 7]))
    got = intersection(a, b, wide)
    assert [got.values_at((i,), wide) for i in range(4)] == [{3}, {300}, set(), set()]
    # a set wider than one window meets a window: by value
    big = Mask.empty((1,))
    big.wide[0] = wide.intern([1, 2, 700])
    got = intersection(big, Mask.of_values(np.array([2])), wide)
    assert got.values_at((0,), wide) == {2} and got.wide[0] == 0


def test_a_per_token_scale_loaded_from_a_cache_is_constant_along_k():
    """A K scale loaded per token (an identity, reduced over nothing in this kernel: the cache's
    writer reduced it) names its column and says nothing of the dims summed: it factors out of the
    sum and is checked on N only. Taken from the wrong token, it is an M/N mismatch."""
    from gfxsim.testing import run_small
    from support.qk_chain import DIMS, MMA, ROWS

    def kernel(w, q8, k8, s_tok, out, *, shift):
        row, g = w.lane_id % 16, w.lane_id // 16
        acc = w.mma(MMA, w.global_load(q8, row * 32 + 8 * g, 8, "i8"), w.global_load(k8, row * 32 + 8 * g, 8, "i8"))
        sk = w.group_scale(w.global_load(s_tok, ((row + shift) % 16) * 4, 4, "f32"))
        s = w.dequant(acc, sk)
        for i in range(4):
            w.global_store(out, ((4 * g + i) * 16 + row) * 4, s[i])

    q8, k8, *_ = inputs()
    found = {}
    for shift in (0, 1):
        run, _ = run_small(kernel, arch="gfx942", inputs={
            "q8": (q8, {"row": ROWS, "dim": DIMS}), "k8": (k8, {"token": ROWS, "dim": DIMS}),
            "s_tok": (np.ones(16, np.float32), {"token": np.arange(16)})}, outputs={"out": ((16, 16), "f32")},
            kwargs=dict(shift=shift), trace=False)
        found[shift] = sorted({(f.kind, f.details["field"], f.details["axis"]) for f in run.findings})
    assert found == {0: [], 1: [("scale-group-mismatch", "token", "M/N")]}
