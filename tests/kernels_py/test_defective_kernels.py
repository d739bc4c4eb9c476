"""Defective kernels a user might write, run as a user runs them:
`gfxsim run KERNEL --kernel-fn tests/defective/FILE.py:FN`. Each names the right elements; its fixed
twin reports nothing and computes what the project's kernel computes.

- swapped_pv.py: a BF16 PV with MMAC(V, W) that writes the result for query q, dim d into out[d][q]
  (within each 16-dim tile) -> store-mismatch;
- no_zero_init.py: an INT8 PV whose accumulators are never zeroed -> uninitialized-read, NaN outputs;
- a copy of pv_int8 with its operands swapped (MMAC(V, P)) -> scale-group-mismatch and
  identity-mismatch on rows and store-mismatch on dims;
- reduce_stats_stride.py: the decode's reduce reading its softmax statistics without their
  partition stride, other heads' weights on a head's partials -> identity-mismatch on head;
- sage_fnuz_v.py: a SageAttention2 port that quantizes V to CDNA3's fp8 (e4m3fnuz) for sm_90's
  e4m3 mma -> format-mismatch, NaN outputs;
- carried_acc.py: a QK whose int32 accumulator is zeroed once per chunk, not per tile ->
  accumulator-carried;
- sage_fused_scales.py: a SageAttention2 port applying sQ·sK as one product, its K scale over each
  lane's own dims -> scale-group-mismatch on dims (the product checked as its parts).
"""
import json

import pytest

from gfxsim.cli import main
from support import DEFECTIVE

SMALL = ["--context", "300"]


