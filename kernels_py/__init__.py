"""Python twins of the INT8 attention kernels, run on gfxsim's wave64 machine.

The kernels sit at the top, each paired by file stem with its HIP twin in kernels_hip/
(pv_int8.py <-> pv_int8.hip; int8_attention.py <-> int8_attention.h, fragments.py the layout
formulas they derive). Around them:
  host/       buffers, launches and harnesses; RunConfig; the `gfxsim run` runners and run_kernel
  reference/  numpy references and the INT8 cache producer
  workloads/  generated data, --inputs loading, accuracy scripts
  fp8/        the FP8 kernels without a HIP twin (SageAttention2, FP8 QKᵀ) and their studies
  cli.py      `gfxsim run`
"""
