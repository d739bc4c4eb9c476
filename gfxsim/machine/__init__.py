"""The back end: wave state, memory, matrix instructions, provenance, trace, findings."""
from .errors import GfxSimError, MemoryFault
from .findings import KINDS, REGISTRY, Finding
from .launch import Machine, Run, launch
from .memory import Buffer, LdsRegion
from .options import LaunchOptions
from .ops import UnknownOperation
from .trace import Event, MmaEvent, Stepper, Trace
from .vgpr import VGPRs
from .cond import Cond
from .wave import Wave

__all__ = ["launch", "LaunchOptions", "Run", "Machine", "Buffer", "LdsRegion", "Wave", "VGPRs", "Cond", "Trace",
           "Event", "MmaEvent", "Stepper", "Finding", "KINDS", "REGISTRY", "UnknownOperation", "GfxSimError",
           "MemoryFault"]
