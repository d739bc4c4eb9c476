"""The text report counts a launch's matrix instructions and makes only the events it shows
(a long prefill issues millions): Run.mmac_count is the length of Run.mmacs(), and
Run.mmacs_carrying gives, in order and one at a time, the events whose operand carries tokens,
for a batch whose members issue different instructions."""
from kernels_py.host import twins as H
from kernels_py.host.buffers import make_cache
from kernels_py.prefix_prefill import prefix_prefill
from kernels_py.workloads.data import make_attention_inputs


def test_the_events_one_at_a_time_are_the_events():
    d = make_attention_inputs(seed=2, num_seqs=1, num_heads=4, num_kv_heads=2, head_dim=64, context_lens=[100],
                              num_queries=70)
    cache = make_cache(d["k"], d["v"], d["context_lens"], block_size=16, smooth_k=True, seed=2)
    run = H.prefill_buffers(d["q"], cache, 0).launch(prefix_prefill, trace=False, provenance=True)
    key = lambda e: (e.index, e.workgroup, e.wave, e.op, e.label)          # noqa: E731
    events = run.mmacs()
    whole = [key(e) for e in events]
    assert len({w for _, w, *_ in whole}) > 1 and len({i for i, *_ in whole}) == len(whole)
    assert run.mmac_count() == len(whole)
    for operand in ("A", "B"):
        want = [key(e) for e in events if e.tagged and e.token_set(operand)]
        assert want and [key(e) for e in run.mmacs_carrying(operand)] == want
