# Quick start:  make demo   (sets up .venv and runs the demo)
#               make test   (sets up .venv and runs ruff, mypy and the test suite)
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
STAMP  := $(VENV)/.setup-stamp

.PHONY: setup system-deps demo test lint typecheck bench clean

setup: $(STAMP)

# Idempotent: re-runs only when the project's dependency declarations change.
$(STAMP): pyproject.toml Makefile scripts/setup_env.sh
	PYTHON=$(PYTHON) VENV=$(VENV) bash scripts/setup_env.sh
	touch $(STAMP)

# Debian packages for the tests (PostgreSQL, Chromium); skipped when already installed.
system-deps:
	bash scripts/install_system_deps.sh

# --fresh: a rerun of the demo starts it over (a sweep run again without it is refused, so that nothing is lost).
demo: setup
	$(PY) -m examples.digits --fresh

lint: setup
	$(PY) -m ruff check .

typecheck: setup
	$(PY) -m mypy

test: setup system-deps
	$(PY) -m ruff check .
	$(PY) -m mypy
	bash scripts/isolated.sh $(PY) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

bench: setup
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) build *.egg-info
