"""DS: LDS regions, ds_read/ds_write, s_barrier, and the per-access bank-conflict and race analysis.

Each batched workgroup has its own LDS; an access is analysed for all of them in one call
(``banks.bank_conflicts_batched``: once per distinct address pattern, exactly per workgroup where
patterns differ). Races are tracked in one state while every workgroup has made the same accesses,
and per workgroup from the first access where they differ (an exact fallback).
"""
from __future__ import annotations

import numpy as np

from . import ops
from .addressing import addresses, byte_addr, member_uniform, read_addr
from . import ds_words
from .banks import bank_conflicts, bank_conflicts_batched, bank_conflicts_rows, phases
from .dtypes import (all_written, dtype_name, itemsize, load_rows, load_values, load_written, store_rows,
                     store_values, to_bytes)
from .errors import MemoryFault
from .lds_races import EpochWatch
from .memory import LdsRegion
from .valueprov import stored_prov
from .vgpr import VGPRs
from .wavemembers import WavesPart


_ALL_WRITTEN = np.uint32(0x01010101)      # four written bytes of a written-bit array, as one word
COMPILED_WORDS = True                     # the waves side by side: ds_words' compiled pass (False: numpy, the A/B)
_N_PHASE: dict = {}                       # (lanes, nbytes, rule) -> (banks.phases, their number)
_NO_WORDS = np.zeros((1, 1), np.uint32)    # the compiled passes' stand-ins for what is not there
_NO_RACE_STATE = (np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.uint64), np.zeros(0, np.int64))
_DS_READ_OPS = {n: ops.Op("DS", m) for n, m in ops.DS_READ.items()}      # lds_load's events
_DS_WRITE_OPS = {n: ops.Op("DS", m) for n, m in ops.DS_WRITE.items()}    # lds_store's


