"""The launch ABI on hand-written snippets: every metadata form LLVM 17-22 writes (YAML tags,
target lines, descriptor expressions, arguments without names), null pointers, hidden pointers,
and the private segment's instruction forms (gfx942 flat scratch, gfx90a's flat scratch init and
private segment buffer) routing every byte's provenance."""
from __future__ import annotations

import numpy as np
import pytest

from gfxsim import Buffer
from gfxsim.asm.launch import PRIVATE_BASE, SHARED_BASE, KernelABI, LaunchError
from gfxsim.asm.parse import AsmFileError, parse
from gfxsim.asm.run import kernel_from_text, run_asm
from gfxsim.asm.state import AsmError
from gfxsim.machine.errors import MemoryFault

# out[lane] = the by-value argument at kernarg offset 8, through the pointer at offset 0
STORE_ARG = """\
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_load_dword s6, s[0:1], 0x8
  v_lshlrev_b32_e32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  v_mov_b32_e32 v2, s6
  global_store_dword v1, v2, s[4:5]
  s_endpgm"""


def asm_text(args_yaml: str, *, target: str = "amdgcn-amd-amdhsa--gfx942", descriptor: dict | None = None,
             sets: str = "", body: str = STORE_ARG, kernarg: int = 16, vgprs: int = 8) -> str:
    """A .s as LLVM writes one, with the argument metadata ``args_yaml`` verbatim."""
    desc = {".amdhsa_group_segment_fixed_size": 0, ".amdhsa_private_segment_fixed_size": 0,
            ".amdhsa_kernarg_size": kernarg, ".amdhsa_user_sgpr_count": 2,
            ".amdhsa_user_sgpr_kernarg_segment_ptr": 1, ".amdhsa_system_sgpr_workgroup_id_x": 1,
            ".amdhsa_system_vgpr_workitem_id": 0, ".amdhsa_next_free_vgpr": vgprs, ".amdhsa_next_free_sgpr": 16,
            ".amdhsa_accum_offset": vgprs, **(descriptor or {})}
    return "\n".join([
        f'\t.amdgcn_target "{target}"', "\t.amdhsa_code_object_version 5", "\t.text", "\t.globl\tk",
        "\t.type\tk,@function", "k:", body, ".Lfunc_end0:", "\t.rodata", "\t.amdhsa_kernel k",
        *(f"\t\t{key} {v}" for key, v in desc.items()), "\t.end_amdhsa_kernel", sets, "\t.amdgpu_metadata", "---",
        "amdhsa.kernels:", "  - .args:", args_yaml.rstrip(), "    .name:           k", "    .symbol:         k.kd",
        f"    .vgpr_count:     {vgprs}", "    .wavefront_size: 64", "    .max_flat_workgroup_size: 256",
        f"amdhsa.target:   {target}", "...", "\t.end_amdgpu_metadata", ""])


def _run(kernel, args, **kw):
    out = next(iter(args.values())) if isinstance(args, dict) else args[0]
    run_asm(kernel, block=64, args=args, **kw)
    return out.array


@pytest.mark.parametrize("name_yaml, name", [
    ("!str n", "n"),               # LLVM: a plain "n" would read as a YAML 1.1 boolean
    ("!str y", "y"),
    ("!str null", "null"),
    ("!!str 7", "7"),
    ("'no'", "no"),
    ('"off"', "off"),
    ("on", "on"),                  # YAML 1.2, as LLVM writes it: a string
])
def test_argument_names_in_every_yaml_form(name_yaml, name):
    args = f"""\
      - .address_space:  global
        .name:           out
        .offset:         0
        .size:           8
        .value_kind:     global_buffer
      - .name:           {name_yaml}
        .offset:         8
        .size:           4
        .value_kind:     !str by_value"""
    k = parse(asm_text(args)).kernel("k")
    assert [a.name for a in k.program.abi.args] == ["out", name]
    got = _run(k, {"out": Buffer("out", np.zeros(64, np.uint32)), name: 77})
    assert (got == 77).all()


def test_other_llvm_tags_and_a_bad_one():
    args = """\
      - .name:           out
        .offset:         !int 0x0
        .size:           8
        .value_kind:     global_buffer
        .is_const:       !bool false
        .type_name:      !nil
      - .name:           v
        .offset:         8
        .size:           4
        .value_kind:     by_value"""
    k = parse(asm_text(args)).kernel("k")
    assert k.metadata[".args"][0][".offset"] == 0 and k.metadata[".args"][0][".is_const"] is False
    with pytest.raises(AsmFileError, match="not valid YAML"):
        parse(asm_text(args.replace("!bool false", "!bool maybe")))


