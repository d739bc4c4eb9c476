"""The launch ABI as clang compiles it (abi_kernels.hip, built here for gfx942 and gfx90a, code
object v5 and v4): hidden arguments at the metadata's offsets, null pointers, a by-value struct
holding pointers, dynamic LDS, the private segment (a local array, register spills) through
gfx942's flat scratch and gfx90a's private segment buffer, gfx90a's user SGPRs."""
import subprocess
from pathlib import Path

import numpy as np
import pytest
from support import need_toolchain

from gfxsim.asm import parse_file
from gfxsim.asm.launch import LaunchError, PointerArray, Struct
from gfxsim.asm.run import run_asm
from gfxsim.machine.errors import MemoryFault
from gfxsim.machine.memory import Buffer

SOURCE = Path(__file__).with_name("abi_kernels.hip")


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    out = tmp_path_factory.mktemp("abi")
    cache = {}

    def kernel(name: str, arch: str = "gfx942", version: int = 5, preload: int = 0):
        key = (arch, version, preload)
        if key not in cache:
            tc = need_toolchain("gfx942")         # the clang that builds gfx942 builds gfx90a too
            from gfxsim.hip.build import CFLAGS
            s = out / f"abi_{arch}_v{version}_p{preload}.s"
            extra = ["-mllvm", f"-amdgpu-kernarg-preload-count={preload}"] if preload else []
            subprocess.run([str(tc.clang), *CFLAGS, f"--offload-arch={arch}", f"-mcode-object-version={version}",
                            *extra, "-S", str(SOURCE), "-o", str(s)], check=True, capture_output=True)
            cache[key] = parse_file(s)
        return cache[key].kernel(name)
    return kernel


