"""gfxsim.testing: each helper passes on a correct kernel and fails, with a
readable message, on a defective one."""
import subprocess
import sys

import numpy as np
import pytest

from gfxsim.testing import (NoTraceError, assert_findings, assert_lane, assert_no_findings, assert_token_sets,
                            run_small)
from support import ROOT

TOK = np.arange(64)
FIRST = "{0-7,16-23,32-39,48-55}"        # the tokens v_mmac_i32_16x16x32_i8 #0 of a 16-byte load consumes
SECOND = "{8-15,24-31,40-47,56-63}"


def pv(w, p, v, out):
    """Two K=32 MMACs over 64 tokens: one 16-byte V load per lane, bytes 8j..8j+7 to instruction j."""
    rowid, lane16id = w.lane_id // 16, w.lane_id % 16
    vq = w.global_load(v, lane16id * 64 + rowid * 16, nbytes=16, dtype="i8")
    acc = None
    for j in range(2):
        pq = w.global_load(p, lane16id * 64 + rowid * 16 + 8 * j, nbytes=8, dtype="i8")
        d = w.mma("v_mmac_i32_16x16x32_i8", pq, vq.bytes(8 * j, 8))
        acc = d if acc is None else acc + d
    w.global_store(out, w.lane_id * 16, acc)


def pv_wrong_p(w, p, v, out):
    """The mistake: P read 16 tokens further for instruction 1 (A and B disagree on the K slots)."""
    rowid, lane16id = w.lane_id // 16, w.lane_id % 16
    vq = w.global_load(v, lane16id * 64 + rowid * 16, nbytes=16, dtype="i8")
    acc = None
    for j in range(2):
        pq = w.global_load(p, lane16id * 64 + (rowid * 16 + 8 * j + 16 * j) % 64, nbytes=8, dtype="i8")
        d = w.mma("v_mmac_i32_16x16x32_i8", pq, vq.bytes(8 * j, 8))
        acc = d if acc is None else acc + d
    w.global_store(out, w.lane_id * 16, acc)


def small(kernel=pv, **kw):
    ones = np.ones((16, 64), np.int8)
    return run_small(kernel, inputs={"p": (ones, {"token": TOK}), "v": (ones, {"token": TOK})},
                     outputs={"out": ((64, 4), "i32")}, **kw)


def test_import_is_cheap():
    code = "import sys, gfxsim.testing; print('numba' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


def test_run_small_builds_tagged_buffers_and_returns_outputs():
    run, out = small()
    assert out["out"].shape == (64, 4) and (out["out"] == 64).all()      # 2 x 32 products of 1 x 1
    assert [m.op for m in run.mmacs()] == ["v_mmac_i32_16x16x32_i8"] * 2
    assert run.arch == "gfx936" and run.trace.enabled
    with pytest.raises(ValueError, match=r"outputs\['out'\] must be \(shape, dtype\)"):
        run_small(pv, outputs={"out": "i32"})


def test_assert_no_findings_passes_and_fails_listing_the_findings():
    run, _ = small()
    assert_no_findings(run)
    assert_no_findings([run, run], kinds=["ab-kslot-mismatch"])
    bad, _ = small(pv_wrong_p)
    with pytest.raises(AssertionError, match=r"expected no findings, got \d+:\n  \[ab-kslot-mismatch\]"):
        assert_no_findings(bad)
    assert_no_findings(bad, kinds="lds-race")                          # other kinds only: passes
    with pytest.raises(ValueError, match="unknown finding kind"):
        assert_no_findings(run, kinds=["no-such-kind"])


def test_assert_no_findings_fails_when_the_check_did_not_run():
    run, _ = small(provenance=False)
    with pytest.raises(AssertionError, match="did not run: ab-kslot-mismatch"):
        assert_no_findings(run)                                       # nothing found, but nothing checked
    with pytest.raises(AssertionError, match="did not run: ab-kslot-mismatch"):
        assert_no_findings(run, kinds=["ab-kslot-mismatch"])          # that check never ran
    assert_no_findings(run, kinds=["lds-race", "uninitialized-read"])  # these ran without provenance


def test_assert_findings_exactly_these_kinds():
    bad, _ = small(pv_wrong_p)
    n = len(bad.findings_of("ab-kslot-mismatch"))
    assert n >= 1
    assert_findings(bad, {"ab-kslot-mismatch": None})
    assert_findings(bad, {"ab-kslot-mismatch": n})
    with pytest.raises(AssertionError, match=rf"expected {n + 1} ab-kslot-mismatch, got {n}"):
        assert_findings(bad, {"ab-kslot-mismatch": n + 1})
    with pytest.raises(AssertionError, match="expected at least one scale-group-mismatch, got none.*"
                                             "unexpected kind.s.: ab-kslot-mismatch"):
        assert_findings(bad, {"scale-group-mismatch": None})
    good, _ = small()
    with pytest.raises(AssertionError, match=r"expected at least one ab-kslot-mismatch, got none \(findings: none\)"):
        assert_findings(good, {"ab-kslot-mismatch": None})


