"""Kernels nobody here wrote: public HIP kernels, fetched by the user, compiled (device code only)
and run on gfxsim's asm front end against numpy references. Nothing fetched is kept in the
repository; ``python -m public_kernels --vllm CHECKOUT`` takes the path of a checkout. See README.md.
"""
