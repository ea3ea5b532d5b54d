"""Print every import cycle between modules of drs_prom, exporters and drs_prom_research (exit 1 if any).

    python scripts/import_cycles.py

Uses grimp (import-linter's graph library), which sees every import statement, including
those inside functions and under ``if TYPE_CHECKING``, so a cycle hidden in a function shows too.
"""

from __future__ import annotations

import sys
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    sys.path.insert(0, str(REPO))  # the checkout's packages (drs_prom_research is not installed, only checked out)
    graph = grimp.build_graph("drs_prom", "exporters", "drs_prom_research")
    modules = sorted(graph.modules)
    # strongly connected components (Tarjan), iteratively
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    for c in cycles:
        print("cycle:", " <-> ".join(c))
    print(f"{len(modules)} modules, {len(cycles)} import cycles")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
