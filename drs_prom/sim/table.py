"""Plain-text tables whose column titles are written in full, wrapped onto as many header lines as they need.

A title such as "p95 pod slowdown" reads unambiguously where an abbreviation ("sd p95") reads as a standard
deviation; wrapping keeps the columns as narrow as their values.
"""

from __future__ import annotations

from collections.abc import Sequence


def _wrap(title: str, width: int) -> list[str]:
    """Greedy word wrap of ``title`` to ``width`` (a word longer than that gets its own line)."""
    lines: list[str] = []
    for word in title.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def format_columns(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Header lines, a rule, then the rows; the first column left-aligned, the others right-aligned.

    A row with fewer cells than ``head`` (e.g. "policy  skipped: reason") is printed as its cells joined, unaligned.
    """
    full = [r for r in rows if len(r) == len(head)]
    widths = []
    for i, title in enumerate(head):
        cells = max((len(r[i]) for r in full), default=0)
        widths.append(max(cells, max(len(w) for w in title.split()) if title.split() else 0))
    wrapped = [_wrap(t, w) for t, w in zip(head, widths)]
    widths = [max(w, *(len(x) for x in lines)) for w, lines in zip(widths, wrapped)]
    depth = max(len(lines) for lines in wrapped)
    out = []
    for level in range(depth):  # titles bottom-aligned, next to the rule
        header = [lines[level - (depth - len(lines))] if level >= depth - len(lines) else "" for lines in wrapped]
        out.append(_join(header, widths))
    out.append("  ".join("-" * w for w in widths))
    for r in rows:
        out.append(_join(r, widths) if len(r) == len(head) else f"{r[0]:<{widths[0]}}  {'  '.join(r[1:])}")
    return out


def _join(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(cells, widths))).rstrip()
