# Quick start:  make demo        (sets up .venv and runs the demo)
#               make test        (sets up .venv and runs ruff, mypy and the whole test suite, fast tier first)
#               make test-fast   (the fast tier alone: no services, no extra processes; the edit-test loop)
PYTHON ?= python3
# Python keeps the bytecode of the project's modules and pytest its rewritten test modules (__pycache__, ignored by
# git). Under PYTHONDONTWRITEBYTECODE=1, set in some environments (this machine's), every test process compiled them
# again: the fast tier took 239 s against 118 s with it unset, side by side on this machine at load 6.
unexport PYTHONDONTWRITEBYTECODE
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
STAMP  := $(VENV)/.setup-stamp

.PHONY: setup system-deps demo test test-fast test-rest lint typecheck bench clean

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
	$(PY) -m ruff format --check .

typecheck: setup
	$(PY) -m mypy

# Two tiers, each test in exactly one (tests/conftest.py): the fast one runs its in-process tests on every core
# (pytest-xdist), the rest (services, launched processes, slow searches) in a loopback-only network.
PYTEST := $(PY) -m pytest -q -p no:cacheprovider
TEST_WORKERS ?= 2

test-fast: setup
	$(PYTEST) --tier fast -n $(TEST_WORKERS) --dist load $(PYTEST_ARGS)

# The rest in two runs: every test that starts or joins no Ray, slow ones and those that start a service or launch
# processes (`--tier no-ray`, on every core, one run so that neither part idles in the other's tail), then the tests
# that start or join a Ray, one at a time: beside another test's training a local Ray misses its own start-up
# deadlines on 2 cores (tests/conftest.py). RAY_BESIDE=1 runs the Ray tests whose only Ray is the session's shared
# cluster beside the first run, which scripts/beside.sh starts once that cluster is up, at a lower CPU priority (the
# Ray side has fixed deadlines, the other none as tight); those that start a Ray of their own then run alone.
RAY_BESIDE ?= 0
NO_RAY := bash scripts/isolated.sh $(PYTEST) --tier no-ray -n $(TEST_WORKERS) --dist load $(PYTEST_ARGS)

test-rest: setup system-deps
ifeq ($(RAY_BESIDE),1)
	bash scripts/beside.sh 'nice -n 5 $(NO_RAY)' 'bash scripts/isolated.sh $(PYTEST) --tier services-ray-shared $(PYTEST_ARGS)'
	bash scripts/isolated.sh $(PYTEST) --tier services-ray-own $(PYTEST_ARGS)
else
	$(NO_RAY)
	bash scripts/isolated.sh $(PYTEST) --tier services-ray $(PYTEST_ARGS)
endif

# The Python set-up and the Debian packages side by side (pip and apt share nothing); mypy (one core, about a minute
# on a fresh clone) beside the fast tier; then the rest.
test:
	$(MAKE) --no-print-directory -j2 setup system-deps
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory -j2 typecheck test-fast
	$(MAKE) --no-print-directory test-rest

bench: setup
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) build *.egg-info