@pytest.mark.parametrize("target", ["amdgcn-amd-amdhsa--gfx942", "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
                                    "amdgcn-amd-amdhsa-unknown-gfx942", "amdgpu9.42-amd-amdhsa-unknown-gfx942"])
def test_target_lines(target):
    f = parse(asm_text(TRITON_ARGS, target=target, kernarg=32))
    assert f.processor == "gfx942"
    out = Buffer("out", np.zeros(64, np.uint32))
    run_asm(f.kernel("k"), block=64, args=[out, 5, None, None])
    assert (out.array == 5).all()


@pytest.mark.parametrize("target, proc", [("amdgcn-amd-amdhsa--gfx1100", "gfx1100"),
                                          ("amdgcn-amd-amdhsa--gfx9-4-generic:xnack-", "gfx9-4-generic")])
def test_another_processor_is_refused_by_name(target, proc):
    f = parse(asm_text(TRITON_ARGS, target=target, kernarg=32))
    assert f.processor == proc
    with pytest.raises(AsmError, match=rf"compiled for {proc} "):
        run_asm(f.kernel("k"), block=64, args=[Buffer("out", np.zeros(64, np.uint32)), 5, None, None])


def test_descriptor_fields_as_expressions_over_set_symbols():
    desc = {".amdhsa_next_free_vgpr": "max(totalnumvgprs(k.num_agpr, k.num_vgpr), 1, 0)",
            ".amdhsa_accum_offset": "((((((alignto(max(1, k.num_vgpr), 4))/4)-1)&(~65536))&63)+1)*4",
            ".amdhsa_private_segment_fixed_size": "k.private_seg_size",
            ".amdhsa_group_segment_fixed_size": "k.lds_size+0x20",
            ".amdhsa_uses_dynamic_stack": "((59|k.has_dyn_sized_stack)&0)"}
    sets = "\n".join(["\t.set k.num_vgpr, 5", "\t.set k.num_agpr, 0", "\t.set k.private_seg_size, 0",
                      "\t.set k.lds_size, 32", "\t.set k.has_dyn_sized_stack, 0"])
    k = parse(asm_text(TRITON_ARGS, descriptor=desc, sets=sets, kernarg=32)).kernel("k")
    assert k.descriptor[".amdhsa_accum_offset"] == 8 and k.descriptor[".amdhsa_next_free_vgpr"] == 5
    abi = k.program.abi
    assert abi.lds_bytes == 64 and abi.private_bytes == 0
    k2 = parse(asm_text(TRITON_ARGS, descriptor=desc, kernarg=32)).kernel("k")      # the .set lines missing
    with pytest.raises(LaunchError, match=r"k: .amdhsa_\w+ '.*' is an expression over symbols the .s does not define"):
        KernelABI.of(k2)


# Triton: no names, two trailing hidden pointers (global_scratch, profile_scratch)
TRITON_ARGS = """\
      - .address_space:  global
        .offset:         0
        .size:           8
        .value_kind:     global_buffer
      - .offset:         8
        .size:           4
        .value_kind:     by_value
      - .address_space:  global
        .offset:         16
        .size:           8
        .value_kind:     global_buffer
      - .address_space:  global
        .offset:         24
        .size:           8
        .value_kind:     global_buffer"""


def test_arguments_without_names_are_arg0_arg1():
    k = parse(asm_text(TRITON_ARGS, kernarg=32)).kernel("k")
    abi = k.program.abi
    assert [a.name for a in abi.args] == ["arg0", "arg1", "arg2", "arg3"]
    out = Buffer("out", np.zeros(64, np.uint32))
    got = _run(k, {"arg0": out, "arg1": 9, "arg2": None, "arg3": "null"})
    assert (got == 9).all()
    with pytest.raises(LaunchError, match=r"k takes 4 arguments \(arg0 \(pointer, offset 0\), arg1 \(4-byte value, "
                                          r"offset 8\), arg2 \(pointer, offset 16\), arg3 \(pointer, offset 24\)\), got 2"):
        run_asm(k, block=64, args=[out, 9])
    with pytest.raises(LaunchError, match=r"k has no argument x; it takes: arg0 \(pointer"):
        run_asm(k, block=64, args={"x": out})
    with pytest.raises(LaunchError, match=r"argument\(s\) arg2, arg3 not given; it takes: arg0"):
        run_asm(k, block=64, args={"arg0": out, "arg1": 9})


