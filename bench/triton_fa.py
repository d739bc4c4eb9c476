"""A Triton flash-attention forward on the asm front end: lane-instructions per second of
`gfxsim triton bench/triton_attention.py:attn_fwd ... --report json` (1024 tokens, head_dim 64,
fp16, BLOCK_M 128 / BLOCK_N 64, 4 warps: 8 programs run side by side with --batch 8), provenance
off and on; the figure is the report's lane-instructions over the seconds its launch took (the
compile, cached after the first run, is outside it). Skipped, with a note, without triton.
"""
from __future__ import annotations


from bench.common import ROOT, gfxsim_cmd, lane_rate_runs, median, run_child

SEQ, QUICK_SEQ = 1024, 256
MODES = {"off": ["--no-provenance"], "on": []}


def command(seq: int, flags) -> list[str]:
    kernel = ROOT / "bench" / "triton_attention.py"
    programs = -(-seq // 128)
    tensor = f"randn:{seq}x64:float16"
    return gfxsim_cmd() + ["triton", f"{kernel}:attn_fwd", "--grid", str(programs), "--batch", str(programs),
                           "--num-warps", "4", "--arg", f"q_ptr={tensor}", "--arg", f"k_ptr={tensor}",
                           "--arg", f"v_ptr={tensor}", "--arg", f"o_ptr=zeros:{seq}x64:float16",
                           "--arg", f"seq_len={seq}", "--arg", "sm_scale=0.125", "--arg", "HEAD=64",
                           "--arg", "BLOCK_M=128", "--arg", "BLOCK_N=64", "--report", "json", *flags]


def triton_fa(bench):
    a = bench.args
    try:
        import triton  # noqa: F401
    except ImportError as e:
        bench.notes.append(f"Triton figure skipped: triton is not installed ({e}); pip install 'gfxsim[triton]'")
        return
    seq = QUICK_SEQ if a.quick else SEQ
    run_child(command(seq, ["--no-provenance"]), timeout=a.timeout)         # compiles once (cached)
    for mode, flags in MODES.items():
        label = f"Triton flash-attention forward {seq}: lane-instructions/s, provenance {mode}"
        cmd = command(seq, flags)
        runs, rss, rates, sims, err, lanes = lane_rate_runs(cmd, a.repeat, a.timeout, bench.mem_limit)
        shown = "gfxsim " + " ".join(cmd[len(gfxsim_cmd()):]).replace(str(ROOT) + "/", "")
        if err:
            bench.add("triton", label, runs=runs, error=err, context=seq, mode=f"triton-{mode}", command=shown)
            continue
        rate = median(rates)
        bench.add("triton", label, seconds=median(runs), runs=runs, rss=max(rss), ratio=None,
                  ratio_text=f"{rate / 1e6:.3g} M lane-instr/s", context=seq, mode=f"triton-{mode}", command=shown,
                  lane_instructions=lanes, lane_instructions_per_second=rate, simulated_seconds=median(sims))
