"""What `gfxsim hip run` prints: the launch, the outputs, the tokens each matrix instruction
consumed and the findings, as text or as JSON (the keys of `gfxsim run --report json` where they
mean the same: ``mmacs``, ``findings``, ``checks``, ``seconds``, ``lane_instructions``).
"""
from __future__ import annotations

import itertools

from .door import Launched, demangled


def report(launched: Launched, *, source: str, grid, block) -> dict:
    """The run as a JSON-able dict."""
    run, k = launched.run, launched.kernel
    mmacs = []
    for rec in run.records:
        a, b = rec.k_slots("A"), rec.k_slots("B")
        for m in rec.live:
            mmacs.append({"index": rec.first + m, "instruction": rec.op, "label": rec.label,
                          "workgroup": list(rec.workgroups[m]), "wave": rec.wave, "source": rec.source,
                          "a_tokens": a[m].tolist() if a is not None else [],
                          "b_tokens": b[m].tolist() if b is not None else []})
    not_run = sorted(run.checks_not_run)
    out = {"kernel": k.name, "source": source, "arch": run.arch, "grid": list(run.grid), "block": list(block),
           "outputs": {n: {"shape": list(a.shape), "dtype": str(a.dtype)} for n, a in launched.outputs.items()},
           "mmacs": mmacs, "findings": [f.to_dict() for f in run.findings],
           "checks": {"not_run": not_run, "reason": "; ".join(run.checks_not_run_why) if not_run else None},
           "seconds": round(run.seconds, 3), "approximated": run.approximations, "schedule": run.schedule}
    if run.lane_instructions is not None:
        out["lane_instructions"] = int(run.lane_instructions)
    return out


def text(launched: Launched, *, source: str, block, shown: int = 4) -> str:
    """A few lines: the launch, each output, the first tagged matrix instructions' token sets, the
    findings by kind."""
    from ..arch.kslots import format_token_set
    run, k = launched.run, launched.kernel
    name = demangled(k.name)
    title = k.name if name == k.name else f"{name} ({k.name})"
    lines = [f"{title} from {source} on {run.arch}: grid {tuple(run.grid)}, block {tuple(block)}, "
             f"{run.seconds:.2f} s simulated"
             + (f", {run.lane_instructions} lane-instructions" if run.lane_instructions is not None else "")
             + (f", waves scheduled {run.schedule}" if run.schedule != "in-order" else "")]
    for n, a in launched.outputs.items():
        lines.append(f"  {n}: {a.dtype} {tuple(a.shape)}")
    lines.append(f"  {run.mmac_count()} matrix instructions")
    for e in itertools.islice(run.tagged_mmacs(), shown):      # made one by one: only those shown
        sets = ", ".join(f"{op} tokens {format_token_set(e.token_set(op))}" for op in "AB" if e.token_set(op))
        lines.append(f"    #{e.index} {e.op} wg{e.workgroup} wave {e.wave}: {sets or 'no tagged K slots'}")
    if run.approximations:
        lines.append(f"  correctly rounded stand-ins (hardware within 1 ulp): {', '.join(run.approximations)}")
    not_run = sorted(run.checks_not_run)
    if not_run:
        lines.append(f"  checks not run ({'; '.join(run.checks_not_run_why)}): {', '.join(not_run)}")
    kinds: dict = {}
    for f in run.findings:
        kinds.setdefault(f.kind, []).append(f)
    if not kinds:
        lines.append("  findings: none" + (" among the checks that ran" if not_run else ""))
    for kind, fs in kinds.items():
        lines.append(f"  {len(fs)} {kind} finding(s), e.g.:")
        lines += [f"    {f}" for f in fs[:2]]
    return "\n".join(lines)