def test_a_load_through_a_hidden_null_pointer_names_the_nulls():
    args = """\
      - .name:           out
        .offset:         0
        .size:           8
        .value_kind:     global_buffer
      - .name:           opt
        .offset:         8
        .size:           8
        .value_kind:     global_buffer
      - .offset:         16
        .size:           8
        .value_kind:     hidden_hostcall_buffer
      - .offset:         24
        .size:           8
        .value_kind:     hidden_printf_buffer"""
    body = """\
  s_load_dwordx2 s[4:5], s[0:1], 0x10
  v_lshlrev_b32_e32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  global_load_dword v2, v1, s[4:5] offset:8
  s_endpgm"""
    k = parse(asm_text(args, body=body, kernarg=32)).kernel("k")
    out = Buffer("out", np.zeros(64, np.uint32))
    with pytest.raises(MemoryFault, match=r"lane 0 accesses address 0x8, which is a null pointer \(\+8\); null in "
                                          r"this launch: opt, hidden_hostcall_buffer, hidden_printf_buffer"):
        run_asm(k, block=64, args={"out": out, "opt": None})
    # the same load from a kernel given a real buffer for opt still faults: hidden_hostcall_buffer is null
    with pytest.raises(MemoryFault, match=r"null in this launch: hidden_hostcall_buffer, hidden_printf_buffer"):
        run_asm(k, block=64, args={"out": out, "opt": Buffer("opt", np.zeros(4, np.uint32))})


def test_hidden_apertures_and_sizes_at_the_offsets_the_metadata_gives():
    args = """\
      - .name:           out
        .offset:         0
        .size:           8
        .value_kind:     global_buffer
      - .offset:         12
        .size:           4
        .value_kind:     hidden_dynamic_lds_size
      - .offset:         16
        .size:           4
        .value_kind:     hidden_shared_base
      - .offset:         20
        .size:           4
        .value_kind:     hidden_private_base
      - .offset:         26
        .size:           2
        .value_kind:     hidden_grid_dims"""
    body = """\
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_load_dwordx4 s[8:11], s[0:1], 0xc
  v_lshlrev_b32_e32 v1, 4, v0
  s_waitcnt lgkmcnt(0)
  v_mov_b32_e32 v2, s8
  v_mov_b32_e32 v3, s9
  v_mov_b32_e32 v4, s10
  v_mov_b32_e32 v5, s11
  global_store_dwordx4 v1, v[2:5], s[4:5]
  s_endpgm"""
    k = parse(asm_text(args, body=body, kernarg=28)).kernel("k")
    out = Buffer("out", np.zeros((64, 4), np.uint32))
    run_asm(k, grid=(2, 3), block=64, args={"out": out}, dynamic_lds=96)
    assert list(out.array[0]) == [96, SHARED_BASE >> 32, PRIVATE_BASE >> 32, 2 << 16]


# -- the private segment ---------------------------------------------------------------------------
# each lane loads one dword of four tokens (4l .. 4l+3), stores it to its private bytes [4, 8),
# overwrites private byte 7 with its byte 1, reads the dword back and stores it: bytes [0, 1, 2, 1]
LOAD = """\
  s_load_dwordx2 s[10:11], s[{k}:{k1}], 0x0
  s_load_dwordx2 s[12:13], s[{k}:{k1}], 0x8
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v1, 2, v0
  global_load_dword v2, v1, s[10:11]
  s_waitcnt vmcnt(0)
  v_lshrrev_b32_e32 v4, 8, v2"""
STORE = """\
  s_waitcnt vmcnt(0)
  global_store_dword v1, v3, s[12:13]"""
