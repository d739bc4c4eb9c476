"""The kernel-run pictures tell the truth: what is drawn is read back from the figure and checked
against the run's own records (MmaEvent K-slot tags, findings, trace events, outputs).

Cell labels are read from the text artists (position -> cell), marks from the outline patches'
geometry, heatmaps from the image arrays, bars from their rectangles; the expected values are
recomputed here from the run, not taken from visualize.
"""
import re

import numpy as np
import pytest

from gfxsim import Buffer, launch
from gfxsim.cli import main
from gfxsim.machine.trace import MmaEvent, words_of
from kernels_py.host.runs import run_kernel
from support.figures import axes_by_gid
from visualize import RunStepper, plot_banks, plot_errors, plot_scales, plot_tokens


MMAC = "v_mmac_i32_16x16x32_i8"
CONTEXT = 300                     # two partitions, the second one short: untagged K slots at its end


@pytest.fixture(scope="module")
def contiguous():
    return run_kernel("paged_attention_decode", context=CONTEXT, grouping="contiguous", trace=True)


@pytest.fixture(scope="module")
def fragment():
    return run_kernel("paged_attention_decode", context=CONTEXT, grouping="fragment", trace=True)


def cell_labels(ax):
    """{(row, col): text} of the cell labels, the cell taken from where each text is drawn."""
    return {(int(round(t.get_position()[1])), int(round(t.get_position()[0]))): t.get_text() for t in ax.texts}


def outlined(ax):
    """(row, col) of the cells drawn with a heavy outline, from the rectangles' geometry."""
    cells = set()
    for p in ax.patches:
        if p.get_fill() or p.get_linewidth() < 1.0:
            continue
        x, y = p.get_xy()
        cells.add((int(round(y + p.get_height() / 2)), int(round(x + p.get_width() / 2))))
    return cells


def row_events(ax):
    """Trace index named by each y tick ('... #2053 ...')."""
    return [int(re.search(r"#(\d+)", t.get_text())[1]) for t in ax.get_yticklabels()]


def scale_findings(kr):
    return {f.details["mma_event"]: f for f in kr.findings if f.kind == "scale-group-mismatch"}


# -- scale groups ----------------------------------------------------------------------------------

def test_marked_slots_are_exactly_the_slots_the_findings_name(contiguous):
    findings = scale_findings(contiguous)
    want = sum(len(set(f.details["k_set"]) - set(f.details["scale_over"])) for f in findings.values())
    assert want > 0
    ax = axes_by_gid(plot_scales(contiguous, workgroup=None, wave=None))["scales"]
    marks, labels, events = outlined(ax), cell_labels(ax), row_events(ax)
    assert len(marks) == want
    assert set(events) == set(findings), "every instruction with a finding is drawn, and only PV ones"
    for (r, c), text in labels.items():
        f = findings[events[r]]
        if text == "·":
            assert (r, c) not in marks
            continue
        token = int(text)
        assert token in f.details["k_set"]
        assert ((r, c) in marks) == (token not in f.details["scale_over"]), f"#{events[r]} slot {c} token {token}"


def test_fragment_run_marks_nothing(fragment):
    assert not scale_findings(fragment)
    fig = plot_scales(fragment, workgroup=None, wave=None)
    ax = axes_by_gid(fig)["scales"]
    assert not outlined(ax) and len(row_events(ax)) == 80
    assert "no scale-group-mismatch" in fig._suptitle.get_text()


def test_one_wave_legend_names_the_groups_the_findings_name(contiguous):
    fig = plot_scales(contiguous, wave=0, limit=2)
    groups = [t.get_text() for t in fig.legends[0].get_texts()]
    f = scale_findings(contiguous)
    first = sorted(i for i in f if f[i].workgroup == (0, 0, 0) and f[i].wave == 0)[:2]   # the plot's wave
    assert groups[:2] == ["group 0: tokens {0-31} (scale)", "group 1: tokens {32-63} (scale)"]
    assert [set(f[i].details["scale_over"]) for i in first] == [set(range(32)), set(range(32, 64))]
    assert "32 of 64 K slots" in fig._suptitle.get_text()


def test_bad_selection_names_the_wave(contiguous):
    with pytest.raises(ValueError, match=r"workgroup \(0, 0, 0\) wave 7 issued no matrix instruction"):
        plot_scales(contiguous, wave=7)


