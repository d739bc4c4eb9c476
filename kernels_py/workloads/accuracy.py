"""The project's accuracy figures on the default data: `python -m kernels_py.workloads.accuracy [--prefill N]`.

For each context length: the INT8 reference math (kernels_py.reference.attention.attention_int8) against
the BF16 reference, with fragment and contiguous (the bug) W grouping, smooth-K on and off;
the ratio contiguous/fragment; the INT8 PV against the pv_bf16 twin on the same int8 cache and QK
(the PV-only comparison, which leaves out the QK and cache errors); BF16 against exact fp32.
"""
from __future__ import annotations

import argparse
import time

from kernels_py.workloads.data import make_attention_inputs
from kernels_py.reference.int8_cache import build_paged_cache
from kernels_py.reference.attention import attention_bf16, attention_fp32, attention_int8, metrics

CONTEXTS = (4096, 8192, 16384)


def accuracy_row(context_len: int, *, seed: int = 0, num_queries: int | None = None, **data_kw) -> dict:
    """All figures for one context length on make_attention_inputs(seed, ...) data (max_abs unless named)."""
    d = make_attention_inputs(seed, context_lens=context_len, num_queries=num_queries, **data_kw)
    q, k, v, lens = d["q"], d["k"], d["v"], d["context_lens"]
    bf16 = attention_bf16(q, k, v, lens)
    smooth = build_paged_cache(k, v, lens, smooth_k=True, seed=seed)
    plain = build_paged_cache(k, v, lens, smooth_k=False, seed=seed)
    frag = attention_int8(q, smooth, grouping="fragment")
    m = metrics(frag, bf16)
    row = dict(context_len=context_len,
               fragment=m["max_abs"],
               fragment_no_smooth=metrics(attention_int8(q, plain, grouping="fragment"), bf16)["max_abs"],
               contiguous=metrics(attention_int8(q, smooth, grouping="contiguous"), bf16)["max_abs"],
               fragment_rms=m["rms"], fragment_rel_l1=m["rel_l1"], fragment_cos_sim=m["cos_sim"],
               pv_only=metrics(frag, attention_int8(q, smooth, pv="bf16"))["max_abs"],
               bf16_vs_fp32=metrics(bf16, attention_fp32(q, k, v, lens))["max_abs"],
               out_max=float(abs(bf16).max()))
    row["ratio"] = row["contiguous"] / row["fragment"]
    return row


COLUMNS = [("context_len", "context", "{:>7d}"), ("fragment", "frag", "{:.2e}"),
           ("fragment_no_smooth", "frag,no-smoothK", "{:.2e}"), ("contiguous", "contig", "{:.2e}"),
           ("ratio", "contig/frag", "{:.0f}x"), ("fragment_rel_l1", "frag relL1", "{:.4f}"),
           ("fragment_cos_sim", "frag cos", "{:.6f}"), ("pv_only", "PV-only", "{:.2e}"),
           ("bf16_vs_fp32", "bf16 vs fp32", "{:.2e}"), ("out_max", "max|out|", "{:.3f}")]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--contexts", type=int, nargs="+", default=list(CONTEXTS))
    ap.add_argument("--prefill", type=int, metavar="N", help="N prefill queries instead of decode")
    a = ap.parse_args(argv)
    kind = f"prefill, {a.prefill} queries" if a.prefill else "decode"
    print(f"INT8 reference vs BF16 reference, max_abs ({kind}; 8 heads, 1 kv head, head_dim 128, "
          f"seed {a.seed}; smooth-K on unless said)")
    print(" | ".join(h for _, h, _ in COLUMNS) + " | seconds")
    for ctx in a.contexts:
        t = time.perf_counter()
        row = accuracy_row(ctx, seed=a.seed, num_queries=a.prefill)
        print(" | ".join(f.format(row[key]) for key, _, f in COLUMNS) + f" | {time.perf_counter() - t:.1f}")


if __name__ == "__main__":
    main()
