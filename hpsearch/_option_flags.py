"""Common options that `hpsearch run` takes as flags of their own (``cli_flag`` in their `Option`), e.g.
``--trial-workers 2``: the flag's help and metavar come from the option's one declaration, and its value (read as
YAML, as ``--set`` reads one) reaches the search as the sweep file's ``backend_options.<name>`` would: checked there
by the same declaration, so a bad value is refused with the message `hyperparameter_search` gives, naming the flag."""

from __future__ import annotations

import argparse

from .options import COMMON_OPTIONS, Option

__all__ = ["add_option_flags", "flag_of", "option_flag_overrides"]


def flag_of(option: Option) -> str:
    """``--trial-workers`` for ``trial_workers``."""
    return "--" + option.name.replace("_", "-")


def _metavar(option: Option) -> str:
    if option.choices:
        return "{" + ",".join(map(str, option.choices)) + "}"
    return "N" if option.types == (int,) else "VALUE"


def _help(option: Option) -> str:
    default = "unset" if option.default in (None, {}) else repr(option.default)
    return (
        f"{option.help}; {option.expected()} (default: {default}; the file's backend_options.{option.name})"
    ).replace("%", "%%")


def add_option_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that override the sweep file's keys: one per flagged common option, and ``--set KEY=VALUE``."""
    for option in COMMON_OPTIONS.values():
        if option.cli_flag:
            parser.add_argument(
                flag_of(option), dest=option.name, metavar=_metavar(option), help=_help(option)
            )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override any key of the file, e.g. --set training_args.num_train_epochs=2 "
        "(the value is YAML; repeatable)",
    )


def option_flag_overrides(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(``backend_options.<name>=<value as given>``, the flag) for each flag given: an override as ``--set`` gives
    one, and the flag an error about it names."""
    return [
        (f"backend_options.{option.name}={getattr(args, option.name)}", flag_of(option))
        for option in COMMON_OPTIONS.values()
        if option.cli_flag and getattr(args, option.name, None) is not None
    ]
