"""Parameter importance computed in a child process: ``python -m hpsearch.dashboard._importance``.

optuna's fANOVA keeps every tree it builds in class-level ``lru_cache``s, so a process that computes it after
every trial grows by megabytes per trial for as long as it runs (measured in the dashboard: +370 MB over 300
recomputations at 1,000 trials). A child process gives that memory back when it exits, and leaves the server's
GIL to the server. The child is started as a module (not through multiprocessing, which would re-run the
caller's unguarded ``__main__``); the parent pipes it the complete trials as the text of a ``search.json`` and
reads the importances back as JSON (no pickle crosses the pipe).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hpsearch.report._analysis import Importances
    from hpsearch.results import SearchResult

__all__ = ["end_children", "isolated_importances"]


def isolated_importances(
    subset: SearchResult, children: set[subprocess.Popen[bytes]] | None = None, timeout: float = 600
) -> Importances | str:
    """`compute_importances` of ``subset`` in a child process (here, where no child can be started).

    ``children`` holds the running child meanwhile, so that its owner can end it (`end_children`).
    """
    from hpsearch.report._analysis import compute_importances

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in sys.path if p
    )  # the child imports what this process imports
    env.setdefault("OMP_NUM_THREADS", "1")
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hpsearch.dashboard._importance"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
    except OSError:
        return compute_importances(subset)
    if children is not None:
        children.add(proc)
    try:
        out, err = proc.communicate(subset._to_json_text().encode("utf-8"), timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RuntimeError(f"the importance process ran past {timeout:g} s and was stopped") from None
    finally:
        if children is not None:
            children.discard(proc)
    if proc.returncode != 0:
        tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"the importance process exited with {proc.returncode}: {tail[0]}")
    return _importances_from_json(out.decode("utf-8"))


def end_children(children: set[subprocess.Popen[bytes]]) -> None:
    """Stop the importance processes in ``children`` (by their own pids) when their owner closes."""
    for proc in list(children):
        if proc.poll() is None:
            proc.kill()


def _main() -> None:
    # Lowest priority: the server's renders and the browser drawing them go first on a busy machine.
    if hasattr(os, "nice"):
        try:
            os.nice(19)
        except OSError:
            pass
    from hpsearch.report._analysis import compute_importances
    from hpsearch.results import SearchResult

    subset = SearchResult.from_json(sys.stdin.buffer.read().decode("utf-8"), source="<stdin>")
    found = compute_importances(subset)
    payload = (
        found
        if isinstance(found, str)
        else {"method": found.method, "per_objective": found.per_objective, "note": found.note}
    )
    sys.stdout.write(json.dumps(payload))
    sys.stdout.flush()


def _importances_from_json(text: str) -> Importances | str:
    from hpsearch.report._analysis import Importances

    data = json.loads(text)
    if isinstance(data, str):
        return data
    return Importances(
        method=data["method"],
        per_objective=[dict(d) for d in data["per_objective"]],
        note=data.get("note", ""),
    )


if __name__ == "__main__":
    _main()
