"""numpy references the twins are checked against.

attention   the attention math of ALGORITHMS.md (fp32, BF16, INT8 decode/prefill, QK and PV chunks), metrics
int8_cache  the INT8 KV-cache producer and the paged cache it fills (PagedKVCache, build_paged_cache)
"""
