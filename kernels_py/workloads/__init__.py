"""What the kernels are fed, and the accuracy studies over it.

data      generated attention inputs (make_attention_inputs)
inputs    a user's --inputs .npz, validated (load_inputs), and prepare_inputs for a run
accuracy  `python -m kernels_py.workloads.accuracy`: the INT8 decode/prefill accuracy table
"""
