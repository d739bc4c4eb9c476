"""Compare a `gfxsim run --report json` of the asm front end with the Python front end's: the
issue's "same mmacs token sets and findings" as data, for tests and for a check by hand.

    python -m gfxsim.asm.parity PY.json ASM.json      # prints the differences, exit 1 if any

What must agree: per (workgroup, wave), the multiset of matrix instructions by opcode with the
token of every K slot of A and B (the compiled code may issue them in another order and number
them differently: index, label and source are not compared); the findings by kind and count,
and per finding its workgroup, wave and the details that name tokens and groups (scale-group:
scale_over, k_set, foreign, extra; others: their details less instruction indices, registers and
sources, which name each front end's own code). The two reports' checks not run must agree too,
apart from what one front end lists and the other does not (shown, not failed, when ``strict``
is off).
"""
from __future__ import annotations

import json
import sys
from collections import Counter

# details naming one front end's own code or numbering, not the kernel's behaviour
_OWN = {"mma_event", "instruction", "register", "source", "label", "lanes", "mismatches", "first", "events",
        "count"}            # count: how many statements fired it (one vector op in Python, one per register compiled)


def mmac_sets(report) -> Counter:
    return Counter((tuple(m["workgroup"]), m["wave"], m["instruction"], _slots(m["a_tokens"]), _slots(m["b_tokens"]))
                   for m in report["mmacs"])


def _slots(tokens) -> tuple:
    """An operand's K-slot tokens; no token in any slot is one form whether the front end recorded
    the slots (all -1) or, its operand carrying no provenance at all, none (an empty list)."""
    return tuple(tokens) if any(t >= 0 for t in tokens) else ()


def _freeze(x):
    if isinstance(x, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in x.items()))
    if isinstance(x, list):
        return tuple(_freeze(v) for v in x)
    return x


def finding_keys(report) -> Counter:
    return Counter((f["kind"], tuple(f["workgroup"]) if f["workgroup"] is not None else None, f["wave"],
                    _freeze({k: v for k, v in (f.get("details") or {}).items() if k not in _OWN}))
                   for f in report["findings"])


def differences(py: dict, asm: dict) -> list[str]:
    """What differs between the two reports (empty: parity)."""
    out = []
    a, b = mmac_sets(py), mmac_sets(asm)
    if a != b:
        only_py, only_asm = a - b, b - a
        out.append(f"mmacs: {sum(a.values())} python, {sum(b.values())} asm; {sum(only_py.values())} only in "
                   f"python (first {next(iter(only_py), None)}), {sum(only_asm.values())} only in asm "
                   f"(first {next(iter(only_asm), None)})")
    ka, kb = Counter(f["kind"] for f in py["findings"]), Counter(f["kind"] for f in asm["findings"])
    if ka != kb:
        out.append(f"finding counts: python {dict(ka)}, asm {dict(kb)}")
    fa, fb = finding_keys(py), finding_keys(asm)
    if fa != fb:
        only_py, only_asm = fa - fb, fb - fa
        out.append(f"findings: {sum(only_py.values())} only in python (first {str(next(iter(only_py), None))[:300]}), "
                   f"{sum(only_asm.values())} only in asm (first {str(next(iter(only_asm), None))[:300]})")
    na, nb = set(py["checks"]["not_run"]), set(asm["checks"]["not_run"])
    if na != nb:
        out.append(f"checks not run: python {sorted(na)}, asm {sorted(nb)}")
    return out


class ReportError(Exception):
    """A report file that cannot be compared; the message names it."""


def load_report(path) -> dict:
    """One `gfxsim run --report json` object from ``path``."""
    try:
        with open(path) as f:
            report = json.load(f)
    except OSError as e:
        raise ReportError(f"{path}: cannot read: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: not one JSON report of `gfxsim run --report json` (one --context): {e}") from None
    missing = [k for k in ("mmacs", "findings") if not isinstance(report, dict) or k not in report]
    if missing:
        raise ReportError(f"{path}: not a `gfxsim run --report json` report: no {', '.join(missing)}")
    return report


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m gfxsim.asm.parity PY.json ASM.json", file=sys.stderr)
        return 2
    try:
        py, asm = (load_report(p) for p in argv)
    except ReportError as e:
        print(f"python -m gfxsim.asm.parity: error: {e}", file=sys.stderr)
        return 2
    diff = differences(py, asm)
    for d in diff:
        print(d)
    if not diff:
        print(f"parity: {len(py['mmacs'])} matrix instructions, {len(py['findings'])} findings "
              f"({dict(Counter(f['kind'] for f in py['findings']))}) agree")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
