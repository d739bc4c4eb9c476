"""A compiled int8 QK^T over two output tiles whose accumulator is zeroed once instead of once per
tile (tests/defective/carried_acc.hip -DCARRIED): tile 1's first v_mfma adds tile 0's scores, an
accumulator-carried finding naming the element and both tokens; zeroed per tile it reports nothing
and computes Q.K^T exactly."""
import numpy as np
import pytest
from support import DEFECTIVE, need_toolchain

import gfxsim.hip as hip

TAGS = {"q": {0: "row", 1: "dim"}, "k": {0: "token", 1: "dim"}}


@pytest.fixture
def toolchain(tmp_path, monkeypatch):
    need_toolchain("gfx942")
    monkeypatch.setenv("GFXSIM_CACHE_DIR", str(tmp_path / "cache"))


def run(*defines):
    rng = np.random.default_rng(0)
    q = rng.integers(-5, 5, (16, 64)).astype(np.int8)
    k = rng.integers(-5, 5, (32, 64)).astype(np.int8)
    res, r, _ = hip.run(str(DEFECTIVE / "carried_acc.hip"), "qk_tiles", 1, 64, tags=TAGS, defines=list(defines),
                        arch="gfx942", q=q, k=k, out=np.zeros(512, np.int32))
    ref = np.stack([q.astype(np.int32) @ k[16 * t:16 * t + 16].astype(np.int32).T for t in range(2)])
    return res["out"].reshape(2, 16, 16), ref, r


def test_an_accumulator_zeroed_per_tile_is_silent(toolchain):
    out, ref, r = run()
    np.testing.assert_array_equal(out, ref)
    assert r.findings == [] and len(r.mmacs()) == 4


def test_an_accumulator_zeroed_once_is_carried_into_the_next_tile(toolchain):
    out, ref, r = run("CARRIED")
    np.testing.assert_array_equal(out[1], ref[1] + ref[0])        # tile 1 starts from tile 0's sums
    assert [f.kind for f in r.findings] == ["accumulator-carried"], r.findings
    f = r.findings[0]
    d = f.details
    third = r.mmacs()[2]                                          # tile 1's first k-step
    assert f.instruction == third.index and (d["field"], d["c_value"], d["d_value"]) == ("token", 0, 16)
    assert d["element"] == [0, 0] and d["elements"] == 256
    assert d["c_instruction"] == r.mmacs()[1].index               # C: tile 0's last k-step
    assert "carried_acc.hip:" in f.source and "holds token 0" in f.message
    # instructions named by trace index and label: the .s line and the source line
    assert f"#{third.index} (line {third.label.split()[1]} <- carried_acc.hip:" in f.message
    assert third.label.startswith("line ") and "<- carried_acc.hip:" in third.label
