"""Code object v5 hidden kernel arguments: a kernel compiled with clang that reads blockDim and
gridDim through its implicit arguments runs on the asm front end with the launch's values."""
import dataclasses

import numpy as np
import pytest
from support import need_toolchain

from gfxsim.asm import parse_file
from gfxsim.asm.launch import HIDDEN, Dispatch, KernelABI, LaunchError, kernarg_segment
from gfxsim.asm.run import run_asm
from gfxsim.machine.memory import Buffer

# blockDim.x is __builtin_amdgcn_workgroup_size_x() (hidden_group_size_x); gridDim.x the hidden
# block count at the start of the implicit arguments (what hip_runtime.h reads)
SOURCE = """
#define __global__ __attribute__((global))
extern "C" __global__ void dims(int* out) {
  unsigned bs = __builtin_amdgcn_workgroup_size_x();
  unsigned nb = *(const unsigned*)__builtin_amdgcn_implicitarg_ptr();
  int i = __builtin_amdgcn_workgroup_id_x() * bs + __builtin_amdgcn_workitem_id_x();
  out[i] = nb * 1000 + bs;
}
"""


@pytest.fixture(scope="module")
def dims_kernel(tmp_path_factory):
    need_toolchain("gfx942")
    from gfxsim.hip import build as hipbuild
    from gfxsim.hip.project import Project
    d = tmp_path_factory.mktemp("hidden")
    (d / "src").mkdir()
    (d / "src" / "dims.hip").write_text(SOURCE)
    (b,) = hipbuild.build(["dims"], "gfx942", project=Project(d / "src", d / "build"))
    return parse_file(b.asm).kernel("dims")


@pytest.mark.parametrize("grid, block", [(3, 128), (5, 64), (1, 256)])
def test_block_and_grid_dims_come_from_the_launch(dims_kernel, grid, block):
    abi = dims_kernel.program.abi
    assert [a.name for a in abi.args] == ["out"]
    assert {"hidden_block_count_x", "hidden_group_size_x"} <= {h.kind for h in abi.hidden}
    out = Buffer.empty("out", (grid * block,), np.int32)
    run = run_asm(dims_kernel, grid=(grid,), block=block, args={"out": out})
    assert run.findings == []
    assert (out.array == grid * 1000 + block).all()


def test_hidden_arguments_without_the_launch_dims_are_named(dims_kernel):
    abi = dims_kernel.program.abi
    with pytest.raises(LaunchError, match="hidden argument hidden_block_count_x needs the launch's grid and block"):
        kernarg_segment(abi, None, {}, {})


def test_an_unknown_hidden_kind_is_named(dims_kernel):
    meta = dict(dims_kernel.metadata)
    meta[".args"] = list(meta[".args"]) + [{".offset": 400, ".size": 8, ".value_kind": "hidden_new_thing"}]
    k = dataclasses.replace(dims_kernel, metadata=meta)
    with pytest.raises(LaunchError, match="hidden argument hidden_new_thing .* is not filled in"):
        KernelABI.of(k)
    assert "hidden_printf_buffer" in HIDDEN and HIDDEN["hidden_printf_buffer"](Dispatch((1, 1, 1), (64, 1, 1))) == 0
