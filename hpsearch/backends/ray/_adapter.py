"""The Ray Tune adapter: converts the space, ships the settings once, drives ``Tuner.fit``, records the trials.

- **Connecting.** ``address="host:port"`` to a cluster with token authentication (Ray's default) works when this
  process has the cluster's token, and is refused before any trial, saying how to fix it, when it has not
  (`_connect`). A connection or a local Ray the search opened is closed when it ends.
- **Shipping.** The `TrialSettings` (with the trainer's recipe: no model, optimizer or accelerator) go to the
  object store once through ``tune.with_parameters``; each trial calls ``model_init``. A piece that cannot be
  pickled is named before anything starts.
- **Reports.** Every evaluation reports ``objective``, ``step``, the eval metrics and the record so far, with the
  checkpoint folder when one was saved at that step and something reads Tune's copies (`_checks.tune_checkpoints`),
  so PBT restarts a trial from another trial's weights and a retried trial resumes from its own
  (``extra["restored_from"]`` / ``["resumed_from"]`` say from where). Of Tune's result loggers only the JSON one
  runs, unless ``tune_loggers`` (`_driver.result_loggers`).
- **Records.** Trials a scheduler stopped are PRUNED, errored ones FAIL; ``node`` is the Ray node id the trial ran
  on (``extra["node_ip"]`` its address). After ``Tuner.fit`` the `ResultGrid` is translated once more so that
  trials restored from an earlier run (``resume=True``) are included.
- **Resuming.** ``resume=True`` restores this search's experiment, or starts it when Tune has saved none yet (a
  first run, or a driver killed before Tune's first snapshot; the log says so). The trials the restored
  experiment had finished are recorded before any trial runs, so ``search.json`` never drops them, and the default
  random search draws from a generator whose state Tune's snapshot keeps, so a restored search draws new
  parameters rather than the first run's again.
"""

from __future__ import annotations

import dataclasses
import glob
import logging
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ... import _trust
from ..._params import check_param_names
from ...errors import SearchConfigError
from ...options import Code, Option
from ..base import SearchBackend, call_native_space
from . import _checks, _driver, _state
from ._connect import Connection, connect
from ._space import check_native_values, convert_space, grid_combinations

if TYPE_CHECKING:
    from spaces import SearchSpace

    from ...executor import Executor
    from ...session import SearchSession

__all__ = ["RayBackend"]

logger = logging.getLogger(__name__)

_DEFAULT_NAME = "hpsearch"
_DRIVER_MEMORY = 1 << 20  # bytes of Ray's logical memory a distributed trial's driver asks for (see run)


def _restorable(path: str) -> bool:
    """Whether ``path`` holds a Tune experiment to restore: the tuner's state and, for a local folder, at least one
    experiment snapshot (a driver killed before Tune's first snapshot leaves only the tuner's state, and
    ``Tuner.restore`` would then fail in ``fit``)."""
    from ray import tune

    if not tune.Tuner.can_restore(path):
        return False
    return "://" in path or bool(glob.glob(os.path.join(glob.escape(path), "experiment_state-*.json")))


