"""Host side of the twins: what a HIP host program does, for the simulator.

buffers  tagged device Buffers of the paged cache, HostSetup (one launch), the decode harness
twins    the harnesses of qk_int8, pv_int8/pv_bf16, prefix_prefill and the producer int8_kv_cache
hip_twins  the compiled HIP twins in the Python twins' place (--frontend asm): CompiledTwin
config   RunConfig, the frozen record of one `gfxsim run` (validated once, on creation)
runners  one `gfxsim run` runner per kernel (fn(cfg, inputs, swap) -> Ran) and KERNELS, the registry
runs     run_kernel and KernelRun (the report of `gfxsim run`)
"""
