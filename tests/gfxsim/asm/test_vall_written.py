"""WaveState.vall_written (asked before every lean store, LDS write and matrix operand) is its
definition: every byte of the registers written in every active lane, whether one byte is missing
in an active lane, in an inactive one, or none is, under a full and a partial EXEC."""
from __future__ import annotations

import numpy as np
import pytest
from support.asm_sandbox import Sandbox


def _want(st, f, first, n) -> bool:
    wr = st.regfile(f).written[4 * first:4 * (first + n)]
    return bool(wr[:, st.exec].all())


@pytest.mark.parametrize("seed", range(6))
def test_vall_written_is_every_active_byte(seed):
    rng = np.random.default_rng(seed)
    sb = Sandbox()
    st = sb.st
    for f in "va":
        st.regfile(f).written[:4 * 12] = True
    if seed % 2:
        sb.set_exec(rng.random(64) < 0.6)
    for f in "va":
        for first, n in ((1, 1), (2, 2), (4, 4), (8, 4)):
            rf = st.regfile(f)
            assert st.vall_written(f, first, n) is True
            byte, lane = 4 * first + int(rng.integers(0, 4 * n)), int(rng.integers(0, 64))
            rf.written[byte, lane] = False                      # one byte of one lane never written
            assert st.vall_written(f, first, n) is _want(st, f, first, n)
            off = np.nonzero(~st.exec)[0]
            if off.size:                                        # an inactive lane's: not read
                rf.written[byte, lane] = True
                rf.written[byte, int(off[0])] = False
                assert st.vall_written(f, first, n) is True
                rf.written[byte, int(off[0])] = True
            rf.written[4 * first:4 * (first + n)] = True
        assert st.vall_written(f, 12, 2) is False               # never written at all
