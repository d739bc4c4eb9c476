"""A swap-in decode kernel for `gfxsim sweep examples/sweep_swap_in.toml` (and `gfxsim run
paged_attention_decode --kernel-fn examples/my_decode.py:my_decode`): the signature of
kernels_py.paged_attention_decode.paged_attention_decode, here calling it unchanged. Put your own
kernel's statements in its place; the sweep runs it on the same inputs, references and checks."""
from kernels_py.paged_attention_decode import paged_attention_decode


def my_decode(w, q, k_cache, v_cache, k_scale, v_scale, block_tables, context_lens, exp_sums, max_logits, tmp_out,
              **launch):
    return paged_attention_decode(w, q, k_cache, v_cache, k_scale, v_scale, block_tables, context_lens, exp_sums,
                                  max_logits, tmp_out, **launch)
