"""The asm front end's speed: lane-instructions per second of the compiled
decode — `gfxsim run paged_attention_decode --frontend asm ... --report json` at the users' shape
(64 query heads on 8 KV heads, head_dim 128, block 16, gfx936) at 4096 tokens, provenance off and
on. The report counts the lane-instructions the front end executed (active lanes x instructions,
both launches: decode and reduce) and the seconds its launches took; the figure is their ratio.
``seconds`` is the whole command's wall time (start-up, data generation and references too).
"""
from __future__ import annotations


from bench.common import gfxsim_cmd, lane_rate_runs, median

ASM_CONTEXT = 4096
ASM_QUICK_CONTEXT = 512
ASM_MODES = {"off": ["--no-provenance"], "on": []}
ASM_TARGETS = {"off": 20e6, "on": 2e6}          # targets, in lane-instructions per second


def asm_decode(bench, shape):
    a = bench.args
    ctx = ASM_QUICK_CONTEXT if a.quick else ASM_CONTEXT
    for mode, flags in ASM_MODES.items():
        label = f"asm decode {ctx}: lane-instructions/s, {'provenance ' + mode}"
        cmd = gfxsim_cmd() + ["run", "paged_attention_decode", "--frontend", "asm", "--heads", str(shape["heads"]),
                              "--kv-heads", str(shape["kv_heads"]), "--head-dim", str(shape["head_dim"]),
                              "--block-size", str(shape["block_size"]), "--arch", shape["arch"],
                              "--context", str(ctx), "--report", "json"] + flags
        runs, rss, rates, sims, err, lanes = lane_rate_runs(cmd, a.repeat, a.timeout, bench.mem_limit)
        if err:
            bench.add("asm", label, runs=runs, error=err, context=ctx, mode=f"asm-{mode}", command=" ".join(cmd[3:]))
            continue
        rate = median(rates)
        target = ASM_TARGETS[mode]
        bench.add("asm", label, seconds=median(runs), runs=runs, rss=max(rss), ratio=None,
                  ratio_text=f"{rate / 1e6:.3g} M lane-instr/s", target=f">= {target / 1e6:g} M/s" if not a.quick else "",
                  met=(rate >= target) if not a.quick else None, context=ctx, mode=f"asm-{mode}",
                  command="gfxsim " + " ".join(cmd[3:]), lane_instructions=lanes,
                  lane_instructions_per_second=rate, simulated_seconds=median(sims))