class RayBackend(SearchBackend):
    name = "ray"
    requirement = "ray"
    install_command = "pip install 'hpsearch[ray]'"
    can_resume = True
    resume_hint = "resume=True"
    warm_start_modes = ("inform", "evaluate")
    trial_workers_refusal = (
        "Ray Tune already runs every trial in a process of its own (an actor), on this machine or a cluster; set "
        "how many run at once with resources_per_trial (e.g. {'cpu': 1} runs one trial per CPU), and drop "
        "trial_workers."
    )
    options = (
        Option(
            "address",
            (str,),
            "'auto', 'host:port' or 'ray://host:port' (default: a local Ray on 127.0.0.1); "
            "a token-authenticated cluster needs its token here (RAY_AUTH_TOKEN_PATH, RAY_AUTH_TOKEN)",
            non_empty=True,
            example="auto",
        ),
        Option(
            "resources_per_trial",
            (dict,),
            "resources of each trial (or each worker), e.g. {'cpu': 1, 'gpu': 0.5}",
            non_empty=True,
            rule=_checks.resources,
            example={"cpu": 1},
        ),
        Option("max_concurrent_trials", (int,), "trials run at once", minimum=1),
        Option(
            "scheduler",
            (),
            "a ray.tune.schedulers scheduler",
            classes=("ray.tune.schedulers:TrialScheduler",),
            example=Code("ASHAScheduler()"),
            build_from=("ray.tune.schedulers",),
        ),
        Option(
            "search_alg",
            (),
            "a ray.tune.search searcher",
            classes=("ray.tune.search:Searcher", "ray.tune.search:SearchAlgorithm"),
            example=Code("OptunaSearch()"),
            build_from=("ray.tune.search",),
        ),
        Option(
            "storage_path",
            (str, os.PathLike),
            "Tune's storage: a folder or a URI such as 's3://...' (default output_dir/ray_results)",
            non_empty=True,
            path=True,
        ),
        Option(
            "name",
            (str,),
            "the experiment's folder name in storage_path",
            non_empty=True,
            rule=_checks.folder_name,
            example=_DEFAULT_NAME,
        ),
        Option("max_failures", (int,), "retries of a failed trial (-1: forever)", minimum=-1),
        Option("keep_checkpoints_num", (int,), "checkpoints Tune keeps per trial", minimum=1),
        Option(
            "checkpoint_score_attr",
            (str,),
            "the result that ranks checkpoints",
            non_empty=True,
            example="objective",
        ),
        Option(
            "time_budget_s", (int, float), "seconds after which Tune stops the search", above=0, example=3600
        ),
        Option(
            "stop",
            (dict, Callable),
            "Tune's stop criteria: a dict of result thresholds, a ray.tune.stopper.Stopper or a callable "
            "(trial_id, result) -> bool",
            example={"training_iteration": 10},
        ),
        Option(
            "scope", (str,), "Ray's name for objective_scope ('all' is 'best')", choices=tuple(_checks.SCOPES)
        ),
        Option(
            "resume",
            (bool, str, os.PathLike),
            "restore the interrupted experiment (True: this search's own, started when "
            "there is none yet; or its folder)",
            path=True,
        ),
        Option(
            "workers_per_trial",
            (int,),
            "processes per trial (a Ray Train run, data-parallel)",
            minimum=1,
            example=2,
        ),
        Option(
            "reuse_actors",
            (bool,),
            "Tune's reuse_actors: a trial runs in the process of a finished one (imports, torch's start-up paid "
            "once per process); default True, except with workers_per_trial > 1, where it is off and True is "
            "refused",
        ),
        Option(
            "tune_checkpoints",
            (bool,),
            "hand each evaluation's checkpoint to Tune too (copied into storage_path; a PBT scheduler, retries and "
            "resume restart trials from those copies); default only where something reads them (a PBT scheduler, "
            "max_failures, resume, keep_checkpoints_num, checkpoint_score_attr, workers_per_trial > 1, a cluster "
            "of several nodes), else the trials' own checkpoint folders are the only ones",
        ),
        Option(
            "tune_loggers",
            (bool,),
            "also Tune's CSV and TensorBoard result loggers (progress.csv, events.out.tfevents.* in each trial's "
            "Tune folder); default False: only Tune's result.json, which resume reads (trials.csv, "
            "intermediates.csv and report_to hold the same figures)",
        ),
    )

    @staticmethod
    def default_space(trial: Any = None) -> dict[str, Any]:
        """The default space as Ray Tune domains (Ray's integer upper bounds are exclusive, hence 6 and 41)."""
        from ray import tune

        return {
            "learning_rate": tune.loguniform(1e-6, 1e-4),
            "num_train_epochs": tune.choice(list(range(1, 6))),
            "seed": tune.randint(1, 41),
            "per_device_train_batch_size": tune.choice([4, 8, 16, 32, 64]),
        }

    # ------------------------------------------------------------------ checks
    def processes_per_trial(self) -> int:
        return max(int(self.kwargs.get("workers_per_trial") or 1), super().processes_per_trial())

    @classmethod
    def check_options(cls, kwargs: Mapping[str, Any]) -> None:
        super().check_options(kwargs)
        _checks.check_scope_given(kwargs)

    def validate(self) -> None:
        super().validate()
        conditional = (
            {n for n in self.settings.space if self.settings.space[n].is_conditional}
            if self.settings.space is not None
            else set()
        )
        _checks.validate(self.kwargs, self.settings, conditional)
        scope = _checks.objective_scope(self.kwargs, self.settings)
        if scope != self.settings.objective_scope:
            self.settings = dataclasses.replace(self.settings, objective_scope=scope)
        _checks.check_picklable(self.settings)

    def check_warm_start(self, mode: str) -> None:
        super().check_warm_start(mode)
        if self.kwargs.get("search_alg") is not None:
            raise SearchConfigError(
                f"warm_start with search_alg={type(self.kwargs['search_alg']).__name__}: Tune takes earlier points only "
                "when a searcher is built (points_to_evaluate, evaluated_rewards); build it with them yourself and "
                "drop warm_start, or drop search_alg (the ray backend then builds the searcher).",
                about="warm_start",
            )
        if (
            mode == "inform"
            and self.settings.space is not None
            and any(self.settings.space[n].is_conditional for n in self.settings.space)
        ):
            raise SearchConfigError(
                "warm_start_mode='inform' on the ray backend uses Tune's OptunaSearch, which cannot read the "
                "conditional parameters of this hp_space; use warm_start_mode='evaluate' or a space without conditions.",
                about="warm_start_mode",
            )

    def _warm_searcher(self, session: SearchSession, limit: int | None) -> Any:
        """The searcher that carries the earlier trials: Tune's own random search replaying them first (evaluate),
        or OptunaSearch told their objectives (inform: a searcher that learns from them, as the log says)."""
        from ...warmstart import prior_records

        points = [dict(p.params) for p in self.priors]
        if self.warm_start_mode == "evaluate":
            return self._random_search(limit, points[: session.n_trials])
        from ray.tune.search.optuna import OptunaSearch

        logger.info(
            "warm_start: Tune's OptunaSearch (TPE) runs this search, told the %d earlier trials.", len(points)
        )
        session.adopt(prior_records(self.priors))
        return OptunaSearch(
            points_to_evaluate=points, evaluated_rewards=[float(p.objective) for p in self.priors]
        )

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        for key in ("scheduler", "search_alg"):
            if key in self.kwargs:
                out[key] = type(self.kwargs[key]).__name__
        return out

    # ------------------------------------------------------------------ space
    def is_native_space(self, hp_space: Any) -> bool:
        from ray.tune.search.sample import Domain

        if isinstance(hp_space, Mapping):
            # tune.grid_search(...) is a plain {"grid_search": [...]} dict, not a Domain.
            return any(
                isinstance(v, Domain) or (isinstance(v, Mapping) and set(v) == {"grid_search"})
                for v in hp_space.values()
            )
        return callable(hp_space)

    def resolve_space(self, hp_space: Any) -> tuple[SearchSpace | None, Any]:
        if hp_space is not None and self.is_native_space(hp_space):
            native = (
                call_native_space(hp_space, self.name)
                if callable(hp_space) and not isinstance(hp_space, Mapping)
                else hp_space
            )
            if not isinstance(native, Mapping):
                raise SearchConfigError(
                    f"hp_space(None) must return a dict of Ray Tune domains (tune.uniform(...), ...), got "
                    f"{type(native).__name__}: {native!r}."
                )
            check_param_names(native, self.settings.trainer)
            check_native_values(native)
            return None, dict(native)
        return super().resolve_space(hp_space)

    def planned_trials(self, n_trials: int, native_space: Any) -> int:
        """``n_trials`` is Tune's num_samples: each sample runs every combination of the space's grid_search values."""
        return n_trials * grid_combinations(native_space) if isinstance(native_space, Mapping) else n_trials

    def convert_space(self, space: SearchSpace) -> dict[str, Any]:
        """Tune domains for the space (Ray's integer upper bounds are exclusive: ``high + 1``)."""
        return convert_space(space)

    # ------------------------------------------------------------------ run
    def _connect(self) -> Connection:
        """Connect to (or start) Ray; the connection's ``close`` undoes what this search opened (see `_connect`)."""
        return connect(self.kwargs.get("address"))

    def _storage(self) -> tuple[str, str]:
        storage = self.kwargs.get("storage_path")
        storage = (
            os.fspath(storage)
            if storage is not None
            else os.path.join(self.settings.output_dir, "ray_results")
        )
        if "://" not in storage:
            storage = os.path.abspath(storage)
        return storage, self.kwargs.get("name") or _DEFAULT_NAME

    def run(self, session: SearchSession, native_space: Any, executor: Executor) -> None:
        # Tune runs its own loop, each trial on Ray's actors (``trial_workers`` is refused: ``executor`` is unused).
        connection = self._connect()
        recorder = _driver.Recorder(self.settings, session)
        _driver.set_current(recorder)
        try:
            runnable, concurrency = self._runnable(connection)
            tuner = self._tuner(session, recorder, runnable, native_space, concurrency)
            try:
                grid = tuner.fit()
            finally:
                recorder.sign_state(full=True)
            session.result.native = grid
            session.replace_all(recorder.translate(grid))
        finally:
            _driver.set_current(None)
            connection.close()
        if recorder.failure is not None:
            raise recorder.failure

    def _runnable(self, connection: Connection) -> tuple[Any, int | None]:
        """The trainable Tune runs, with the settings shipped once and its resources, and, for distributed
        trials, how many fit the cluster at once (None: Tune's own limit)."""
        import ray
        from ray import tune

        from ._distributed import Workers, distributed_trainable, fitting_trials, worker_resources
        from ._worker import trainable

        resources = dict(self.kwargs.get("resources_per_trial") or {"cpu": 1})
        workers = self.kwargs.get("workers_per_trial") or 1
        if workers > 1:
            # The Tune trial only drives its Ray Train workers (Ray's own advice), so it takes no CPU: the
            # workers may use every CPU. Tune refuses an all-zero request, hence a token of logical memory.
            spec = Workers(ray.put(self.settings), workers, worker_resources(resources))
            runnable = tune.with_parameters(distributed_trainable, workers=spec)
            return tune.with_resources(runnable, {"memory": _DRIVER_MEMORY}), fitting_trials(spec)
        _checks.check_fits(resources, connection.local)
        nodes = sum(1 for node in ray.nodes() if node.get("Alive"))
        checkpoints = _checks.tune_checkpoints(self.kwargs, nodes)
        runnable = tune.with_parameters(trainable, settings=self.settings, tune_checkpoints=checkpoints)
        return tune.with_resources(runnable, resources), None

    def _restore_from(self, storage: str, name: str) -> tuple[str, bool]:
        """The experiment folder, and whether Tune restores it (``resume``): only state this user's searches
        signed, and with ``resume=True`` only when there is one to restore (else the search starts there)."""
        resume = self.kwargs.get("resume")
        path = (
            os.path.abspath(os.fspath(resume))
            if isinstance(resume, str | os.PathLike)
            else os.path.join(storage, name)
        )
        if resume and "://" not in path:  # a run killed while Tune wrote its snapshot: restore the one before
            _state.set_aside_torn_runs(path)
        if resume is True and _restorable(path) and not _trust.is_signed(path):
            # Nothing this user's searches signed (a driver killed before Tune's first step, or a planted
            # folder): start the search there without unpickling any of it.
            logger.warning(
                "resume=True: the Ray Tune state in %s was not signed by this user's searches; it "
                "is not loaded (not unpickled) and the search starts anew there.",
                path,
            )
            return path, False
        if resume and not _restorable(path):
            if resume is not True:
                raise SearchConfigError(
                    f"resume={resume!r}: there is no Ray Tune experiment to restore in {path!r}; pass the "
                    "experiment folder (storage_path/name), or resume=True to continue this search's own.",
                    about="resume",
                )
            # A rerun loop passes resume=True from its first run on, and a driver killed before Tune's first
            # experiment snapshot leaves nothing to restore (no trial of it counts): both start the search.
            logger.info(
                "resume=True: no Ray Tune experiment to restore in %s yet; starting a new one there.",
                path,
            )
            return path, False
        if (
            resume and "://" not in path
        ):  # Tune unpickles tuner.pkl and the experiment state: only signed state
            _trust.check_folder(path, f"resume={resume!r}")
        return path, bool(resume)

    def _tuner(
        self,
        session: SearchSession,
        recorder: _driver.Recorder,
        runnable: Any,
        native_space: Any,
        concurrency: int | None,
    ) -> Any:
        """The restored experiment (its finished trials adopted by the session first), or a new Tuner."""
        from ray import tune

        storage, name = self._storage()
        path, restore = self._restore_from(storage, name)
        recorder.state_dir = path
        if restore:
            tuner = tune.Tuner.restore(path, trainable=runnable, resume_errored=True)
            # The trials the experiment finished before, so search.json lists them from this run's first save.
            session.adopt(recorder.restored(tuner))
            return tuner
        limit = self.kwargs.get("max_concurrent_trials") or concurrency
        searcher = self._warm_searcher(session, limit) if self.priors else None
        return tune.Tuner(
            runnable,
            param_space=dict(native_space),
            tune_config=self._tune_config(session.n_trials, limit, searcher),
            run_config=self._run_config(storage, name),
        )

    def _random_search(self, limit: int | None, points: list[dict[str, Any]] | None = None) -> Any:
        """Tune's random search (its ``BasicVariantGenerator``) drawing from a generator of its own, seeded with
        ``args.seed``. Tune's default draws from NumPy's global generator, which every driver seeds with ``args.seed``
        when it builds the trainer, so a restored search would draw the first run's parameters again; this
        generator's state is saved with Tune's searcher snapshot, so a restored search draws where it left off.
        It takes the concurrency limit itself (Tune ignores ``max_concurrent_trials`` for it)."""
        import numpy as np
        from ray.tune.search.basic_variant import BasicVariantGenerator

        return BasicVariantGenerator(
            points_to_evaluate=points,
            max_concurrent=limit or 0,
            random_state=np.random.default_rng(self.settings.trainer.args.seed),
        )

    def _tune_config(self, n_trials: int, limit: int | None, searcher: Any = None) -> Any:
        """``n_trials`` is Tune's num_samples, as transformers passes it: a space with ``tune.grid_search`` values runs
        every combination once per sample (n_trials x combinations trials)."""
        from ray import tune
        from ray.tune.search.basic_variant import BasicVariantGenerator

        kw = self.kwargs
        search_alg = kw.get("search_alg") or searcher or self._random_search(limit)
        # Our own random search limits itself (see _random_search): Tune would ignore the limit and warn.
        own_random = search_alg is not kw.get("search_alg") and isinstance(search_alg, BasicVariantGenerator)
        return tune.TuneConfig(
            metric="objective",
            mode="max" if self.settings.directions[0] == "maximize" else "min",
            num_samples=n_trials,
            scheduler=kw.get("scheduler"),
            search_alg=search_alg,
            max_concurrent_trials=None if own_random else limit,
            time_budget_s=kw.get("time_budget_s"),
            reuse_actors=_checks.reuse_actors(kw),
        )

    def _run_config(self, storage: str, name: str) -> Any:
        from ray import tune

        kw = self.kwargs
        score = kw.get("checkpoint_score_attr")
        order = "max" if self.settings.directions[0] == "maximize" else "min"
        if score is not None and score.startswith("min-"):  # Ray's legacy "min-<metric>" form
            score, order = score[4:], "min"
        return tune.RunConfig(
            name=name,
            storage_path=storage,
            stop=_driver.stopper_class()(kw.get("stop")),
            callbacks=[
                _driver.tune_callback_class()(),
                *_driver.result_loggers(bool(kw.get("tune_loggers"))),
            ],
            failure_config=tune.FailureConfig(max_failures=kw.get("max_failures") or 0),
            checkpoint_config=tune.CheckpointConfig(
                num_to_keep=kw.get("keep_checkpoints_num"),
                checkpoint_score_attribute=score
                if score is not None or kw.get("keep_checkpoints_num") is None
                else "objective",
                checkpoint_score_order=order,
            ),
            verbose=0,
        )
