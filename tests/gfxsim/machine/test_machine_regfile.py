"""The numbered register file (the asm front end's registers) shares the value model."""
import numpy as np
import pytest

from gfxsim import Buffer, GfxSimError, launch

LANES = 64


def tokens(n=8):
    tok = np.arange(LANES * n).reshape(LANES, n)
    return Buffer("v", (tok % 127).astype(np.int8), tags={"token": tok})


def run(kernel):
    out = {}
    launch(lambda w: kernel(w, out), trace=False)
    return out


def test_bytes_and_their_tokens_go_in_and_out_by_register_number():
    buf = tokens()

    def k(w, out):
        rf = w.register_file(16)
        rf.write(4, w.global_load(buf, w.lane_id * 8, 8, "i8"))          # v[4:5]
        hi = rf.read(5, 1, "u32")
        out["name"] = hi.reg_name()
        out["tok"] = hi.bitcast("i8").tags("token")[:, :2].T.tolist()
        out["val"] = rf.read(4, 2, "i8").numpy()[:, 1].tolist()
        words = rf.read(4, 2)
        rf.write(8, w.perm(words[1], words[0], 0x04050001))               # v4 bytes 1, 0; v5 bytes 1, 0
        out["perm"] = rf.read(8, 1, "i8").tags("token")[:, 0].tolist()
    o = run(k)
    assert o["name"] == "v5"
    assert o["tok"] == [[4, 5, 6, 7], [12, 13, 14, 15]]
    assert o["val"] == [8, 9, 10, 11, 12, 13, 14, 15]
    assert o["perm"] == [1, 0, 5, 4]


def test_exec_keeps_inactive_lanes_and_unwritten_registers_are_flagged():
    def k(w, out):
        rf = w.register_file(4)
        with w.if_(w.lane_id < 32):
            rf.write(1, w.const(7, "u32"))
        v = rf.read(1, 1)
        out["written"] = v.written()[0, [0, 40]].tolist()
        out["poison"] = hex(int(v.numpy()[0, 40]))
        v + 1                                                              # reads lanes never written
        out["findings"] = [f.kind for f in w.machine.findings]
    o = run(k)
    assert o["written"] == [True, False]
    assert o["poison"] == "0x7fbadbad"
    assert o["findings"] == ["uninitialized-read"]


def test_bad_register_numbers_and_partial_registers_are_errors():
    def outside(w):
        w.register_file(4).read(3, 2)

    def partial(w):
        w.register_file(4).write(0, w.const(1, "i16"))
    with pytest.raises(GfxSimError, match=r"v\[3:4\] is outside the register file"):
        launch(outside)
    with pytest.raises(GfxSimError, match="does not fill whole registers"):
        launch(partial)


def test_a_read_of_every_type_is_its_registers_bytes_reinterpreted():
    """A read of whole 4-byte elements takes the words as they are, the others go through the
    bytes: every type gives the little-endian reinterpretation of the registers' bytes per lane."""
    from gfxsim.machine.dtypes import NAMES, from_bytes, itemsize, to_bytes
    rng = np.random.default_rng(1)

    def k(w, out):
        rf = w.register_file(8)
        rf.words[:] = rng.integers(0, 2 ** 32, rf.words.shape, dtype=np.uint32)
        for name in NAMES:
            if 8 % itemsize(name) == 0:
                got = rf.read(2, 2, name).numpy()
                want = from_bytes(to_bytes(rf.words[2:4]), name)
                out[name] = got.dtype == want.dtype and got.view(np.uint8).tobytes() == want.view(np.uint8).tobytes()
    o = run(k)
    assert o and all(o.values()), o


def test_what_the_file_follows_of_its_planes_never_hides_a_value():
    """The register file follows which planes may hold values in which registers, to skip clearing
    and reading empty ones: after writes with and without provenance, under full and partial EXEC,
    every read is what reading every plane gives."""
    from gfxsim.machine.regfile import _read_prov
    buf = tokens()
    rng = np.random.default_rng(2)

    def k(w, out):
        rf = w.register_file(12)
        tagged = w.global_load(buf, w.lane_id * 8, 8, "i8")              # 2 registers, token planes
        plain = w.const(7, "u32")
        same = []
        for step in range(40):
            first = int(rng.integers(0, 10))
            value = tagged if rng.integers(2) else w.from_lanes(np.full(64, step, np.uint32), "u32") if rng.integers(2) \
                else plain
            n = value.nbytes // 4
            first = min(first, 12 - n)
            if rng.integers(2):
                with w.if_(w.lane_id < int(rng.integers(1, 64))):
                    rf.write(first, value)
            else:
                rf.write(first, value)
            for r in range(0, 12, 2):
                got = rf.read(r, 2, "u32").prov
                whole = None if rf.prov is None or not rf.has[r:r + 2].any() else _read_prov(rf.prov, slice(4 * r, 4 * r + 8), 4)
                same.append((got is None) == (whole is None) and (got is None or (
                    sorted(got.ids) == sorted(whole.ids) and all(np.array_equal(got.ids[f], whole.ids[f]) for f in got.ids))))
        out["same"] = same
    o = run(k)
    assert len(o["same"]) == 40 * 6 and all(o["same"])


