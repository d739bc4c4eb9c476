"""Render a header + rows table as text, markdown or csv (json is built by the callers)."""
from __future__ import annotations

import csv
import io
from .errors import ArgumentError


def render(header, rows, fmt: str = "text", title: str | None = None) -> str:
    header = [str(h) for h in header]
    rows = [[str(c) for c in r] for r in rows]
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
        return buf.getvalue().rstrip("\n")
    if fmt == "markdown":
        esc = lambda s: s.replace("|", "\\|")
        lines = ([f"**{title}**", ""] if title else [])
        lines.append("| " + " | ".join(map(esc, header)) + " |")
        lines.append("|" + "|".join("---" for _ in header) + "|")
        lines += ["| " + " | ".join(map(esc, r)) + " |" for r in rows]
        return "\n".join(lines)
    if fmt == "text":
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
        numeric = [all(r[i].lstrip("-").isdigit() for r in rows) for i in range(len(header))]
        line = lambda cells: "  ".join(c.rjust(w) if n else c.ljust(w)
                                       for c, w, n in zip(cells, widths, numeric)).rstrip()
        out = ([title] if title else []) + [line(header), line(["-" * w for w in widths])]
        return "\n".join(out + [line(r) for r in rows])
    raise ArgumentError(f"unknown table format {fmt!r}; use text, markdown or csv")
