"""ds_swizzle_b32: LLVM's swizzle(...) offset macros and the lanes each mode reads (quad-perm,
bit-mask within 32 lanes), an inactive source lane giving 0."""
import numpy as np
import pytest

from gfxsim import Buffer
from gfxsim.asm.operands import AsmSyntaxError, parse_operands, swizzle_offset
from gfxsim.asm.run import kernel_from_text, run_asm


@pytest.mark.parametrize("text, offset", [("swizzle(SWAP,16)", 0x1F | 16 << 10), ("swizzle(REVERSE,8)", 0x1F | 7 << 10),
                                          ("swizzle(BROADCAST,4,1)", 0x1C | 1 << 5),
                                          ("swizzle(QUAD_PERM,3,2,1,0)", 0x8000 | 3 | 2 << 2 | 1 << 4),
                                          ('swizzle(BITMASK_PERM,"01pi0")', 0x06 | 0x08 << 5 | 0x02 << 10)])
def test_macros(text, offset):
    assert swizzle_offset(text) == offset
    assert parse_operands(f"v1, v2 offset:{text}").mods["offset"] == offset


@pytest.mark.parametrize("bad", ["swizzle(SWAP,3)", "swizzle(QUAD_PERM,0,1,2)", "swizzle(NOPE,4)", "swizzle(SWAP,32)"])
def test_bad_macros_are_errors(bad):
    with pytest.raises(AsmSyntaxError, match="swizzle macro"):
        parse_operands(f"v1, v2 offset:{bad}")


def _run(offset_text, active=64):
    k = kernel_from_text(f"""
        s_load_dwordx2 s[4:5], s[0:1], 0x0
        v_lshlrev_b32_e32 v1, 2, v0
        s_waitcnt lgkmcnt(0)
        global_load_dword v2, v1, s[4:5]
        v_mov_b32_e32 v3, -1
        s_waitcnt vmcnt(0)
        v_cmp_gt_u32_e32 vcc, {active}, v0
        s_and_saveexec_b64 s[6:7], vcc
        ds_swizzle_b32 v3, v2 offset:{offset_text}
        s_waitcnt lgkmcnt(0)
        s_or_b64 exec, exec, s[6:7]
        global_store_dword v1, v3, s[4:5]
    """, args=[("x", "global_buffer", 8)])
    b = Buffer("x", np.arange(100, 164, dtype=np.uint32))
    run_asm(k, 1, 64, args={"x": b})
    return b.array.astype(np.int64)


@pytest.mark.parametrize("text, src", [
    ("swizzle(SWAP,16)", lambda l: l ^ 16),
    ("swizzle(REVERSE,4)", lambda l: l ^ 3),
    ("swizzle(BROADCAST,8,5)", lambda l: (l & ~7) | 5),
    ("swizzle(QUAD_PERM,1,0,3,2)", lambda l: l ^ 1),
    ('swizzle(BITMASK_PERM,"0000p")', lambda l: (l & 0x20) | (l & 1)),
])
def test_lanes_read(text, src):
    lane = np.arange(64)
    np.testing.assert_array_equal(_run(text), 100 + src(lane))


def test_an_inactive_source_lane_gives_zero():
    got = _run("swizzle(SWAP,16)", active=40)
    lane = np.arange(64)
    want = np.where(lane >= 40, 0xFFFFFFFF, np.where((lane ^ 16) < 40, 100 + (lane ^ 16), 0))
    np.testing.assert_array_equal(got, want)


def test_routing_a_provenance_of_no_field_gives_none():
    # an SDWA UNUSED_PRESERVE destination concatenates the result's and the old register's bytes;
    # when neither holds a field the concatenation has no arrays, and routing it is no provenance
    from gfxsim.machine.provenance import Prov
    from gfxsim.machine.routing import route_prov
    empty = Prov(1, {})
    assert empty.shape is None
    assert route_prov(empty, np.zeros((4, 64), np.int64), 64) is None
