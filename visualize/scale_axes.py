"""Which axis each scale was applied on: one panel per scale over the result tile D[m][n].

A cell (m, n) shows the identity the scale applied to D[m][n] carries (r5: computed for row 5,
t3: for token 3). The fill says which axis that identity runs along: it equals the element's row
index (M), its column index (N) or neither (the scale of another element). A q scale belongs on M,
a k scale on N (k_scaleᵀ); a k scale along M is k_scale applied untransposed. Outlined: the scale was reduced over
fewer head elements than the instruction summed (a per-token scale split along the reduction
axis K). The data is what the kernel saw (kernels_py.fp8.fp8_qk ``record``), read from the scales'
provenance, not from the kernel's intent.

>>> rec = {}; run_fp8_qk(q, k, k_scale_on="M", record=rec); fig = plot_scale_axes(rec)
"""
from __future__ import annotations

import numpy as np
from matplotlib.patches import Patch

from . import grid, style

AXES = ("along M: the element's row index", "along N: the element's column (token) index",
        "neither: another element's scale")


def scale_axes(record) -> dict:
    """name -> (labels [M, N], axis code [M, N] (0 M, 1 N, 2 neither), split [M, N], dims covered)."""
    insn, rows, cols = record["insn"], record["rows"], record["cols"]
    K_all = None
    out = {}
    for name, ids in record["scales"].items():
        M, N = insn.M, insn.N
        labels = np.full((M, N), "", dtype=object)
        code = np.full((M, N), 2, int)
        cover = np.zeros((M, N), int)
        dims = [d for per_reg in ids["dims"] for d in per_reg]
        K_all = frozenset().union(*dims) if K_all is None else K_all | frozenset().union(*dims)
        for lane in range(rows.shape[0]):
            for i in range(rows.shape[1]):
                m, n = int(rows[lane, i]), int(cols[lane, i])
                r, t = int(ids["row"][i, lane]), int(ids["token"][i, lane])
                ident = r if r >= 0 else t
                labels[m, n] = f"r{r}" if r >= 0 else (f"t{t}" if t >= 0 else "·")
                code[m, n] = 3 if ident >= 0 and ident == m == n else (0 if ident == m else (1 if ident == n else 2))
                cover[m, n] = len(ids["dims"][i][lane])
        rest = code[code != 3]
        axis = int(np.bincount(rest, minlength=3).argmax()) if rest.size else 0
        code[code == 3] = axis                  # the diagonal: both indices; drawn as the panel's axis
        out[name] = [labels, code, cover, None]
    for name, v in out.items():
        covered = v[2]
        v[2] = covered < len(K_all)
        v[3] = (int(covered.min()), len(K_all))
    return {k: tuple(v) for k, v in out.items()}


def _title(name, code, split, cov) -> str:
    kinds = sorted(set(code.ravel().tolist()))
    on = {0: "along M (rows)", 1: "along N (columns)", 2: "along neither M nor N"}
    axis = on[kinds[0]] if len(kinds) == 1 else "mixed: " + ", ".join(on[k] for k in kinds)
    k = (f"reduced over all {cov[1]} head elements (K)" if not split.any() else
         f"reduced over only {cov[0]} of {cov[1]} head elements: split along K, the reduction axis")
    return f"{name} {axis}; {k}"


def plot_scale_axes(record):
    axes = scale_axes(record)
    insn = record["insn"]
    panels = []
    for name, (labels, code, split, cov) in axes.items():
        panels.append(grid.Panel(labels=labels, groups=code, title=_title(name, code, split, cov), gid=name,
                                 xticks=[str(n) for n in range(insn.N)], yticks=[str(m) for m in range(insn.M)],
                                 xlabel="n (token)", ylabel="m (query row)", outline=split))
    size = grid.sizing(panels)
    handles = [Patch(facecolor=style.group_style(g)[0], hatch=style.group_style(g)[1] or None,
                     edgecolor=style.group_style(g)[2], linewidth=0.6, label=f"applied {AXES[g]}")
               for g in range(3)]
    handles.append(Patch(facecolor="white", edgecolor=style.DIFF_EDGE, linewidth=style.DIFF_LINEWIDTH,
                         label="outlined: reduced over part of K"))
    fig = grid.figure(size.width, size.height, f"Scales applied to {insn.mnemonic} results (rN: row N's scale, "
                      f"tN: token N's)", handles, "")
    grid.draw(fig, panels, size)
    return fig


__all__ = ["plot_scale_axes", "scale_axes"]
