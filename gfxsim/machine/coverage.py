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
            self.expect = [self._expected(expect, m) for m in range(wave.members)]
            self.counts = [dict() for _ in range(wave.members)]
        self.first = None

    def _expected(self, expect, member):
        if isinstance(expect, tuple) and len(expect) == 2:
            lo, hi = (int(x.val[0, member * self.wave.lanes]) if hasattr(x, "val") else int(x) for x in expect)
            return list(range(lo, hi))
        return sorted(int(x) for x in expect)

    def add(self, wave, rec):
        if not self.active or rec.a is None:
            return
        from .matrix import _expand
        side = rec.b if self.operand == "B" else rec.a
        insn = rec.insn
        if self.field in side:
            kind, arr = side[self.field]
            full = _expand(kind, arr, self.operand, insn.M, insn.N, insn.K)
            per_k = full[::insn.blocks, :, 0] if self.operand == "B" else full[::insn.blocks, 0, :]   # [members, K]
        else:
            per_k = np.full((wave.members, insn.K), -1)
        for m in rec.live:
            counts = self.counts[m]
            for v in per_k[m].tolist():
                counts[v] = counts.get(v, 0) + 1
        self.first = rec.first if self.first is None else self.first

    def __enter__(self):
        self.wave._coverage.append(self)
        return self

    def __exit__(self, *exc):
        self.wave._coverage.remove(self)
        if exc[0] is not None or not self.active:
            return False
        from ..arch.kslots import format_token_set
        for m, (expect, counts) in enumerate(zip(self.expect, self.counts)):
            never = [t for t in expect if counts.get(t, 0) == 0]
            multi = {t: c for t, c in counts.items() if t in set(expect) and c > 1}
            if never or multi:
                msg = []
                if never:
                    msg.append(f"{len(never)} {self.field}s never consumed {format_token_set(never)}")
                if multi:
                    msg.append(f"{len(multi)} consumed more than once {format_token_set(sorted(multi))}")
                self.wave.finding("token-coverage", f"output tile {self.key!r}: " + "; ".join(msg),
                                  lane=m * self.wave.lanes, instruction=self.first, tile=repr(self.key),
                                  never=never, multiple={int(k): int(v) for k, v in multi.items()})
        return False
