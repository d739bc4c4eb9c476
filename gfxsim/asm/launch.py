"""The AMDHSA launch of a clang-compiled kernel (LLVM AMDGPUUsage, "Initial Kernel Execution
State" and "Code Object V4/V5 Metadata"): what the descriptor and metadata say, the kernarg
segment, the address of every buffer, and a wave's registers at its first instruction.

- ``KernelABI.of(kernel)``: the ``.amdhsa_*`` fields the launch needs, validated, and the user
  SGPRs they enable in ABI order (private segment buffer, dispatch packet pointer, queue pointer,
  kernarg segment pointer, dispatch id, flat scratch init, private segment size, preloaded
  kernargs); a feature the front end does not set up (workgroup info, a hidden argument it does
  not know) is an error naming the kernel and the field.
- Arguments: a pointer is a Buffer, or None / "null" (address 0: an access through it is a fault
  naming it), or a ``PointerArray`` (a buffer of pointers to other Buffers); a by-value argument
  a number, or for an aggregate (a struct passed by value) a ``Struct`` (its bytes, pointers
  inside it given as Buffers); arguments the metadata leaves
  unnamed (Triton's) are ``arg0``, ``arg1``, ... in order. Hidden arguments (``HIDDEN``, code
  object v4 and v5) are written at the offsets the metadata gives, from the launch's ``Dispatch``
  (grid, block, dynamic LDS bytes); the pointers among them (printf, hostcall, heap, queues) are
  null, and a kernel dereferencing one faults naming it.
- ``AddressSpace``: every Buffer (and the kernarg segment, the dispatch packet) gets a 1 TiB range
  of 64-bit addresses, so a pointer is an address and an access resolves to one buffer and a byte
  offset — or a fault naming the lane, the address and, near 0, the null pointers of the launch.
  The private segment (scratch) of every lane is at offset 0 of the private aperture
  (``PRIVATE_BASE``, semantics/scratch.py); the LDS aperture is ``SHARED_BASE``.
- ``initial_state``: user SGPRs in ABI order, then the enabled workgroup ids and the scratch wave
  offset, FLAT_SCRATCH, EXEC of the live work-items, v0 = the packed work-item ids (gfx90a and
  gfx94x: x | y << 10 | z << 20).
"""
from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ..errors import GfxSimError
from ..machine.errors import MemoryFault
from ..machine.memory import Buffer
from .operands import APERTURE_REGS

SPAN = 1 << 40                     # address range of each buffer
BASE = 1 << 44                     # first buffer's address (far from 0: a null pointer faults)
KERNARG = "kernarg"
DISPATCH = "dispatch_packet"
NEAR_NULL = 1 << 32                # an address below this is a null pointer plus an offset
# flat apertures (the high words the v5 hidden arguments hidden_private_base/hidden_shared_base give)
PRIVATE_BASE = 1 << 43
SHARED_BASE = 3 << 42
APERTURE = 1 << 32

# descriptor fields the front end does not set up: field -> what it is
_UNSUPPORTED = {".amdhsa_system_sgpr_workgroup_info": "workgroup info SGPR"}
# the per-lane stack a dispatch adds to the private segment of a kernel with a dynamic stack
# (recursion, variable-sized allocas, calls of unknown depth): HIP's default stack size limit
STACK_BYTES = 1024
# user SGPRs in the order the ABI loads them: (descriptor field, what, SGPRs)
USER_SGPRS = ((".amdhsa_user_sgpr_private_segment_buffer", "private_segment_buffer", 4),
              (".amdhsa_user_sgpr_dispatch_ptr", "dispatch_ptr", 2),
              (".amdhsa_user_sgpr_queue_ptr", "queue_ptr", 2),
              (".amdhsa_user_sgpr_kernarg_segment_ptr", "kernarg_segment_ptr", 2),
              (".amdhsa_user_sgpr_dispatch_id", "dispatch_id", 2),
              (".amdhsa_user_sgpr_flat_scratch_init", "flat_scratch_init", 2),
              (".amdhsa_user_sgpr_private_segment_size", "private_segment_size", 1))


