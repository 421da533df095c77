"""Fixtures shared by the whole suite: quiet, fast `TrainingArguments` and a clean torch global state."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

# The test models are tiny: one intra-op thread is as fast, and on a shared 2-core CI machine torch's spinning
# thread pool makes a loaded run several times slower. Set before torch is first imported; override from outside.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# `tests._digits` is shared by tests, examples and benchmarks; make it importable however pytest is launched.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)


@pytest.fixture
def make_args(tmp_path: Path):
    """``make_args(**overrides)`` -> `TrainingArguments` writing to tmp_path, no tqdm, no saving, no reporting."""
    from trainer import TrainingArguments

    def make(**overrides: Any) -> TrainingArguments:
        kwargs: dict[str, Any] = {
            "output_dir": str(tmp_path / "out"),
            "disable_tqdm": True,
            "save_strategy": "no",
            "report_to": "none",
        }
        kwargs.update(overrides)
        return TrainingArguments(**kwargs)

    return make


@pytest.fixture(autouse=True)
def _restore_torch_determinism():
    """`enable_full_determinism` flips process-wide torch switches; do not let one test change the next."""
    torch = sys.modules.get("torch")  # never import torch here: the spaces tests must run without it
    before = torch.are_deterministic_algorithms_enabled() if torch is not None else False
    yield
    torch = sys.modules.get("torch")
    if torch is not None and torch.are_deterministic_algorithms_enabled() != before:
        torch.use_deterministic_algorithms(before)


# ---------------------------------------------------------------------------------------------------- test tiers
# `make test-fast` runs `pytest --tier fast`: the tests that need no service (PostgreSQL, Ray, Chromium), start no
# process and take no more than a few seconds. `--tier rest` runs every other test, so the two tiers together are the
# whole suite, each test once. The rest is itself two parts: `--tier slow`, the slow tests that start no service,
# and `--tier services`, the tests that start a service or launch processes; the services tier splits again into the
# tests that start or join no Ray (`--tier services-no-ray`) and those that do (mark `ray`, set here for the users of
# the session's cluster; `--tier services-ray`). `make test-rest` runs slow and services-no-ray as one run on every
# core (`--tier no-ray`, pytest-xdist), then services-ray one test at a time: beside another test's training, a local
# Ray's start misses its own fixed deadlines on 2 cores (seen in a whole run on 2 workers: "Failed to start GCS").
# Run on several workers anyway, the Ray tests stay in one xdist group, and a Ray node's start that misses Ray's fixed
# agent deadline is tried again (`_ray_cluster.start_node`). The Ray tests split once more by whether their only Ray
# is the shared cluster (`--tier services-ray-shared`, which starts no Ray node of its own beside another test) or
# they start one (`--tier services-ray-own`); `make test-rest RAY_BESIDE=1` runs the first beside `--tier no-ray`.
# A test says what it needs by its marks; the fixtures that start a service mark their users here, and the fast tier
# fails a test that starts a process anyway (see `_no_processes_in_fast_tier`), so a test cannot slip into it
# unnoticed.
# The slow tier is not guarded: a library there may run a helper command (`git version`, `lscpu`), and a test may run
# one process that trains on its own (a benchmark's --quick run); a test that launches a service, a process group or
# a process it kills (a local Ray, trial workers, a driver) is `multiprocess`.
_SLOW_MARKS = ("slow", "multiprocess", "service")
_PROCESS_MARKS = ("multiprocess", "service")
#: Fixtures that start a service: a test using one (directly or through another fixture) is a `service` test.
_SERVICE_FIXTURES = frozenset({"ray_cluster", "postgres", "browser"})


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier",
        choices=(
            "all",
            "fast",
            "rest",
            "slow",
            "services",
            "services-no-ray",
            "services-ray",
            "services-ray-shared",
            "services-ray-own",
            "no-ray",
        ),
        default="all",
        help="fast: no services, no extra processes, no slow tests (make test-fast); rest: every other test, "
        "that is slow (slow tests that start no service and no process group) and services (those that do); "
        "all (default): the whole suite; services-no-ray and services-ray split services by whether a test starts or "
        "joins a Ray (make test-rest runs the first on every core, the second alone); services-ray itself in two: "
        "services-ray-shared, the tests whose only Ray is the session's shared cluster (make test-rest RAY_BESIDE=1 "
        "runs them beside services-no-ray), and services-ray-own, those that start a Ray of their own (then alone); "
        "no-ray: slow and services-no-ray together, the rest tier's tests that start or join no Ray (make test-rest "
        "runs it as one run on every core, then services-ray)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "service: a test that starts a service (PostgreSQL, Ray, Chromium)")
    config.addinivalue_line("markers", "ray_cluster: a test that joins the session's Ray cluster on demand")
    config.addinivalue_line(
        "markers", "ray: a test that starts a Ray of its own or joins one (runs in xdist group 'ray')"
    )


def _tier(item: pytest.Item) -> str:
    """The smallest tier ``item`` belongs to: fast, slow or services."""
    if any(item.get_closest_marker(mark) for mark in _PROCESS_MARKS):
        return "services"
    return "slow" if item.get_closest_marker("slow") else "fast"


def _in_tier(item: pytest.Item, tier: str) -> bool:
    if tier == "no-ray":  # exactly slow and services-no-ray, so that make test-rest still runs each test once
        return _in_tier(item, "slow") or _in_tier(item, "services-no-ray")
    if tier in ("services-no-ray", "services-ray"):
        return _tier(item) == "services" and _uses_ray(item) == (tier == "services-ray")
    if tier in ("services-ray-shared", "services-ray-own"):
        in_ray = _tier(item) == "services" and _uses_ray(item)
        return in_ray and _joins_shared_cluster(item) == (tier == "services-ray-shared")
    return tier == "all" or _tier(item) == tier or (tier == "rest" and _tier(item) != "fast")


def _joins_shared_cluster(item: pytest.Item) -> bool:
    """Whether ``item``'s Ray is the session's shared cluster: such a test starts no Ray node itself, and the
    cluster's one start tries again a node start that missed Ray's agent deadline (`_ray_cluster.start_node`)."""
    return (
        "ray_cluster" in getattr(item, "fixturenames", ())
        or item.get_closest_marker("ray_cluster") is not None
    )


def _uses_ray(item: pytest.Item) -> bool:
    return _joins_shared_cluster(item) or item.get_closest_marker("ray") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _SERVICE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.service)
        if _uses_ray(item):
            # Under pytest-xdist (--dist loadgroup) the Ray tests run one after another on one worker: one Ray
            # start-up at a time, and one shared cluster per run. The other tests go to whichever worker is free.
            item.add_marker(pytest.mark.xdist_group("ray"))
    tier = config.getoption("--tier")
    if tier == "all":
        return
    keep = [item for item in items if _in_tier(item, tier)]
    dropped = [item for item in items if item not in set(keep)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(autouse=True)
def _no_processes_in_fast_tier(request: pytest.FixtureRequest):
    """In the fast tier, a test that starts a process fails, naming the command and the mark it needs."""
    if request.config.getoption("--tier") != "fast":
        yield
        return
    import multiprocessing.process
    import platform
    import subprocess

    # The standard library's own lazy probe (`platform.processor()` runs `uname -p` once per process, and libraries
    # such as transformers call it on import) is not the test starting a process: answered before tracking starts.
    platform.processor()
    started: list[str] = []
    popen_init = subprocess.Popen.__init__
    process_start = multiprocessing.process.BaseProcess.start

    def tracked_popen(self: Any, args: Any, *a: Any, **kw: Any) -> None:
        started.append(repr(args)[:200])
        popen_init(self, args, *a, **kw)

    def tracked_start(self: Any) -> None:
        started.append(f"multiprocessing {type(self).__name__}")
        process_start(self)

    subprocess.Popen.__init__ = tracked_popen  # type: ignore[method-assign]
    multiprocessing.process.BaseProcess.start = tracked_start  # type: ignore[method-assign]
    try:
        yield
    finally:
        subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
        multiprocessing.process.BaseProcess.start = process_start  # type: ignore[method-assign]
    if started:
        pytest.fail(
            f"{request.node.nodeid} is in the fast tier but started a process ({started[0]}); mark it "
            "@pytest.mark.multiprocess if it launches processes itself (it then runs alone), or slow if a library "
            "it calls runs a helper command, so that it runs in another tier."
        )