class DsOps:
    def shared(self, name: str, shape, dtype) -> LdsRegion:
        """A ``__shared__`` array of the workgroup (the same region for every wave); ``dtype`` an ISA
        type name ("i8", "f32") or a numpy dtype."""
        try:
            from .dtypes import np_dtype
            return self.wg.lds.region(name, shape, np_dtype(dtype_name(dtype)))
        except (MemoryError, ValueError) as e:
            raise self.error(MemoryFault if isinstance(e, MemoryError) else ValueError, str(e)) from None

    def _lds_access(self, region, offset, nbytes, is_write, value=None):
        lds = self.wg.lds
        if not isinstance(region, LdsRegion) or lds.regions.get(region.name) is not region:
            raise self.error(TypeError, f"LDS access needs a region from w.shared(), got {region!r}")
        what = f"ds_{'write' if is_write else 'read'} of {region.name!r}"
        # gfx9 DS alignment (without unaligned-access mode): natural, b96 like b128 on 16 bytes
        align = 16 if nbytes == 12 else nbytes
        a2 = self.exec.reshape(self.members, self.lanes)
        # every member at the same address under the same EXEC (a kernel's LDS layout): the
        # addresses are made and checked for one member's lanes and broadcast
        shared = self.wg.waves_as_members        # one LDS for every member: the waves of one workgroup
        uniform = not shared and member_uniform(self, offset)
        rel = addresses(self, offset, nbytes, region.nbytes, what, align, one_member=uniform) + region.offset
        r2 = np.broadcast_to(rel, (self.members, self.lanes)) if uniform else rel.reshape(self.members, self.lanes)
        if shared:
            self._member_races(region, r2, a2, nbytes, is_write, value)
        elif self.machine.check_races and self.wg.num_waves > 1:
            self._wave_races(region, r2, a2, nbytes, is_write, value, uniform)
        deg = self._bank_conflicts(region, r2, a2, nbytes, is_write, uniform)
        # what an event shows: the address in its own workgroup's LDS (each member's own offsets,
        # lanes outside EXEC included), and each one's conflict degree
        if uniform and self.machine.trace.enabled and isinstance(offset, VGPRs) and self.members > 1:
            self._lds_rel = offset.val[0].astype(np.int64) + region.offset
        else:
            self._lds_rel = r2.reshape(-1) if self.machine.trace.enabled or not uniform else None
        self._lds_deg = deg
        # the index into the region's own arrays (bytes, written bits, provenance): one member's
        # offsets in its region when every member's are the same, else one per column
        if uniform:
            return rel - region.offset, None
        return None, rel + self._member_offsets(region.stride, -region.offset)

    def _wave_races(self, region: LdsRegion, r2, a2, nbytes: int, is_write: bool, value, uniform: bool):
        """The LDS race check of waves run one after another (the launch's check_races): the
        access tracked as this wave's, a finding for each member's first race."""
        lds = self.wg.lds
        races = lds.races if lds.races is not None else lds.race_tracker()
        same = (self._unchanged(region, r2, a2, nbytes, value) if value is not None and
                races.others_wrote(r2, a2, nbytes, self.wave_id, self.wg.epoch, uniform) else None)
        if same is not None and uniform:
            # one access for every member: a lane is a duplicate store where it is one in every
            # member (the shared race row stays shared; replicated data repeats in every member)
            same = np.broadcast_to(same.all(axis=0), same.shape)
        hl, ha, hw = races.track(r2, a2, nbytes, self.wave_id, self.wg.epoch, is_write, uniform, same)
        for m in np.nonzero(hl >= 0)[0].tolist():
            reg, off = lds.region_at(int(ha[m]))
            where = reg.describe(off) if reg is not None else str(int(ha[m]))
            self.finding("lds-race", f"{'write' if is_write else 'read'} of LDS {where} races with wave "
                         f"{int(hw[m])}: no barrier between them", lane=m * self.lanes + int(hl[m]),
                         address=int(ha[m]), other_wave=int(hw[m]), where=where)

    def _bank_conflicts(self, region: LdsRegion, r2, a2, nbytes: int, is_write: bool, uniform: bool):
        """Each member's bank-conflict degree of an access (int64 [members]), and a finding for each
        member whose access conflicts."""
        lds = self.wg.lds
        if uniform:              # one pattern: computed once (and remembered), the same for every member
            deg, cycles, passes = (np.full(self.members, x, np.int64) for x in
                                   bank_conflicts(r2[0], a2[0], nbytes, lds.banks, lds.bank_bytes, self.arch.lds_rule))
        elif self.wg.waves_as_members:   # the waves of one workgroup: each its own pattern (most a shift of the first's)
            deg, cycles, passes = bank_conflicts_rows(np.asarray(r2, np.int64), a2, nbytes, lds.banks,
                                                      lds.bank_bytes, self.arch.lds_rule)
        else:
            deg, cycles, passes = bank_conflicts_batched(r2, a2, nbytes, lds.banks, lds.bank_bytes, self.lanes,
                                                         self.arch.lds_rule)
        worst = int(deg.max()) if deg.size else 0
        if worst > 1:
            for m in np.nonzero(deg > 1)[0].tolist():
                l = int(np.argmax(a2[m]))
                self.finding("lds-bank-conflict", f"{ops.DS_WRITE[nbytes] if is_write else ops.DS_READ[nbytes]} on "
                             f"{region.name!r}: {int(deg[m])}-way bank conflict ({int(cycles[m])} cycles for "
                             f"{int(passes[m])} passes)", lane=m * self.lanes + l,
                             address=int(r2[m, l]), degree=int(deg[m]), cycles=int(cycles[m]), passes=int(passes[m]),
                             region=region.name)
        return deg

    def _lds_words_fit(self, region: LdsRegion, offset: np.ndarray, nbytes: int) -> bool:
        """What both word paths ask first: no provenance or trace, the waves of one workgroup side
        by side or one wave alone, a region of this LDS, every active lane in bounds and aligned."""
        m, wg = self.machine, self.wg
        if m.provenance or m.trace.enabled or (not wg.waves_as_members and self.members > 1):
            return False
        if not isinstance(region, LdsRegion) or wg.lds.regions.get(region.name) is not region:
            return False
        a = offset if self.exec_full else offset[self.exec]
        align = 16 if nbytes == 12 else nbytes
        return bool(a.size) and int(a.min()) >= 0 and int(a.max()) + nbytes <= region.nbytes \
            and not (a & (align - 1)).any()

    def lds_load_words(self, region: LdsRegion, offset: np.ndarray, nbytes: int):
        """What ``lds_load`` of ``nbytes`` (whole dwords) per lane at byte ``offset`` (int64
        [width]) of the region gives, without provenance or a trace, for the waves of one workgroup
        side by side or one wave of a workgroup run one at a time (else None), where every active lane
        is in bounds, aligned and reads written bytes: uint32 words [nbytes/4, width] (inactive
        lanes: any words), with the race watch, the bank conflicts (and their findings) and the
        event. None, having done nothing, anywhere else (``lds_load`` names the fault or the
        never-written bytes)."""
        m, wg = self.machine, self.wg
        if nbytes % 4:
            return None
        if self._lds_compiled(region):
            return self._words_side_by_side(region, offset, nbytes, None)
        if self._lds_compiled_one(region):
            return self._words_one_wave(region, offset, nbytes, None)
        if not self._lds_words_fit(region, offset, nbytes):
            return None
        lds, shared = wg.lds, wg.waves_as_members
        raw = lds.raw[region.name]
        written = lds.written.get(region.name)
        if written is None:
            written = lds.written_one[region.name]
        if raw.size % 4 or written.size != raw.size:
            return None
        ex, full = self.exec, self.exec_full
        at = (offset if full else np.where(ex, offset, 0)) >> 2
        at = at[None, :] + np.arange(nbytes // 4)[:, None] if nbytes > 4 else at[None, :]
        wr = written.view(np.uint32)[at] == _ALL_WRITTEN
        if not (wr if full else wr[:, ex]).all():
            return None
        r2 = (offset + region.offset).reshape(self.members, self.lanes)
        a2 = ex.reshape(self.members, self.lanes)
        if shared:
            self._member_races(region, r2, a2, nbytes, False, None)
        elif m.check_races and wg.num_waves > 1:
            self._wave_races(region, r2, a2, nbytes, False, None, True)
        self._bank_conflicts(region, r2, a2, nbytes, False, not shared)
        words = raw.view(np.uint32)[at]
        self.event(_DS_READ_OPS[nbytes])
        return words

    def lds_store_words(self, region: LdsRegion, offset: np.ndarray, words: np.ndarray, nbytes: int) -> bool:
        """What ``lds_store`` of the first ``nbytes`` (1, 2 or whole dwords) of uint32 ``words`` [n, width],
        written in every active lane, at byte ``offset`` (int64 [width]) of the region does, without
        provenance or a trace, for the waves of one workgroup side by side or one wave of a workgroup
        run one at a time, where every active lane is in bounds and aligned: the race watch, the bank
        conflicts (and their findings), the bytes and their written bits, the event; True. False,
        having done nothing, anywhere else."""
        m, wg = self.machine, self.wg
        if nbytes > 4 * words.shape[0]:
            return False
        if self._lds_compiled(region):
            return self._words_side_by_side(region, offset, nbytes, words)
        if self._lds_compiled_one(region):
            return self._words_one_wave(region, offset, nbytes, words)
        if not self._lds_words_fit(region, offset, nbytes):
            return False
        lds, shared = wg.lds, wg.waves_as_members
        raw = lds.raw[region.name]
        ex, full = self.exec, self.exec_full
        r2 = (offset + region.offset).reshape(self.members, self.lanes)
        a2 = ex.reshape(self.members, self.lanes)
        if shared:
            self._member_races(region, r2, a2, nbytes, True, VGPRs(self, words, "u32"))
        elif m.check_races and wg.num_waves > 1:
            self._wave_races(region, r2, a2, nbytes, True, VGPRs(self, words, "u32"), True)
        self._bank_conflicts(region, r2, a2, nbytes, True, not shared)
        w1 = None if shared else lds.written_one.get(region.name)      # lds_store's written bits: the same ones
        store_values(raw, w1 if w1 is not None else lds.member_written(region.name), offset, nbytes, words,
                     None if full else ex)
        self.event(_DS_WRITE_OPS[nbytes])
        return True

    def _lds_compiled(self, region: LdsRegion) -> bool:
        """Whether the word paths take ``ds_words``' compiled pass: the waves of one workgroup
        side by side (one LDS), no provenance or trace, a region of this LDS."""
        m, wg = self.machine, self.wg
        return COMPILED_WORDS and wg.waves_as_members and self.members > 1 and wg.lds.members == 1 and \
            not m.provenance and not m.trace.enabled and isinstance(region, LdsRegion) and \
            wg.lds.regions.get(region.name) is region

    def _lds_compiled_one(self, region: LdsRegion) -> bool:
        """Whether the word paths take ``ds_words.one_wave``: one wave of one workgroup (run alone
        or serially after its waves parted), no provenance or trace, a region of this LDS."""
        m, wg = self.machine, self.wg
        return COMPILED_WORDS and not wg.waves_as_members and self.members == 1 and wg.lds.members == 1 and \
            not m.provenance and not m.trace.enabled and isinstance(region, LdsRegion) and \
            wg.lds.regions.get(region.name) is region

    def _words_one_wave(self, region: LdsRegion, offset: np.ndarray, nbytes: int, words):
        """lds_load_words (``words`` None) or lds_store_words of one wave alone, one compiled
        pass (ds_words.one_wave) deciding what their numpy paths decide, in the same order."""
        wg = self.wg
        lds = wg.lds
        raw = lds.raw[region.name]
        if words is None:
            written = _read_written(lds, region, raw)
            if written is None:
                return None
        else:
            written = lds.written_one.get(region.name)
            if written is None:
                written = lds.member_written(region.name)
        races = self.machine.check_races and wg.num_waves > 1
        wave, epoch = int(self.wave_id), int(wg.epoch)
        if races:
            tracker = lds.races if lds.races is not None else lds.race_tracker()
            st = tracker.state
            state = (st.w_wave[0], st.w_epoch[0], st.r_mask[0], st.r_epoch[0])
        else:
            state = _NO_RACE_STATE
        ph, n_phase = self._phases(nbytes)
        offset = np.asarray(offset, np.int64)
        ex = self.exec
        out = np.empty((nbytes // 4, offset.shape[0]), np.uint32) if words is None else _NO_WORDS
        hit = np.empty(3, np.int64)
        code = ds_words.one_wave(raw, written.view(np.uint8), offset, ex, nbytes,
                                 _NO_WORDS if words is None else np.ascontiguousarray(words, np.uint32), words is not None,
                                 region.offset, region.nbytes, races, wave, epoch, *state, ph, n_phase, lds.banks,
                                 lds.bank_bytes, out, hit)
        if code == ds_words.NOT_HERE:
            return None if words is None else False
        if races and words is not None:              # RaceTracker.track's note of the epoch's writers
            if epoch != tracker.write_epoch:
                tracker.write_epoch, tracker.writers = epoch, set()
            tracker.writers.add(wave)
        if hit[0] >= 0:                              # _wave_races' finding
            reg, off = lds.region_at(int(hit[1]))
            where = reg.describe(off) if reg is not None else str(int(hit[1]))
            self.finding("lds-race", f"{'write' if words is not None else 'read'} of LDS {where} races with wave "
                         f"{int(hit[2])}: no barrier between them", lane=int(hit[0]),
                         address=int(hit[1]), other_wave=int(hit[2]), where=where)
        return self._words_done(code, region, offset, ex, nbytes, words, raw, written, out, 1, True)

    def _words_side_by_side(self, region: LdsRegion, offset: np.ndarray, nbytes: int, words):
        """lds_load_words (``words`` None) or lds_store_words of the waves side by side, one
        compiled pass (ds_words.py) deciding what their numpy paths decide, in the same order."""
        wg = self.wg
        lds = wg.lds
        raw = lds.raw[region.name]
        st = (lds.races if lds.races is not None else lds.race_tracker()).state
        watch = wg.lds_watch
        if watch is None:
            watch = wg.lds_watch = EpochWatch()
        epoch = wg.epoch
        if epoch != watch.epoch:
            watch.epoch, watch.wrote, watch.marked, watch.reads = epoch, False, False, []
        watch.flush(st)                  # reads the numpy path kept: marked now, as this pass marks its own
        ph, n_phase = self._phases(nbytes)
        offset = np.asarray(offset, np.int64)
        ex, out = self.exec, None
        if words is None:
            written = _read_written(lds, region, raw)
            if written is None:
                return None
            out = np.empty((nbytes // 4, offset.shape[0]), np.uint32)
            code = ds_words.read_words(raw.view(np.uint32), written.view(np.uint32), offset, ex, self.lanes, nbytes,
                                       region.offset, region.nbytes, st.w_wave[0], st.w_epoch[0], st.r_mask[0],
                                       st.r_epoch[0], epoch, watch.wrote, ph, n_phase, lds.banks, lds.bank_bytes, out)
            if code == ds_words.NOT_HERE:
                return None
            watch.marked = True
        else:
            if watch.marks is None or watch.marks.size != st.w_wave[0].size:
                watch.marks = np.zeros(st.w_wave[0].size, np.int32)
            written = lds.member_written(region.name)
            code = ds_words.store_words(raw, written.view(np.uint8), offset, ex, self.lanes, nbytes,
                                        np.ascontiguousarray(words, np.uint32), region.offset, region.nbytes,
                                        st.w_wave[0], st.w_epoch[0], st.r_mask[0], st.r_epoch[0], watch.marks, epoch,
                                        watch.wrote, watch.marked, ph, n_phase, lds.banks, lds.bank_bytes)
            if code == ds_words.NOT_HERE:
                return False
            if code != ds_words.RACE:
                watch.wrote = True
        if code == ds_words.RACE:
            raise WavesPart(f"waves race in LDS in barrier epoch {epoch}")
        return self._words_done(code, region, offset, ex, nbytes, words, raw, written, out, self.members, False)

    def _phases(self, nbytes: int):
        """(banks.phases of an access of ``nbytes`` per lane, their number), both kept per lanes, size and
        rule (a few dozen keys at most: the cache is bounded by the access sizes and rules there are)."""
        key = (self.lanes, nbytes, self.arch.lds_rule)
        got = _N_PHASE.get(key)          # every access asks: one look-up, no key made from the array
        if got is None:
            ph = phases(nbytes, self.lanes, self.arch.lds_rule)
            got = _N_PHASE[key] = (ph, int(ph.max()) + 1)
        return got

    def _words_done(self, code, region, offset, ex, nbytes: int, words, raw, written, out, rows: int, serial: bool):
        """A compiled word pass's end: where it found a bank conflict, the conflict's findings and the
        access's rest as the numpy path makes them (``rows`` rows of lanes; ``serial``: the waves run
        one after another); then the access's event and what the word path returns."""
        if code == ds_words.CONFLICT:
            r2 = (offset + region.offset).reshape(rows, self.lanes)
            self._bank_conflicts(region, r2, ex.reshape(rows, self.lanes), nbytes, words is not None, serial)
            if words is None:
                at = np.where(ex, offset, 0) >> 2
                out = raw.view(np.uint32)[at[None, :] + np.arange(nbytes // 4)[:, None]]
            else:
                store_values(raw, written, offset, nbytes, words, None if self.exec_full else ex)
        if words is None:
            self.event(_DS_READ_OPS[nbytes])
            return out
        self.event(_DS_WRITE_OPS[nbytes])
        return True

    def _member_races(self, region: LdsRegion, r2, a2, nbytes: int, is_write: bool, value):
        """The waves of one workgroup as members: each member's access tracked as its wave's
        (lds_races.EpochWatch); a race, whether or not the launch checks races, is decided by the
        order the waves run in, so it ends the side-by-side run (wavemembers.WavesPart) and the
        workgroup runs serially (a race found where there is none costs a serial run, never a
        wrong answer)."""
        lds = self.wg.lds
        st = (lds.races if lds.races is not None else lds.race_tracker()).state
        watch = self.wg.lds_watch
        if watch is None:
            watch = self.wg.lds_watch = EpochWatch()
        act = None if self.exec_full else a2.copy()
        unchanged = None if value is None else (lambda: self._unchanged(region, r2, a2, nbytes, value))
        if watch.race(st, r2, act, nbytes, is_write, self.wg.epoch, unchanged):
            raise WavesPart(f"waves race in LDS in barrier epoch {self.wg.epoch}")

    def _unchanged(self, region: LdsRegion, r2, a2, nbytes: int, value: VGPRs):
        """bool [members, lanes]: the active lanes of a write whose bytes equal what their LDS bytes
        hold already (the race check's duplicate stores), or None where no lane's do."""
        rows = self.wg.lds.rows(region.name)
        rel = np.where(a2, r2 - region.offset, 0)
        new = to_bytes(value.val)[:nbytes].reshape(nbytes, self.members, self.lanes)
        idx = rel[None, :, :] + np.arange(nbytes)[:, None, None]
        old = rows[np.arange(self.members)[None, :, None] if rows.shape[0] > 1 else 0, idx]
        same = a2 & (old == new).all(axis=0)
        return same if same.any() else None

    def _lds_index(self, region: LdsRegion, one, ridx):
        """Per column, the index into the region's arrays: ``ridx``, or made from ``one`` (one
        member's offsets in its region, the same in every member)."""
        if ridx is not None:
            return ridx
        return (one[None, :] + (np.arange(self.members) * region.stride)[:, None]).reshape(-1)

    def _lds_prov_index(self, region: LdsRegion, ridx, what):
        """Per provenance column, the index into the region's provenance (``[pw]``): a folded
        batch keeps one region per class, read at its representative's addresses (every member's
        the same, else the batch unfolds). Lanes outside EXEC read their region's first byte."""
        if not self.exec_full:
            ridx = np.where(self.exec, ridx, self._member_offsets(region.stride))
        if self.fold is None:
            return ridx
        rel = ridx - self._member_offsets(region.stride)              # in each member's own region
        return self.pcols(rel, f"the addresses of a {what} of {region.name!r}") + \
            (np.arange(self.pw) // self.lanes) * region.stride

    def _member_offsets(self, stride: int, add: int = 0) -> np.ndarray:
        """member * stride + add per column (read-only, made once per wave and stride: every LDS
        access of a batch adds it)."""
        got = self.lds_offsets.get((stride, add))
        if got is None:
            per_member = 0 if self.wg.waves_as_members else stride       # waves as members: one LDS
            got = self.lds_offsets[(stride, add)] = (self.member_starts // self.lanes) * per_member + add
            got.setflags(write=False)
        return got

    def lds_load(self, region: LdsRegion, offset, nbytes: int = 4, dtype=None) -> VGPRs:
        """ds_read_b*: ``nbytes`` per lane from byte ``offset`` of the region."""
        dtype = dtype_name(dtype) if dtype is not None else dtype_name(region.dtype)
        size = itemsize(dtype)
        if nbytes % size:
            raise self.error(ValueError, f"ds_read of {nbytes} bytes as {dtype}")
        one, ridx = self._lds_access(region, offset, nbytes, False)
        lds = self.wg.lds
        prov = None
        if self.machine.provenance:
            ridx = self._lds_index(region, one, ridx)
            pidx = self._lds_prov_index(region, ridx, "ds_read")
            prov = lds.prov[region.name].gather(pidx[None, :] + np.arange(nbytes)[:, None], size)
            prov = self.outside_exec(prov, f"EXEC of a ds_read of {region.name!r}")
        # the same offsets in every member: each member's row read at one member's offsets (lanes
        # outside EXEC read their region's first byte)
        if one is not None and not self.exec_full:
            one = np.where(self.exec[:self.lanes], one, 0)
        shared = one is not None and region.name in lds.written_one
        val = None if one is None else load_rows(lds.rows(region.name), one, nbytes, dtype)
        every = None                    # whether every byte read was written, where already known
        if val is None:
            ridx = self._lds_index(region, one, ridx)
            if shared:
                val = load_values(lds.raw[region.name], read_addr(self, ridx), nbytes, dtype)
            else:                       # the values and the written bits by one unit index
                val, every = load_written(lds.raw[region.name], lds.member_written(region.name),
                                          read_addr(self, ridx), nbytes, dtype)
        v = self.new_value(val, dtype, prov)
        wr = self._lds_written(region, one, ridx, nbytes, every)
        if wr is not None and not self.exec_full:
            wr = wr | ~self.exec[None, :]
        if wr is not None and not wr.all():
            ridx = self._lds_index(region, one, ridx)
            for l in self.first_lanes(~wr.all(axis=0)):
                rel = int(ridx[l] - (l // self.lanes) * region.stride + region.offset)   # in its own LDS
                reg, off = lds.region_at(rel)
                self.finding("uninitialized-read", f"ds_read of {reg.describe(off) if reg else rel} reads "
                             f"never-written LDS bytes", lane=l, address=rel, what="lds", name=region.name)
            v.valid = wr if v.valid is None else (v.valid & wr)
        self.event(ops.Op("DS", ops.DS_READ[nbytes]), outs=[v], region=region.name, address=self._lds_rel,
                    bank_conflict=self._lds_deg)
        return v

    def lds_store(self, region: LdsRegion, offset, value: VGPRs, nbytes: int | None = None):
        """ds_write_b*: the value's bytes (or the first ``nbytes``) to byte ``offset`` of the region."""
        if not isinstance(value, VGPRs):
            raise self.error(TypeError, f"ds_write to {region.name!r} needs a per-lane value, got "
                             f"{type(value).__name__}")
        nbytes = nbytes or value.nbytes
        self.check_read(value)
        one, ridx = self._lds_access(region, offset, nbytes, True, value)
        lds, act = self.wg.lds, self.exec
        lanes = None if self.exec_full else np.flatnonzero(act[:self.lanes])
        w1 = lds.written_one.get(region.name) if one is not None else None
        # every member's written bits are marked with the bytes, unless they are still shared
        written = None if w1 is not None else lds.member_written(region.name)
        if one is None or not store_rows(lds.rows(region.name), None if written is None else
                                         written.reshape(self.members, -1), one, nbytes, value.val, lanes):
            ridx = self._lds_index(region, one, ridx)
            store_values(lds.raw[region.name], written, ridx, nbytes, value.val, None if self.exec_full else act)
        if w1 is not None:                              # the shared written bits: one member's
            at = one if lanes is None else one[lanes]
            w1[(at[None, :] + np.arange(nbytes)[:, None]).ravel()] = True
        mp = lds.prov[region.name]
        if self.machine.provenance and (value.prov is not None or not mp.empty()):
            ridx = self._lds_index(region, one, ridx)
            pact = self.pexec(f"EXEC of a ds_write to {region.name!r}")
            p = stored_prov(value.prov, nbytes, pact, self.exec_full)
            rb = self._lds_prov_index(region, ridx, "ds_write")[None, :] + np.arange(nbytes)[:, None]
            mp.scatter(rb if self.exec_full else np.take(rb, np.flatnonzero(pact), axis=1), p)
        self.event(ops.Op("DS", ops.DS_WRITE[nbytes]), ins=[value], region=region.name, address=self._lds_rel,
                    bank_conflict=self._lds_deg)

    def _lds_written(self, region: LdsRegion, one, ridx, nbytes, every=None):
        """A read's written bits, bool ``[nbytes, width]``, or None where every byte it reads (in
        the active lanes) was written (``every``: that, where the caller already knows it). While
        every member has written the same bytes and reads the same offsets, one member's are
        looked up and repeated."""
        lds = self.wg.lds
        w1 = lds.written_one.get(region.name)
        if one is not None and w1 is not None:
            b = w1[one[None, :] + np.arange(nbytes)[:, None]]            # [nbytes, lanes]
            act = self.exec[:self.lanes]
            if (b.all(axis=0) | ~act).all():
                return None
            return np.tile(b, (1, self.members))
        ridx = self._lds_index(region, one, ridx)
        written = lds.member_written(region.name)
        if every if every is not None else all_written(written, read_addr(self, ridx), nbytes):
            return None
        return written[byte_addr(self, ridx, nbytes)]

    def barrier(self):
        """s_barrier: wait until every live wave of the workgroup arrives."""
        self.event(ops.OTHER["barrier"])
        self.wg.barrier(self)


def _read_written(lds, region: LdsRegion, raw):
    """The written map a compiled word read checks (the members' map, else the one-wave map), or
    None where the region is not whole dwords or the map does not match it (the numpy path then)."""
    written = lds.written.get(region.name)
    if written is None:
        written = lds.written_one[region.name]
    return None if raw.size % 4 or written.size != raw.size else written
