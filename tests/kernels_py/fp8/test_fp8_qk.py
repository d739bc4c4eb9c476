"""FP8 QKᵀ on gfx942 with per-token q and k scales: q_scale on the rows,
k_scaleᵀ on the columns, before 1/√d. The fixed kernel equals its numpy reference and is silent; a
k scale applied untransposed (on M) and a per-token k scale split along the reduction axis (K) are
scale-group-mismatch findings, and the picture shows the axis each scale was applied along."""
import numpy as np
import pytest

from kernels_py.fp8.fp8_qk import reference, run_fp8_qk


def data(T=32, d=128, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(16, d)).astype(np.float32)
    k = (rng.normal(size=(T, d)) * np.exp(rng.normal(size=(T, 1)))).astype(np.float32)   # per-token spread
    return q, k


def test_fixed_kernel_is_the_reference_and_silent():
    q, k = data()
    s, run = run_fp8_qk(q, k)
    np.testing.assert_allclose(s, reference(q, k), rtol=1e-6, atol=1e-6)
    assert run.findings == [] and {m.op for m in run.mmacs()} == {"v_mfma_f32_16x16x32_fp8_fp8"}
    # dequantized before 1/sqrt(d): close to the exact scores
    exact = q.astype(np.float64) @ k.T / np.sqrt(q.shape[1])
    assert np.abs(s - exact).max() < 0.05 * np.abs(exact).max()


def test_k_scale_untransposed_is_an_m_n_finding_on_tokens():
    q, k = data()
    s, run = run_fp8_qk(q, k, k_scale_on="M")
    f = run.findings_of("scale-group-mismatch")
    assert len(f) == len(run.findings) == 2                 # one per 16-token tile
    x = f[0]
    assert x.details["field"] == "token" and x.details["axis"] == "M/N"
    pairs = {(tuple(m["k_set"]), tuple(m["scale_over"])) for m in x.details["mismatches"]}
    assert ((0,), (1,)) in pairs and ((5,), (3,)) in pairs      # token 0's element got token 1's scale, ...
    assert np.abs(s - reference(q, k)).max() > 0.1


def test_per_token_scale_split_along_the_reduction_axis_is_a_k_finding():
    q, k = data()
    _, run = run_fp8_qk(q, k, k_scale_on="K")
    f = run.findings_of("scale-group-mismatch")
    assert f and len(f) == len(run.findings)
    x = f[0]
    assert x.details["field"] == "dim" and x.details["axis"] == "K"
    assert x.details["k_set"] == list(range(128))
    assert x.details["scale_over"] == [d for d in range(128) if d % 32 < 8]       # lane's own 8 per k step


def test_bad_mode_is_refused():
    q, k = data()
    with pytest.raises(ValueError, match="k_scale_on"):
        run_fp8_qk(q, k, k_scale_on="T")


@pytest.mark.parametrize("mode,k_axis,k_split", [("N", 1, False), ("M", 0, False), ("K", 1, True)])
def test_picture_shows_the_axis_each_scale_was_applied_on(mode, k_axis, k_split):
    from visualize.scale_axes import plot_scale_axes, scale_axes
    q, k = data(T=16, d=64)
    rec = {}
    run_fp8_qk(q, k, k_scale_on=mode, record=rec)
    ax = scale_axes(rec)
    labels, code, split, (lo, total) = ax["q_scale"]
    assert (code == 0).all() and not split.any() and total == 64 and labels[5, 9] == "r5"
    labels, code, split, (lo, total) = ax["k_scale"]
    assert (code == k_axis).all() and split.all() == k_split and split.any() == k_split
    assert labels[5, 9] == ("t5" if mode == "M" else "t9")
    assert lo == (16 if k_split else 64)
    fig = plot_scale_axes(rec)
    titles = [a.get_title(loc="left") for a in fig.axes if a.get_title(loc="left")]
    assert any("k_scale along " + ("M" if mode == "M" else "N") in t for t in titles)
    assert any(("split along K" in t) == k_split for t in titles if t.startswith("k_scale"))
