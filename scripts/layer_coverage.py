"""Fail when a package or root module of drs_prom/ is in no layer of the import contracts, or the root holds too many.

    python scripts/layer_coverage.py

import-linter checks the arrows between the layers it is given; a module it is not given is checked by nothing. So
every package and module directly under drs_prom/ (``__init__`` and ``__main__`` aside) must be named in the
``layers`` contract of pyproject.toml, and the root stays a short list of what the whole product shares (at most
ROOT_LIMIT modules): anything with one job goes in the package of that job.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT_LIMIT = 10
PACKAGE = "drs_prom"


def main() -> int:
    repo = Path(__file__).resolve().parents[1]
    config = tomllib.loads((repo / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["id"] == "layers")["layers"]
    named = {m for line in layers for m in re.findall(r"[\w.]+", line)}
    base = repo / PACKAGE
    modules = sorted(p.stem for p in base.glob("*.py") if p.stem not in ("__init__", "__main__"))
    packages = sorted(p.name for p in base.iterdir() if (p / "__init__.py").exists())
    bad = [
        f"{PACKAGE}.{m}: in no layer of the 'layers' contract"
        for m in [*modules, *packages]
        if f"{PACKAGE}.{m}" not in named
    ]
    if len(modules) > ROOT_LIMIT:
        bad.append(f"{PACKAGE}/ has {len(modules)} modules at its root (at most {ROOT_LIMIT}): {', '.join(modules)}")
    for line in bad:
        print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