PRIVATE = {
    # gfx942: FLAT_SCRATCH set by the hardware; vaddr, saddr and immediate forms
    "gfx942 scratch_* off/offset": ("gfx942", 0, {}, """\
  scratch_store_dword off, v2, off offset:4
  scratch_store_byte off, v4, off offset:7
  scratch_load_dword v3, off, off offset:4"""),
    "gfx942 scratch_* vaddr/saddr": ("gfx942", 0, {}, """\
  v_mov_b32_e32 v5, 2
  s_mov_b32 s8, 4
  scratch_store_dword off, v2, s8
  scratch_store_byte v5, v4, off offset:5
  scratch_load_dword v3, v5, s8 offset:-2"""),
    "gfx942 scratch_* byte_d16_hi": ("gfx942", 0, {}, """\
  v_lshlrev_b32_e32 v4, 16, v4
  scratch_store_dword off, v2, off offset:4
  scratch_store_byte_d16_hi off, v4, off offset:7
  scratch_load_dword v3, off, off offset:4"""),
    # gfx90a with flat scratch: s[2:3] flat scratch init, s5 the wave offset, the prolog's sum
    "gfx90a flat scratch init": ("gfx90a", 0, {".amdhsa_user_sgpr_flat_scratch_init": 1, ".amdhsa_user_sgpr_count": 4,
                                               ".amdhsa_system_sgpr_private_segment_wavefront_offset": 1}, """\
  s_add_u32 flat_scratch_lo, s2, s5
  s_addc_u32 flat_scratch_hi, s3, 0
  scratch_store_dword off, v2, off offset:4
  scratch_store_byte off, v4, off offset:7
  scratch_load_dword v3, off, off offset:4"""),
    # gfx90a: the private segment buffer V# in s[0:3], kernarg s[4:5], workgroup id s6, wave offset s7
    "gfx90a private segment buffer": ("gfx90a", 4, {".amdhsa_user_sgpr_private_segment_buffer": 1,
                                                    ".amdhsa_user_sgpr_count": 6,
                                                    ".amdhsa_system_sgpr_private_segment_wavefront_offset": 1}, """\
  s_add_u32 s0, s0, s7
  s_addc_u32 s1, s1, 0
  v_mov_b32_e32 v5, 4
  buffer_store_dword v2, off, s[0:3], 0 offset:4
  buffer_store_byte v4, v5, s[0:3], 0 offen offset:3
  v_mov_b32_e32 v6, 1
  s_mov_b32 s8, 2
  buffer_load_dword v3, v6, s[0:3], s8 offen offset:1"""),
}


def _private_kernel(form, size=16, **over):
    arch, k, desc, body = PRIVATE[form]
    desc = {".amdhsa_enable_private_segment": int(arch != "gfx90a"), ".amdhsa_private_segment_fixed_size": size,
            **desc, **over}
    return kernel_from_text(LOAD.format(k=k, k1=k + 1) + "\n" + body + "\n" + STORE, "private",
                            args=[("k", "global_buffer", 8), ("out", "global_buffer", 8)], arch=arch,
                            extra_descriptor=desc), arch


@pytest.mark.parametrize("form", sorted(PRIVATE))
def test_private_bytes_keep_their_provenance(form):
    kern, arch = _private_kernel(form)
    rng = np.random.default_rng(1)
    k = rng.integers(1, 255, (64, 4)).astype(np.uint8)
    tok = np.arange(256).reshape(64, 4)
    out = Buffer.empty("out", (64, 4), np.uint8)
    run = run_asm(kern, args={"k": Buffer("k", k, {"token": tok}), "out": out}, arch=arch)
    assert run.findings == []
    np.testing.assert_array_equal(out.array, k[:, [0, 1, 2, 1]])
    mp = out.prov
    ids = np.repeat(mp.ids["token"], mp.unit)[:256].reshape(64, 4)
    np.testing.assert_array_equal(ids, tok[:, [0, 1, 2, 1]])


def test_private_bytes_are_each_lanes_own_and_tags_check_the_store():
    kern, arch = _private_kernel("gfx942 scratch_* off/offset")
    k = np.arange(256, dtype=np.uint8).reshape(64, 4)
    tok = np.arange(256).reshape(64, 4)
    want = tok[:, [0, 1, 2, 1]]
    wrong = np.roll(want, 1, axis=0)                        # the element of the lane before
    out = Buffer.empty("out", (64, 4), np.uint8, tags={"token": wrong})
    run = run_asm(kern, args={"k": Buffer("k", k, {"token": tok}), "out": out})
    assert len(run.findings_of("store-mismatch")) > 0


