"""A kernel's decoded program translated once into the steps its waves run.

The semantics table (semantics.OPS, one function per operation) checks an instruction's operands
and modifiers and then executes it, each time a wave reaches it. What depends on the instruction
alone is decided once here: a semantics function with a ``prepare(decoded)`` gives, per
instruction, a step ``step(st)`` that only executes (the same code the function runs after its
checks), so the hot path makes no operand-form decisions; an instruction whose checks fail, or
whose function has no ``prepare``, keeps the plain ``fn(st, decoded)`` call, which names what is
wrong when a wave gets there. The steps live on the Program, which is kept with its Kernel (cache.py:
parsed and decoded once per content), so a kernel is translated once per process.
"""
from __future__ import annotations

ENABLED = True          # False: every instruction through its semantics function (the A/B of the speed figures)
# Without provenance a register move, v_perm_b32 and a VALU table row write their words and written
# bits straight into the register file (WaveState.lean), not through the back end's values, whose
# provenance planes they would only carry empty. False: the value path (the A/B, and the tests that
# compare both).
LEAN = True


def steps(program) -> tuple:
    """One prepared step (or None) per instruction of ``program`` (run.Program)."""
    if not ENABLED:
        return (None,) * len(program.decoded)
    out = []
    for d, fn in zip(program.decoded, program.fns):
        prepare = getattr(fn, "prepare", None)
        out.append(None if prepare is None else prepare(d))
    return tuple(out)
