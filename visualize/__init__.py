"""Pictures of gfxsim's data: fragment ownership, scale groups, errors, LDS banks.

visualize depends on gfxsim, never the reverse.

>>> from visualize import plot_layout, plot_compare, save
>>> save(plot_layout("gfx936", "v_mmac_i32_16x16x32_i8", "D"), "d.png")

Kernel runs (kernels_py.host.runs.run_kernel): plot_tokens, plot_scales, plot_errors, plot_banks, and
RunStepper to step through a traced run's wave in a notebook.

The names load on first use, so `gfxsim` (which loads visualize.cli for `gfxsim plot`) does not
pay for importing matplotlib on every command.
"""
_LAZY = {"plot_layout": "fragments", "plot_compare": "compare", "differing": "compare", "save": "style",
         "plot_tokens": "tokens", "plot_scales": "scales", "plot_errors": "errors", "plot_banks": "lds",
         "RunStepper": "stepper", "plot_scale_axes": "scale_axes"}

__all__ = list(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'visualize' has no attribute {name!r}")
