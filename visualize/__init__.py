"""Pictures of gfxsim's data: fragment ownership, scale groups, errors, LDS banks.

visualize depends on gfxsim, never the reverse.
"""
