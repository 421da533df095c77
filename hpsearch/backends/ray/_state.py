"""Tune's experiment state as a killed driver leaves it: a torn run's files set aside before a restore.

Each run of a Tune experiment (each driver: the first one and every restore) writes its own snapshot files, named
after the run's start (``experiment_state-<run>.json``; the searcher's ``basic-variant-state-<run>.json``, or
``search_gen_state-<run>.json`` and ``searcher-state-<run>.pkl``, pickles whatever their names say;
``callback-states-<run>.pkl``), and a restore reads the newest run's of each. Tune writes the
experiment state in place (``open(..., "w")``) and copies its staging folder into the experiment folder file by file,
so a driver killed in the middle leaves its run's snapshot empty or cut short: the next restore then failed to read
it, logged "Failed to restore the run state" and started the experiment over, training its finished trials again.

`set_aside_torn_runs` renames every snapshot file of a run whose files do not read whole to ``<name>.torn`` (kept,
not deleted), so that Tune restores the newest run that is whole. Nothing is unpickled to tell: a pickle is whole
when its opcodes read to its STOP (`pickletools.genops` only reads them), a JSON state when it parses.
"""

from __future__ import annotations

import json
import logging
import os
import pickletools
import re
from pathlib import Path

__all__ = ["TORN_SUFFIX", "set_aside_torn_runs"]

logger = logging.getLogger(__name__)

TORN_SUFFIX = ".torn"

#: A run's snapshot files: what Tune and its searchers and callbacks name after the run (``<kind>-<run>.<ext>``).
_SNAPSHOT = re.compile(
    r"^(experiment_state|basic-variant-state|search_gen_state|searcher-state|callback-states)-(?P<run>.+)\.(json|pkl)$"
)


def set_aside_torn_runs(folder: str | os.PathLike[str]) -> list[str]:
    """Rename the snapshot files of each run of ``folder`` that has a torn one to ``<name>.torn``; the names renamed.

    A run is torn when its experiment state is empty or not JSON, one of its pickled snapshots does not read to its
    end, or it lacks a searcher snapshot the folder's other runs have. The other runs' files are left as they are."""
    root = Path(folder)
    try:
        names = [entry.name for entry in os.scandir(root) if entry.is_file()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    runs: dict[str, list[str]] = {}
    kinds: dict[str, set[str]] = {}
    for name in names:
        match = _SNAPSHOT.match(name)
        if match:
            runs.setdefault(match["run"], []).append(name)
            kinds.setdefault(match["run"], set()).add(match[1])
    # Every run of an experiment writes its searcher's state (callbacks write theirs only when they have one).
    every_kind = (set().union(*kinds.values()) if kinds else set()) - {"callback-states"}
    renamed: list[str] = []
    for run, files in sorted(runs.items()):
        # A run lacking the searcher snapshot the others have (killed before that file was copied) would have Tune
        # pair its experiment state with another run's searcher: torn too.
        if every_kind <= kinds[run] and all(_whole(root / name) for name in files):
            continue
        for name in sorted(files):
            os.replace(root / name, root / (name + TORN_SUFFIX))
            renamed.append(name)
        logger.warning(
            "Ray Tune's snapshot of the run started %s in %s was cut short (its driver was killed while writing it): "
            "set aside as %s, so the experiment is restored from the run before it.",
            run,
            root,
            ", ".join(name + TORN_SUFFIX for name in sorted(files)),
        )
    return renamed


def _whole(path: Path) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    if path.name.startswith("experiment_state-"):
        try:
            json.loads(data)
        except ValueError:
            return False
        return True
    return _whole_pickle(data)


def _whole_pickle(data: bytes) -> bool:
    """Whether ``data`` is one pickle read to its STOP opcode (read, never run)."""
    try:
        for opcode, _, _ in pickletools.genops(data):
            if opcode.name == "STOP":
                return True
    except Exception:  # pickletools raises ValueError and others on a pickle cut short
        return False
    return False