def test_every_implicit_argument_at_its_metadata_offset(build):
    k = build("implicit_words")
    out = Buffer("out", np.full(6 * 64, 0xDEADBEEF, np.uint32))
    run_asm(k, grid=(2, 3), block=64, args={"out": out})
    w = out.array[:64]
    h = w.view(np.uint16)
    assert list(w[:3]) == [2, 3, 1]                           # hidden_block_count_x/y/z
    assert list(h[6:9]) == [64, 1, 1]                         # hidden_group_size_x/y/z
    assert list(h[9:12]) == [0, 0, 0]                         # hidden_remainder_x/y/z: whole workgroups
    assert list(w[10:16]) == [0] * 6                          # hidden_global_offset_x/y/z
    assert h[32] == 2                                         # hidden_grid_dims
    offsets = {a[".value_kind"]: a[".offset"] - 8 for a in k.metadata[".args"]}
    for kind in ("hidden_hostcall_buffer", "hidden_multigrid_sync_arg", "hidden_heap_v1", "hidden_default_queue",
                 "hidden_completion_action", "hidden_queue_ptr"):
        assert w[offsets[kind] // 4] == 0 and w[offsets[kind] // 4 + 1] == 0, kind      # null pointers
    assert (out.array[64:128] == out.array[:64]).all()        # the same segment for every workgroup


@pytest.mark.parametrize("grid, block", [((3, 2), (16, 4)), ((1, 1), (64, 1)), ((5, 1), (128, 1))])
def test_block_and_grid_dims_in_two_dimensions(build, grid, block):
    k = build("dims")
    n = grid[0] * grid[1] * block[0] * block[1]
    out = Buffer.empty("out", (n,), np.int32)
    run = run_asm(k, grid=grid, block=block, args={"out": out})
    assert run.findings == []
    assert (out.array == grid[0] * 1000000 + grid[1] * 10000 + block[0] * 100 + block[1]).all()


def test_code_object_v4_reads_block_dims_from_the_dispatch_packet(build):
    k = build("dims", "gfx90a", 4)
    assert k.program.abi.user == (("private_segment_buffer", 4), ("dispatch_ptr", 2), ("kernarg_segment_ptr", 2))
    assert {h.kind for h in k.program.abi.hidden} >= {"hidden_global_offset_x", "hidden_none"}
    out = Buffer("out", np.full(16 * 4, -1, np.int32))
    run_asm(k, grid=1, block=(16, 4), args={"out": out}, arch="gfx90a")
    # v4's implicit arguments start with the global offsets, so "gridDim" read there is 0 and every
    # row lands on row 0; blockDim (16, 4) is the dispatch packet's
    assert (out.array[:16] == 16 * 100 + 4).all() and (out.array[16:] == -1).all()


@pytest.mark.parametrize("arch, version", [("gfx90a", 4), ("gfx90a", 5), ("gfx942", 5)])
def test_the_dispatch_packet(build, arch, version):
    k = build("packet", arch, version)
    out = Buffer.empty("out", (3 * 8,), np.uint32)
    run_asm(k, grid=3, block=128, args={"out": out}, arch=arch)
    for g in range(3):
        assert list(out.array[8 * g:8 * g + 8]) == [128, 1, 1, 3 * 128, 1, 1, 0, 0]


@pytest.mark.parametrize("arch", ["gfx942", "gfx90a"])
def test_a_null_optional_pointer_is_address_zero(build, arch):
    k = build("optional_bias", arch)
    x = np.arange(64, dtype=np.float32)
    bias = np.full(64, 0.5, np.float32)
    for given, want in ((Buffer("bias", bias), x + 0.5), (None, x), ("null", x)):
        out = Buffer.empty("out", (64,), np.float32)
        run_asm(k, block=64, args={"out": out, "x": Buffer("x", x), "bias": given}, arch=arch)
        np.testing.assert_array_equal(out.array, want)


def test_dereferencing_a_null_pointer_names_it(build):
    k = build("required_bias")
    x = np.arange(64, dtype=np.float32)
    out = Buffer.empty("out", (64,), np.float32)
    with pytest.raises(MemoryFault, match=r"required_bias: line \d+: global_load_dword .*: lane 0 accesses address "
                                          r"0x0, which is a null pointer \(\+0\); null in this launch: bias") as e:
        run_asm(k, block=64, args={"out": out, "x": Buffer("x", x), "bias": None})
    assert e.value.coords["lane"] == 0 and e.value.coords["address"] == 0 and e.value.coords["kernel"] == "required_bias"


def test_a_96_byte_struct_with_pointers_inside(build):
    k = build("by_value_struct")
    (p,) = k.program.abi.args
    assert (p.name, p.size, p.kind) == ("p", 96, "by_value")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    c = Buffer("c", np.full(64, -1.0, np.float32))
    extra = np.arange(16, dtype=np.int32) * 3
    s = Struct(data=np.zeros(96, np.uint8), pointers={0: Buffer("a", a), 8: Buffer("b", b), 24: c},
               values={16: np.int32(50), 20: np.float32(2.0), **{32 + 4 * i: v for i, v in enumerate(extra)}})
    run = run_asm(k, block=64, args={"p": s})
    assert run.findings == []
    np.testing.assert_array_equal(c.array[:50], (a[:50] + b[:50]) * np.float32(2.0) + np.float32(15))
    assert (c.array[50:] == -1).all()
    # the same from a numpy structured record whose pointer fields the Struct fills in
    rec = np.zeros((), np.dtype([("a", "<u8"), ("b", "<u8"), ("n", "<i4"), ("scale", "<f4"), ("c", "<u8"),
                                 ("extra", "<i4", 16)]))
    rec["n"], rec["scale"], rec["extra"] = 64, np.float32(1.0), extra
    c2 = Buffer.empty("c", (64,), np.float32)
    run_asm(k, block=64, args=[Struct(rec, pointers={0: Buffer("a", a), 8: Buffer("b", b), 24: c2})])
    np.testing.assert_array_equal(c2.array, a + b + np.float32(15))
    # and by field name from a C-aligned structured dtype
    layout = np.dtype([("a", "u8"), ("b", "u8"), ("n", "i4"), ("scale", "f4"), ("c", "u8"), ("extra", "i4", 16)],
                      align=True)
    c3 = Buffer.empty("c", (64,), np.float32)
    run_asm(k, block=64, args={"p": Struct.of(layout, a=Buffer("a", a), b=Buffer("b", b), n=64, scale=0.5, c=c3,
                                               extra=extra)})
    np.testing.assert_array_equal(c3.array, (a + b) * np.float32(0.5) + np.float32(15))
    with pytest.raises(MemoryFault, match=r"null pointer \(\+0\); null in this launch: p\+8"):
        run_asm(k, block=64, args={"p": Struct.of(layout, a=Buffer("a", a), b=None, n=64, c=c3)})
    with pytest.raises(LaunchError, match=r"field n \(int32\) takes no pointer"):
        Struct.of(layout, n=c3)
    with pytest.raises(LaunchError, match=r"argument p is a 96-byte value, got a Buffer \(a struct: pass "):
        run_asm(k, block=64, args={"p": c})
    with pytest.raises(LaunchError, match="a pointer at offset 92 outside the 96-byte argument"):
        run_asm(k, block=64, args={"p": Struct(pointers={92: c})})


@pytest.mark.parametrize("dynamic", [64 * 4, 1024])
def test_extern_shared_sized_at_launch(build, dynamic):
    k = build("dynamic_lds")
    assert k.program.abi.lds_bytes == 64 and "hidden_dynamic_lds_size" in {h.kind for h in k.program.abi.hidden}
    out, size = Buffer.empty("out", (64,), np.float32), Buffer.empty("size", (1,), np.uint32)
    run = run_asm(k, block=64, args={"out": out, "lds_size": size}, dynamic_lds=dynamic)
    assert run.findings == []
    t = np.arange(64)
    np.testing.assert_array_equal(out.array, 2.0 * ((t + 1) % 64) + 100.0 * (t % 16))
    assert size.array[0] == dynamic


def test_extern_shared_without_its_launch_size_faults(build):
    k = build("dynamic_lds")
    out, size = Buffer.empty("out", (64,), np.float32), Buffer.empty("size", (1,), np.uint32)
    with pytest.raises(MemoryFault, match=r"outside \[0, 64\)"):
        run_asm(k, block=64, args={"out": out, "lds_size": size})
    with pytest.raises(LaunchError, match="dynamic_lds must be a byte count"):
        run_asm(k, block=64, args={"out": out, "lds_size": size}, dynamic_lds=-4)


@pytest.mark.parametrize("arch", ["gfx942", "gfx90a"])
def test_a_local_array_in_the_private_segment(build, arch):
    k = build("local_array", arch)
    abi = k.program.abi
    assert abi.private_segment and abi.private_bytes >= 256
    if arch == "gfx90a":                   # private segment buffer s[0:3], kernarg s[4:5], flat scratch init
        assert abi.user[:2] == (("private_segment_buffer", 4), ("kernarg_segment_ptr", 2)) and abi.wave_offset
        assert any(i.mnemonic.startswith("buffer_store") for i in k.instructions)
    else:
        assert any(i.mnemonic.startswith("scratch_store") for i in k.instructions)
    idx = np.random.default_rng(0).integers(0, 1000, 128).astype(np.int32)
    out = Buffer.empty("out", (128,), np.int32)
    run = run_asm(k, grid=1, block=128, args=dict(out=out, idx=Buffer("idx", idx), n=7), arch=arch, batch=1)
    assert run.findings == []
    t = np.arange(128)
    np.testing.assert_array_equal(out.array, (idx & 63) * t + 7)


@pytest.mark.parametrize("arch", ["gfx942", "gfx90a"])
def test_register_spills_round_trip_through_scratch(build, arch):
    k = build("spill", arch)
    assert int(k.metadata[".vgpr_spill_count"]) > 0
    x = np.random.default_rng(2).standard_normal(64 * 40).astype(np.float32)
    inp = Buffer("in", x, tags={"token": np.arange(64 * 40)})
    out = Buffer.empty("out", (64 * 40,), np.float32)
    run = run_asm(k, block=64, args={"out": out, "in": inp}, arch=arch)
    assert run.findings == []
    v = x.reshape(64, 40)
    s = np.zeros(64, np.float32)
    for i in range(40):                    # clang's order of the sum (fma contraction aside)
        s = s + v[:, i] * v[:, 39 - i]
    np.testing.assert_allclose(out.array.reshape(64, 40), v * s[:, None], rtol=1e-5)


def test_two_workgroups_side_by_side_keep_their_own_private_segments(build):
    k = build("local_array")
    idx = np.arange(256, dtype=np.int32) * 7
    out = Buffer.empty("out", (256,), np.int32)
    run_asm(k, grid=4, block=64, args=dict(out=out, idx=Buffer("idx", idx), n=3), batch=4)
    t = np.tile(np.arange(64), 4)
    np.testing.assert_array_equal(out.array, (idx & 63) * t + 3)


def test_a_table_of_pointers_read_through_generic_addresses(build):
    k = build("pointer_table")
    assert any(i.mnemonic == "flat_load_dword" for i in k.instructions)
    rows = [Buffer(f"row{r}", np.arange(64, dtype=np.float32) + 100 * r, tags={"token": np.arange(64) + 64 * r})
            for r in range(3)]
    outs = [Buffer.empty(f"out{r}", (64,), np.float32) for r in range(3)]
    run = run_asm(k, grid=3, block=64, args={"rows": PointerArray("rows", rows), "outs": PointerArray("outs", outs),
                                             "n": 50})
    assert run.findings == []
    for r in range(3):
        np.testing.assert_array_equal(outs[r].array[:50], rows[r].array[:50] * 2 + r)
    with pytest.raises(MemoryFault, match=r"null pointer \(\+0\); null in this launch: outs\[1\]"):
        run_asm(k, grid=3, block=64, args={"rows": PointerArray("rows", rows),
                                           "outs": PointerArray("outs", [outs[0], None, outs[2]]), "n": 50})


@pytest.mark.parametrize("arch", ["gfx942", "gfx90a"])
def test_a_generic_pointer_to_lds_private_or_global_memory(build, arch):
    k = build("generic_pointer", arch)
    ops = " ".join(str(i) for i in k.instructions)
    assert "src_shared_base" in ops and "src_private_base" in ops and "flat_load_dword" in ops
    g = Buffer("g", np.concatenate([np.arange(64, dtype=np.float32) + 1000, np.zeros(64, np.float32)]))
    run = run_asm(k, block=64, args={"g": g, "sel": 1}, arch=arch)
    assert run.findings == []
    t = np.arange(64)
    np.testing.assert_array_equal(g.array[64:], np.where(t & 1, t ^ 1, np.where(t & 2, (t & 15) * t, t + 1000)))


def test_sgprs_spilled_into_vgpr_lanes(build):
    k = build("sgpr_spill")
    assert sum(i.mnemonic == "v_writelane_b32" for i in k.instructions) >= 4
    out = Buffer.empty("out", (128,), np.int32)
    run = run_asm(k, block=128, args={"out": out, "in": Buffer("in", np.array([5, -2, 40, 7], np.int32))})
    assert run.findings == []
    np.testing.assert_array_equal(out.array, 13 * np.arange(128) + 33)


@pytest.mark.parametrize("arch", ["gfx942", "gfx90a"])
def test_preloaded_kernel_arguments_start_past_the_preload_header(build, arch):
    k = build("local_array", arch, preload=4)
    abi = k.program.abi
    assert abi.preload > 0 and k.instructions[0].mnemonic == "s_trap" and k.program.entry == 1
    idx = np.random.default_rng(3).integers(0, 1000, 128).astype(np.int32)
    out = Buffer.empty("out", (128,), np.int32)
    run = run_asm(k, grid=2, block=64, args=dict(out=out, idx=Buffer("idx", idx), n=-5), arch=arch)
    assert run.findings == []
    np.testing.assert_array_equal(out.array, (idx & 63) * np.tile(np.arange(64), 2) - 5)
