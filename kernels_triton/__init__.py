"""Kernels written in Triton, each with its numpy reference, run on gfxsim's asm front end."""
