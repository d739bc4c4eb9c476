"""Coverage without scopes: what every stored value consumed, output declarations
(``Buffer.expect``) checked per launch and across a chain of launches, and double counting at an
add — on small kernels, and on two defective user kernels run by ``gfxsim run --kernel-fn``."""
import json

import numpy as np
import pytest

from gfxsim import Buffer, launch
from gfxsim.cli import main
from support import DEFECTIVE

MMAC = "v_mmac_i32_16x16x32_i8"          # gfx936: B[k][n] at lane n + 16*(k/8), byte k%8
# B loaded from v[c][16r + 8j + b] holds token 32j + 8r + b: instruction j consumes tokens 32j..32j+31
_x = np.arange(64)
TOK = np.broadcast_to(32 * ((_x % 16) // 8) + 8 * (_x // 16) + _x % 8, (16, 64))


def v_buffer():
    return Buffer("v", np.ones((16, 64), np.int8), {"token": TOK})


def tile(w, v, j):
    """The matrix result of k-step j (tokens 32j..32j+31 when loaded right), as f32."""
    r, c = w.lane_id // 16, w.lane_id % 16
    return w.mma(MMAC, w.const(1, "i8", 8), w.global_load(v, c * 64 + r * 16 + 8 * j, 8, "i8")).to("f32")


def store_tile(w, out, o, base=0):
    """o (4 f32 in the gfx936 D layout) to out[base + m][n] of a [.., 16, 16] buffer."""
    lane = w.lane_id
    for i in range(4):
        w.global_store(out, (base + (lane % 16) * 16 + lane // 16 + 4 * i) * 4, o[i])


def accumulate(steps, extra=()):
    v = v_buffer()
    out = Buffer.empty("out", (16, 16), np.float32).expect("token", 0, 64)

    def acc_kernel(w):
        o = w.zeros("f32", 4)
        for j in steps:
            o += tile(w, v, j)
        for j in extra:
            o += tile(w, v, j)
        store_tile(w, out, o)
    return launch(acc_kernel, arch="gfx936")


def test_a_correct_accumulation_reports_nothing():
    assert not accumulate([0, 1]).findings


def test_a_missing_k_step_names_the_tokens_never_consumed_and_the_elements():
    run = accumulate([0])
    (f,) = run.findings_of("token-coverage")
    assert f.details["never"] == list(range(32, 64)) and f.details["multiple"] == {}
    assert f.details["buffer"] == "out" and f.details["element_count"] == 256
    assert f.details["where"] == "out[0-15, 0-15]" and f.details["elements"][:2] == [[0, 0], [0, 1]]
    assert f.source.startswith("test_consumed.py")


def test_a_reloaded_k_step_is_a_double_count_at_the_add_and_in_the_output():
    run = accumulate([0, 0])
    (dc,) = run.findings_of("double-count")
    assert dc.details["values"] == list(range(32)) and dc.details["field"] == "token"
    mm = [r.first for r in run.machine.mma_log.records]
    assert (dc.details["left_instruction"], dc.details["right_instruction"]) == (mm[0], mm[1])
    assert f"#{mm[0]} v_mmac" in dc.details["left"] and f"#{mm[1]} v_mmac" in dc.details["right"]
    (cov,) = run.findings_of("token-coverage")
    assert cov.details["never"] == list(range(32, 64))
    assert cov.details["multiple"] == {t: 2 for t in range(32)}


def test_a_partial_sum_added_twice_counts_three_times():
    run = accumulate([0, 1], extra=[1])
    dc = run.findings_of("double-count")
    assert len(dc) == 1 and dc[0].details["values"] == list(range(32, 64))
    first, second, _ = (m.index for m in run.mmacs())
    assert f"the sum of #{first} + #{second} made at #" in dc[0].details["left"]     # (acc0 + acc1) + acc1
    (cov,) = run.findings_of("token-coverage")
    assert cov.details["multiple"] == {t: 2 for t in range(32, 64)} and not cov.details["never"]


def test_the_same_value_added_to_itself_is_a_double_count():
    v = v_buffer()

    def twice(w):
        x = tile(w, v, 0)
        x + x
    (dc,) = launch(twice, arch="gfx936").findings_of("double-count")
    assert dc.details["left"] == dc.details["right"] and "the same value twice" in dc.message


def test_fma_accumulation_is_checked_like_an_add():
    v = v_buffer()

    def fma_twice(w):
        a = tile(w, v, 0)
        w.fma(tile(w, v, 0), 2.0, a)          # c + a*b: the same tokens again
    assert launch(fma_twice, arch="gfx936").findings_of("double-count")


def test_a_sum_across_elements_is_a_reduction_not_a_double_count():
    """D[m][0] + D[m][4] of one instruction consumed the same tokens for two different columns
    (a row sum over N): not a double count; and a value divided by such a sum keeps its name."""
    v = v_buffer()
    out = Buffer.empty("out", (16, 16), np.float32).expect("token", 0, 64)

    def normalised(w):
        o = tile(w, v, 0) + tile(w, v, 1)
        row = o[0] + o[1]                     # registers 0 and 1: columns n and n + 4
        store_tile(w, out, o / w.cat(*[row] * 4))
    run = launch(normalised, arch="gfx936")
    assert not run.findings, run.findings


def _tiles_summed(tokens_of_second):
    """S of 16 rows x two 16-token tiles (QK: the dims are the K range), the tiles added (a sum
    over tokens). The second tile's tokens: ``tokens_of_second`` (-1: an unused cache block, no
    token tag; its dims are tagged as every block's are)."""
    rng = np.random.default_rng(0)
    q = Buffer("q", rng.integers(-5, 5, (16, 32)).astype(np.int8),
               {"row": np.broadcast_to(np.arange(16)[:, None], (16, 32)), "dim": np.broadcast_to(np.arange(32), (16, 32))})
    tok = np.concatenate([np.arange(16), tokens_of_second])[:, None] + np.zeros((1, 32), np.int64)
    k = Buffer("k", rng.integers(-5, 5, (32, 32)).astype(np.int8),
               {"token": tok, "dim": np.broadcast_to(np.arange(32), (32, 32))})

    def tiles_summed(w):
        r, c = w.lane_id // 16, w.lane_id % 16
        qa = w.global_load(q, c * 32 + 8 * r, 8, "i8")
        s = [w.mma(MMAC, qa, w.global_load(k, (16 * t + c) * 32 + 8 * r, 8, "i8")) for t in range(2)]
        s[0] + s[1]
    return launch(tiles_summed, arch="gfx936")


@pytest.mark.parametrize("second", ["tokens 16-31", "an unused block"])
def test_a_tile_of_an_untagged_block_is_not_the_same_element(second):
    """Both tiles consumed dims 0-31; they are different tokens' scores, so their sum is a
    reduction, whether the second tile's tokens are tagged or come from a block no sequence uses
    (no token tag): an element without a tag is not shown to be the other's."""
    run = _tiles_summed(np.arange(16, 32) if second == "tokens 16-31" else np.full(16, -1))
    assert not run.findings, [f.message for f in run.findings]


def test_provenance_off_skips_the_checks_and_says_so():
    v = v_buffer()
    out = Buffer.empty("out", (16, 16), np.float32).expect("token", 0, 64)

    def k(w):
        store_tile(w, out, tile(w, v, 0) + tile(w, v, 0))
    run = launch(k, arch="gfx936", provenance=False)
    assert not run.findings
    assert {"token-coverage", "double-count"} <= set(run.checks_not_run)


def test_an_element_never_written_consumed_nothing():
    v = v_buffer()
    out = Buffer.empty("out", (32, 16), np.float32).expect("token", 0, 64)

    def half(w):
        store_tile(w, out, tile(w, v, 0) + tile(w, v, 1))          # rows 16-31 never stored
    (f,) = launch(half, arch="gfx936").findings_of("token-coverage")
    assert f.details["where"] == "out[16-31, 0-15]" and f.details["never"] == list(range(64))
    assert "never written" in f.message


def test_expect_checks_its_arguments():
    b = Buffer.empty("o", (4, 8), np.float32)
    with pytest.raises(ValueError, match="'o'.*do not broadcast"):
        b.expect("token", np.zeros(3), 5)
    with pytest.raises(ValueError, match="reserved"):
        b.expect("@mma", 0, 1)
    assert b.expect("token", 0, np.arange(4)[:, None], exact=False) is b


# -- a chain: partial sums stored by one launch, combined by the next -------------------------------
def chain(step_of_partition):
    v = v_buffer()
    tmp = Buffer.empty("tmp", (2, 16, 16), np.float32, tags={"part": np.arange(2)[:, None, None]})
    tmp.expect("token", 32 * np.arange(2)[:, None, None], 32 * np.arange(1, 3)[:, None, None])
    out = Buffer.empty("out", (16, 16), np.float32).expect("token", 0, 64)

    def partials(w):
        p = w.workgroup_id[0]
        store_tile(w, tmp, tile(w, v, step_of_partition[p]), base=256 * p)

    def combine(w):
        lane = w.lane_id
        o = None
        for p in range(2):
            part = w.cat(*[w.global_load(tmp, (256 * p + (lane % 16) * 16 + lane // 16 + 4 * i) * 4, 4, "f32")
                           for i in range(4)])
            o = part if o is None else o + part
        store_tile(w, out, o)
    return launch(partials, grid=(2,), arch="gfx936"), launch(combine, arch="gfx936")


def test_a_correct_chain_reports_nothing():
    r1, r2 = chain([0, 1])
    assert not r1.findings and not r2.findings


def test_a_chain_names_the_wrong_partition_in_both_launches():
    r1, r2 = chain([0, 0])                   # partition 1 re-reads partition 0's tokens
    (f1,) = r1.findings_of("token-coverage")
    assert f1.details["where"] == "tmp[1, 0-15, 0-15] (part 1)"
    assert f1.details["never"] == list(range(32, 64)) and f1.details["unexpected"] == list(range(32))
    (dc,) = r2.findings_of("double-count")
    assert "launch partials" in dc.details["left"] and "workgroup (0, 0, 0)" in dc.details["left"]
    assert "workgroup (1, 0, 0)" in dc.details["right"]
    (f2,) = r2.findings_of("token-coverage")
    assert f2.details["launches"] == ["partials", "combine"]
    assert f2.details["never"] == list(range(32, 64)) and f2.details["multiple"] == {t: 2 for t in range(32)}


# -- the defective user kernels, through `gfxsim run --kernel-fn` ------------------------------------
def run_json(capsys, *argv):
    assert main(["run", *argv, "--report", "json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


def _by_kind(report):
    got = {}
    for f in report["findings"]:
        got.setdefault(f["kind"], []).append(f)
    return got


DECODE = ["paged_attention_decode", "--context", "1024", "--partition-size", "512"]


def test_wrong_partition_size_is_named_by_elements_and_tokens(capsys):
    bad = _by_kind(run_json(capsys, *DECODE, "--kernel-fn",
                            f"{DEFECTIVE / 'wrong_partition.py'}:paged_attention_decode"))
    assert set(bad) == {"token-coverage", "double-count"}
    tmp, out = sorted(bad["token-coverage"], key=lambda f: f["details"]["buffer"] != "tmp_out")
    # decode: partition 1 of every head read tokens 256-767 instead of 512-1023
    assert tmp["details"]["where"] == "tmp_out[0, 0-7, 1, 0-127] (dim 0-127, head 0-7)"
    assert tmp["details"]["never"] == list(range(768, 1024))
    assert tmp["details"]["unexpected"] == list(range(256, 512))
    # the chain decode -> reduce: tokens 256-511 twice, 768-1023 never, in every output element
    assert out["details"]["where"] == "out[0, 0-7, 0-127] (dim 0-127, head 0-7)"
    assert out["details"]["launches"] == ["paged_attention_decode", "paged_attention_reduce"]
    assert out["details"]["never"] == list(range(768, 1024))
    assert out["details"]["multiple"] == {str(t): 2 for t in range(256, 512)}
    (dc,) = bad["double-count"]
    assert dc["details"]["values"] == list(range(256, 512)) and dc["source"].startswith("paged_attention_decode.py")
    assert "workgroup (0, 0, 0)" in dc["details"]["left"] and "workgroup (0, 1, 0)" in dc["details"]["right"]
    good = run_json(capsys, *DECODE)
    assert good["findings"] == []


def test_a_partial_sum_added_twice_is_named(capsys):
    bad = _by_kind(run_json(capsys, "pv_int8", "--context", "512", "--kernel-fn",
                            f"{DEFECTIVE / 'double_add.py'}:pv_int8"))
    assert set(bad) == {"token-coverage", "double-count"}
    wave0 = list(range(0, 64)) + list(range(256, 320))       # wave 0 holds chunks 0 and 4
    (dc,) = bad["double-count"]
    assert dc["details"]["values"] == wave0 and dc["wave"] == 0
    assert dc["details"]["left"] == dc["details"]["right"]   # the same partial, loaded twice
    (cov,) = bad["token-coverage"]
    assert cov["details"]["where"] == "out[0-15, 0-127] (dim 0-127, row 0-15)" and cov["details"]["never"] == []
    assert cov["details"]["multiple"] == {str(t): 2 for t in wave0}
    assert run_json(capsys, "pv_int8", "--context", "512")["findings"] == []


def test_a_row_max_is_no_partial_of_the_element_it_came_from():
    """m = max(S, -inf) of one valid token, then exp(-inf - m) for the tiles past the context:
    those zeros must not pass for partials of m's element (adding them is no double count)."""
    v = v_buffer()

    def row_max(w):
        s = tile(w, v, 0)
        m = w.max(s, -np.inf)
        past = [w.exp(w.const(-np.inf, "f32", 4) - m) for _ in range(2)]
        w.exp(s - m) + past[0]
        past[0] + past[1]
    assert not launch(row_max, arch="gfx936").findings


def test_a_register_rewritten_in_place_is_not_taken_for_the_remembered_operand():
    """Matrix operands are remembered by content (matrix.OPERAND_MEMO): the same B twice is one
    gather, and B rewritten in place with other tokens is gathered anew."""
    v = v_buffer()

    def kernel(w):
        a = w.const(1, "i8", 8)
        b = w.global_load(v, w.lane_id % 16 * 64 + w.lane_id // 16 * 16, 8, "i8")
        w.mma(MMAC, a, b)
        w.mma(MMAC, a, b)
        b[:] = w.global_load(v, w.lane_id % 16 * 64 + w.lane_id // 16 * 16 + 8, 8, "i8")
        w.mma(MMAC, a, b)
    run = launch(kernel, arch="gfx936")
    got = [sorted(set(m.tokens("B").ravel().tolist()) - {-1}) for m in run.mmacs()]
    assert got == [list(range(32)), list(range(32)), list(range(32, 64))]


def test_row_stats_of_wide_sets_shared_by_rows_are_each_rows_own():
    """_row_stats per distinct wide set (rows of a context-wide sum share one) equals each row's."""
    from gfxsim.machine.consumed import _row_stats
    from gfxsim.machine.provenance import WINDOW, Mask, WideSets
    wide = WideSets()
    sets = [wide.intern(range(5, 3 * WINDOW)), wide.intern([1, 2 * WINDOW + 7]), wide.intern(range(WINDOW, 2 * WINDOW + 1))]
    pick = [0, 1, 0, 2, 0, 1]
    m = Mask.concat([Mask.empty((len(pick),)), Mask.of_values(np.array([3, -1]))])
    m.wide[:len(pick)] = [sets[i] for i in pick]
    first, last, count = _row_stats(m, wide)
    for r, i in enumerate(pick):
        vals = wide.values(sets[i])
        assert (first[r], last[r], count[r]) == (min(vals), max(vals), len(vals))
    assert (first[-2], last[-2], count[-2]) == (3, 3, 1) and count[-1] == 0 and first[-1] == -1


def test_row_stats_word_by_word_equal_each_sets_values():
    """_row_stats (bit counts, lowest and highest set bits of the words) against the values of each
    row's set bit by bit: random words, single bits at every position (0, 63 of each word), full and
    empty words in every place, empty rows and an empty-base row."""
    from gfxsim.machine.consumed import _row_stats
    from gfxsim.machine.provenance import WORDS, Mask
    rng = np.random.default_rng(7)
    n_rand, singles = 300, 64 * WORDS
    words = [rng.integers(0, 2 ** 63, (n_rand, WORDS), dtype=np.uint64) * np.uint64(2)
             | rng.integers(0, 2, (n_rand, WORDS), dtype=np.uint64)]
    words[0][rng.random((n_rand, WORDS)) < 0.4] = 0                 # zero words between set ones
    one = np.zeros((singles, WORDS), np.uint64)
    one[np.arange(singles), np.arange(singles) // 64] = np.uint64(1) << (np.arange(singles) % 64).astype(np.uint64)
    words.append(one)
    full = np.zeros((2 ** WORDS, WORDS), np.uint64)
    for r in range(2 ** WORDS):
        for w in range(WORDS):
            if r >> w & 1:
                full[r, w] = np.uint64(2 ** 64 - 1)
    words.append(full)                                              # row 0: no bit set
    bits = np.concatenate(words)
    n = len(bits)
    base = rng.integers(0, 50, n) * 256
    base[5] = -1                                                    # an empty window (its count is 0)
    m = Mask(base, bits, np.zeros(n, np.uint32))
    first, last, count = _row_stats(m, None)
    for r in range(n):
        vals = [int(base[r]) + 64 * w + b for w in range(WORDS) for b in range(64) if int(bits[r, w]) >> b & 1]
        if base[r] < 0:
            assert count[r] == 0
            continue
        want = (min(vals), max(vals), len(vals)) if vals else (-1, -1, 0)
        assert (first[r], last[r], count[r]) == want, r


def test_stacked_footprints_hold_an_empty_row_only_for_positions_no_group_covers():
    """_stack: the groups' tables side by side; the empty last row exists only where some position
    is in no group (an unused row made a 16K decode's tmp_out table one over a row per 4
    elements, and its coverage check took the per-element path)."""
    from gfxsim.machine.consumed import Fp, _stack
    from gfxsim.machine.provenance import Mask
    a = Fp(Mask.of_values(np.array([3, 7])), np.array([0, 0, 1, 1]))
    b = Fp(Mask.of_values(np.array([9, 11, 12])))
    whole = _stack([(np.array([0, 1, 2, 3]), a), (np.array([4, 5, 6]), b)], 7)
    assert len(whole.table.base) == 5 and whole.index.tolist() == [0, 0, 1, 1, 2, 3, 4]
    some = _stack([(np.array([0, 2, 4, 6]), a)], 8)
    assert len(some.table.base) == 3 and some.index.tolist() == [0, 2, 0, 2, 1, 2, 1, 2]
    assert some.nonempty().tolist() == [True, False, True, False, True, False, True, False]
    for fp, want in ((whole, [[3], [3], [7], [7], [9], [11], [12]]), (some, [[3], [], [3], [], [7], [], [7], []])):
        assert [sorted(fp.values_at(i, None)) for i in range(len(want))] == want


@pytest.mark.parametrize("big", [False, True])
def test_distinct_triples_is_the_unique_over_rows(big):
    """distinct_triples (one int64 key each, or row-wise where a value is negative or the spans
    overflow) names each position's triple, every distinct triple once, as np.unique over rows does."""
    from gfxsim.machine.consumed import distinct_triples
    rng = np.random.default_rng(3)
    x, y, z = (rng.integers(0, 5, 4000) for _ in range(3))
    z = z + rng.integers(0, 3, 4000) * 1000
    if big:
        x[7], y[9] = 1 << 40, -2
    keys, inv = distinct_triples(x, y, z)
    rows = np.stack([x, y, z], axis=1)
    want = np.unique(rows, axis=0)
    assert sorted(keys) == [tuple(r) for r in want.tolist()]
    assert [keys[i] for i in inv.tolist()] == [tuple(r) for r in rows.tolist()]
    assert distinct_triples(x[:0], y[:0], z[:0])[0] == []


def test_distinct_is_the_sorted_unique():
    """distinct (one value; values near each other counted; else sorted) is np.unique(a), dtype
    and all, and _distinct its list as Python ints, for one value, a few among many, negatives,
    a span too wide to count, several axes and nothing."""
    from gfxsim.machine.consumed import _distinct, distinct
    rng = np.random.default_rng(11)
    cases = [np.full(50, 7, np.int64), rng.integers(1 << 28, (1 << 28) + 4, 4096), rng.integers(-5, 5, 37),
             np.array([3, 1 << 40, -2, 3], np.int64), rng.integers(0, 1000, 10), np.zeros(0, np.int64),
             np.array([9, 2], np.int32), (rng.integers(0, 64, 4096) // 16 * 3).astype(np.int32),
             rng.integers(0, 9, (3, 64)).astype(np.int32), np.zeros(0, np.int32)]
    for a in cases:
        want = np.unique(a)
        got = distinct(a)
        assert got.dtype == want.dtype and np.array_equal(got, want)
        listed = _distinct(a.ravel())
        assert listed == want.tolist() and all(type(v) is int for v in listed)
