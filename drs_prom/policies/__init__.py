"""The placement policies that need no network: the contract every policy meets, the field's heuristics, the
teachers of the shipped model and the memories they share (recent binds, resident load, recent pod shapes).

The learned policies are in ``drs_prom.agent``; ``drs_prom.registry`` builds any of them by name.
"""