def run_json(capsys, *argv):
    assert main(["run", *argv, "--report", "json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("arch", ["gfx936", "gfx942"])
def test_swapped_pv_operands_is_a_store_mismatch_naming_query_and_dim(capsys, arch):
    bad = run_json(capsys, "pv_bf16", *SMALL, "--arch", arch, "--kernel-fn", f"{DEFECTIVE / 'swapped_pv.py'}:swapped_pv")
    assert bad["findings"] and {f["kind"] for f in bad["findings"]} == {"store-mismatch"}
    assert {f["details"]["field"] for f in bad["findings"]} == {"row", "dim"}
    for f in bad["findings"]:
        d = f["details"]
        r, c = d["element"]                          # out[r][c] of the [16 rows][head_dim] output
        q, dim = c % 16, 16 * (c // 16) + r          # what the defect stores there
        assert d["buffer"] == "out" and d["tags"] == {"row": r, "dim": c}
        assert d["value"]["row"] == q and d["value"]["dim"] == dim
        assert (q, dim) != (r, c)
        assert f"global_store to out[{r}, {c}]" in f["message"]
        assert f"holds row {q}, dim {dim}" in f["message"] and f"lane {f['lane']} {d['register']}" in f["message"]
        assert f["kernel"] == "swapped_pv" and f["source"].startswith("swapped_pv.py:")       # its store of O
        assert d["count"] == 32                      # 32 stores of the 16 x 128 output, each mostly misplaced
    assert bad["metrics"]["vs_reference_bf16_pv"]["max_abs"] > 1e-2                    # and the numbers show it
    good = run_json(capsys, "pv_bf16", *SMALL, "--arch", arch,
                    "--kernel-fn", f"{DEFECTIVE / 'swapped_pv.py'}:swapped_pv_fixed")
    assert good["findings"] == []
    ours = run_json(capsys, "pv_bf16", *SMALL, "--arch", arch)
    assert good["metrics"] == ours["metrics"]


def test_a_missing_accumulator_zero_init_is_an_uninitialized_read_and_nan_outputs(capsys):
    src = (DEFECTIVE / "no_zero_init.py").read_text().splitlines()
    line = next(i + 1 for i, s in enumerate(src) if "acc[dt] += part[dt]" in s)
    bad = run_json(capsys, "pv_int8", *SMALL, "--kernel-fn", f"{DEFECTIVE / 'no_zero_init.py'}:pv_no_zero_init")
    found = bad["findings"]
    assert found and {f["kind"] for f in found} == {"uninitialized-read"}
    # one finding per accumulator (head_dim / 16 column tiles), each read by the four waves
    assert len(found) == 128 // 16 and {f["details"]["count"] for f in found} == {4}
    for f in found:
        assert f["source"] == f"no_zero_init.py:{line}" and f["details"]["what"] == "register"
        assert f["details"]["name"].startswith("v[") and f["details"]["name"] in f["message"]
    assert len({f["details"]["name"] for f in found}) == len(found)
    # the poison reaches the numbers: every metric is NaN (null in the JSON)
    assert all(v is None for v in bad["metrics"]["vs_reference_int8"].values())
    good = run_json(capsys, "pv_int8", *SMALL, "--kernel-fn", f"{DEFECTIVE / 'no_zero_init.py'}:pv_zero_init")
    assert good["findings"] == []
    assert good["metrics"] == run_json(capsys, "pv_int8", *SMALL)["metrics"]


def test_the_seeds_int8_mmac_v_p_is_caught_three_times(tmp_path, capsys):
    """pv_int8 with the operands swapped and nothing else changed (MMAC(V, P)): the W
    row scales land on D's rows, which now hold dims (a scale on M must be the element's own row;
    the product of one row's result and another row's scale), and the stores put dim m where dim n
    belongs."""
    from support.copies import copy_of
    path = tmp_path / "pv_v_p.py"
    path.write_text(copy_of("pv_int8", "pv_int8", "pv_v_p", ("w.mma(cfg.MMA, wq[j], vq.bytes(8 * j, 8),",
                                                             "w.mma(cfg.MMA, vq.bytes(8 * j, 8), wq[j],")))
    bad = run_json(capsys, "pv_int8", *SMALL, "--kernel-fn", f"{path}:pv_v_p")
    kinds = {f["kind"] for f in bad["findings"]}
    assert kinds == {"scale-group-mismatch", "store-mismatch", "identity-mismatch"}
    # the dequant multiplies a result of one query row by another row's scale
    assert {f["details"]["field"] for f in bad["findings"] if f["kind"] == "identity-mismatch"} == {"row"}
    scale = [f for f in bad["findings"] if f["kind"] == "scale-group-mismatch"]
    assert {f["details"]["field"] for f in scale} == {"row"}
    assert "a scale on M or N must be the element's own" in scale[0]["message"]
    store = [f for f in bad["findings"] if f["kind"] == "store-mismatch"]
    assert {f["details"]["field"] for f in store} == {"dim"}
    r, c = store[0]["details"]["element"]
    assert store[0]["details"]["value"]["dim"] == 16 * (c // 16) + r != c


def test_fnuz_v_bytes_read_by_an_e4m3_mma_are_a_format_mismatch_and_nan_outputs(capsys):
    """sage_fnuz_v.py: V quantized to CDNA3's fp8 (e4m3fnuz) and handed to sm_90's e4m3 mma.sync."""
    small = ["sage_attention", "--arch", "sm_90", "--context", "128", "--head-dim", "64"]
    path = DEFECTIVE / "sage_fnuz_v.py"
    bad = run_json(capsys, *small, "--kernel-fn", f"{path}:sage_fnuz_v")
    assert bad["findings"] and {f["kind"] for f in bad["findings"]} == {"format-mismatch"}
    (f,) = bad["findings"]                       # one statement, B (V) of every PV instruction, counted
    d = f["details"]
    assert (d["operand"], d["written"], d["reads"]) == ("B", "e4m3fnuz", "e4m3fn")
    assert d["written_by"] == "v_cvt_pk_fp8_f32" and d["element"] == -1 and d["count"] > 1
    assert "is read as e4m3fn, but lane" in f["message"] and "mma.sync" in f["message"]
    # the numbers show it: fnuz's ±240 (bytes 0x7f, 0xff), what V's elements near 240 become, is e4m3fn's NaN
    assert bad["metrics"]["vs_sage_reference"]["max_abs"] is None
    good = run_json(capsys, *small, "--kernel-fn", f"{path}:sage_fixed_v")
    assert good["findings"] == [] and good["metrics"]["vs_sage_reference"]["max_abs"] < 1e-5


@pytest.mark.parametrize("fixed", [False, True])
def test_the_project_reduce_with_its_statistics_mis_strided(capsys, fixed):
    """tests/defective/reduce_stats_stride.py: every head but 0 weights its partial outputs with
    other heads' statistics; gfxsim run --reduce-fn names each head's product."""
    fn = "reduce_stats_stride_fixed" if fixed else "reduce_stats_stride"
    rep = run_json(capsys, "paged_attention_decode", "--context", "1000",
                   "--reduce-fn", f"{DEFECTIVE / 'reduce_stats_stride.py'}:{fn}")
    rel = rep["metrics"]["vs_reference_int8"]["rel_l1"]
    if fixed:
        assert rep["findings"] == [] and rel < 1e-5
        return
    assert rel > 0.5                                        # the numbers are far off
    # the sum of the weights keeps the one head it met, the wrong one: its quotient is stored there
    assert {f["kind"] for f in rep["findings"]} == {"identity-mismatch", "store-mismatch"}
    src = (DEFECTIVE / "reduce_stats_stride.py").read_text().splitlines()
    line = next(i + 1 for i, s in enumerate(src) if "acc += (o_p + p * head_dim).load() * w_p" in s)
    lines = {f"reduce_stats_stride.py:{n}" for n in (line, line + 1)}    # the product, and w_sum += w_p
    heads = set()
    for f in rep["findings"]:
        if f["kind"] == "store-mismatch":
            continue
        d = f["details"]
        assert d["field"] == "head" and f["source"] in lines and len(set(d["values"])) == 2
        if f["source"].endswith(f":{line}"):
            mine, theirs = d["values"]
            assert mine == f["workgroup"][0] != theirs        # the workgroup's head, another head's weight
            heads.add(mine)
    assert heads == set(range(1, 8))                          # head 0 reads its own statistics


def test_an_accumulator_zeroed_once_per_chunk_is_carried_into_the_next_tile(capsys):
    """carried_acc.py: QK's int32 accumulator zeroed once per chunk, so tile td starts from tile
    td-1's scores: accumulator-carried at the first instruction of each later tile, naming the
    element, C's token and D's; the numbers are far off. Its twin zeroes per tile and reports nothing."""
    src = (DEFECTIVE / "carried_acc.py").read_text().splitlines()
    line = next(i + 1 for i, s in enumerate(src) if "acc = w.mma(" in s)
    bad = run_json(capsys, "qk_int8", *SMALL, "--kernel-fn", f"{DEFECTIVE / 'carried_acc.py'}:qk_carried_acc")
    carried = [f for f in bad["findings"] if f["kind"] == "accumulator-carried"]
    assert carried and {f["kind"] for f in bad["findings"]} == {"accumulator-carried"}
    for f in carried:
        d = f["details"]
        assert f["source"] == f"carried_acc.py:{line}" and d["field"] == "token"
        assert d["d_value"] - d["c_value"] == 16                 # the previous tile's token, same column
        assert d["elements"] == 256 and "j 3)" in d["c_from"]     # the whole tile, from the last k-step of the last
        assert f"holds token {d['c_value']}" in f["message"] and f"token {d['d_value']}" in f["message"]
        assert "tile" in f["message"] and " j 0)" in f["message"]     # named by index and label
    good = run_json(capsys, "qk_int8", *SMALL, "--kernel-fn", f"{DEFECTIVE / 'carried_acc.py'}:qk_zero_per_tile")
    assert good["findings"] == []
    assert good["metrics"] == run_json(capsys, "qk_int8", *SMALL)["metrics"]
    assert bad["metrics"]["vs_fp32"]["max_abs"] > 100 * good["metrics"]["vs_fp32"]["max_abs"]


def test_a_wrong_part_of_a_fused_scale_product_is_a_scale_group_mismatch_on_dims(capsys):
    """sage_fused_scales.py: S = int(QKᵀ)·(sQ·sK) with each lane's K scale over its own elements
    only. The product is checked as its parts: sQ covers every dim, the K scale part of them."""
    sage = ["sage_attention", "--context", "128", "--head-dim", "64", "--arch", "sm_90"]
    path = DEFECTIVE / "sage_fused_scales.py"
    bad = run_json(capsys, *sage, "--kernel-fn", f"{path}:sage_fused_lane_k")
    assert bad["findings"] and {f["kind"] for f in bad["findings"]} == {"scale-group-mismatch"}
    assert {f["kernel"] for f in bad["findings"]} == {"sage_fused_lane_k"}
    dims = [f["details"] for f in bad["findings"] if f["details"]["field"] == "dim"]
    assert dims and all(d["axis"] == "K" and d["foreign"] and set(d["scale_over"]) < set(d["k_set"]) for d in dims)
    # the lane's scale is its own tokens' too, not its group's: the M/N group rule says so as well
    assert {(f["details"]["field"], f["details"]["axis"]) for f in bad["findings"]} == {("dim", "K"),
                                                                                       ("token", "M/N group")}
    good = run_json(capsys, *sage, "--kernel-fn", f"{path}:sage_fused_fixed")
    assert good["findings"] == [] and good["metrics"]["vs_sage_reference"]["max_abs"] < 1e-5
