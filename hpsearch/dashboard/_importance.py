"""Parameter importance computed in a child process: ``python -m hpsearch.dashboard._importance``.

optuna's fANOVA keeps every tree it builds in class-level ``lru_cache``s, so a process that computes it after
every trial grows by megabytes per trial for as long as it runs (measured in the dashboard: +370 MB over 300
recomputations at 1,000 trials). A child process gives that memory back when it exits, and leaves the server's
GIL to the server. The child is started as a module (not through multiprocessing, which would re-run the
caller's unguarded ``__main__``); the parent pipes it the complete trials (pickled, parent to its own child, never
through a file) and reads the importances back the same way.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hpsearch.report._analysis import Importances
    from hpsearch.results import SearchResult

__all__ = ["isolated_importances"]


def isolated_importances(subset: SearchResult, timeout: float = 600) -> Importances | str:
    """`compute_importances` of ``subset`` in a child process (here, where no child can be started)."""
    from hpsearch.report._analysis import compute_importances

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # the child imports what this process imports
    env.setdefault("OMP_NUM_THREADS", "1")
    try:
        proc = subprocess.run([sys.executable, "-m", "hpsearch.dashboard._importance"],
                              input=pickle.dumps(subset), capture_output=True, env=env, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return compute_importances(subset)
    if proc.returncode != 0:
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"the importance process exited with {proc.returncode}: {tail[0]}")
    return pickle.loads(proc.stdout)  # written by our own child a moment ago


def _main() -> None:
    from hpsearch.report._analysis import compute_importances

    subset = pickle.load(sys.stdin.buffer)
    sys.stdout.buffer.write(pickle.dumps(compute_importances(subset)))
    sys.stdout.flush()


if __name__ == "__main__":
    _main()
