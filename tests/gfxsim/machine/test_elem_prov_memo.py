"""A value's provenance per element, broadcast (valueprov.elem_prov), is kept on the value while its
provenance is the same object: asked again it answers what a fresh computation gives, and after a
write into the value (x op= y, a partial write under EXEC, a register slice written) it follows
the new provenance, never the kept one."""
import numpy as np

from gfxsim import Buffer, launch
from gfxsim.machine.dtypes import itemsize
from gfxsim.machine.provenance import broadcast_rows
from gfxsim.machine.valueprov import elem_prov

ROWS = np.broadcast_to(np.arange(16)[:, None], (16, 32))
DIMS = np.broadcast_to(np.arange(32), (16, 32))


def _fresh(w, v, n):
    return broadcast_rows(v.prov.per_element(itemsize(v.dtype), w.machine.wide), n)


def _same(a, b):
    if a is None or b is None:
        return a is None and b is None
    if a.g != b.g or a.ids.keys() != b.ids.keys() or a.fp.keys() != b.fp.keys():
        return False
    if not all(np.array_equal(a.ids[f], b.ids[f]) for f in a.ids):
        return False
    if not all(np.array_equal(x, y) for f in a.fp for x, y in zip((a.fp[f].base, a.fp[f].bits, a.fp[f].wide),
                                                                  (b.fp[f].base, b.fp[f].bits, b.fp[f].wide))):
        return False
    return (a.flags is None) == (b.flags is None) and (a.flags is None or np.array_equal(a.flags, b.flags))


def test_a_kept_answer_is_a_fresh_one_and_follows_writes():
    rng = np.random.default_rng(0)
    q = Buffer("q", rng.standard_normal((16, 32)).astype(np.float32), {"row": ROWS, "dim": DIMS})
    checked = []

    def check(w, v, n):
        for _ in range(2):                       # the first answer made, the second kept
            got = elem_prov(w, v, n)
            assert _same(got, _fresh(w, v, n))
            checked.append((v.n, n))

    def k(w):
        g, c = w.lane_id // 16, w.lane_id % 16
        x = w.cat(*[w.global_load(q, c * 128 + g * 32 + h, 16, "f32") for h in (0, 16)])    # 8 elements
        a = abs(x[0])
        for e in range(1, 4):
            a = w.max(a, abs(x[e]))             # one element: a footprint over dims
        s = w.group_scale(a * np.float32(1 / 127))
        for n in (1, 4, 8):
            check(w, s, n)
        y = x * s                                # s broadcast to 8, asked by the merge and the checks
        check(w, s, 8)
        check(w, y, 8)
        s += x[5]                                # written into: a new provenance
        check(w, s, 8)
        with w.if_(w.lane_id < 20):              # a partial write under EXEC
            s += x[6]
        check(w, s, 4)
        y[2:4] = x[0:2] * 2.0                    # a slice of y written
        check(w, y, 8)
        b = x.to("bf16")                         # 2-byte elements: rows per element
        check(w, b, 8)
        check(w, b[0:1], 8)
    launch(k, arch="gfx942")
    assert len(checked) == 2 * 10
