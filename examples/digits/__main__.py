"""``python -m examples.digits [hpsearch run options]``: the demo sweep, i.e. ``hpsearch run sweep.yaml``.

Extra arguments go to ``hpsearch run`` (``--n-trials 5``, ``--resume``, ``--output-dir DIR``, ``--backend``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from hpsearch.cli import main

SWEEP = Path(__file__).resolve().parent / "sweep.yaml"

if __name__ == "__main__":
    if {"-h", "--help"} & set(sys.argv[1:]):
        print(
            f"usage: python -m examples.digits [hpsearch run options]\n\nRuns `hpsearch run {SWEEP}`: "
            "the demo sweep. Its options follow.\n",
            flush=True,
        )
    raise SystemExit(main(["run", str(SWEEP), *sys.argv[1:]]))