class LaunchError(GfxSimError, ValueError):
    """A kernel or its arguments the asm launch cannot set up."""


@dataclass(frozen=True)
class Arg:
    name: str
    offset: int
    size: int
    kind: str                      # "global_buffer" | "by_value"


@dataclass(frozen=True)
class Struct:
    """A by-value aggregate argument (``.value_kind: by_value`` of more than 8 bytes, a C struct):
    ``data`` its bytes (bytes-like, or a numpy array or structured record, shorter ones zero-padded),
    ``pointers`` {byte offset: Buffer or None} the pointers inside it (each written as its buffer's
    address, None as null), ``values`` {byte offset: numpy scalar} further fields by their type.

        Struct(pointers={0: a, 8: b, 24: c}, values={16: np.int32(n), 56: np.int64(3)})
        Struct.of(np.dtype([("a", "u8"), ("b", "u8"), ("n", "i4"), ("c", "u8")], align=True), a=a, b=b, n=5, c=None)
    """
    data: object = b""
    pointers: Mapping = field(default_factory=dict)
    values: Mapping = field(default_factory=dict)

    @classmethod
    def of(cls, dtype: np.dtype, **fields) -> Struct:
        """A struct laid out by a numpy structured ``dtype`` (``align=True`` lays it out as C does),
        its fields by name: a Buffer or None for a pointer (an 8-byte integer field), numbers or
        arrays for the others; fields not given are zero."""
        dtype = np.dtype(dtype)
        if dtype.names is None:
            raise LaunchError(f"Struct.of needs a structured dtype, got {dtype}")
        unknown = set(fields) - set(dtype.names)
        if unknown:
            raise LaunchError(f"Struct.of: no field {', '.join(sorted(unknown))} in {dtype} (fields: "
                              f"{', '.join(dtype.names)})")
        rec, pointers = np.zeros((), dtype), {}
        for name, v in fields.items():
            t, off = dtype.fields[name][:2]
            if isinstance(v, Buffer) or is_null(v):
                if t.kind not in "iu" or t.itemsize != 8:
                    raise LaunchError(f"Struct.of: field {name} ({t}) takes no pointer: a pointer is an 8-byte "
                                      "integer field")
                pointers[off] = None if is_null(v) else v
            else:
                rec[name] = v
        return cls(rec, pointers)

    def to_bytes(self, size: int, address, where: str) -> bytes:
        """The argument's ``size`` bytes; ``address(buffer)`` is a pointer's value."""
        raw = bytearray(np.ascontiguousarray(self.data).tobytes() if isinstance(self.data, (np.ndarray, np.generic))
                        else bytes(self.data))
        if len(raw) > size:
            raise LaunchError(f"{where}: {len(raw)} bytes of data for a {size}-byte argument")
        raw.extend(bytes(size - len(raw)))
        parts = [(o, address(b).to_bytes(8, "little"), "pointer") for o, b in self.pointers.items()]
        for o, v in self.values.items():
            if not isinstance(v, np.generic):
                raise LaunchError(f"{where}: the field at offset {o} is {type(v).__name__}; give a numpy scalar "
                                  "(np.int32(5), np.float32(1.5)) so its size is known")
            parts.append((o, v.tobytes(), f"{v.dtype} value"))
        for o, b, what in parts:
            if not (isinstance(o, (int, np.integer)) and 0 <= o and o + len(b) <= size):
                raise LaunchError(f"{where}: a {what} at offset {o} outside the {size}-byte argument")
            raw[o:o + len(b)] = b
        return bytes(raw)


class PointerArray(Buffer):
    """A buffer of 64-bit pointers (a kernel's ``float**``, a table of per-batch pointers): element i
    is the address of ``targets[i]`` (a Buffer; None for null), written when the launch places them."""

    def __init__(self, name: str, targets, tags: dict | None = None):
        self.targets = list(targets)
        for t in self.targets:
            if not (isinstance(t, Buffer) or is_null(t)):
                raise LaunchError(f"PointerArray {name!r}: a target is a Buffer or None, got {type(t).__name__}")
        super().__init__(name, np.zeros(len(self.targets), np.uint64), tags)

    def fill(self, space: AddressSpace):
        self.array[:] = [space.pointer(t) for t in self.targets]


