"""The asm front end's speed: lane-instructions per second of the compiled
decode — `gfxsim run paged_attention_decode --frontend asm ... --report json` at the users' shape
(64 query heads on 8 KV heads, head_dim 128, block 16, gfx936) at 4096 and 16384 tokens, provenance
off and on, and at each context provenance-on's launches over provenance-off's (target <= 3x); the
16K decode with provenance has its own target (launches <= 10 s, peak RSS < 2 GiB). The report
counts the lane-instructions the front end executed (active lanes x instructions, both launches:
decode and reduce) and the seconds its launches took; the figure is their ratio.
``seconds`` is the whole command's wall time (start-up, data generation and references too).
"""
from __future__ import annotations


from bench.common import gfxsim_cmd, lane_rate_runs, median

ASM_CONTEXTS = (4096, 16384)
ASM_QUICK_CONTEXTS = (512,)
ASM_MODES = {"off": ["--no-provenance"], "on": []}
ASM_TARGETS = {"off": 20e6, "on": 2e6}          # targets, in lane-instructions per second
ON_OVER_OFF = 3.0                               # provenance-on launches over provenance-off's
LONG = dict(context=16384, seconds=10.0, rss=2 * 2 ** 30)   # the batched 16K decode with provenance


def asm_decode(bench, shape):
    a = bench.args
    for ctx in (ASM_QUICK_CONTEXTS if a.quick else ASM_CONTEXTS):
        sims = {mode: _one(bench, shape, ctx, mode, flags) for mode, flags in ASM_MODES.items()}
        if sims["off"] and sims["on"]:
            r = sims["on"] / sims["off"]
            bench.add("asm", f"asm decode {ctx}: provenance-on launches over provenance-off", seconds=sims["on"],
                      ratio=r, ratio_text=f"{r:.2f}x provenance off", target=f"<= {ON_OVER_OFF:g}x" if not a.quick else "",
                      met=(r <= ON_OVER_OFF) if not a.quick else None, context=ctx, mode="asm-on-over-off")


def _one(bench, shape, ctx, mode, flags):
    """One figure: the command run --repeat times; the median seconds of its launches (None if it failed)."""
    a = bench.args
    label = f"asm decode {ctx}: lane-instructions/s, {'provenance ' + mode}"
    cmd = gfxsim_cmd() + ["run", "paged_attention_decode", "--frontend", "asm", "--heads", str(shape["heads"]),
                          "--kv-heads", str(shape["kv_heads"]), "--head-dim", str(shape["head_dim"]),
                          "--block-size", str(shape["block_size"]), "--arch", shape["arch"],
                          "--context", str(ctx), "--report", "json"] + flags
    runs, rss, rates, sims, err, lanes = lane_rate_runs(cmd, a.repeat, a.timeout, bench.mem_limit)
    if err:
        bench.add("asm", label, runs=runs, error=err, context=ctx, mode=f"asm-{mode}", command=" ".join(cmd[3:]))
        return None
    rate, sim = median(rates), median(sims)
    parts, oks = [], []
    if not a.quick:
        parts.append(f">= {ASM_TARGETS[mode] / 1e6:g} M/s")
        oks.append(rate >= ASM_TARGETS[mode])
        if mode == "on" and ctx == LONG["context"]:
            parts += [f"launches <= {LONG['seconds']:g} s", f"RSS < {LONG['rss'] / 2 ** 30:g} GiB"]
            oks += [sim <= LONG["seconds"], max(rss) < LONG["rss"]]
    bench.add("asm", label, seconds=median(runs), runs=runs, rss=max(rss), ratio=None,
              ratio_text=f"{rate / 1e6:.3g} M lane-instr/s", target=", ".join(parts),
              met=all(oks) if oks else None, context=ctx, mode=f"asm-{mode}",
              command="gfxsim " + " ".join(cmd[3:]), lane_instructions=lanes,
              lane_instructions_per_second=rate, simulated_seconds=sim)
    return sim
