"""Exact byte routing: every byte's identity goes where the byte goes."""
import numpy as np
import pytest

from gfxsim import Buffer, launch

LANES = 64


def token_bytes(n=4):
    """A buffer of n int8 tokens per lane: lane l's byte b is token n*l + b."""
    tok = np.arange(LANES * n).reshape(LANES, n)
    return Buffer("v", (tok % 251).astype(np.int8), tags={"token": tok})


def run(kernel, *args, **kw):
    out = {}
    launch(lambda w: kernel(w, out, *args), trace=False, **kw)
    return out


def byte_tokens(v):
    """Token of every byte of lanes 0 and 1: [lane][byte]."""
    return v.bitcast("i8").tags("token")[:, :2].T.tolist()


def test_four_token_bytes_shifted_masked_permuted_and_repacked():
    buf = token_bytes()

    def k(w, out):
        u = w.global_load(buf, w.lane_id * 4, 4, "i8").bitcast("u32")
        out["u32"] = u.tags("token")[0, :2].tolist()                 # four tokens: no single one
        out["shr8"] = byte_tokens(u >> 8)
        out["shl16"] = byte_tokens(u << 16)
        out["ashr"] = byte_tokens(u.bitcast("i32") >> 24)
        out["mask"] = byte_tokens(u & 0x00FF00FF)
        out["nibble"] = byte_tokens(u >> 4)
        out["perm"] = byte_tokens(w.perm(u, u, 0x00010203))
        out["perm_ab"] = byte_tokens(w.perm(u, u >> 8, 0x0C0D0804))
        b0, b1 = u & 0xFF, (u >> 8) & 0xFF
        out["repack"] = byte_tokens(b1 | (b0 << 8) | (u & 0xFF000000))
        out["xor"] = byte_tokens((u >> 16) ^ (u << 16))
    o = run(k)
    assert o["u32"] == [-1, -1]
    assert o["shr8"] == [[1, 2, 3, -1], [5, 6, 7, -1]]
    assert o["shl16"] == [[-1, -1, 0, 1], [-1, -1, 4, 5]]
    assert o["ashr"] == [[3, 3, 3, 3], [7, 7, 7, 7]]               # sign copies carry the top byte
    assert o["mask"] == [[0, -1, 2, -1], [4, -1, 6, -1]]
    assert o["nibble"] == [[-1, -1, -1, 3], [-1, -1, -1, 7]]        # two bytes mixed: no single token
    assert o["perm"] == [[3, 2, 1, 0], [7, 6, 5, 4]]
    # selector 0x04 -> a's byte 0; 0x08 -> sign of {a,b} byte 1 = b's byte 1 = u's byte 2; 0x0C/0x0D: constants
    assert o["perm_ab"] == [[0, 2, -1, -1], [4, 6, -1, -1]]
    assert o["repack"] == [[1, 0, -1, 3], [5, 4, -1, 7]]
    assert o["xor"] == [[2, 3, 0, 1], [6, 7, 4, 5]]


def test_perm_values_follow_the_v_perm_b32_selector_table():
    def k(w, out):
        a = w.const(0x80402010, "u32")
        b = w.const(0x08040201, "u32")
        out["sel"] = [w.perm(a, b, s).numpy()[0, 0] for s in (0x03020100, 0x07060504, 0x0B0A0908, 0x0D0C0D0C)]
    o = run(k)
    assert [hex(int(x)) for x in o["sel"]] == ["0x8040201", "0x80402010", "0xff000000", "0xff00ff00"]


def test_bitcast_bytes_and_cat_keep_each_bytes_identity():
    buf = token_bytes(16)

    def k(w, out):
        v = w.global_load(buf, w.lane_id * 16, 16, "i8")
        words = v.bitcast("u32")
        hi = words.bytes(8, 8)                                      # v[2:3]
        out["hi"] = byte_tokens(hi)
        out["cat"] = w.cat(words[3], words[0]).bitcast("i8").tags("token")[:, 0].tolist()
        out["sel"] = w.select(w.lane_id < 1, words[1], words[2]).bitcast("i8").tags("token")[:, :2].T.tolist()
    o = run(k)
    assert o["hi"] == [list(range(8, 16)), list(range(24, 32))]
    assert o["cat"] == [12, 13, 14, 15, 0, 1, 2, 3]
    assert o["sel"] == [[4, 5, 6, 7], [24, 25, 26, 27]]