@dataclass(frozen=True)
class Dispatch:
    """What a launch gives its hidden arguments: grid in workgroups and block in work-items (x, y, z),
    the dynamic LDS bytes (``extern __shared__``) after the descriptor's fixed group segment, and
    the per-lane stack bytes after the fixed private segment of a kernel with a dynamic stack."""
    grid: tuple
    block: tuple
    dynamic_lds: int = 0
    stack: int = STACK_BYTES


def _dispatch(dims) -> Dispatch | None:
    if dims is None or isinstance(dims, Dispatch):
        return dims
    grid, block = dims
    return Dispatch(tuple(grid), tuple(block))


def _field(d, key: str, where: str, default=None) -> int:
    v = d.get(key, default)
    if v is None:
        raise LaunchError(f"{where}: the kernel descriptor has no {key}")
    if not isinstance(v, (int, np.integer)):
        raise LaunchError(f"{where}: {key} {v!r} is an expression over symbols the .s does not define")
    return int(v)


@dataclass(frozen=True)
class KernelABI:
    name: str
    lds_bytes: int                 # .amdhsa_group_segment_fixed_size
    kernarg_size: int
    user_sgprs: int
    preload: int                   # kernarg dwords preloaded into SGPRs after the other user SGPRs
    preload_offset: int
    workgroup_id: tuple            # (x, y, z) enabled
    workitem_id: int               # 0: x, 1: x and y, 2: x, y and z in v0
    n_vgpr: int
    n_agpr: int
    wave_size: int
    max_workgroup: int
    args: tuple
    hidden: tuple = ()             # hidden arguments (Arg, kind = its value kind)
    user: tuple = (("kernarg_segment_ptr", 2),)   # the enabled user SGPRs in order: (what, count)
    private_bytes: int = 0         # .amdhsa_private_segment_fixed_size: scratch bytes per lane
    private_segment: bool = False  # scratch enabled (.amdhsa_enable_private_segment, or gfx90a's wave offset)
    wave_offset: bool = False      # .amdhsa_system_sgpr_private_segment_wavefront_offset
    dynamic_stack: bool = False    # .amdhsa_uses_dynamic_stack: the dispatch adds a stack (Dispatch.stack)

    @classmethod
    def of(cls, kernel) -> KernelABI:
        d, m = kernel.descriptor, kernel.metadata
        where = f"{kernel.name}"

        def need(key, default=None):
            return _field(d, key, where, default)
        for key, what in _UNSUPPORTED.items():
            if need(key, 0):
                raise LaunchError(f"{where}: {key} 1 ({what}) is not set up by the asm launch")
        user = tuple((what, n) for key, what, n in USER_SGPRS if need(key, 0))
        if ("kernarg_segment_ptr", 2) not in user:
            raise LaunchError(f"{where}: .amdhsa_user_sgpr_kernarg_segment_ptr 0: no kernarg segment pointer")
        preload = need(".amdhsa_user_sgpr_kernarg_preload_length", 0)
        count = need(".amdhsa_user_sgpr_count")
        loaded = sum(n for _, n in user)
        if count != loaded + preload:
            raise LaunchError(f"{where}: .amdhsa_user_sgpr_count {count} != the enabled user SGPRs "
                              f"({', '.join(f'{w} ({n})' for w, n in user)}) + preload ({preload})")
        if need(".amdhsa_float_round_mode_32", 0) != 0:
            raise LaunchError(f"{where}: .amdhsa_float_round_mode_32 {d['.amdhsa_float_round_mode_32']}: only "
                              "round-to-nearest-even is modelled")
        if need(".amdhsa_float_denorm_mode_32", 3) != 3:
            raise LaunchError(f"{where}: .amdhsa_float_denorm_mode_32 {d['.amdhsa_float_denorm_mode_32']}: only 3 "
                              "(fp32 denormals kept) is modelled")
        if need(".amdhsa_ieee_mode", 1) != 1:
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
            name = a.get(".name")
            name = f"arg{len(args)}" if name is None or name == "" else str(name)   # Triton names none
            args.append(Arg(name, int(a[".offset"]), int(a[".size"]), kind))
        if len({a.name for a in args}) != len(args):
            raise LaunchError(f"{where}: argument names repeat: {', '.join(a.name for a in args)}")
        vgpr_total = int(m.get(".vgpr_count", need(".amdhsa_next_free_vgpr")))
        n_agpr = int(m.get(".agpr_count", 0))
        accum = need(".amdhsa_accum_offset", vgpr_total)
        n_vgpr = min(256, accum if n_agpr else max(vgpr_total, accum))
        wave_offset = bool(need(".amdhsa_system_sgpr_private_segment_wavefront_offset", 0))
        private = bool(need(".amdhsa_enable_private_segment", 0)) or wave_offset
        return cls(kernel.name, need(".amdhsa_group_segment_fixed_size", 0), need(".amdhsa_kernarg_size"),
                   count, preload, need(".amdhsa_user_sgpr_kernarg_preload_offset", 0),
                   tuple(need(f".amdhsa_system_sgpr_workgroup_id_{c}", 0) for c in "xyz"),
                   need(".amdhsa_system_vgpr_workitem_id", 0), max(n_vgpr, 1), n_agpr,
                   int(m.get(".wavefront_size", 64)), int(m.get(".max_flat_workgroup_size", 1024)), tuple(args),
                   tuple(hidden), user, need(".amdhsa_private_segment_fixed_size", 0), private, wave_offset,
                   bool(need(".amdhsa_uses_dynamic_stack", 0)))

    def lane_private(self, stack: int = STACK_BYTES) -> int:
        """A lane's private bytes: the fixed segment, plus ``stack`` for a dynamic stack."""
        return self.private_bytes + (stack if self.dynamic_stack else 0)

    def describe_args(self) -> str:
        """``out (pointer, offset 0), n (4-byte value, offset 8)``: what the kernel takes."""
        return ", ".join(f"{a.name} ({'pointer' if a.kind == 'global_buffer' else f'{a.size}-byte value'}, "
                         f"offset {a.offset})" for a in self.args)


