"""Wave.scalar_load_dwords (an s_load_dwordx* at once) gives what as many one-dword scalar loads
give: the words, the events, the findings of never-written bytes and the fault past the end."""
import numpy as np
import pytest
from support.asm_sandbox import Sandbox

from gfxsim import Buffer


def _load(offset, n, together, written):
    sb = Sandbox()
    buf = Buffer("b", np.arange(64, dtype=np.uint32) * 0x01010101)
    if written is not None:
        buf.written = np.zeros(buf.nbytes, bool)
        buf.written[written] = True
    w, tr = sb.w, sb.m.trace
    before = tr.n_events
    try:
        got = (w.scalar_load_dwords(buf, offset, n) if together else
               [w.scalar_load(buf, offset + 4 * k, "u32", identities_marked=True) for k in range(n)])
    except Exception as e:                      # noqa: BLE001 - compared below
        got = (type(e).__name__, str(e).split(" in sandbox at ")[0])     # not the line of this file that called
    return got, tr.n_events - before, w.steps, [(f.kind, f.message, f.address) for f in sb.m.findings]


@pytest.mark.parametrize("offset,n,written", [(0, 8, None), (16, 4, None), (240, 4, None), (248, 4, None),
                                               (4, 2, slice(0, 256)), (32, 8, slice(0, 40)),
                                               (32, 8, slice(44, 64)), (252, 2, slice(0, 256))])
def test_dwords_together_are_dwords_one_at_a_time(offset, n, written):
    assert _load(offset, n, True, written) == _load(offset, n, False, written)
    if offset + 4 * n <= 256 and written is None:
        assert _load(offset, n, True, written)[0] == [k * 0x01010101 for k in range(offset // 4, offset // 4 + n)]
