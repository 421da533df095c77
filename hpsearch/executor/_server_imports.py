"""Imported by multiprocessing's forkserver as it starts (the last of `_preload.PRELOAD`): imports the modules of the
search that `_preload.start_server` named in the server's environment, skipping any that fails (the worker that needs
it reports the error). Importing this module anywhere else does nothing: the variable is set only for the server."""

from __future__ import annotations

import importlib
import os

from ._preload import VARIABLE


def import_listed() -> None:
    """Import the modules `VARIABLE` names (read once: the server's workers do not see it)."""
    for name in filter(None, os.environ.pop(VARIABLE, "").split(",")):
        try:
            importlib.import_module(name)
        except BaseException:  # SystemExit included: the worker that needs it reports it
            pass


import_listed()