NULL = "null"


def is_null(v) -> bool:
    """A null pointer argument: None or "null"."""
    return v is None or (isinstance(v, str) and v == NULL)


def entry(kernel, abi: KernelABI) -> int:
    """The index of a wave's first instruction. A kernel that preloads kernargs begins with a
    256-byte header for firmware that cannot preload (LLVM 19+: ``s_trap 2`` and 63 ``s_nop 0``
    written as ``.fill``); hardware that preloads starts past it. LLVM 18's header (the kernargs
    loaded, then ``s_branch`` to the body) is a path that gives the same registers, and runs."""
    ins = kernel.instructions
    return 1 if abi.preload and ins and ins[0].mnemonic == "s_trap" else 0


class AddressSpace:
    """Buffers at 64-bit addresses: buffer k spans [BASE + k*SPAN, BASE + k*SPAN + nbytes).
    ``nulls``: what the launch passed as a null pointer (argument names, hidden pointers), named
    when an access lands near address 0."""

    def __init__(self, buffers: list, nulls=()):
        self.buffers = list(buffers)
        self.base = {b.name: BASE + k * SPAN for k, b in enumerate(self.buffers)}
        self.nulls = tuple(nulls)

    def address(self, name: str) -> int:
        return self.base[name]

    def pointer(self, buf) -> int:
        """A pointer argument's value: its buffer's address, 0 for null."""
        return 0 if is_null(buf) else self.base[buf.name]

    def _index(self, addr):
        return ((np.asarray(addr, np.uint64) - np.uint64(BASE)) // np.uint64(SPAN)).astype(np.int64)

    def why(self, addr: int) -> str:
        """Why an address is in no buffer."""
        if addr < NEAR_NULL:
            return (f"a null pointer (+{addr}); null in this launch: {', '.join(self.nulls)}" if self.nulls else
                    f"a null pointer (+{addr}), though no pointer of this launch is null")
        if PRIVATE_BASE <= addr < PRIVATE_BASE + APERTURE:
            return "in the private (scratch) aperture, which only flat_* and scratch_* instructions reach"
        if SHARED_BASE <= addr < SHARED_BASE + APERTURE:
            return "in the LDS aperture, which only flat_* instructions reach"
        return f"in no buffer ({self.describe()})"

    def split(self, st, addr: np.ndarray, active: np.ndarray, nbytes: int):
        """[(buffer, byte offsets [width], lanes)] for the buffers the active lanes address."""
        addr = np.asarray(addr, np.uint64)
        one = self._one_buffer(addr, active)
        if one is not None:
            return one
        low = active & (addr < np.uint64(BASE))
        idx = np.where(addr >= np.uint64(BASE), self._index(addr), -1)
        bad = active & ((idx < 0) | (idx >= len(self.buffers)))
        if low.any() or bad.any():
            lane = int(np.argmax(low | bad))
            a = int(addr[lane])
            raise st.error(f"lane {lane % st.lanes} accesses address 0x{a:x}, which is {self.why(a)}",
                           cls=MemoryFault, lane=lane, address=a)
        out = []
        for k in sorted(set(idx[active].tolist())):
            buf = self.buffers[k]
            lanes = active & (idx == k)
            offs = np.where(lanes, (addr - np.uint64(self.base[buf.name])).astype(np.int64), 0)
            out.append((buf, offs, lanes))
        return out

    def _one_buffer(self, addr: np.ndarray, active: np.ndarray):
        """split's answer where every active lane addresses one buffer's span, else None (split's
        general path, which also names a fault)."""
        one = self.one_buffer(addr, active)
        return None if one is None else [(*one, active.copy())]

    def one_buffer(self, addr: np.ndarray, active: np.ndarray, full: bool = False):
        """(buffer, byte offsets int64 [width], 0 outside ``active``) where every active lane of
        ``addr`` (uint64 [width]) addresses one buffer's span (the common case: the lowest and
        highest active address decide it), else None. ``full``: every lane is active."""
        a = addr if full else addr[active]
        if not a.size:
            return None
        lo, hi = int(a.min()), int(a.max())
        k = (lo - BASE) // SPAN
        if lo < BASE or k != (hi - BASE) // SPAN or k >= len(self.buffers):
            return None
        buf = self.buffers[k]
        offs = (addr - np.uint64(self.base[buf.name])).astype(np.int64)
        return buf, offs if full else np.where(active, offs, 0)

    def scalar(self, st, addr: int, nbytes: int):
        """(buffer, byte offset) of a scalar access."""
        k = (addr - BASE) // SPAN if addr >= BASE else -1
        if not 0 <= k < len(self.buffers):
            raise st.error(f"s_load from address 0x{addr:x}, which is {self.why(addr)}", cls=MemoryFault,
                           address=addr)
        buf = self.buffers[k]
        return buf, addr - self.base[buf.name]

    def describe(self) -> str:
        return ", ".join(f"{b.name} at 0x{self.base[b.name]:x} ({b.nbytes} B)" for b in self.buffers)


# a kernel's arguments are declared only in the .s's metadata: a file without it (cut short, or
# hand-written) declares none
NO_ARGS = ("its .s declares none (arguments are listed under .args in its .amdgpu_metadata block; a .s cut "
           "short or written without that block has none)")


def bind_args(abi: KernelABI, args) -> tuple[dict, dict]:
    """Pointers (Buffer or None) and values by argument name from a dict (by name; unnamed
    arguments are arg0, arg1, ...) or a sequence (metadata order)."""
    names = [a.name for a in abi.args]
    takes = abi.describe_args()
    if isinstance(args, dict):
        unknown = set(args) - set(names)
        if unknown:
            raise LaunchError(f"{abi.name} has no argument {', '.join(sorted(map(str, unknown)))}; " + (
                f"it takes: {takes}" if names else NO_ARGS))
        values = dict(args)
    else:
        args = list(args)
        if len(args) != len(names):
            raise LaunchError(f"{abi.name} takes {len(names)} arguments ({takes}), got {len(args)}"
                              if names else f"{abi.name} takes no arguments, got {len(args)}; {NO_ARGS}")
        values = dict(zip(names, args))
    missing = [n for n in names if n not in values]
    if missing:
        raise LaunchError(f"{abi.name}: argument(s) {', '.join(missing)} not given; it takes: {takes}")
    bufs, scalars = {}, {}
    for a in abi.args:
        v = values[a.name]
        if a.kind == "global_buffer":
            if is_null(v):
                bufs[a.name] = None
            elif not isinstance(v, Buffer):
                raise LaunchError(f"{abi.name}: argument {a.name} is a pointer: pass a gfxsim Buffer (or None for "
                                  f"null), got {type(v).__name__}")
            else:
                bufs[a.name] = v
        else:
            if isinstance(v, Buffer):
                raise LaunchError(f"{abi.name}: argument {a.name} is a {a.size}-byte value, got a Buffer" + (
                    " (a struct: pass gfxsim.asm.launch.Struct(pointers={offset: buffer}))" if a.size > 8 else ""))
            scalars[a.name] = v
    return bufs, scalars


def struct_buffers(scalars: dict, bufs: dict | None = None) -> list:
    """The Buffers the pointers inside by-value Struct arguments and PointerArrays name (they join
    the address space)."""
    inside = [b for v in scalars.values() if isinstance(v, Struct) for b in v.pointers.values()]
    todo = [b for b in (bufs or {}).values() if isinstance(b, PointerArray)]
    seen: list = []
    while todo:                                    # arrays of arrays of pointers
        pa = todo.pop()
        if any(pa is s for s in seen):
            continue
        seen.append(pa)
        inside += pa.targets
        todo += [t for t in pa.targets if isinstance(t, PointerArray)]
    return [b for b in inside if not is_null(b)]


def _scalar_bytes(abi, a: Arg, v, space=None) -> bytes:
    where = f"{abi.name}: argument {a.name}"
    if isinstance(v, Struct):
        return v.to_bytes(a.size, space.pointer, where)
    if isinstance(v, (bytes, bytearray, memoryview)) or (isinstance(v, np.ndarray) and a.size > 8):
        return Struct(v).to_bytes(a.size, space.pointer, where)
    if isinstance(v, np.void):                      # a record of a structured array
        return Struct(np.array(v)).to_bytes(a.size, space.pointer, where)
    if isinstance(v, (np.generic,)):
        b = np.asarray(v).tobytes()
    elif isinstance(v, bool) or isinstance(v, (int, np.integer)):
        if not -(1 << (8 * a.size - 1)) <= int(v) < (1 << (8 * a.size)):
            raise LaunchError(f"{where} = {v} does not fit {a.size} bytes")
        b = (int(v) % (1 << (8 * a.size))).to_bytes(a.size, "little")
    elif isinstance(v, float):
        if a.size == 4:
            b = struct.pack("<f", v)
        elif a.size == 8:
            b = struct.pack("<d", v)
        else:
            raise LaunchError(f"{where}: a float for a {a.size}-byte value")
    else:
        raise LaunchError(f"{where}: {type(v).__name__} is not a scalar" + (
            " (a struct: pass bytes, a numpy record or gfxsim.asm.launch.Struct)" if a.size > 8 else ""))
    if len(b) != a.size:
        raise LaunchError(f"{where} is {a.size} bytes, the value given {len(b)}")
    return b


# Hidden kernel arguments (LLVM AMDGPUUsage, "Code Object V4 Metadata" / "Code Object V5
# Metadata"), what the HIP runtime writes for a dispatch: Dispatch -> value. A launch is whole
# workgroups (grid in workgroups), so no workgroup is partial and the remainders are 0. Pointers
# the front end has nothing behind (printf and hostcall buffers, the heap, queues, the multigrid
# sync argument, the completion action) are null (HIDDEN_POINTERS): a kernel dereferencing one
# faults at a near-0 address, naming them. The apertures' high words are PRIVATE_BASE's and
# SHARED_BASE's.
HIDDEN_POINTERS = ("hidden_printf_buffer", "hidden_hostcall_buffer", "hidden_multigrid_sync_arg", "hidden_heap_v1",
                   "hidden_default_queue", "hidden_completion_action", "hidden_queue_ptr")


def _grid_dims(d: Dispatch) -> int:
    g, b = d.grid, d.block
    return 3 if g[2] > 1 or b[2] > 1 else 2 if g[1] > 1 or b[1] > 1 else 1


HIDDEN = {
    **{f"hidden_block_count_{c}": (lambda k: lambda d: d.grid[k])(k) for k, c in enumerate("xyz")},
    **{f"hidden_group_size_{c}": (lambda k: lambda d: d.block[k])(k) for k, c in enumerate("xyz")},
    **{f"hidden_remainder_{c}": lambda d: 0 for c in "xyz"},
    **{f"hidden_global_offset_{c}": lambda d: 0 for c in "xyz"},
    "hidden_grid_dims": _grid_dims,
    "hidden_dynamic_lds_size": lambda d: d.dynamic_lds,
    "hidden_private_base": lambda d: PRIVATE_BASE >> 32,
    "hidden_shared_base": lambda d: SHARED_BASE >> 32,
    "hidden_none": lambda d: 0,
    **{k: lambda d: 0 for k in HIDDEN_POINTERS},
}


def null_pointers(abi: KernelABI, bufs: dict, scalars: dict | None = None) -> list[str]:
    """What the launch passes as null: pointer arguments given None, pointers inside Structs
    ("p+24"), hidden pointers, the queue pointer."""
    inside = [f"{n}+{o}" for n, v in (scalars or {}).items() if isinstance(v, Struct)
              for o, b in sorted(v.pointers.items()) if is_null(b)]
    inside += [f"{b.name}[{i}]" for b in bufs.values() if isinstance(b, PointerArray)
               for i, t in enumerate(b.targets) if is_null(t)]
    return ([n for n, b in bufs.items() if b is None] + inside + [h.kind for h in abi.hidden if h.kind in HIDDEN_POINTERS]
            + ["queue_ptr (user SGPRs)" for w, _ in abi.user if w == "queue_ptr"])


def kernarg_segment(abi: KernelABI, space: AddressSpace, bufs: dict, scalars: dict, dims=None) -> np.ndarray:
    """The kernarg bytes: every pointer the address of its buffer (0 for null), every value its
    bytes, and the hidden arguments of the launch ``dims`` (a Dispatch, or (grid, block))."""
    dims = _dispatch(dims)
    seg = np.zeros(-(-max(abi.kernarg_size, 4) // 64) * 64, np.uint8)
    for h in abi.hidden:
        if dims is None:
            raise LaunchError(f"{abi.name}: hidden argument {h.kind} needs the launch's grid and block "
                              "(gfxsim.asm.run.run_asm gives them)")
        if h.offset + h.size > len(seg):
            raise LaunchError(f"{abi.name}: hidden argument {h.kind} at [{h.offset}, {h.offset + h.size}) outside "
                              f"the {abi.kernarg_size}-byte kernarg segment")
        value = int(HIDDEN[h.kind](dims))
        if value >= 1 << (8 * h.size):
            raise LaunchError(f"{abi.name}: hidden argument {h.kind} = {value} does not fit its {h.size} bytes")
        seg[h.offset:h.offset + h.size] = np.frombuffer(value.to_bytes(h.size, "little"), np.uint8)
    for a in abi.args:
        if a.offset + a.size > len(seg):
            raise LaunchError(f"{abi.name}: argument {a.name} at [{a.offset}, {a.offset + a.size}) outside the "
                              f"{abi.kernarg_size}-byte kernarg segment")
        b = (space.pointer(bufs[a.name]).to_bytes(8, "little")[:a.size] if a.kind == "global_buffer"
             else _scalar_bytes(abi, a, scalars[a.name], space))
        seg[a.offset:a.offset + a.size] = np.frombuffer(b, np.uint8)
    return seg


def dispatch_packet(abi: KernelABI, dims: Dispatch, kernarg_address: int) -> Buffer:
    """The AQL kernel dispatch packet (hsa_kernel_dispatch_packet_t, 64 bytes) the dispatch pointer
    addresses: setup (dimensions), workgroup_size_x/y/z (u16 at 4), grid_size_x/y/z in work-items
    (u32 at 12), private and group segment sizes, kernarg_address (at 40). Code object v4 reads
    blockDim here."""
    p = bytearray(64)
    struct.pack_into("<HH3HH3III", p, 0, 2 << 0 | 1 << 8, _grid_dims(dims), *dims.block, 0,
                     *(g * b for g, b in zip(dims.grid, dims.block)), abi.lane_private(dims.stack),
                     abi.lds_bytes + dims.dynamic_lds)
    struct.pack_into("<Q", p, 40, kernarg_address)
    return Buffer(DISPATCH, np.frombuffer(bytes(p), np.uint8).copy())


def private_descriptor(abi: KernelABI, lanes: int, lane_bytes: int | None = None) -> list[int]:
    """The private segment buffer V# (gfx9 MUBUF resource, s[0:3] before gfx940): base the private
    aperture, swizzled per lane (ADD_TID_ENABLE, index stride 64, element size 4) so each lane sees
    its own bytes from offset 0; num_records the wave's scratch bytes."""
    lane_bytes = abi.private_bytes if lane_bytes is None else lane_bytes
    return [PRIVATE_BASE & 0xFFFFFFFF, (PRIVATE_BASE >> 32) | 1 << 31, lane_bytes * lanes,
            1 << 23 | 3 << 21 | 1 << 19 | 4 << 15 | 4 << 12]


def initial_state(st, abi: KernelABI, space: AddressSpace, kernarg: Buffer, wg_ids, block, wave_id):
    """The user SGPRs (ABI order), preloaded kernargs, workgroup ids, scratch wave offset,
    FLAT_SCRATCH, EXEC and v0 of wave ``wave_id`` of every member (``wg_ids``: one (x, y, z) per
    member of the batch; ``wave_id`` one per member where the members are the waves of one workgroup)."""
    s = 0
    lane_bytes = st.scratch.lane_bytes if getattr(st, "scratch", None) is not None else abi.private_bytes
    for what, n in abi.user:
        if what == "private_segment_buffer":
            st.swrite(s, *private_descriptor(abi, st.lanes, lane_bytes))
        elif what == "dispatch_ptr":
            if DISPATCH not in space.base:
                raise LaunchError(f"{abi.name}: the dispatch pointer needs the launch's dispatch packet "
                                  "(gfxsim.asm.run.address_space with the launch's grid and block)")
            st.swrite64(s, space.address(DISPATCH))
        elif what == "queue_ptr":
            st.swrite64(s, 0)                   # null: named by a fault through it
        elif what == "kernarg_segment_ptr":
            st.swrite64(s, space.address(kernarg.name))
        elif what == "dispatch_id":
            st.swrite64(s, 0)
        elif what == "flat_scratch_init":       # the wave's scratch base before its wave offset
            st.swrite64(s, PRIVATE_BASE)
        elif what == "private_segment_size":
            st.swrite(s, lane_bytes)
        s += n
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
    if abi.wave_offset:                          # each wave's scratch is its own (semantics/scratch.py)
        st.swrite(s, 0)
        s += 1
    if abi.private_segment:                      # gfx940+: FLAT_SCRATCH set by the hardware
        st.swrite64(102, PRIVATE_BASE)
    st.swrite64(APERTURE_REGS["src_shared_base"], SHARED_BASE)
    st.swrite64(APERTURE_REGS["src_private_base"], PRIVATE_BASE)
    bx, by, bz = block
    n = bx * by * bz
    waves = np.broadcast_to(np.asarray(wave_id, np.int64), (st.members,))
    flat = (waves[:, None] * st.lanes + np.arange(st.lanes)).reshape(-1)
    live = flat < n
    x, y, z = flat % bx, (flat // bx) % by, flat // (bx * by)
    if (abi.workitem_id < 1 and by > 1) or (abi.workitem_id < 2 and bz > 1):
        raise LaunchError(f"{abi.name}: block {block} has y/z extent but the descriptor enables work-item ids "
                          f"up to {'xyz'[abi.workitem_id]} only")
    v0 = np.where(live, x | (y << 10) | (z << 20), 0).astype(np.uint32)
    st.set_exec(live)
    st.vwrite("v", 0, v0[None, :])
