"""Common options that `hpsearch run` takes as flags of their own (``cli_flag`` in their `Option`), e.g.
``--trial-workers 2``: the flag's type and help come from the option's one declaration, and its value reaches
the search as the sweep file's ``backend_options.<name>`` would (checked there, with the file's other options)."""

from __future__ import annotations

import argparse
import json

from .settings import COMMON_OPTIONS

__all__ = ["add_option_flags", "option_flag_overrides"]


def add_option_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that override the sweep file's keys: one per flagged common option, and ``--set KEY=VALUE``."""
    for name, option in COMMON_OPTIONS.items():
        if option.cli_flag:
            parser.add_argument(
                "--" + name.replace("_", "-"),
                dest=name,
                type=option.types[0],
                metavar="N" if option.types[0] is int else "VALUE",
                help=f"{option.help} (backend_options.{name})",
            )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any key of the file, e.g. --set training_args.num_train_epochs=2 "
        "(the value is YAML; repeatable)",
    )


def option_flag_overrides(args: argparse.Namespace) -> list[str]:
    """``--set``-style overrides (``backend_options.<name>=<JSON value>``) for the flags given."""
    return [
        f"backend_options.{name}={json.dumps(getattr(args, name))}"
        for name, option in COMMON_OPTIONS.items()
        if option.cli_flag and getattr(args, name, None) is not None
    ]
