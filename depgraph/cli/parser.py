"""The ``depgraph`` argument parser: every subcommand, in the order ``--help``
lists them, and the flags every command takes (``--memory-budget``,
``--hardware``, before or after the command)."""

from __future__ import annotations

import argparse

from .args import _budget_arg, _Parser
from .catalog import add_bytes_command, add_catalog_commands, add_memory_command, add_schedule_command
from .calibrate import add_calibrate_command
from .profile import add_profile_command
from .serving import (add_capacity_command, add_loadtest_command,
                      add_plan_command)
from .single import add_request_commands
from .sweep import add_anomalies_command, add_reproduce_command, add_sweep_command
from .validate import add_validate_command


def _build_parser() -> argparse.ArgumentParser:
    from .._version import __version__

    parser = _Parser(prog="depgraph", description="Dependency graphs of prefill/decode handoffs for hybrid LLMs.")
    parser.add_argument("--version", action="version", version=f"depgraph {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    add_catalog_commands(sub)
    add_bytes_command(sub)
    add_memory_command(sub)
    add_request_commands(sub)

    add_sweep_command(sub)
    add_capacity_command(sub)
    add_anomalies_command(sub)
    add_plan_command(sub)
    add_profile_command(sub)
    add_calibrate_command(sub)
    add_validate_command(sub)
    add_schedule_command(sub)
    add_loadtest_command(sub)
    add_reproduce_command(sub)
    # every command plans its memory against one budget (depgraph._memory); the flag goes before or after it
    budget = dict(type=_budget_arg, default=argparse.SUPPRESS, metavar="GB",
                  help="memory one command may plan to use, in GB (default: half of this machine's memory; "
                       "or set DEPGRAPH_MEMORY_BUDGET)")
    parser.add_argument("--memory-budget", **budget)
    hardware = dict(default=argparse.SUPPRESS, metavar="FILE",
                    help="a TOML or JSON file of GPUs and links that add to or replace the catalog's "
                         "(see 'depgraph gpus', 'depgraph links')")
    parser.add_argument("--hardware", **hardware)
    for command in sub.choices.values():
        command.add_argument("--memory-budget", **budget)
        command.add_argument("--hardware", **hardware)
    return parser