# -- token map and coverage --------------------------------------------------------------------------

def test_token_map_labels_are_the_mma_tokens(contiguous):
    events = {e.index: e for e in contiguous.mmacs()}
    ax = axes_by_gid(plot_tokens(contiguous, workgroup=None, wave=None, limit=None))["tokens"]
    labels, ticks = cell_labels(ax), [t.get_text() for t in ax.get_yticklabels()]
    assert len(ticks) == 2 * 80
    rng = np.random.default_rng(5)
    cells = list(labels)
    for i in rng.choice(len(cells), 300, replace=False):
        r, c = cells[i]
        e, op = events[int(re.search(r"#(\d+)", ticks[r])[1])], ticks[r][-1]
        t = int(e.tokens(op)[c])
        assert labels[(r, c)] == (str(t) if t >= 0 else "·"), f"{ticks[r]} slot {c}"
    assert not outlined(ax), "A and B agree in every K slot of the decode kernel"


def test_fragment_coverage_is_each_token_once_per_tile(fragment):
    fig = plot_tokens(fragment)
    img = axes_by_gid(fig)["coverage"].images[0].get_array()
    pv = [e for e in fragment.mmacs() if e.tagged and len(e.token_set("A")) > 1]
    assert img.shape == (len(pv) // 2, CONTEXT), "two K=32 instructions per 16-column output tile"
    assert set(np.unique(img)) == {0, 1}
    assert (img.sum(axis=0) == 128 // 16).all(), "every context token once in each of the 8 column tiles"


def pv_tile(w, wbuf, vbuf, *, load_bytes):
    """The PV tile (16 rows x 64 tokens); an 8-byte V load gives each MMAC half its tokens."""
    rowid, lane16id = w.lane_id // 16, w.lane_id % 16
    vq = w.global_load(vbuf, lane16id * 64 + rowid * 16, nbytes=load_bytes, dtype="i8")
    o = w.zeros("f32", 4)
    with w.coverage("O", expect=range(64)):
        for j in range(2):
            wq = w.global_load(wbuf, lane16id * 64 + rowid * 16 + 8 * j, nbytes=8, dtype="i8")
            o += w.mma(MMAC, wq, vq.bytes(8 * j, 8) if load_bytes == 16 else vq).to("f32")


def run_tile(load_bytes):
    tok = np.broadcast_to(np.arange(64), (16, 64))
    bufs = [Buffer(n, np.ones((16, 64), np.int8), {"token": tok}) for n in ("w", "v_cache")]
    return launch(pv_tile, grid=1, arch="gfx936", args=bufs, kwargs=dict(load_bytes=load_bytes))


def test_eight_byte_load_marks_ab_slots_and_coverage_as_the_findings_do():
    run = run_tile(8)
    (ab,) = run.findings_of("ab-kslot-mismatch")
    (cov,) = run.findings_of("token-coverage")
    axes = axes_by_gid(plot_tokens(run))
    second = {(3, c) for c in ab.details["slots"]} | {(2, c) for c in ab.details["slots"]}
    assert outlined(axes["tokens"]) == second, "instruction 2's A and B rows, in the slots the finding lists"
    labels, e = cell_labels(axes["tokens"]), run.mmacs()[1]
    assert [labels[(2, k)] for k in range(32)] == [str(t) for t in e.tokens("A")]
    assert [labels[(3, k)] for k in range(32)] == [str(t) for t in e.tokens("B")] != [labels[(2, k)] for k in range(32)]
    counts = axes["coverage"].images[0].get_array()[0]
    assert [t for t in range(64) if counts[t] == 0] == cov.details["never"]
    assert {t: int(counts[t]) for t in range(64) if counts[t] > 1} == cov.details["multiple"]
    assert not run_tile(16).findings


# -- errors -----------------------------------------------------------------------------------------

def test_error_heatmaps_are_the_output_minus_the_references(contiguous):
    fig = plot_errors(contiguous)
    axes = axes_by_gid(fig)
    for ref in ("fp32", "bf16"):
        ax = axes[f"errors:{ref}"]
        want = np.abs(contiguous.out.astype(np.float64) - contiguous.refs[ref])[0]
        np.testing.assert_allclose(ax.images[0].get_array(), want)
        (x,), (y,) = ax.lines[0].get_data()
        assert want[y, x] == want.max()
        assert f"max abs {want.max():.3g}" in ax.get_title(loc="left")
        assert ax.get_xlabel() and ax.get_ylabel()
    assert ax.images[0].get_clim() == axes["errors:fp32"].images[0].get_clim(), "one colour scale"


# -- LDS banks --------------------------------------------------------------------------------------

def strided(w):
    x = w.shared("x", (64, 33), np.float32)
    w.lds_store(x, w.lane_id * 132, w.zeros("f32") + 1.0)             # row stride 33 dwords: no conflict
    w.barrier()
    w.lds_load(x, w.lane_id * 8, 8, "f32")                                   # consecutive: no conflict
    # lane 3 reads 128 bytes past lane 5's dwords: banks 10-11 serve two dwords in pass 0 (2-way)
    w.lds_load(x, w.select(w.lane_id.eq(3), w.zeros("i32") + 5 * 8 + 128, w.lane_id * 8), 8, "f32")


def test_bank_view_counts_accesses_and_outlines_conflicting_lanes():
    run = launch(strided, grid=1, arch="gfx936")
    (finding,) = run.findings_of("lds-bank-conflict")
    worst = [e for e in run.events if e.op.startswith("ds_")][-1]
    fig = plot_banks(run)
    axes = axes_by_gid(fig)
    bars = {}
    for p in axes["lds:statements"].patches:
        _, y, d = p.get_gid().split("/")
        bars[(int(y), int(d))] = int(round(p.get_width()))
    assert bars == {(0, 1): 1, (1, 1): 1, (2, finding.details["degree"]): 1}
    # the lane map of the worst access: a lane is outlined when one of its banks serves another dword
    grid_ax = axes[f"lds:access:{worst.index}"]
    addr = worst.details["address"] // 4
    want = set()
    for p in range(4):                                                # ds_read_b64: 4 passes of 16 lanes
        lanes = range(16 * p, 16 * p + 16)
        dwords = {l: {addr[l], addr[l] + 1} for l in lanes}
        for l in lanes:
            others = set().union(*(dwords[m] for m in lanes)) - dwords[l]
            if any(d % 32 == o % 32 for d in dwords[l] for o in others):
                want.add((p, l - 16 * p))
    assert outlined(grid_ax) == want == {(0, 3), (0, 5)}
    assert f"{finding.details['degree']}-way conflict, {finding.details['cycles']} cycles" in \
        grid_ax.figure._suptitle.get_text()


def test_decode_kernel_lds_is_conflict_free(fragment):
    n = sum(1 for r in fragment.runs for e in r.events if e.op.startswith(("ds_read_b", "ds_write_b")))
    fig = plot_banks(fragment)
    assert f"all {n} DS accesses are conflict-free" in fig._suptitle.get_text()
    assert not any(outlined(a) for g, a in axes_by_gid(fig).items() if g.startswith("lds:access"))


# -- the stepper ------------------------------------------------------------------------------------

def test_stepper_stops_at_the_first_pv_instruction_and_outlines_the_lanes_cells(fragment):
    st = RunStepper(fragment, workgroup=(0, 0, 0), wave=0, lane=21)
    e = st.next_mma(over_tokens=True).current
    first = next(m for m in fragment.run.mmacs() if m.wave == 0 and m.workgroup == (0, 0, 0)
                 and len(m.token_set("A")) > 1)
    assert isinstance(e, MmaEvent) and e.index == first.index
    axes = axes_by_gid(st.figure())
    for op in ("A", "B"):
        ax = axes[f"stepper:{e.index}:{op}"]
        lay = e.insn.operand(op)
        mine = {(int(r), int(c)) for r, c in zip(*np.nonzero(lay.slot_of()[0, 0] == 21))}
        assert outlined(ax) == mine and len(mine) == 8
        tags = e.slot_tags(op)[0]
        assert all(text == str(tags[r, c]) for (r, c), text in cell_labels(ax).items())
    # the lane's A register holds tokens 16-23 (K slots 8-15: lane group 1 of MMAC 0)
    assert st.lane_tokens("A") == list(range(16, 24))


def test_stepper_registers_are_the_replayed_vgprs_and_back_undoes_step(fragment):
    st = RunStepper(fragment, lane=37).next_mma(over_tokens=True)
    e = st.current
    (role, a), = st.operands()[:1]                                   # A: Wq, read from LDS by ds_read_b64
    base, n = a.regs
    assert role == "A" and (st.replay.vgpr[base:base + n, 37] == words_of(a.values)[:, 37]).all()
    shown = {r: v for r, _, _, v in st.registers()}
    for role, o in st.operands():
        assert shown[role] == o.values[:, 37].tolist()
        assert " ".join(str(v) for v in shown[role]) in st.text()
    before = st.vgprs()
    st.step(3).back(3)
    assert st.vgprs() == before and st.current is e
    out = st.step().replay.vgpr[e.outputs[0].regs[0], 37]
    assert out == words_of(e.outputs[0].values)[0, 37]
    assert st.current is not e and st.text().splitlines()[1].startswith("next: #")   # the step moved on


def test_stepper_without_ipywidgets_falls_back_to_the_static_view(fragment, capsys):
    pytest.importorskip("matplotlib")
    try:
        import ipywidgets  # noqa: F401
        pytest.skip("ipywidgets is installed: the widget path runs instead")
    except ImportError:
        pass
    fig = RunStepper(fragment).next_mma().widget()
    assert "ipywidgets is not installed" in capsys.readouterr().out
    assert fig.axes


def test_stepper_widget_moves_and_redraws(fragment):
    pytest.importorskip("ipywidgets")
    st = RunStepper(fragment, lane=3)
    row, lane, status, text, image = st.widget().children
    row.children[3].click()                                          # next matrix instruction
    assert isinstance(st.current, MmaEvent) and st.instruction() in text.value and image.value
    lane.value = 40
    assert st.lane == 40 and "lane 40" in text.value
    row.children[0].click()                                          # back: before the first one
    row.children[2].click()
    assert "no matrix instruction before" in status.value


def test_stepper_on_an_untraced_run_says_what_to_do():
    run = run_tile(16)
    run.trace.enabled = False
    with pytest.raises(ValueError, match="trace=True"):
        RunStepper(run)


# -- the CLI ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("what,ext,magic", [("scales", "png", b"\x89PNG\r\n\x1a\n"), ("errors", "svg", b"<?xml")])
def test_cli_writes_png_and_svg(tmp_path, capsys, what, ext, magic):
    out = tmp_path / f"pic.{ext}"
    rc = main(["plot", "run", "--context", "64", "--grouping", "contiguous", "--what", what, "--instructions", "2",
               "-o", str(out)])
    assert rc == 0
    data = out.read_bytes()
    assert data.startswith(magic) and len(data) > 10_000
    if ext == "svg":
        assert b"against the bf16 reference" in data
    assert str(out) in capsys.readouterr().out


@pytest.mark.parametrize("args,named", [
    (["--what", "scales", "-o", "OUT.jpg"], "'.jpg'"),
    (["--what", "scales", "--context", "64", "32", "-o", "OUT.png"], "--context"),
    (["--what", "tokens", "--workgroup", "a,b", "-o", "OUT.png"], "'a,b'"),
    (["--what", "tokens", "--instructions", "0", "-o", "OUT.png"], "--instructions"),
    (["--what", "scales", "--no-provenance", "-o", "OUT.png"], "--no-provenance"),
    (["nope_kernel", "--what", "errors", "-o", "OUT.png"], "'nope_kernel'"),
    (["--what", "scales", "--context", "64", "--wave", "9", "-o", "OUT.png"], "wave 9"),
])
def test_cli_errors_exit_2_naming_the_culprit(tmp_path, capsys, args, named):
    args = [a.replace("OUT", str(tmp_path / "x")) for a in args]
    assert main(["plot", "run", *args]) == 2
    err = capsys.readouterr().err
    assert named in err and err.startswith("gfxsim plot: error:"), err
    assert not list(tmp_path.iterdir()), "nothing is written on an error"


def test_cli_rejects_an_unknown_picture(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["plot", "run", "--what", "heat", "-o", str(tmp_path / "x.png")])
    assert exit_.value.code == 2 and "'heat'" in capsys.readouterr().err
