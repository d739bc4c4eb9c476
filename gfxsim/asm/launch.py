"""The AMDHSA launch of a clang-compiled kernel (LLVM AMDGPUUsage, "Initial Kernel Execution
State" and "Code Object V4/V5 Metadata"): what the descriptor and metadata say, the kernarg
segment, the address of every buffer, and a wave's registers at its first instruction.

- ``KernelABI.of(kernel)``: the ``.amdhsa_*`` fields the launch needs, validated; a feature the
  front end does not set up (dispatch or queue pointers, private segment, a hidden argument it
  does not know) is an error naming the kernel and the field. Code object v5's hidden arguments
  (blockDim, gridDim: ``HIDDEN``) are written into the kernarg segment from the launch's grid.
- ``AddressSpace``: every Buffer (and the kernarg segment) gets a 1 TiB range of 64-bit
  addresses, so a pointer in the kernarg segment is an address and an access resolves to one
  buffer and a byte offset — or a fault naming the lane and the address.
- ``initial_state``: user SGPRs in ABI order (kernarg segment pointer in s[0:1]; preloaded
  kernargs after), then the enabled workgroup ids, EXEC of the live work-items, v0 = the packed
  work-item ids (gfx90a+: x | y << 10 | z << 20).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from ..errors import GfxSimError
from ..machine.errors import MemoryFault
from ..machine.memory import Buffer

SPAN = 1 << 40                     # address range of each buffer
BASE = 1 << 44                     # first buffer's address (far from 0: a null pointer faults)
KERNARG = "kernarg"

# user SGPRs the front end does not set up: field -> what it is
_UNSUPPORTED_USER = {".amdhsa_user_sgpr_private_segment_buffer": "private segment buffer",
                     ".amdhsa_user_sgpr_dispatch_ptr": "dispatch packet pointer",
                     ".amdhsa_user_sgpr_queue_ptr": "queue pointer",
                     ".amdhsa_user_sgpr_dispatch_id": "dispatch id",
                     ".amdhsa_user_sgpr_flat_scratch_init": "flat scratch init",
                     ".amdhsa_user_sgpr_private_segment_size": "private segment size",
                     ".amdhsa_enable_private_segment": "private (scratch) segment",
                     ".amdhsa_system_sgpr_private_segment_wavefront_offset": "scratch wave offset",
                     ".amdhsa_system_sgpr_workgroup_info": "workgroup info SGPR",
                     ".amdhsa_uses_dynamic_stack": "dynamic stack"}


class LaunchError(GfxSimError, ValueError):
    """A kernel or its arguments the asm launch cannot set up."""


@dataclass(frozen=True)
class Arg:
    name: str
    offset: int
    size: int
    kind: str                      # "global_buffer" | "by_value"


@dataclass(frozen=True)
class KernelABI:
    name: str
    lds_bytes: int                 # .amdhsa_group_segment_fixed_size
    kernarg_size: int
    user_sgprs: int
    preload: int                   # kernarg dwords preloaded into SGPRs after the kernarg pointer
    preload_offset: int
    workgroup_id: tuple            # (x, y, z) enabled
    workitem_id: int               # 0: x, 1: x and y, 2: x, y and z in v0
    n_vgpr: int
    n_agpr: int
    wave_size: int
    max_workgroup: int
    args: tuple
    hidden: tuple = ()             # code object v5 hidden arguments (Arg, kind = its value kind)

    @classmethod
    def of(cls, kernel) -> KernelABI:
        d, m = kernel.descriptor, kernel.metadata
        where = f"{kernel.name}"

        def need(key):
            if key not in d:
                raise LaunchError(f"{where}: the kernel descriptor has no {key}")
            return int(d[key])
        for key, what in _UNSUPPORTED_USER.items():
            if int(d.get(key, 0)):
                raise LaunchError(f"{where}: {key} 1 ({what}) is not set up by the asm launch")
        if not need(".amdhsa_user_sgpr_kernarg_segment_ptr"):
            raise LaunchError(f"{where}: .amdhsa_user_sgpr_kernarg_segment_ptr 0: no kernarg pointer in s[0:1]")
        preload = int(d.get(".amdhsa_user_sgpr_kernarg_preload_length", 0))
        user = need(".amdhsa_user_sgpr_count")
        if user != 2 + preload:
            raise LaunchError(f"{where}: .amdhsa_user_sgpr_count {user} != kernarg pointer (2) + preload ({preload})")
        if int(d.get(".amdhsa_float_round_mode_32", 0)) != 0:
            raise LaunchError(f"{where}: .amdhsa_float_round_mode_32 {d['.amdhsa_float_round_mode_32']}: only "
                              "round-to-nearest-even is modelled")
        if int(d.get(".amdhsa_float_denorm_mode_32", 3)) != 3:
            raise LaunchError(f"{where}: .amdhsa_float_denorm_mode_32 {d['.amdhsa_float_denorm_mode_32']}: only 3 "
                              "(fp32 denormals kept) is modelled")
        if int(d.get(".amdhsa_ieee_mode", 1)) != 1:
            raise LaunchError(f"{where}: .amdhsa_ieee_mode 0 is not modelled")
        args, hidden = [], []
        for a in m.get(".args", []):
            kind = a.get(".value_kind")
            if isinstance(kind, str) and kind.startswith("hidden_"):
                if kind not in HIDDEN:
                    raise LaunchError(f"{where}: hidden argument {kind} at offset {a.get('.offset')} is not filled "
                                      f"in by the asm launch (it fills {', '.join(sorted(HIDDEN))})")
                hidden.append(Arg(kind, int(a[".offset"]), int(a[".size"]), kind))
                continue
            if kind not in ("global_buffer", "by_value"):
                raise LaunchError(f"{where}: argument {a.get('.name', a.get('.offset'))} of kind {kind} "
                                  "(the asm launch fills global_buffer, by_value and hidden_* arguments)")
            if ".name" not in a:
                raise LaunchError(f"{where}: argument at offset {a.get('.offset')} has no name "
                                  "(compile with -fhip-kernel-arg-name)")
            args.append(Arg(a[".name"], int(a[".offset"]), int(a[".size"]), kind))
        vgpr_total = int(m.get(".vgpr_count", need(".amdhsa_next_free_vgpr")))
        n_agpr = int(m.get(".agpr_count", 0))
        accum = int(d.get(".amdhsa_accum_offset", vgpr_total))
        n_vgpr = min(256, accum if n_agpr else max(vgpr_total, accum))
        return cls(kernel.name, int(d.get(".amdhsa_group_segment_fixed_size", 0)), need(".amdhsa_kernarg_size"),
                   user, preload, int(d.get(".amdhsa_user_sgpr_kernarg_preload_offset", 0)),
                   tuple(int(d.get(f".amdhsa_system_sgpr_workgroup_id_{c}", 0)) for c in "xyz"),
                   int(d.get(".amdhsa_system_vgpr_workitem_id", 0)), max(n_vgpr, 1), n_agpr,
                   int(m.get(".wavefront_size", 64)), int(m.get(".max_flat_workgroup_size", 1024)), tuple(args),
                   tuple(hidden))


class AddressSpace:
    """Buffers at 64-bit addresses: buffer k spans [BASE + k*SPAN, BASE + k*SPAN + nbytes)."""

    def __init__(self, buffers: list):
        self.buffers = list(buffers)
        self.base = {b.name: BASE + k * SPAN for k, b in enumerate(self.buffers)}

    def address(self, name: str) -> int:
        return self.base[name]

    def _index(self, addr):
        return ((np.asarray(addr, np.uint64) - np.uint64(BASE)) // np.uint64(SPAN)).astype(np.int64)

    def split(self, st, addr: np.ndarray, active: np.ndarray, nbytes: int):
        """[(buffer, byte offsets [width], lanes)] for the buffers the active lanes address."""
        addr = np.asarray(addr, np.uint64)
        low = active & (addr < np.uint64(BASE))
        idx = np.where(addr >= np.uint64(BASE), self._index(addr), -1)
        bad = active & ((idx < 0) | (idx >= len(self.buffers)))
        if low.any() or bad.any():
            lane = int(np.argmax(low | bad))
            raise st.error(f"lane {lane % st.lanes} accesses address 0x{int(addr[lane]):x}, which is in no "
                           f"buffer ({self.describe()})", cls=MemoryFault, lane=lane, address=int(addr[lane]))
        out = []
        for k in sorted(set(idx[active].tolist())):
            buf = self.buffers[k]
            lanes = active & (idx == k)
            offs = np.where(lanes, (addr - np.uint64(self.base[buf.name])).astype(np.int64), 0)
            out.append((buf, offs, lanes))
        return out

    def scalar(self, st, addr: int, nbytes: int):
        """(buffer, byte offset) of a scalar access."""
        k = (addr - BASE) // SPAN if addr >= BASE else -1
        if not 0 <= k < len(self.buffers):
            raise st.error(f"s_load from address 0x{addr:x}, which is in no buffer ({self.describe()})",
                           cls=MemoryFault, address=addr)
        buf = self.buffers[k]
        return buf, addr - self.base[buf.name]

    def describe(self) -> str:
        return ", ".join(f"{b.name} at 0x{self.base[b.name]:x} ({b.nbytes} B)" for b in self.buffers)


# a kernel's arguments are declared only in the .s's metadata: a file without it (cut short, or
# hand-written) declares none
NO_ARGS = ("its .s declares none (arguments are listed under .args in its .amdgpu_metadata block; a .s cut "
           "short or written without that block has none)")


def bind_args(abi: KernelABI, args) -> tuple[dict, dict]:
    """Buffers and scalars by argument name from a dict (by name) or a sequence (metadata order)."""
    names = [a.name for a in abi.args]
    if isinstance(args, dict):
        unknown = set(args) - set(names)
        if unknown:
            raise LaunchError(f"{abi.name} has no argument {', '.join(sorted(unknown))}; " + (
                f"its arguments: {', '.join(names)}" if names else NO_ARGS))
        values = dict(args)
    else:
        args = list(args)
        if len(args) != len(names):
            raise LaunchError(f"{abi.name} takes {len(names)} arguments ({', '.join(names)}), got {len(args)}"
                              if names else f"{abi.name} takes no arguments, got {len(args)}; {NO_ARGS}")
        values = dict(zip(names, args))
    missing = [n for n in names if n not in values]
    if missing:
        raise LaunchError(f"{abi.name}: argument(s) {', '.join(missing)} not given")
    bufs, scalars = {}, {}
    for a in abi.args:
        v = values[a.name]
        if a.kind == "global_buffer":
            if not isinstance(v, Buffer):
                raise LaunchError(f"{abi.name}: argument {a.name} is a pointer: pass a gfxsim Buffer, got "
                                  f"{type(v).__name__}")
            bufs[a.name] = v
        else:
            if isinstance(v, Buffer):
                raise LaunchError(f"{abi.name}: argument {a.name} is a {a.size}-byte value, got a Buffer")
            scalars[a.name] = v
    return bufs, scalars


def _scalar_bytes(abi, a: Arg, v) -> bytes:
    if isinstance(v, (np.generic,)):
        b = np.asarray(v).tobytes()
    elif isinstance(v, bool) or isinstance(v, (int, np.integer)):
        if not -(1 << (8 * a.size - 1)) <= int(v) < (1 << (8 * a.size)):
            raise LaunchError(f"{abi.name}: argument {a.name} = {v} does not fit {a.size} bytes")
        b = (int(v) % (1 << (8 * a.size))).to_bytes(a.size, "little")
    elif isinstance(v, float):
        if a.size == 4:
            b = struct.pack("<f", v)
        elif a.size == 8:
            b = struct.pack("<d", v)
        else:
            raise LaunchError(f"{abi.name}: argument {a.name}: a float for a {a.size}-byte value")
    else:
        raise LaunchError(f"{abi.name}: argument {a.name}: {type(v).__name__} is not a scalar")
    if len(b) != a.size:
        raise LaunchError(f"{abi.name}: argument {a.name} is {a.size} bytes, the value given {len(b)}")
    return b


# Code object v5 hidden arguments (LLVM AMDGPUUsage, "Code Object V5 Metadata"), what the HIP
# runtime writes for a dispatch of grid workgroups of block work-items: (grid, block) -> value.
# Pointers the front end has nothing behind (printf and hostcall buffers, the heap, queues,
# apertures) are null: a kernel that uses one faults at address 0, naming it.
_NULL = lambda grid, block: 0                                          # noqa: E731
HIDDEN = {
    **{f"hidden_block_count_{c}": (lambda k: lambda grid, block: grid[k])(k) for k, c in enumerate("xyz")},
    **{f"hidden_group_size_{c}": (lambda k: lambda grid, block: block[k])(k) for k, c in enumerate("xyz")},
    **{f"hidden_remainder_{c}": _NULL for c in "xyz"},         # whole workgroups only: no partial one
    **{f"hidden_global_offset_{c}": _NULL for c in "xyz"},
    "hidden_grid_dims": lambda grid, block: 3 if grid[2] > 1 or block[2] > 1 else 2 if grid[1] > 1 or block[1] > 1 else 1,
    "hidden_dynamic_lds_size": _NULL,
    **{k: _NULL for k in ("hidden_none", "hidden_printf_buffer", "hidden_hostcall_buffer", "hidden_multigrid_sync_arg",
                          "hidden_heap_v1", "hidden_default_queue", "hidden_completion_action", "hidden_queue_ptr",
                          "hidden_private_base", "hidden_shared_base")},
}


def kernarg_segment(abi: KernelABI, space: AddressSpace, bufs: dict, scalars: dict, dims=None) -> np.ndarray:
    """The kernarg bytes: every pointer the address of its buffer, every scalar its bytes, and the
    hidden arguments of the launch ``dims`` = (grid in workgroups, block in work-items)."""
    seg = np.zeros(-(-max(abi.kernarg_size, 4) // 64) * 64, np.uint8)
    for h in abi.hidden:
        if dims is None:
            raise LaunchError(f"{abi.name}: hidden argument {h.kind} needs the launch's grid and block "
                              "(gfxsim.asm.run.run_asm gives them)")
        if h.offset + h.size > len(seg):
            raise LaunchError(f"{abi.name}: hidden argument {h.kind} at [{h.offset}, {h.offset + h.size}) outside "
                              f"the {abi.kernarg_size}-byte kernarg segment")
        seg[h.offset:h.offset + h.size] = np.frombuffer(int(HIDDEN[h.kind](*dims)).to_bytes(h.size, "little"), np.uint8)
    for a in abi.args:
        if a.offset + a.size > len(seg):
            raise LaunchError(f"{abi.name}: argument {a.name} at [{a.offset}, {a.offset + a.size}) outside the "
                              f"{abi.kernarg_size}-byte kernarg segment")
        b = (space.address(bufs[a.name].name).to_bytes(8, "little") if a.kind == "global_buffer"
             else _scalar_bytes(abi, a, scalars[a.name]))
        seg[a.offset:a.offset + a.size] = np.frombuffer(b, np.uint8)
    return seg


def initial_state(st, abi: KernelABI, space: AddressSpace, kernarg: Buffer, wg_ids, block, wave_id: int):
    """s[0:1], preloaded kernargs, workgroup ids, EXEC and v0 of wave ``wave_id`` of every member
    (``wg_ids``: one (x, y, z) per member of the batch)."""
    st.swrite64(0, space.address(kernarg.name))
    s = 2
    if abi.preload:
        words = kernarg.array.view(np.uint32)
        first = abi.preload_offset // 4
        st.swrite(s, *[int(x) for x in words[first:first + abi.preload]])
        s += abi.preload
    ids = np.asarray(wg_ids, np.int64).reshape(-1, 3)
    if ids.shape[0] != st.members:
        raise LaunchError(f"{abi.name}: {ids.shape[0]} workgroup ids for a wave of {st.members} members")
    for k, enabled in enumerate(abi.workgroup_id):
        if enabled:
            st.swrite(s, ids[:, k].astype(np.uint64))
            s += 1
    bx, by, bz = block
    n = bx * by * bz
    flat = wave_id * st.lanes + np.arange(st.lanes)
    live = flat < n
    x, y, z = flat % bx, (flat // bx) % by, flat // (bx * by)
    if (abi.workitem_id < 1 and by > 1) or (abi.workitem_id < 2 and bz > 1):
        raise LaunchError(f"{abi.name}: block {block} has y/z extent but the descriptor enables work-item ids "
                          f"up to {'xyz'[abi.workitem_id]} only")
    v0 = np.where(live, x | (y << 10) | (z << 20), 0).astype(np.uint32)
    live, v0 = np.tile(live, st.members), np.tile(v0, st.members)
    st.set_exec(live)
    st.vwrite("v", 0, v0[None, :])
