"""Run vLLM's compiled paged-attention kernels on gfxsim's asm front end and check them.

Each QKV instance runs over grid (seqs, partitions, kv_heads) with 256 work-items, as vLLM's
launcher starts it; its max logits, exp-sums and partial outputs are compared with a float64
reference. The reduce then merges the partitions it left. K and V caches carry each slot's token
(fields ``ktoken`` / ``vtoken``) and sequence, so every matrix instruction's A operand names the
tokens it consumed.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from gfxsim.asm.parse import parse_file
from gfxsim.asm.run import run_asm
from gfxsim.machine.memory import Buffer

from .paged_cases import VALUE, Shape, fp8_mfma_logits_model, make_case, reference


@dataclass
class Outcome:
    """What one kernel run gave: ``ok`` when it ran and matched, else ``error`` (gfxsim's message)."""
    label: str
    shape: str
    ran: bool = False
    ok: bool = False
    error: str = ""
    errors: dict = field(default_factory=dict)      # quantity -> max relative error
    tokens: str = ""
    findings: str = ""
    lane_instructions: int | None = None
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def lane_rate(self) -> float | None:
        return self.lane_instructions / self.seconds if self.lane_instructions and self.seconds else None


def kernel_of(path):
    f = parse_file(path)
    (k,) = f.kernels.values()
    return k


def unsupported(kernel) -> list[str]:
    """What the asm front end names as unsupported before anything runs."""
    return list(kernel.program.unsupported())


def blocker(path, arch: str = "gfx942") -> str:
    """What stops the kernel before it runs (metadata, operand syntax, instructions without
    semantics and matrix instructions without a record, by mnemonic and count), or "" when
    nothing does. An ABI error is followed by the instructions that would stop it next."""
    try:
        k = kernel_of(path)
        miss = unsupported(k) + no_record(k, arch)
    except Exception as e:          # gfxsim's own error names kernel, line and form
        msg = f"{type(e).__name__}: {_short(str(e))}"
        later = _instructions_past_abi(path, arch)
        return msg + (f"; behind it: {later}" if later else "")
    return _counted(miss)


def _counted(miss: list[str]) -> str:
    if not miss:
        return ""
    c = Counter(m.split(": ", 1)[1] for m in miss)
    return f"{len(miss)} unsupported: " + ", ".join(f"{k} x{v}" for k, v in c.most_common())


def no_record(kernel, arch: str) -> list[str]:
    """'line N: mnemonic (no record)' of matrix instructions the arch has no record of."""
    from gfxsim.arch import get_arch
    have = get_arch(arch).instructions
    return [f"line {i.line}: {i.mnemonic} (no {arch} record)" for i in kernel.instructions
            if i.mnemonic.startswith("v_mfma") and i.mnemonic.removesuffix("_e64") not in have]


def _instructions_past_abi(path, arch: str) -> str:
    """Instructions without semantics or record, and operand forms gfxsim cannot read, listed
    without the launch ABI (or the parse) that failed first."""
    import re

    from gfxsim.asm import semantics
    from gfxsim.asm.run import decode
    try:
        k = kernel_of(path)
    except Exception as e:
        return f"{type(e).__name__}: {_short(str(e))}"
    miss = []
    for ins in k.instructions:
        try:
            d = decode(ins, k.name)
        except Exception as e:      # an operand form: name the modifier, not the registers
            form = re.search(r"unsupported modifier '([a-z_]+)", str(e))
            miss.append(f"line {ins.line}: {ins.mnemonic} [{form.group(1) if form else 'operands'}]")
            continue
        if d.enc == "dpp" or (not d.mnemonic.startswith("v_mfma") and d.mnemonic not in semantics.OPS):
            miss.append(f"line {ins.line}: {ins.mnemonic}")
    return _counted(miss + no_record(k, arch))


def _short(msg: str) -> str:
    """A message with the mangled kernel name cut to its readable head."""
    import re
    return re.sub(r"_Z\d+(paged_attention_\w+?_kernel)\w*", r"\1<...>", msg)[:400]


def qkv_args(case: dict, kernel, nulls: bool) -> tuple[list, dict]:
    """The 20 arguments of vLLM's QKV kernels (metadata order) and the output Buffers by name.
    ``nulls``: the optional pointers (query_start_loc, alibi_slopes) null, as vLLM's decode passes
    them; otherwise a decode query_start_loc (0, 1, 2, ...) and an unread alibi buffer."""
    s: Shape = case["shape"]
    P = s.partitions
    # Q's head-dim index as a tag: the fp8-MFMA path's Q scale (an amax over those dims) can then
    # be checked where it is applied and undone (scale-group-mismatch, dequant-direction)
    q = Buffer("q", case["q"], tags={"qdim": np.broadcast_to(np.arange(case["q"].shape[-1]), case["q"].shape)})
    k = Buffer("k_cache", case["k"], tags=case["k_tags"])
    v = Buffer("v_cache", case["v"], tags=case["v_tags"])
    outs = {"exp_sums": Buffer("exp_sums", np.full((s.seqs, s.heads, P), np.nan, np.float32)),
            "max_logits": Buffer("max_logits", np.full((s.seqs, s.heads, P), np.nan, np.float32)),
            "tmp_out": Buffer("tmp_out", np.zeros((s.seqs, s.heads, P, s.head), np.uint16))}
    final = Buffer("final_out", np.zeros((s.seqs, s.heads, s.head), np.uint16))
    qsl = None if nulls else Buffer("query_start_loc", np.arange(s.seqs + 1, dtype=np.int32))
    alibi = None if nulls else Buffer("alibi_slopes", np.zeros(s.heads, np.float32))
    args = [q, k, v, s.kv_heads, np.float32(case["scale"]), Buffer("block_tables", case["tables"]),
            Buffer("seq_lens", case["context"]), qsl, s.max_blocks, alibi, s.heads * s.head,
            s.kv_heads * s.head * s.block, s.head * s.block, outs["exp_sums"], outs["max_logits"],
            outs["tmp_out"], final, s.max_blocks, Buffer("k_scale", np.array([case["k_scale"]], np.float32)),
            Buffer("v_scale", np.array([case["v_scale"]], np.float32))]
    return _named(kernel, args), outs


def reduce_args(case: dict, kernel, qkv_outs: dict, nulls: bool) -> tuple[list, Buffer]:
    s: Shape = case["shape"]
    out = Buffer("out", np.zeros((s.seqs, s.heads, s.head), np.uint16))
    qsl = None if nulls else Buffer("query_start_loc", np.arange(s.seqs + 1, dtype=np.int32))
    fp8_out = None if nulls else Buffer("fp8_out_scale", np.ones(1, np.float32))
    # the partition state as numbers (fresh Buffers): a Buffer stored by one launch with token
    # footprints that span windows cannot be loaded by the next (gfxsim's MemProv.gather)
    fresh = {k: Buffer(b.name, b.array.copy()) for k, b in qkv_outs.items()}
    args = [out, fresh["exp_sums"], fresh["max_logits"], fresh["tmp_out"],
            Buffer("seq_lens", case["context"]), qsl, s.partitions, fp8_out]
    return _named(kernel, args), out


def _named(kernel, args: list) -> dict:
    """Arguments by the kernel's metadata names (explicit ones; hidden ones are the launch's)."""
    names = [a.name for a in kernel.program.abi.args if not a.kind.startswith("hidden")]
    if len(names) != len(args):
        raise ValueError(f"{kernel.name}: metadata lists {len(names)} explicit arguments, vLLM passes {len(args)}")
    return dict(zip(names, args))


def _rel(got, want) -> float:
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    m = ~np.isnan(want)
    if not m.any():
        return 0.0
    if np.isnan(got[m]).any():
        return float("inf")
    return float(np.max(np.abs(got[m] - want[m])) / max(np.max(np.abs(want[m])), 1e-30))


def token_report(run, case: dict) -> tuple[str, dict]:
    """Per matrix instruction, the tokens its operands consumed from each cache (K in QK^T, V in
    PV; A in mfma16, either side in mfma4); how often each (sequence, token) was consumed."""
    s: Shape = case["shape"]
    uses = {"ktoken": Counter(), "vtoken": Counter()}
    sizes = {"ktoken": Counter(), "vtoken": Counter()}
    n_mm = 0
    for m in run.mmacs():
        n_mm += 1
        # an instruction reading V bytes is a PV one (its P operand also names K tokens, through
        # the softmax); otherwise K bytes make it QK^T. The cache is A or B, by kernel.
        vt = m.token_set("A", "vtoken") | m.token_set("B", "vtoken")
        fld, toks = ("vtoken", vt) if vt else ("ktoken", m.token_set("A", "ktoken") | m.token_set("B", "ktoken"))
        if toks:
            seqs = m.token_set("A", "seq") | m.token_set("B", "seq")
            for t in toks:
                uses[fld][(min(seqs) if len(seqs) == 1 else -1, t)] += 1
            sizes[fld][len(toks)] += 1
    parts = [f"{n_mm} matrix instructions"]
    detail = {}
    for fld, name in (("ktoken", "K"), ("vtoken", "V")):
        c = uses[fld]
        want = {(q, t) for q in range(s.seqs) for t in range(s.context[q])}
        never = want - set(c)
        counts = Counter(c.values())
        parts.append(f"{name}: {sum(sizes[fld].values())} instr., tokens/instr {dict(sorted(sizes[fld].items()))}, "
                     f"uses/token {dict(sorted(counts.items()))}, never {len(never)}")
        detail[name] = dict(per_instruction=dict(sizes[fld]), uses=dict(counts), never=len(never))
    return "; ".join(parts), detail


def run_qkv(inst, path, shape: Shape, *, seed: int = 0, nulls: bool = True, batch: int | None = None,
            provenance: bool = True) -> tuple[Outcome, dict | None, dict | None]:
    """One QKV instance at ``shape``: the Outcome, the case, and its output Buffers (for the reduce)."""
    o = Outcome(inst.label, shape.describe())
    case = make_case(shape, inst.dtype, inst.kv, seed)
    o.error = blocker(path)
    if o.error:
        return o, case, None
    kernel = kernel_of(path)
    args, outs = qkv_args(case, kernel, nulls)
    grid = (shape.seqs, shape.partitions, shape.kv_heads)
    # workgroups side by side, as the compiled twins run: all of them without provenance, with it
    # 128 at a time (a batch holds every VGPR byte's provenance of every member)
    batch = batch or (128 if provenance else int(np.prod(grid)))
    t0 = time.perf_counter()
    try:
        run = run_asm(kernel, grid=grid, block=256, args=args,
                      trace=False, provenance=provenance, batch=batch)
    except Exception as e:          # the report lists what stopped it, with gfxsim's message
        o.error = f"{type(e).__name__}: {_short(str(e))}"
        return o, case, None
    o.seconds = time.perf_counter() - t0
    o.ran = True
    o.lane_instructions = run.lane_instructions
    o.seconds = run.seconds or o.seconds
    ref = reference(case)
    val = VALUE[inst.dtype]
    got_ml = outs["max_logits"].array
    got_es = outs["exp_sums"].array
    o.errors = {"max_logits": _rel(got_ml, ref["max_logits"]), "exp_sums": _rel(got_es, ref["exp_sums"]),
                "partial_out": _rel(val(outs["tmp_out"].array), ref["partial"])}
    o.extra["max_logits_ratio"] = float(np.nanmedian(got_ml / ref["max_logits"]))
    tol = {"max_logits": 1e-5, "exp_sums": 1e-4, "partial_out": 2e-2}
    o.ok = all(o.errors[k] <= tol[k] for k in tol)
    if inst.kv == "fp8" and inst.mfma == "Fp8":
        # the fp8-MFMA path scales every logit by about (q_max/224)^2: its own arithmetic, modelled
        model = fp8_mfma_logits_model(case)
        o.extra["vs_defect_model"] = {"max_logits": _rel(got_ml, model["max_logits"]),
                                      "exp_sums": _rel(got_es, model["exp_sums"])}
    if provenance:
        o.tokens, o.extra["tokens"] = token_report(run, case)
    o.findings = run.summary().split("traced, ")[-1] if run.findings else "no findings"
    return o, case, outs


def run_reduce(inst, path, case: dict, qkv_outs: dict, *, nulls: bool = True, batch: int = 8) -> Outcome:
    s: Shape = case["shape"]
    o = Outcome(inst.label, s.describe())
    o.error = blocker(path)
    if o.error:
        return o
    kernel = kernel_of(path)
    args, out = reduce_args(case, kernel, qkv_outs, nulls)
    try:
        run = run_asm(kernel, grid=(s.heads, s.seqs), block=s.head, args=args, trace=False, batch=batch)
    except Exception as e:
        o.error = f"{type(e).__name__}: {_short(str(e))}"
        return o
    o.ran = True
    o.lane_instructions, o.seconds = run.lane_instructions, run.seconds
    o.errors = {"out": _rel(VALUE[case["dtype"]](out.array), reference(case)["out"])}
    o.ok = o.errors["out"] <= 2e-2
    o.findings = run.summary().split("traced, ")[-1] if run.findings else "no findings"
    return o
