"""The ``drs-prom`` command: each subcommand parses flags, builds settings, calls one run().

Heavy imports (TensorFlow, the Kubernetes client) happen inside the subcommand that
needs them so ``drs-prom --help`` and ``drs-prom export`` start fast.
"""

from __future__ import annotations

import sys

import click

from drs_prom.errors import DrsError


@click.group(context_settings={"auto_envvar_prefix": "DRS_PROM", "help_option_names": ["-h", "--help"]})
@click.version_option(package_name="drs-prom")
def cli() -> None:
    """drs-prom: a Kubernetes scheduler with a DQN policy fed by Prometheus metrics."""


def main() -> None:
    """Entry point: a DrsError becomes one line on stderr and exit code 2, never a traceback."""
    try:
        cli(standalone_mode=True)
    except DrsError as exc:
        click.echo(f"drs-prom: error: {exc}", err=True)
        sys.exit(2)


# Subcommands register themselves below; keep this list in sync with the README.
# (Each engineer adds their command with a small `cli.add_command(...)` line.)
