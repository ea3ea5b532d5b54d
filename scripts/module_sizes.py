"""Fail when a module of drs_prom/, exporters/ or drs_prom_research/ is over 400 lines without saying why in its docstring.

    python scripts/module_sizes.py

The reason is a docstring line starting "Over 400 lines" (e.g. "Over 400 lines because ...").
Small modules with one job are the rule (developer guide); a long one must say what keeps it whole.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

LIMIT = 400
ROOTS = ("drs_prom", "exporters", "drs_prom_research")


def main() -> int:
    repo = Path(__file__).resolve().parents[1]
    bad = []
    for root in ROOTS:
        for path in sorted((repo / root).rglob("*.py")):
            text = path.read_text()
            lines = text.count("\n")
            if lines <= LIMIT:
                continue
            doc = ast.get_docstring(ast.parse(text)) or ""
            if not any(line.startswith("Over 400 lines") for line in doc.splitlines()):
                bad.append(
                    f"{path.relative_to(repo)}: {lines} lines and no 'Over 400 lines ...' reason in its docstring"
                )
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