def test_private_access_outside_the_segment_is_named():
    kern, arch = _private_kernel("gfx942 scratch_* off/offset", size=6)
    k = np.zeros((64, 4), np.uint8)
    with pytest.raises(AsmError, match=r"private: line \d+: scratch_store_dword off, v2, off offset:4: lane 0 "
                                       r"accesses private bytes \[4, 8\) outside its 6-byte private segment"):
        run_asm(kern, args={"k": Buffer("k", k), "out": Buffer.empty("out", (64, 4), np.uint8)})
    kern, arch = _private_kernel("gfx942 scratch_* off/offset", size=0)
    with pytest.raises(AsmError, match=r"private_segment_fixed_size 0"):
        run_asm(kern, args={"k": Buffer("k", k), "out": Buffer.empty("out", (64, 4), np.uint8)})


def test_a_private_segment_buffer_holds_the_private_aperture():
    kern, arch = _private_kernel("gfx90a private segment buffer")
    abi = kern.program.abi
    assert abi.user == (("private_segment_buffer", 4), ("kernarg_segment_ptr", 2)) and abi.wave_offset
    from gfxsim.asm.launch import private_descriptor
    w = private_descriptor(abi, 64)
    assert w[0] | (w[1] & 0xFFFF) << 32 == PRIVATE_BASE and w[3] >> 23 & 1


def test_a_global_buffer_resource_is_not_taken_for_private_memory():
    from support.asm_sandbox import Sandbox
    from gfxsim.asm.launch import private_descriptor
    from gfxsim.asm.operands import parse_operand
    from gfxsim.asm.semantics.scratch import is_private
    kern, arch = _private_kernel("gfx90a private segment buffer")
    sb = Sandbox()
    rsrc = parse_operand("s[8:11]")
    sb.set_sgpr(8, *private_descriptor(kern.program.abi, 64))
    assert is_private(sb.st, rsrc)
    sb.set_sgpr(8, 0x1000, 0x10, 0xFFFFFFFF, 0x20000)            # a raw global buffer (Triton's)
    assert not is_private(sb.st, rsrc)
    sb.set_sgpr(8, *private_descriptor(kern.program.abi, 64)[:3], 0x20000)     # no ADD_TID: not per lane
    assert not is_private(sb.st, rsrc)


def test_sgpr_spills_through_vgpr_lanes():
    from support.asm_sandbox import Sandbox
    sb = Sandbox()
    sb.v[5] = 0xAAAA
    sb.set_exec(np.arange(64) < 4)                 # the lane written is outside EXEC: written all the same
    sb.set_sgpr(8, 0x1234, 0x5678, 63)
    sb.run("v_writelane_b32 v5, s8, 0", "v_writelane_b32 v5, s9, 17", "v_writelane_b32 v5, 0x77, s10",
           "v_readlane_b32 s20, v5, 17", "v_readlane_b32 s21, v5, s10", "v_readlane_b32 s22, v5, 1")
    want = np.full(64, 0xAAAA, np.uint32)
    want[[0, 17, 63]] = [0x1234, 0x5678, 0x77]
    np.testing.assert_array_equal(sb.v[5], want)
    assert sb.sgpr(20, 3) == [0x5678, 0x77, 0xAAAA]


# generic (flat) addresses into the LDS and private apertures, made from the hidden aperture bases:
# lane l writes its token dword to LDS at 4l and to its private bytes at 8, reads both back
APERTURES = """\
      - .name:           k
        .offset:         0
        .size:           8
        .value_kind:     global_buffer
      - .name:           out
        .offset:         8
        .size:           8
        .value_kind:     global_buffer
      - .offset:         16
        .size:           4
        .value_kind:     hidden_shared_base
      - .offset:         20
        .size:           4
        .value_kind:     hidden_private_base"""
FLAT = """\
  s_load_dwordx4 s[4:7], s[0:1], 0x0
  s_load_dwordx2 s[8:9], s[0:1], 0x10
  v_lshlrev_b32_e32 v1, 2, v0
  s_waitcnt lgkmcnt(0)
  global_load_dword v2, v1, s[4:5]
  v_mov_b32_e32 v11, v1
  v_mov_b32_e32 v12, s8
  v_mov_b32_e32 v6, 8
  v_mov_b32_e32 v7, s9
  s_waitcnt vmcnt(0)
  flat_store_dword v[11:12], v2
  flat_store_dword v[6:7], v2 offset:4
  flat_load_dword v8, v[6:7] offset:4
  flat_load_dword v9, v[11:12]
  v_lshlrev_b32_e32 v10, 3, v0
  s_waitcnt vmcnt(0) lgkmcnt(0)
  global_store_dwordx2 v10, v[8:9], s[6:7]
  s_endpgm"""


