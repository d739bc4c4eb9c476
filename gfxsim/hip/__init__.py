"""HIP twins: compile kernels_hip/ with clang (build, toolchain), read the assembly (asm, encoding),
report on it (inspect), and run a twin on a ROCm GPU (harness).

    gfxsim hip build pv_int8 --arch gfx942        # build/hip/gfx942/pv_int8.{s,co} + build.json
    gfxsim hip inspect pv_int8 --arch gfx942      # families, matrix per loop, LDS, registers, occupancy
"""
