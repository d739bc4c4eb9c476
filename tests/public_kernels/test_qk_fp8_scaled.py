"""A defective/fixed pair of our own for fp8 Q quantization (qk_fp8_scaled.hip): the fixed kernel
undoes its scale on the logits, the defective one applies it twice, which multiplies every logit
by (q_max/224)^2 — the shape of the scaling in vLLM's opt-in fp8-MFMA paged attention. Both are
compared with a numpy model of their own arithmetic and with the float64 logits."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from gfxsim.asm import parse_file
from gfxsim.asm.run import run_asm
from gfxsim.hip.build import compile_flags
from gfxsim.hip.toolchain import get_target
from gfxsim.machine.memory import Buffer
from public_kernels.paged_cases import e4m3fnuz_round, e4m3fnuz_value
from support import ROOT, need_toolchain

SCALE, K_SCALE = 0.125, 0.5


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    tc = need_toolchain("gfx942")
    out = tmp_path_factory.mktemp("qk8") / "qk_fp8_scaled.s"
    subprocess.run([str(tc.clang), *compile_flags(get_target("gfx942")), f"-I{ROOT / 'kernels_hip'}", "-S",
                    str(ROOT / "tests" / "public_kernels" / "qk_fp8_scaled.hip"), "-o", str(out)],
                   check=True, capture_output=True)
    k = parse_file(out).kernel("qk_fp8_scaled")
    missing = k.program.unsupported()
    if missing:      # fp8 conversion semantics are another part's; the pair waits for them
        pytest.skip(f"the asm front end cannot run yet: {sorted({m.split(': ')[1] for m in missing})}")
    return k


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((16, 32)).astype(np.float32)
    codes = np.array([c for c in range(256) if c != 0x80], np.uint8)
    kb = rng.choice(codes[np.abs(e4m3fnuz_value(codes)) <= 4], (16, 32)).astype(np.uint8)
    return q, kb


def model(q, kb, fixed):
    m = np.float32(np.abs(q).max())
    s = m / np.float32(224) if fixed else np.float32(224) / m
    q8 = e4m3fnuz_round((q / s).astype(np.float32))
    acc = (e4m3fnuz_value(kb) @ q8.T).astype(np.float32)          # [token][head]
    back = s if fixed else np.float32(1) / s
    return acc * np.float32(SCALE) * np.float32(K_SCALE) * back


@pytest.mark.parametrize("fixed", [1, 0])
def test_fp8_q_scale_is_undone_in_the_fixed_kernel_and_squared_in_the_defective_one(kernel, fixed):
    q, kb = inputs()
    out = Buffer("logits", np.zeros((16, 16), np.float32))
    run_asm(kernel, grid=1, block=64, args=dict(q=Buffer("q", q), k=Buffer("k", kb.view(np.int64)), logits=out,
                                               scale=np.float32(SCALE), k_scale=np.float32(K_SCALE), fixed=fixed))
    np.testing.assert_allclose(out.array, model(q, kb, fixed), rtol=1e-5, atol=1e-7)
    true = e4m3fnuz_value(kb) @ q.astype(np.float64).T * SCALE * K_SCALE
    ratio = np.median(out.array / true)
    if fixed:
        assert ratio == pytest.approx(1.0, abs=0.05)
    else:
        assert ratio == pytest.approx((np.abs(q).max() / 224) ** 2, rel=0.2)
