"""gfxsim: a wave64 simulator of GPU matrix instructions and LDS, and a fragment-mapping debugger."""
__version__ = "0.1.0"