def test_assert_token_sets_per_slot_and_as_sets():
    run, _ = small()
    first, second = run.mmacs()
    assert_token_sets(run, first.index, A=FIRST, B=FIRST)
    assert_token_sets(run, second, B={*range(8, 16), *range(24, 32), *range(40, 48), *range(56, 64)})
    slots = [16 * r + b for r in range(4) for b in range(8)]
    assert_token_sets(run, first.index, B=slots, A=slots)
    with pytest.raises(AssertionError, match=rf"B tokens: expected \{{0-31\}}, got \{SECOND[:-1]}\}}"):
        assert_token_sets(run, second.index, B=set(range(32)))
    with pytest.raises(AssertionError, match=r"B token per K slot: .*slots k8: expected 8, got 16"):
        assert_token_sets(run, first.index, B=list(range(32)))
    with pytest.raises(AssertionError, match="no matrix instruction with index 3"):
        assert_token_sets(run, 3, B=FIRST)
    bad, _ = small(pv_wrong_p)             # instruction 1's A slots hold the same set, rotated by 16 tokens
    assert_token_sets(bad, bad.mmacs()[1].index, A=SECOND, B=SECOND)
    with pytest.raises(AssertionError, match=r"A token per K slot: expected \{8-15,24-31,40-47,56-63\} \[8, 9,"
                                             r".*, got \{8-15,24-31,40-47,56-63\} \[24, 25,.*k0: expected 8, got 24"):
        assert_token_sets(bad, bad.mmacs()[1].index, A=[s + 8 for s in slots])


def test_assert_lane_register_contents_at_an_instruction():
    run, _ = small()
    first, second = run.mmacs()
    d0, d1 = first.outputs[0], second.outputs[0]
    assert_lane(run, 0, 0, 5, d0, [32] * 4, at=first.index)           # 32 products of 1 x 1
    assert_lane(run, 0, 0, 5, d0.regs[0], 32, at=first.index)
    assert_lane(run, (0, 0, 0), 0, 63, d1, 32, at=second.index, dtype="i32")
    assert_lane(run, 0, 0, 0, d0.regs[0], 32)                          # at the end of the wave
    assert_lane(run, 0, 0, 5, d0.regs[0], [32, 0, 0, 0], dtype="i8", at=first.index)
    with pytest.raises(AssertionError, match=r"v\[\d+:\d+\] of lane 5, workgroup 0 wave 0, after instruction "
                                             r"\d+ as i32: expected \[31, 31, 31, 31\], got \[32, 32, 32, 32\].*"
                                             r"last written by #\d+ .*v_mmac_i32_16x16x32_i8"):
        assert_lane(run, 0, 0, 5, d0, [31] * 4, at=first.index)
    with pytest.raises(AssertionError, match="before instruction .*: never written"):
        assert_lane(run, 0, 0, 5, d0, 32, at=first.index, when="before")
    with pytest.raises(AssertionError, match="instruction 100000 is not one of"):
        assert_lane(run, 0, 0, 5, d0, 32, at=100000)
    untraced, _ = small(trace=False)
    with pytest.raises(NoTraceError, match="assert_lane needs the trace: launch 'pv' with trace=True"):
        assert_lane(untraced, 0, 0, 5, 0, 32)


def test_readme_unit_test_example_passes(tmp_path):
    """The gfxsim.testing example of docs/your_kernel.md is a real pytest file that passes."""
    import re
    import subprocess
    import sys
    readme = (ROOT / "docs" / "your_kernel.md").read_text()
    code = re.search(r"```python\n(# test_my_pv\.py.*?)```", readme, re.S).group(1)
    (tmp_path / "test_my_pv.py").write_text(code)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "1 passed" in out.stdout, out.stdout + out.stderr


def test_queries_name_what_does_not_exist():
    """An operand, workgroup, wave or lane the run does not have is an error, not an empty answer."""
    run, _ = small()
    m = run.mmacs()[0]
    assert m.token_set("a") == m.token_set("A")
    with pytest.raises(ValueError, match="operand 'Z'"):
        m.token_set("Z")
    with pytest.raises(ValueError, match="wave 5: the launch ran 1 wave"):
        run.replay((0, 0, 0), 5)
    with pytest.raises(ValueError, match=r"workgroup \(3, 0, 0\) is outside the grid"):
        run.replay((3, 0, 0), 0)
    with pytest.raises(ValueError, match="lane 99"):
        run.history((0, 0, 0), 0, 99, 0)
    assert run.replay((0, 0, 0), 0).events


def test_buffers_hold_numbers_with_integer_tags_and_unique_names():
    from gfxsim import Buffer, launch
    with pytest.raises(TypeError, match="tag 'token' must hold integers"):
        Buffer("v", np.zeros(64, np.int8), {"token": np.linspace(0, 63, 64)})
    with pytest.raises(TypeError, match="dtype object"):
        Buffer("v", np.array([object()] * 4))
    a, b = Buffer("v", np.zeros(64, np.float32)), Buffer("v", np.zeros(64, np.float32))
    with pytest.raises(ValueError, match="two different Buffers are named 'v'"):
        launch(lambda w, x, y: None, grid=1, args=(a, b))
    launch(lambda w, x, y: None, grid=1, args=(a, a))          # one buffer passed twice is fine
