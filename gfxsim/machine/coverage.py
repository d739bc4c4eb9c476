"""Coverage scopes: ``with w.coverage(tile, expect=tokens):`` counts, per output tile, how often each
expected token fed a K slot of the matrix instructions issued inside; zero or several is a
``token-coverage`` finding. A provenance-based check: it does not run without provenance."""
from __future__ import annotations

import numpy as np


class Coverage:
    """``expect`` is an iterable of tokens, or (lo, hi) for tokens lo..hi-1 where lo and hi may be
    per-lane values (uniform per wave; one range per workgroup of a batched launch)."""

    def __init__(self, wave, key, expect, field="token", operand="B"):
        self.wave, self.key, self.field, self.operand = wave, key, field, operand.upper()
        self.active = wave.machine.provenance
        if self.active:
            self.ranges = self._expected(expect, wave.members)
            self.consumed = []                      # [members, K] per instruction (-1 = no token)
            self.live = np.zeros(wave.members, bool)
            # a batched workgroup whose lanes are all off does not run the scope: nothing expected of it
            self.entered = wave.exec.reshape(wave.members, wave.lanes).any(axis=1)
        self.first = None

    def _expected(self, expect, members):
        """The expected tokens of every member: (lo, hi) int64 [members] for a range (tokens
        lo..hi-1), else a list of int64 arrays."""
        if isinstance(expect, tuple) and len(expect) == 2:
            lanes = self.wave.lanes
            lo, hi = (np.asarray(x.val[0, ::lanes], np.int64) if hasattr(x, "val") else np.full(members, int(x), np.int64)
                      for x in expect)          # each member's first lane: uniform per wave
            return lo, np.maximum(lo, hi)
        one = np.array(sorted(int(x) for x in expect), np.int64)
        return [one] * members

    def add(self, wave, rec):
        if not self.active or not rec.tagged():
            return
        per_k = rec.k_slots(self.operand, self.field)          # [members, K], -1 where none
        keep = np.zeros(wave.members, bool)
        keep[rec.live] = True
        self.consumed.append(np.where(keep[:, None], per_k, -1))
        self.live |= keep
        self.first = rec.first if self.first is None else self.first

    def __enter__(self):
        self.wave.coverages.append(self)
        return self

    def __exit__(self, *exc):
        self.wave.coverages.remove(self)
        if exc[0] is not None or not self.active:
            return False
        from ..arch.kslots import format_token_set
        members = self.wave.members
        if isinstance(self.ranges, tuple):                 # a range per member: lo..hi-1
            lo, hi = self.ranges
            span = max(int((hi - lo).max(initial=0)), 1)
            want = np.arange(span)[None, :] < (hi - lo)[:, None]
        else:
            lo = np.array([r[0] if len(r) else 0 for r in self.ranges], np.int64)
            span = max([int(r[-1] - r[0] + 1) if len(r) else 0 for r in self.ranges] + [1])
            want = np.zeros((members, span), bool)
            for m, r in enumerate(self.ranges):
                want[m, r - lo[m]] = True
        want &= self.entered[:, None]
        got = np.concatenate(self.consumed, axis=1) if self.consumed else np.full((members, 0), -1)
        off = got - lo[:, None]
        ok = (got >= 0) & (off >= 0) & (off < span)
        idx = (np.arange(members)[:, None] * span + off)[ok]
        counts = np.bincount(idx, minlength=members * span).reshape(members, span)
        bad = ((counts == 0) | (counts > 1)) & want
        for m in np.nonzero(bad.any(axis=1))[0].tolist():
            never = (np.nonzero(want[m] & (counts[m] == 0))[0] + lo[m]).tolist()
            multi = {int(t + lo[m]): int(counts[m, t]) for t in np.nonzero(want[m] & (counts[m] > 1))[0]}
            msg = []
            if never:
                msg.append(f"{len(never)} {self.field}s never consumed {format_token_set(never)}")
            if multi:
                msg.append(f"{len(multi)} consumed more than once {format_token_set(sorted(multi))}")
            self.wave.finding("token-coverage", f"output tile {self.key!r}: " + "; ".join(msg),
                              lane=m * self.wave.lanes, instruction=self.first, tile=repr(self.key),
                              never=never, multiple=multi)
        return False
