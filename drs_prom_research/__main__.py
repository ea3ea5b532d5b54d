"""``python -m drs_prom_research`` from a source checkout: the drs-prom-research command."""

from drs_prom_research.commands import main

main()
