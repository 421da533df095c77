"""``python -m hpsearch``: the same command as the ``hpsearch`` console script (see `hpsearch.cli`)."""

from __future__ import annotations

from hpsearch.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