def test_generic_addresses_reach_lds_and_private_memory():
    f = parse(asm_text(APERTURES, body=FLAT, kernarg=24, vgprs=16, descriptor={
        ".amdhsa_group_segment_fixed_size": 256, ".amdhsa_enable_private_segment": 1,
        ".amdhsa_private_segment_fixed_size": 16}))
    k = f.kernel("k")
    assert [i.mnemonic for i in k.instructions].count("flat_load_dword") == 2
    tok = np.arange(64)
    src = Buffer("k", np.arange(64, dtype=np.uint32) * 3 + 1, tags={"token": tok})
    out = Buffer.empty("out", (64, 2), np.uint32, tags={"token": np.stack([tok, tok], 1)})
    run = run_asm(k, block=64, args={"k": src, "out": out})
    assert run.findings == []
    np.testing.assert_array_equal(out.array, np.stack([src.array, src.array], 1))
    for col in (0, 1):                                       # each round trip kept each lane's token
        tags = np.stack([tok, tok], 1)
        tags[:, col] = np.roll(tok, 1)
        bad = Buffer.empty("out", (64, 2), np.uint32, tags={"token": tags})
        run = run_asm(k, block=64, args={"k": src, "out": bad})
        assert run.findings_of("store-mismatch")


@pytest.mark.parametrize("tagged", [True, False])
def test_an_sgpr_spilled_and_read_back_keeps_its_unknown_origin(tagged):
    from gfxsim.machine.provenance import UNKNOWN
    # a token read into an SGPR (v_readlane), spilled into a VGPR lane, read back, used as data
    body = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_load_dwordx2 s[6:7], s[0:1], 0x8
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v1, 2, v0
  global_load_dword v2, v1, s[4:5]
  s_waitcnt vmcnt(0)
  v_readlane_b32 s8, v2, 5
  v_writelane_b32 v4, s8, 0
  v_readlane_b32 s9, v4, 0
  v_mov_b32_e32 v3, s9
  global_store_dword v1, v3, s[6:7]"""
    kern = kernel_from_text(body, "spill", args=[("k", "global_buffer", 8), ("out", "global_buffer", 8)])
    k = np.arange(1, 65, dtype=np.uint32)
    out = Buffer.empty("out", 64, np.uint32)
    run_asm(kern, args={"k": Buffer("k", k, {"token": np.arange(64)}) if tagged else Buffer("k", k), "out": out})
    assert (out.array == 6).all()
    mp = out.prov
    marked = np.zeros(256, bool) if mp is None or mp.flags is None else (
        (np.repeat(mp.flags, mp.unit) if mp.unit > 1 else mp.flags) & UNKNOWN) != 0
    assert marked.all() if tagged else not marked.any()


def test_a_dynamic_stack_follows_the_fixed_private_segment():
    kern, arch = _private_kernel("gfx942 scratch_* vaddr/saddr", **{".amdhsa_uses_dynamic_stack": 1})
    assert kern.program.abi.dynamic_stack and kern.program.abi.lane_private(1024) == 16 + 1024
    body = """\
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  v_mov_b32_e32 v1, 7
  s_movk_i32 s8, 0x400
  scratch_store_dword off, v1, s8 offset:12
  scratch_load_dword v2, off, s8 offset:12
  v_lshlrev_b32_e32 v3, 2, v0
  s_waitcnt vmcnt(0) lgkmcnt(0)
  global_store_dword v3, v2, s[4:5]"""
    k = kernel_from_text(body, "stack", args=[("out", "global_buffer", 8)], extra_descriptor={
        ".amdhsa_enable_private_segment": 1, ".amdhsa_private_segment_fixed_size": 16,
        ".amdhsa_uses_dynamic_stack": 1})
    out = Buffer.empty("out", (64,), np.uint32)
    run_asm(k, args={"out": out})                          # bytes [1036, 1040) of 16 + 1024
    assert (out.array == 7).all()
    with pytest.raises(AsmError, match=r"private bytes \[1036, 1040\) outside its 528-byte private segment"):
        run_asm(k, args={"out": out}, stack_bytes=512)
    with pytest.raises(LaunchError, match="stack_bytes must be a byte count"):
        run_asm(k, args={"out": out}, stack_bytes=-1)
