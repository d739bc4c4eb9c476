"""A K-slot mismatch where one operand's rows disagree among themselves names them, and does not
read as A == B ("gets dim [0..7] from A but [0..7] from B")."""
import numpy as np

from gfxsim import Buffer, launch
from support.pv_tile import MMAC


def test_kslot_mismatch_when_a_rows_disagree_names_them():
    tok = np.arange(64)[None, :] + 8 * (np.arange(16)[:, None] % 2)      # odd rows of A 8 tokens on
    a = Buffer("a", np.ones((16, 64), np.int8), {"token": tok})
    b = Buffer("b", np.ones((16, 64), np.int8), {"token": np.broadcast_to(np.arange(64), (16, 64))})

    def k(w):
        r, c = w.lane_id // 16, w.lane_id % 16
        w.mma(MMAC, w.global_load(a, c * 64 + r * 8, 8, "i8"), w.global_load(b, c * 64 + r * 8, 8, "i8"))
    f = launch(k).findings_of("ab-kslot-mismatch")[0]
    assert f.details["a_values"] == [0, 8] and f.details["b_values"] == [0]
    assert ("K slot 0 must hold one token in every row of A and column of B, but A's 16 rows hold several: "
            "[0, 8], B's 16 columns hold [0]") in f.message
    assert "from A but" not in f.message
