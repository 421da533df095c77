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
$PIP install -e ".[optuna,ray,report,tensorboard,mlflow,postgres,test]"
