"""``python -m drs_prom ...`` is the ``drs-prom`` command (tests start ``python -m drs_prom export`` this way)."""

from drs_prom.cli import main

if __name__ == "__main__":
    main()
