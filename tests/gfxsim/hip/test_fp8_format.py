"""A compiled fp8 QK^T tile (sources/qk_fp8.hip: Q quantized in the kernel by v_cvt_pk_fp8_f32, K's
fp8 bytes from the host) on gfx942, whose v_mfma_f32_16x16x32_fp8_fp8 reads e4m3fnuz: K written by
a host library in OCP e4m3fn is a format-mismatch naming the buffer, both encodings and the
element, and every logit is half what the host meant; the same values encoded in e4m3fnuz, or
bytes that declare nothing, are silent."""
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from support import hip_folder

import gfxsim.hip as hip
from gfxsim import Buffer

from test_qk_fp8_scale import K_SCALE, model

SOURCES = Path(__file__).parent / "sources"
TAGS = {"q": {0: "head", 1: "dim"}, "k8": {0: "token", 1: "dim"}}


@pytest.fixture
def folder(tmp_path, monkeypatch):
    return hip_folder(tmp_path, monkeypatch, SOURCES / "qk_fp8.hip")


def run(q, k8):
    res, r, _ = hip.run("qk_fp8.hip", "qk_fp8", 1, 64, tags=TAGS, k8=k8, q=q, k_scale=float(K_SCALE),
                        out=np.zeros(256, np.float32))
    return res["out"].reshape(16, 16), r


def keys(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((16, 32)).astype(np.float32)


def test_e4m3fn_keys_read_by_gfx942s_fp8_mfma_are_a_format_mismatch(folder):
    q, k = keys()
    fn = k.astype(ml_dtypes.float8_e4m3fn)
    out, r = run(q, Buffer("k8", fn.view(np.uint8), encoding="e4m3fn"))
    (f,) = r.findings
    assert f.kind == "format-mismatch" and f.details["operand"] == "A"       # clang puts K in A
    assert (f.details["written"], f.details["reads"], f.details["written_by"]) == ("e4m3fn", "e4m3fnuz", "buffer 'k8'")
    assert f.details["element"] == 0 and f.details["elements"] == 16 * 32
    assert f.source and "v_mfma_f32_16x16x32_fp8_fp8" in f.message
    # bias 7 read with bias 8: every key, so every logit, is half what the host meant
    halved = (fn.astype(np.float32) / 2).astype(ml_dtypes.float8_e4m3fnuz)
    np.testing.assert_allclose(out, model(q, halved, False), rtol=1e-6, atol=1e-6)
    meant = model(q, fn.astype(np.float32).astype(ml_dtypes.float8_e4m3fnuz), False)
    assert np.median(out / meant) == pytest.approx(0.5, rel=0.02)


def test_the_same_keys_encoded_e4m3fnuz_are_silent(folder):
    q, k = keys()
    fnuz = k.astype(ml_dtypes.float8_e4m3fnuz)
    out, r = run(q, Buffer("k8", fnuz.view(np.uint8), encoding="e4m3fnuz"))
    assert r.findings == []            # and Q's bytes, written by v_cvt_pk_fp8_f32, are gfx942's fnuz
    np.testing.assert_allclose(out, model(q, fnuz, False), rtol=1e-6, atol=1e-6)


def test_bytes_that_declare_nothing_are_not_checked(folder):
    q, k = keys()
    out, r = run(q, k.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))
    assert r.findings == []


def test_gfxsim_hip_run_declares_an_encoding(folder, capsys):
    import json
    from gfxsim.cli import main
    q, k = keys()
    np.save("q.npy", q)
    np.save("k8.npy", k.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))
    np.save("out.npy", np.zeros(256, np.float32))
    argv = ["hip", "run", "qk_fp8.hip", "--kernel", "qk_fp8", "--grid", "1", "--block", "64", "--arg", "q=q.npy",
            "--arg", "k8=k8.npy", "--arg", f"k_scale={float(K_SCALE)}", "--arg", "out=out.npy", "--report", "json"]
    assert main([*argv, "--encoding", "k8=e4m3fn"]) == 0
    (f,) = json.loads(capsys.readouterr().out)["findings"]
    assert f["kind"] == "format-mismatch" and f["details"]["written"] == "e4m3fn"
    assert main(argv) == 0 and json.loads(capsys.readouterr().out)["findings"] == []
    assert main([*argv, "--encoding", "k8=e4m3"]) == 2
    assert "unknown encoding 'e4m3'" in capsys.readouterr().err
    assert main([*argv, "--encoding", "k_scale=e4m3fn"]) == 2
    assert "k_scale is not a buffer argument" in capsys.readouterr().err
