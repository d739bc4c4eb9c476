"""Matplotlib figures as tests read them."""


def axes_by_gid(fig):
    axes, stack = [], [fig]
    while stack:
        f = stack.pop()
        axes += f.axes
        stack += list(f.subfigs)
    return {a.get_gid(): a for a in axes if a.get_gid()}
