"""Python twins of the INT8 attention kernels, run on gfxsim's wave64 machine.

Each module pairs by file stem with a HIP twin in kernels_hip/ (pv_int8.py <-> pv_int8.hip).
"""
