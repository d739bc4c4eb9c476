"""HIP: compile a project's .hip files with clang (project, build, toolchain) and run a twin on
a ROCm GPU (harness); run your own HIP source or .s on the asm front end (door, source). Reading
the assembly is gfxsim.asm's (parse, encoding, inspect); inspect.py here builds a kernel first and
hands its .s to gfxsim.asm.inspect.

    project = Project("kernels_hip", "build/hip")
    build(["pv_int8"], "gfx942", project=project)   # build/hip/gfx942/pv_int8.{s,co} + build.json
    gfxsim hip build --sources kernels_hip           # the same from the command line
    gfxsim hip inspect pv_int8 --arch gfx942         # families, matrix per loop, LDS, registers, occupancy
    run_on_gpu(entry, grid, args, project=project)   # a ROCm GPU (harness.py)
    run_on_sim(entry, grid, args, project=project)   # the same call on the asm front end (sim.py)
    gfxsim.hip.run("my.hip", "my_kernel", grid, block, out=..., x=...)   # your own source (door.py)
    gfxsim hip run my.hip --kernel my_kernel --grid 4 --block 64 --arg out=out.npy ...
"""


def run(source, kernel, grid, block, **kwargs):
    """gfxsim.hip.door.run: your own HIP source or .s on the asm front end; (outputs, Run, Kernel)."""
    from .door import run as _run
    return _run(source, kernel, grid, block, **kwargs)
