"""Fixtures shared by the search tests: a digits trainer factory, a tiny portable space, every registered backend
(with the options each needs here, Ray on a real 2-node cluster) and readers of the saved results."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hpsearch.backends import backend_names

# Ray's driver joins the loopback test cluster (see _ray_cluster) and reports no usage.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


@pytest.fixture
def output_dir(tmp_path: Path) -> Path:
    """Where a test's search writes (``tmp_path/out``)."""
    return tmp_path / "out"


@pytest.fixture
def make_trainer(output_dir: Path):
    """``make_trainer(model_init=None, callbacks=(), **args)`` -> a digits `Trainer` of tiny trials writing to
    `output_dir` (see `tests.hpsearch._trials.TINY_ARGS`; the default model_init reads ``trial["hidden"]``)."""
    from tests.hpsearch._trials import digits_search_trainer

    def make(model_init: Any = None, callbacks: Any = (), **overrides: Any) -> Any:
        return digits_search_trainer(str(output_dir), model_init, callbacks, **overrides)

    return make


@pytest.fixture
def tiny_space():
    """A portable space of two parameters: an argument (``learning_rate``) and a model one (``hidden``)."""
    from spaces import Categorical, Float, SearchSpace

    return SearchSpace({"learning_rate": Float(1e-3, 1e-1, log=True), "hidden": Categorical([8, 16])})


@pytest.fixture
def sigint_raises():
    """SIGINT raising KeyboardInterrupt, as in a user's Python process or a terminal, whatever this one inherited (a
    pytest-xdist worker runs with SIGINT ignored)."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session")
def _shared_ray_cluster():
    """The session's one Ray cluster (started on first use, stopped at the end); tests use `ray_cluster`."""
    import ray

    from tests.hpsearch import _ray_cluster as rc

    started = rc.start_cluster()
    ready = os.environ.get("BESIDE_READY_FILE")
    if ready:  # scripts/beside.sh starts the run beside this one once the cluster is up (make test-rest RAY_BESIDE=1)
        Path(ready).write_text(started.address, encoding="utf-8")
    try:
        yield started
    finally:
        if ray.is_initialized():
            ray.shutdown()
        started.stop()


@pytest.fixture(scope="module")
def ray_cluster(_shared_ray_cluster):
    """A real 2-node Ray cluster on 127.0.0.1, one for the whole session: starting one takes several seconds on 2
    cores and no test changes its nodes (a test that kills a node starts a cluster of its own). The modules that
    use it run last (see `pytest_collection_modifyitems`), so it never idles beside the others' tests nor shares
    the machine with a module's own Ray. After each module, a driver a failed test left connected is disconnected,
    so that every module's searches join the cluster themselves."""
    import ray

    yield _shared_ray_cluster
    if ray.is_initialized():
        ray.shutdown()


def _uses_shared_ray_cluster(item: pytest.Item) -> bool:
    return (
        "ray_cluster" in getattr(item, "fixturenames", ())
        or item.get_closest_marker("ray_cluster") is not None
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Runs the modules that use the shared Ray cluster after all others, each module whole and in order (a stable
    sort: module fixtures stay one per module)."""

    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::")[0]

    users = {module(item) for item in items if _uses_shared_ray_cluster(item)}
    items.sort(key=lambda item: module(item) in users)


@dataclass
class Backend:
    """One registered backend as the contract tests run it: its name and the options it needs here."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)

    def search(self, trainer: Any, **kwargs: Any) -> Any:
        """`hyperparameter_search` on this backend; ``kwargs`` win over the backend's test options."""
        from hpsearch import hyperparameter_search

        return hyperparameter_search(trainer, backend=self.name, **{**self.options, **kwargs})

    def __str__(self) -> str:
        return self.name


def backend_options(name: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The options a backend needs in these tests: seeded samplers where the engine takes one, and Ray's cluster."""
    if name == "optuna":
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        return {"sampler": optuna.samplers.RandomSampler(seed=0)}
    if name == "ray":
        cluster = request.getfixturevalue("ray_cluster")
        return {"address": cluster.address, "resources_per_trial": {"cpu": 1}}
    if name == "sigopt":
        return {"driver": "lite"}
    if name == "random":
        return {"seed": 0}
    return {}  # a newly registered backend runs the contract with its defaults


def _backend_param(name: str) -> Any:
    if name == "ray":
        # `backend_options` joins the `ray_cluster` on demand; the mark tells the ordering so up front.
        marks = [pytest.mark.slow, pytest.mark.multiprocess, pytest.mark.ray_cluster]
        return pytest.param(name, id=name, marks=marks)
    return pytest.param(name, id=name)


@pytest.fixture(params=[_backend_param(name) for name in backend_names()])
def backend(request: pytest.FixtureRequest) -> Backend:
    """Every registered backend in turn (`hpsearch.backends.backend_names`); a missing engine fails, never skips."""
    return Backend(request.param, backend_options(request.param, request))


# ---------------------------------------------------------------------------------------------- results on disk
def read_search_json(output_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """``output_dir/search.json`` as plain JSON."""
    return json.loads((Path(output_dir) / "search.json").read_text(encoding="utf-8"))


def load_search(output_dir: str | os.PathLike[str]) -> Any:
    """``output_dir``'s search reloaded with `SearchResult.load` (no backend involved)."""
    from hpsearch import SearchResult

    return SearchResult.load(output_dir)


@pytest.fixture
def saved(output_dir: Path):
    """``saved()`` -> the test's search as `SearchResult.load` reads it back from `output_dir`."""
    return lambda: load_search(output_dir)


@pytest.fixture
def make_settings(make_trainer, output_dir: Path):
    """``make_settings(trainer=None, compute_objective="eval_accuracy", directions=("maximize",), **fields)`` ->
    the `TrialSettings` `hyperparameter_search` would build for the random backend (trainer: `make_trainer()`)."""
    from hpsearch.objective import resolve_compute_objective
    from hpsearch.settings import TrialSettings

    def make(
        trainer: Any = None,
        compute_objective: Any = "eval_accuracy",
        directions: Any = ("maximize",),
        **fields: Any,
    ) -> TrialSettings:
        trainer = trainer if trainer is not None else make_trainer()
        function, name = resolve_compute_objective(compute_objective)
        return TrialSettings(
            trainer=trainer.recipe(),
            compute_objective=function,
            objective_name=name,
            directions=tuple(directions),
            output_dir=str(output_dir.resolve()),
            backend="random",
            **fields,
        )

    return make
