"""Finding messages and pictures a user can act on: the kernels name each matrix
instruction by chunk, tile and j (``w.mma(..., label=...)``), and the scale-group and token
pictures, the findings and the run report show that name beside the index; the error heatmap
separates kv groups."""
import re

import numpy as np
import pytest

from gfxsim import Buffer, launch
from kernels_py.host.runs import run_kernel
from visualize import plot_errors, plot_scales, plot_tokens

from support.figures import axes_by_gid

LABEL = re.compile(r"#(\d+) chunk (\d+) tile (\d+) j (\d+)")


@pytest.fixture(scope="module")
def contiguous_pv():
    return run_kernel("pv_int8", context=300, grouping="contiguous", trace=True)


def _check_label_is_the_instruction(e, chunk, tile, j):
    """pv_int8: instruction j of a chunk consumes tokens {16r + 8j + b} of the chunk (B's K slots)."""
    tok = e.tokens("B")
    tok = tok[tok >= 0]
    assert ((tok // 64) == chunk).all()
    assert (((tok % 16) // 8) == j).all()
    assert e.label == f"chunk {chunk} tile {tile} j {j}"


def test_every_matrix_instruction_of_the_twins_is_labelled_by_chunk_tile_and_j(contiguous_pv):
    events = contiguous_pv.mmacs()
    assert events and all(LABEL.match(f"#{e.index} {e.label}") for e in events)
    for e in events:
        _, chunk, tile, j = (int(x) for x in LABEL.match(f"#{e.index} {e.label}").groups())
        _check_label_is_the_instruction(e, chunk, tile, j)
    report = contiguous_pv.report()
    assert [m["label"] for m in report["mmacs"]] == [e.label for e in sorted(events, key=lambda e: e.index)]


def test_scale_picture_rows_name_index_and_label(contiguous_pv):
    fig = plot_scales(contiguous_pv, limit=6)
    ticks = [t.get_text() for t in axes_by_gid(fig)["scales"].get_yticklabels()]
    by_index = {e.index: e for e in contiguous_pv.mmacs()}
    assert len(ticks) == 6
    for t in ticks:
        m = LABEL.match(t)
        assert m, t
        idx, chunk, tile, j = (int(x) for x in m.groups())
        _check_label_is_the_instruction(by_index[idx], chunk, tile, j)


def test_token_picture_rows_name_index_and_label(contiguous_pv):
    fig = plot_tokens(contiguous_pv, limit=3)
    ticks = [t.get_text() for t in axes_by_gid(fig)["tokens"].get_yticklabels()]
    by_index = {e.index: e for e in contiguous_pv.mmacs()}
    assert [t.split()[-1] for t in ticks] == ["A", "B"] * 3
    for t in ticks:
        idx = int(LABEL.match(t).group(1))
        assert t == f"#{idx} {by_index[idx].label} {t.split()[-1]}"


def test_scale_finding_names_the_instruction_by_its_label(contiguous_pv):
    found = [f for f in contiguous_pv.findings if f.kind == "scale-group-mismatch"]
    by_index = {e.index: e for e in contiguous_pv.mmacs()}
    assert found
    for f in found:
        e = by_index[f.details["mma_event"]]
        assert f"instruction #{e.index} ({e.label}) was computed over" in f.message


def test_decode_labels_name_the_chunk_within_the_partition():
    kr = run_kernel("paged_attention_decode", context=300, heads=4, trace=True)
    events = kr.mmacs()
    assert events and all(LABEL.match(f"#{e.index} {e.label}") for e in events)
    for e in events:
        chunk = int(e.label.split()[1])
        assert chunk == e.wave                # one 256-token partition per workgroup: wave w takes its chunk w


def test_labels_in_ab_kslot_findings_and_bad_labels():
    mmac = "v_mmac_i32_16x16x32_i8"
    tok = np.broadcast_to(np.arange(64), (16, 64))
    a = Buffer("a", np.ones((16, 64), np.int8), {"token": tok})

    def shifted(w):
        r, c = w.lane_id // 16, w.lane_id % 16
        w.mma(mmac, w.global_load(a, c * 64 + r * 8, 8, "i8"), w.global_load(a, c * 64 + r * 8 + 8, 8, "i8"),
              label="chunk 3 tile 1 j 0")
    f = launch(shifted).findings_of("ab-kslot-mismatch")[0]
    assert f.message.startswith(f"{mmac} (chunk 3 tile 1 j 0): K slot")

    def bad(w):
        w.mma(mmac, w.zeros("i8", 8), w.zeros("i8", 8), label=3)
    with pytest.raises(TypeError, match="label must be a str, got int"):
        launch(bad)


def test_error_heatmap_separates_kv_groups():
    kr = run_kernel("paged_attention_decode", context=300, heads=8, kv_heads=2)
    fig = plot_errors(kr)
    ax = axes_by_gid(fig)["errors:fp32"]
    lines = [l for l in ax.get_lines() if l.get_gid() == "kv-group"]
    assert lines and {l.get_ydata()[0] for l in lines} == {3.5}          # heads 0-3 | 4-7
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert ticks[3] == "query head 3 (kv 0)" and ticks[4] == "query head 4 (kv 1)"
    err = np.abs(kr.out - kr.refs["fp32"]).reshape(8, -1)
    title = ax.get_title(loc="left")
    assert f"kv 0 {err[:4].max():.3g}, kv 1 {err[4:].max():.3g}" in title
    one = plot_errors(run_kernel("paged_attention_decode", context=300, heads=4, kv_heads=1))
    assert not [l for l in axes_by_gid(one)["errors:fp32"].get_lines() if l.get_gid() == "kv-group"]


def test_gfxsim_run_text_names_the_instructions_by_label(capsys):
    from gfxsim.cli import main
    assert main(["run", "pv_int8", "--context", "100", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"#\d+ v_mmac_i32_16x16x32_i8 \(chunk 0 tile 0 j 0\) wg\(0, 0, 0\) wave 0: A tokens", text)
    assert re.search(r"#\d+ v_mmac_i32_16x16x32_i8 \(chunk 0 tile 0 j 1\) wg\(0, 0, 0\) wave 0: A tokens", text)
