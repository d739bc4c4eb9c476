"""A K-slot mismatch where one operand's rows disagree among themselves names them, and does not
read as A == B ("gets dim [0..7] from A but [0..7] from B"). Findings name instructions as the
trace does — index and label — never by the internal id of a sum of results."""
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


def test_a_scale_on_a_sum_of_results_names_the_instructions_summed():
    """Two k-steps summed in int32 (two-level accumulation), then one per-lane scale over 4 tokens:
    the finding names both instructions by index and label and the add, and its coordinates are
    trace indices."""
    tok = np.broadcast_to(np.arange(64), (16, 64))
    v = Buffer("v", np.ones((16, 64), np.int8), {"token": tok})
    p = Buffer("p", np.ones((16, 64), np.float32), {"token": tok})

    def two_level(w):
        r, c = w.lane_id // 16, w.lane_id % 16
        acc = [w.mma(MMAC, w.const(1, "i8", 8), w.global_load(v, c * 64 + r * 16 + 8 * j, 8, "i8"),
                     label=f"tile 0 j {j}") for j in range(2)]
        total = acc[0] + acc[1]
        scale = w.group_scale(w.reduce(abs(w.global_load(p, c * 256 + r * 64, 4, "f32")), "max"))
        w.dequant(total.to("f32"), scale)
    run = launch(two_level)
    f = run.findings_of("scale-group-mismatch")[0]
    first, second = (m.index for m in run.mmacs())
    assert f"#{first} (tile 0 j 0) + #{second} (tile 0 j 1) (summed at #" in f.message
    assert "#2684" not in f.message and f.instruction < 1000 and f.details["mma_event"] == f.instruction
    assert f.instruction > second                       # the add that made the sum