def test_a_kept_read_and_a_per_element_write_are_the_exact_ones():
    """A one-register read is kept until a write reaches the register, and a per-element value is
    written into its bytes without first going per byte (one element of one register broadcast
    over its 4 bytes): after random writes (per element, per
    byte, none, under full and partial EXEC) every one-register read equals what reading every
    plane gives (also where the file knows a register's bytes agree, RegisterFile.whole, and
    does not compare them), the file equals one that was given every value per byte, and a
    reader cannot write the kept planes it is handed (read-only) and rebinds a field only in its own
    Prov: the next read sees none of it."""
    from gfxsim.machine.regfile import _read_prov
    from gfxsim.machine.vgpr import VGPRs
    words = Buffer("w", np.arange(LANES * 2, dtype=np.uint32).reshape(LANES, 2),
                   tags={"token": np.arange(LANES * 2).reshape(LANES, 2) // 3})
    buf = tokens()
    rng = np.random.default_rng(3)

    def planes(p):
        return None if p is None else (p.g, {f: a.tolist() for f, a in p.ids.items()},
                                       {f: (m.base.tolist(), m.bits.tolist(), m.wide.tolist()) for f, m in p.fp.items()},
                                       None if p.flags is None else p.flags.tolist())

    def k(w, out):
        rf, ref = w.register_file(8), w.register_file(8)
        per_element = w.global_load(words, w.lane_id * 8, 8, "u32")
        per_byte = w.global_load(buf, w.lane_id * 8, 8, "i8")
        one_word = w.global_load(words, w.lane_id * 8 + 4, 4, "u32")     # one element, one register
        plain = w.const(7, "u32")
        same, kinds, known = [], set(), set()
        counted = 0
        for step in range(60):
            value = [per_element, per_byte, one_word, plain][int(rng.integers(4))]
            if value.prov is not None:
                kinds.add((value.prov.g, value.nbytes // 4))
            n = value.nbytes // 4
            first = int(rng.integers(0, 9 - n))
            bytewise = value if value.prov is None else VGPRs(w, value.val, value.dtype, value.prov.per_byte())
            lanes = int(rng.integers(1, 65))
            with w.if_(w.lane_id < lanes):
                rf.write(first, value)
                ref.write(first, bytewise)
            for r in range(8):
                known.add(bool(rf.whole[r] and rf.has[r]))
                got = rf.read(r, 1, "u32").prov
                whole = None if rf.prov is None or not rf.has[r] else _read_prov(rf.prov, slice(4 * r, 4 * r + 4), 4)
                same.append(planes(got) == planes(whole))
                if got is not None:                  # the kept planes are shared, read-only
                    for f, a in list(got.ids.items()):
                        try:
                            a[...] = 12345
                            same.append(False)
                        except ValueError:
                            same.append(True)
                        got.ids[f] = np.full_like(a, 12345)  # a reader's rebinding stays its own
                    for m in got.fp.values():
                        same.append(not (m.base.flags.writeable or m.bits.flags.writeable or m.wide.flags.writeable))
                        m.base = np.full_like(m.base, 7)
                    same.append(got.flags is None or not got.flags.flags.writeable)
                    counted += 1
            same.append(all(np.array_equal(rf.prov.ids[f], ref.prov.ids[f]) for f in ref.prov.ids)
                        if ref.prov is not None else rf.prov is None)
        out["same"], out["kinds"], out["known"], out["counted"] = same, kinds, known, counted
    o = run(k)
    assert o["kinds"] == {(1, 2), (4, 2), (4, 1)} and o["known"] == {True, False} and o["counted"] > 100
    assert len(o["same"]) > 60 * 9 and all(o["same"])


@pytest.mark.parametrize("src", ["u8", "i16", "bf16", "u32", "f32", "f64", "u64"])
@pytest.mark.parametrize("dst", ["i8", "u8", "f16", "bf16", "i32", "u32", "f64", "i64"])
def test_retype_regroups_each_lanes_bytes_as_the_byte_round_trip_does(src, dst):
    """dtypes.retype (a register read or write of elements narrower or wider than a word) gives
    from_bytes(to_bytes(...)) bit for bit, from contiguous and strided arrays; a size that does not
    divide is refused as from_bytes refuses it."""
    from gfxsim.machine.dtypes import from_bytes, np_dtype, retype, to_bytes
    rng = np.random.default_rng(5)
    raw = rng.integers(0, 256, (48, 40), dtype=np.uint8)
    val = from_bytes(raw, src)
    whole = 8 // np_dtype(src).itemsize           # rows that make whole elements of either type
    for v in (val, val[:, ::2], np.asfortranarray(val), val[:whole], val[:whole, :1]):
        want = from_bytes(to_bytes(v), dst)
        got = retype(v, dst)
        assert got.dtype == np_dtype(dst) and got.shape == want.shape
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
        assert not np.may_share_memory(got, v)     # a register read never aliases the registers
    with pytest.raises(GfxSimError):
        retype(from_bytes(raw[:1], "u8"), "u32")



def _random_value(w, kind, prov, step):
    """A constant (kind 0), two registers per element (1), one register per byte (2) or per element
    (else), its provenance made by ``prov(w, rows, step)``."""
    from gfxsim.machine.vgpr import VGPRs
    if kind == 0:
        return w.const(step, "u32")
    regs, rows = {1: (2, 2), 2: (1, 4)}.get(kind, (1, 1))
    return VGPRs(w, np.zeros((regs, w.width), np.uint32), "u32", prov(w, rows, step))


def _typed_planes(p):
    """A Prov's planes with their types, for comparing two files' values exactly (None: none)."""
    return None if p is None else (p.g, [(f, a.dtype.str, a.tolist()) for f, a in p.ids.items()],
                                   [(f, m.base.dtype.str, m.base.tolist(), m.bits.tolist(), m.wide.tolist())
                                    for f, m in p.fp.items()],
                                   None if p.flags is None else (p.flags.dtype.str, p.flags.tolist()))


def test_a_read_seeded_by_a_one_register_write_is_the_read_of_the_planes():
    """A one-register write of a per-element value under full EXEC keeps what the next read of that
    register gives (regfile.SEED_READS). Two files given the same random writes (identities with
    and without a value, of two types, footprints empty and not, flags or none — a flags plane made
    while a seeded read waits —, per byte, none, partial EXEC, two registers, a broadcast plane),
    one seeding and one not, and read at random moments in every type: every read's planes are the
    same, field order and types and all; the seeded planes are read-only copies (the written
    value's own stay writable)."""
    from gfxsim.machine import regfile
    from gfxsim.machine.provenance import Mask, Prov
    from gfxsim.machine.vgpr import VGPRs
    rng = np.random.default_rng(5)

    def prov(w, rows, step):
        ids = {}
        for f in ("token", "head", "@mma"):
            if rng.integers(3):
                ids[f] = (rng.integers(-1, 50, (rows, w.pw)) if rng.integers(3) else np.full((rows, w.pw), -1)) \
                    .astype(np.int32 if rng.integers(2) else np.int64)
        fp = {}
        if rng.integers(2):
            fp["token"] = Mask.of_values(rng.integers(-1, 300, (rows, w.pw)) if rng.integers(2)
                                         else np.full((rows, w.pw), -1))
        flags = rng.integers(0, 4, (rows, w.pw)).astype(np.uint8) if step > 40 and rng.integers(4) == 0 else None
        if rng.integers(6) == 0 and ids:                    # a broadcast plane: the planes are read back
            f = next(iter(ids))
            ids[f] = ids[f][:, :1]
        return Prov(4 if rows in (1, 2) else 1, ids, fp, flags)

    def k(w, out):
        rf, ref = w.register_file(6), w.register_file(6)
        same, seeded, dropped = [], 0, 0
        for step in range(400):
            kind = int(rng.integers(5))
            if step < 2:                  # first a seeded read, then a flags plane made in another register
                plain = prov(w, 1, 0)
                value = VGPRs(w, np.zeros((1, w.width), np.uint32), "u32", Prov(4, {"token": np.zeros((1, w.pw), np.int32)},
                              flags=plain.flags if step == 0 else np.ones((1, w.pw), np.uint8)))
            else:
                value = _random_value(w, kind, prov, step)
            n = value.nbytes // 4
            first = step if step < 2 else int(rng.integers(0, 7 - n))
            mine = None if value.prov is None else _typed_planes(value.prov)
            unread = set(rf._unread) - set(range(first, first + n))
            with w.if_(w.lane_id < (64 if step < 2 or rng.integers(4) else int(rng.integers(1, 64)))):
                for f, seed in ((rf, True), (ref, False)):
                    regfile.SEED_READS = seed
                    try:
                        f.write(first, value)
                    finally:
                        regfile.SEED_READS = True
            dropped += bool(unread - rf._unread)         # a flags plane made: the seeded reads waiting dropped
            if mine is not None:                           # the value's own planes untouched, writable
                same.append(_typed_planes(value.prov) == mine and all(a.flags.writeable for a in value.prov.ids.values()))
            if first in rf._unread:
                seeded += 1
                same.append(first not in ref._reads)
                same.append(all(not a.flags.writeable for a in rf._reads[first][4].ids.values()))
            for r in range(6):
                if step >= 2 and rng.integers(3) == 0:
                    dtype = ["u32", "f32", "i32", "u16", "u8"][int(rng.integers(5))]
                    got, want = rf.read(r, 1, dtype).prov, ref.read(r, 1, dtype).prov
                    same.append(_typed_planes(got) == _typed_planes(want))
        out["same"], out["seeded"], out["dropped"] = same, seeded, dropped
    o = run(k)
    assert o["seeded"] > 50 and o["dropped"] > 0
    assert len(o["same"]) > 400 and all(o["same"])


def test_a_one_register_write_in_one_walk_leaves_the_file_the_general_write_leaves():
    """regfile.ONE_WRITE: a one-register write of a per-element value under full EXEC into planes
    the file has made is one walk (planes set or cleared, the seeded read taken). Two files given
    the same random writes (identities of two types, with and without a value, footprints empty
    and not, flags or none, fields the file has not made yet, per byte, two registers, a broadcast
    plane, partial EXEC, no provenance), one by the walk and one by ``_assign``/``_seeded_read``:
    after every write their planes (field order, types, values), ``holds``, ``has``, ``whole``
    and kept reads are the same, and so is every read."""
    from gfxsim.machine import regfile
    from gfxsim.machine.provenance import Mask, Prov
    rng = np.random.default_rng(11)
    taken = []
    walk = regfile._write_one

    def counted(*a):
        got = walk(*a)
        taken.append(got is not None)
        return got

    def prov(w, rows, step):
        ids = {}
        for f in ("token", "head", "@mma", "dim")[:2 + min(step // 60, 2)]:     # fields the file makes later
            if rng.integers(3):
                ids[f] = (rng.integers(-1, 50, (rows, w.pw)) if rng.integers(3) else np.full((rows, w.pw), -1)) \
                    .astype(np.int32 if rng.integers(2) else np.int64)
        fp = {}
        for f in ("token", "dim"):
            if rng.integers(2):
                fp[f] = Mask.of_values(rng.integers(-1, 300, (rows, w.pw)) if rng.integers(2)
                                       else np.full((rows, w.pw), -1))
        flags = rng.integers(0, 4, (rows, w.pw)).astype(np.uint8) if step > 30 and rng.integers(3) == 0 else None
        if rng.integers(8) == 0 and ids:                    # a broadcast plane: the general write
            f = next(iter(ids))
            ids[f] = ids[f][:, :1]
        return Prov(4 if rows in (1, 2) else 1, ids, fp, flags)

    def state(rf):
        return (_typed_planes(rf.prov), [(k, h.tolist()) for k, h in rf.holds.items()], rf.has.tolist(), rf.whole.tolist(),
                sorted((r, _typed_planes(x[4])) for r, x in rf._reads.items() if 4 in x), sorted(rf._unread))

    def k(w, out):
        fast, ref = w.register_file(6), w.register_file(6)
        same = []
        for step in range(500):
            kind = int(rng.integers(6))
            value = _random_value(w, kind, prov, step)
            n = value.nbytes // 4
            first = int(rng.integers(0, 7 - n))
            with w.if_(w.lane_id < (64 if rng.integers(5) else int(rng.integers(1, 64)))):
                for f, on in ((fast, True), (ref, False)):
                    regfile.ONE_WRITE = on
                    try:
                        f.write(first, value)
                    finally:
                        regfile.ONE_WRITE = True
            same.append(state(fast) == state(ref))
            for r in range(6):
                if rng.integers(4) == 0:
                    dtype = ["u32", "f32", "i32", "u16", "u8"][int(rng.integers(5))]
                    same.append(_typed_planes(fast.read(r, 1, dtype).prov) == _typed_planes(ref.read(r, 1, dtype).prov))
        out["same"] = same
    regfile._write_one = counted
    try:
        o = run(k)
    finally:
        regfile._write_one = walk
    assert sum(taken) > 100 and not all(taken)         # both forms met
    assert len(o["same"]) > 500 and all(o["same"])