def test_sign_and_zero_extension_keep_the_byte():
    buf = token_bytes(4)

    def k(w, out):
        x = w.global_load(buf, w.lane_id * 4, 4, "i8")
        out["sext"] = x[1].to("i32").tags("token")[0, :2].tolist()
        out["zext"] = (x.bitcast("u32") & 0xFF).tags("token")[0, :2].tolist()
        out["half"] = w.global_load(buf, w.lane_id * 4 + 2, 2, "i16").to("i32").tags("token")[0, :2].tolist()
    o = run(k)
    assert o["sext"] == [1, 5]
    assert o["zext"] == [0, 4]                       # the zero bytes carry nothing: the element is the byte
    assert o["half"] == [-1, -1]                     # two tokens in one half: no single one


@pytest.mark.parametrize("nbytes", [1, 2, 4, 8, 12, 16])
def test_loads_and_stores_of_every_width_route_bytes_through_global_and_lds(nbytes):
    buf = token_bytes(16)
    dst = Buffer.empty("dst", (LANES * 16,), np.int8)

    def k(w, out):
        lds = w.shared("scratch", (LANES * 16,), "i8")
        v = w.global_load(buf, w.lane_id * 16, nbytes, "i8")
        w.lds_store(lds, w.lane_id * 16, v)
        back = w.lds_load(lds, w.lane_id * 16, nbytes, "i8")
        w.global_store(dst, w.lane_id * 16, back)
        out["t"] = w.global_load(dst, w.lane_id * 16, nbytes, "i8").tags("token")[:, :2].T.tolist()
    o = run(k)
    assert o["t"] == [list(range(nbytes)), list(range(16, 16 + nbytes))]


def test_provenance_survives_launches_through_a_buffer():
    buf = token_bytes(4)
    mid = Buffer.empty("mid", (LANES * 4,), np.int8)
    launch(lambda w: w.global_store(mid, w.lane_id * 4, w.global_load(buf, (63 - w.lane_id) * 4, 4, "i8")))
    out = {}
    launch(lambda w: out.setdefault("t", w.global_load(mid, w.lane_id * 4, 4, "i8").tags("token")[:, 0].tolist()))
    assert out["t"] == [252, 253, 254, 255]


def test_bpermute_and_shuffles_move_the_source_lanes_bytes():
    buf = token_bytes(4)

    def k(w, out):
        v = w.global_load(buf, w.lane_id * 4, 4, "i8").bitcast("u32")
        out["perm"] = byte_tokens(w.bpermute(v, (w.lane_id + 1) % 64))
        out["xor"] = byte_tokens(w.shfl_xor(v, 1))
    o = run(k)
    assert o["perm"] == [[4, 5, 6, 7], [8, 9, 10, 11]]
    assert o["xor"] == [[4, 5, 6, 7], [0, 1, 2, 3]]


def test_arithmetic_keeps_agreeing_fields_per_element():
    tok = np.arange(64)
    a = Buffer("a", np.ones(64, np.float32), tags={"token": tok, "row": np.zeros(64, int)})
    b = Buffer("b", np.ones(64, np.float32), tags={"token": tok[::-1].copy(), "row": np.zeros(64, int)})

    def k(w, out):
        x, y = w.global_load(a, w.lane_id * 4), w.global_load(b, w.lane_id * 4)
        s = x + y
        out["token"] = s.tags("token")[0, [0, 31, 63]].tolist()
        out["row"] = s.tags("row")[0, :2].tolist()
        out["same"] = (x * 2.0).tags("token")[0, :2].tolist()
    o = run(k)
    assert o["token"] == [-1, -1, -1]
    assert o["row"] == [0, 0]
    assert o["same"] == [0, 1]
