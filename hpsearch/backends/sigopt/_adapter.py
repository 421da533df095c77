"""The SigOpt adapter: the experiment's suggestions are the search loop's asks, its observations the tells; see the
package docstring for drivers and spaces."""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ... import _dist
from ...errors import HPSearchError, SearchConfigError
from ...settings import Option
from ...trial import Trial, TrialRecord, TrialState
from ..base import SearchBackend
from . import _warm
from ._compat import create_suggestion, numpy2_compat
from ._resume import NATIVE_SPACE, load_previous, tell_previous
from ._space import _MAX_NAME, Converted, check_native, portable_to_sigopt, same_assignments
from ._warm import warm_start

if TYPE_CHECKING:
    from spaces import SearchSpace

    from ...session import SearchSession

__all__ = ["SigOptBackend"]

logger = logging.getLogger(__name__)

_DRIVERS = ("lite", "http")

_MAX_OBJECTIVES = 2


def _proxies(value: Any) -> Any:
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise SearchConfigError(
            "proxies must be a dict of scheme -> proxy URL such as {'https': 'http://proxy:3128'}, got a dict of "
            f"{sorted({type(v).__name__ for v in value.values()})} values."
        )
    return value


def _experiment_name(value: str) -> str:
    if len(value) > _MAX_NAME:
        raise SearchConfigError(
            f"name={value[:40]!r}... has {len(value)} characters, more than the {_MAX_NAME} SigOpt allows for an "
            "experiment's name; pass a shorter name."
        )
    return value


class SigOptBackend(SearchBackend):
    name = "sigopt"
    requirement = "sigopt"
    install_command = "make setup (or: pip install 'hpsearch[sigopt]' && pip install --no-deps sigoptlite libsigopt qmcpy==1.2)"
    warm_start_modes = ("inform", "evaluate")
    can_resume = True
    resume_hint = "resume=True"
    options = (
        Option(
            "driver",
            (str,),
            "'lite': SigOpt's optimizer in this process, no account; 'http': the hosted API or a self-hosted "
            "server, needs SIGOPT_API_TOKEN (default: 'http' when SIGOPT_API_TOKEN is set)",
            choices=_DRIVERS,
        ),
        Option("proxies", (dict,), "scheme -> proxy URL for driver='http'", rule=_proxies),
        Option(
            "name",
            (str,),
            f"the experiment's name, at most {_MAX_NAME} characters",
            non_empty=True,
            rule=_experiment_name,
            example="my-sweep",
        ),
        Option(
            "observation_budget",
            (int,),
            "SigOpt's observation budget (default: n_trials)",
            minimum=1,
            example=30,
        ),
        Option(
            "parallel_bandwidth",
            (int,),
            "trials run at once in threads (driver='http' only)",
            default=1,
            minimum=1,
            concurrency=True,
        ),
        Option(
            "resume",
            (bool,),
            "continue the killed search in output_dir (its search.json) in a new experiment",
        ),
    )

    def __init__(self, settings, options, *, trial_workers=None) -> None:
        super().__init__(settings, options, trial_workers=trial_workers)
        self._converted: Converted | None = None
        self._native_fields: dict[str, Any] = {}
        self._assignments: dict[str, dict[str, Any]] = {}
        self._metric_names: list[str] = ["objective"]
        self._random_state: Any = None
        self._optimizer_seed: Any = None  # set by a resume: the first run's draws are not replayed
        self._id_offset = 0  # set by a resume on lite: new trial ids continue after the recorded ones
        # One search's experiment, set by `start`, and the numbers its new trials take.
        self._conn: Any = None
        self._experiment_id: Any = None
        self._numbers: Iterator[int] = iter(())
        self._warm: Iterator[Trial] = iter(())  # warm_start_mode='evaluate': trials that run first
        driver = self.kwargs.get("driver")
        # The token decides the default, but its value is never read here: the sigopt client reads it.
        self.driver = (
            driver if driver is not None else ("http" if os.environ.get("SIGOPT_API_TOKEN") else "lite")
        )

    @staticmethod
    def default_space(trial: Any = None) -> list[dict[str, Any]]:
        """The default space as SigOpt parameters (categorical values are strings, mapped back by the adapter)."""
        return [
            {
                "bounds": {"min": 1e-6, "max": 1e-4},
                "name": "learning_rate",
                "type": "double",
                "transformation": "log",
            },
            {"bounds": {"min": 1, "max": 5}, "name": "num_train_epochs", "type": "int"},
            {"bounds": {"min": 1, "max": 40}, "name": "seed", "type": "int"},
            {
                "categorical_values": ["4", "8", "16", "32", "64"],
                "name": "per_device_train_batch_size",
                "type": "categorical",
            },
        ]

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        super().validate()
        kw = self.kwargs
        settings = self.settings
        if settings.n_objectives > _MAX_OBJECTIVES:
            raise SearchConfigError(
                f"direction={list(settings.directions)}: SigOpt optimizes at most {_MAX_OBJECTIVES} metrics at once (its "
                "multimetric mode gives a two-dimensional Pareto front); combine objectives in compute_objective "
                "so that it returns one or two values, or use backend='optuna' for more.",
                about="direction",
            )
        if kw.get("proxies") is not None and self.driver == "lite":
            raise SearchConfigError(
                "proxies are for driver='http' (a SigOpt server); the lite driver runs in this process and "
                "makes no requests. Drop proxies or pass driver='http'."
            )
        bandwidth = kw.get("parallel_bandwidth", 1)
        if bandwidth > 1 and self.driver == "lite":
            raise SearchConfigError(
                f"parallel_bandwidth={bandwidth}: the lite driver suggests one trial at a time; use "
                "parallel_bandwidth=1, or driver='http' with a SigOpt server to run trials concurrently.",
                about="parallel_bandwidth",
            )
        if (self.trial_workers or 1) > 1 and self.driver == "lite":
            raise SearchConfigError(
                f"trial_workers={self.trial_workers}: the lite driver suggests one trial at a time, so only one worker "
                "would ever train; use trial_workers=1 (each trial isolated in a worker process), or driver='http' "
                "with a SigOpt server to run trials concurrently.",
                about="trial_workers",
            )
        if bandwidth > 1 and _dist.world_size() > 1:
            raise SearchConfigError(
                f"parallel_bandwidth={bandwidth} runs trials in threads, which a search under accelerate launch "
                f"({_dist.world_size()} processes training each trial together) cannot do; use parallel_bandwidth=1.",
                about="parallel_bandwidth",
            )
        accumulation = settings.trainer.args.gradient_accumulation_steps
        if bandwidth > 1 and accumulation > 1:
            raise SearchConfigError(
                f"parallel_bandwidth={bandwidth} runs trials in threads, and accelerate keeps gradient-accumulation "
                f"state per process, so concurrent trials would corrupt each other with "
                f"gradient_accumulation_steps={accumulation}; use parallel_bandwidth=1.",
                about="parallel_bandwidth",
            )
        # Building the connection checks the driver now (lite installed; http has its token) without any request.
        self._connect()

    def describe(self) -> dict[str, Any]:
        out = super().describe()  # proxies are saved as their type name only: a proxy URL may hold a password
        out["driver"] = self.driver
        out["parallel_bandwidth"] = self.kwargs.get("parallel_bandwidth", 1)
        return out

    def _connect(self) -> Any:
        import sigopt

        if self.driver == "lite":
            try:
                import sigoptlite  # noqa: F401
            except ImportError as error:
                raise SearchConfigError(
                    f"driver='lite' needs sigoptlite, which is not installed ({error}); run `{self.install_command}`.",
                    about="driver",
                ) from error
            numpy2_compat()
            return sigopt.Connection(driver="lite")
        try:
            return sigopt.Connection(driver="http", proxies=self.kwargs.get("proxies"))
        except ValueError as error:
            # The client's own message names the missing token; it never contains one.
            raise SearchConfigError(
                f"driver='http' could not connect: {error}. Set SIGOPT_API_TOKEN (and SIGOPT_API_URL for a "
                "self-hosted sigopt-server) in the environment, or use driver='lite'.",
                about="driver",
            ) from error

    # ------------------------------------------------------------------ space
    def convert_space(self, space: SearchSpace) -> list[dict[str, Any]]:
        """SigOpt's parameter list for a portable space (conditionals kept for `run`)."""
        self._converted = portable_to_sigopt(space)
        return self._converted.parameters

    def is_native_space(self, hp_space: Any) -> bool:
        if isinstance(hp_space, list | tuple):
            return True
        return super().is_native_space(hp_space)

    def resolve_space(self, hp_space: Any) -> tuple[SearchSpace | None, Any]:
        space, native = super().resolve_space(hp_space)
        if space is None:
            native, self._native_fields = check_native(native, self.settings.trainer)
        return space, native

    # ------------------------------------------------------------------ run
    def _experiment_body(self, n_trials: int, native_space: Any) -> dict[str, Any]:
        settings = self.settings
        if settings.n_objectives == 1:
            metric_names = ["objective"]
        else:
            metric_names = [f"objective_{i}" for i in range(settings.n_objectives)]
        self._metric_names = metric_names
        body: dict[str, Any] = {
            "name": self.kwargs.get("name") or f"hpsearch {settings.objective_name}"[:_MAX_NAME],
            "parameters": list(native_space),
            "metrics": [{"name": m, "objective": d} for m, d in zip(metric_names, list(settings.directions))],
            "observation_budget": self.kwargs.get("observation_budget") or n_trials,
            "parallel_bandwidth": self.kwargs.get("parallel_bandwidth", 1),
        }
        if self._converted is not None and self._converted.conditionals:
            body["conditionals"] = self._converted.conditionals
        return body

    def start(self, session: SearchSession, native_space: Any) -> int:
        from sigopt.exception import SigOptException

        n_trials = session.n_trials
        previous = load_previous(self, native_space) if self.kwargs.get("resume") else None
        if self.settings.space is None:  # a native space: kept so that a resume can check it is the same
            session.result.settings[NATIVE_SPACE] = list(native_space)
        conn = self._conn = self._connect()
        try:
            experiment = conn.experiments().create(**self._experiment_body(n_trials, native_space))
        except SigOptException as error:
            raise SearchConfigError(f"SigOpt refused the experiment: {error}") from error
        self._experiment_id = experiment.id
        session.result.native = experiment
        session.result.settings["experiment_id"] = str(experiment.id)
        logger.info("SigOpt experiment %s (driver=%s): %d trials.", experiment.id, self.driver, n_trials)
        if previous is not None:
            if self.priors:
                logger.info(
                    "resume=True: warm_start is not applied again; the earlier run's trials carry it."
                )
            used, first = tell_previous(self, session, conn, experiment.id, previous, native_space)
        else:
            used = first = 0
            if self.priors:
                self._warm = warm_start(self, session, self._experiment())
        self._numbers = itertools.count(first)
        return max(n_trials - used, 0)

    def ask(self, session: SearchSession) -> Trial | None:
        warm = next(self._warm, None)  # warm_start_mode='evaluate': the earlier configurations first
        if warm is not None:
            next(self._numbers)
            return warm
        experiment = self._experiment()
        suggestion = self._suggest(experiment, session)
        if suggestion is None:
            return None  # nothing left to suggest: the session starts no more trials
        assignments = dict(suggestion.assignments)
        suggestion_id = str(suggestion.id)
        trial_id = str(int(suggestion_id) + self._id_offset) if self._id_offset else suggestion_id
        self._assignments[trial_id] = assignments
        try:
            params = self._params(assignments, self.settings.space)
        except BaseException:
            self._abandon(experiment, suggestion_id)
            raise
        return Trial(trial_id, next(self._numbers), params, self.name, native=suggestion)

    def tell(self, trial: Trial, record: TrialRecord) -> None:
        if trial.native is None:  # a warm 'evaluate' trial: SigOpt did not suggest it
            _warm.observe(self, self._experiment(), record)
            return
        complete = record.state is TrialState.COMPLETE
        self._observe(self._experiment(), record.objective, not complete, suggestion=str(trial.native.id))
        record.extra["sigopt_observation"] = "value" if complete else "failed"

    def abandon(self, trial: Trial, error: BaseException) -> None:
        if trial.native is not None:
            self._abandon(self._experiment(), str(trial.native.id))

    def finish(self, session: SearchSession, completed: bool) -> None:
        if not completed or self._conn is None:
            return
        # The snapshot taken at creation stays if SigOpt cannot be reached.
        with contextlib.suppress(Exception):
            session.result.native = self._experiment().fetch()  # with its final progress
        self._mark_best(session, self._conn, self._experiment_id)

    def _experiment(self) -> Any:
        return self._conn.experiments(self._experiment_id)

    def _suggest(self, experiment: Any, session: SearchSession) -> Any | None:
        """The next suggestion (None when there is none left: see `create_suggestion`), made by the lite optimizer
        on a random state of its own.

        sigoptlite draws from numpy's global generator, which every trial's ``set_seed(args.seed)`` resets:
        without this, each suggestion would start from the same state and lite would propose the same
        assignments again and again. The optimizer's state is seeded once from ``args.seed`` (a search is
        repeatable) and swapped in around each suggestion, leaving the trainer's state as it was.
        """
        if self.driver != "lite":
            return create_suggestion(experiment, session, self.driver)
        import numpy

        if self._random_state is None:
            numpy_state = numpy.random.get_state()
            numpy.random.seed(self._optimizer_seed or int(self.settings.trainer.args.seed) % 2**32)
            self._random_state = numpy.random.get_state()
            numpy.random.set_state(numpy_state)
        trainer_state = numpy.random.get_state()
        numpy.random.set_state(self._random_state)
        try:
            return create_suggestion(experiment, session, self.driver)
        finally:
            self._random_state = numpy.random.get_state()
            numpy.random.set_state(trainer_state)

    def _params(self, assignments: Mapping[str, Any], space: SearchSpace | None) -> dict[str, Any]:
        if space is None:
            out = dict(assignments)
            for name, target in self._native_fields.items():
                if isinstance(out.get(name), str):
                    out[name] = target(out[name])
            return out
        assert self._converted is not None
        encodings = self._converted.encodings

        def value(name: str, domain: Any) -> Any:
            encoding = encodings[name]
            if encoding.kind == "constant":
                return encoding.constant
            if name not in assignments:
                raise HPSearchError(
                    f"SigOpt's suggestion {dict(assignments)} has no value for {name!r}, which the space makes "
                    "active; the space and the experiment disagree."
                )
            return encoding.decode(name, assignments[name])

        return space.sample_with(value)

    def _observe(self, experiment: Any, objective: Any, failed: bool = False, **where: Any) -> None:
        """Tell ``experiment`` one observation: the objective's values, or ``failed``; ``where`` is SigOpt's
        ``suggestion=<id>`` (a trial it suggested) or ``assignments={...}`` (a trial it did not: warm start, resume)."""
        if failed or objective is None:
            experiment.observations().create(failed=True, **where)
            return
        values = objective if isinstance(objective, list) else [objective]
        experiment.observations().create(
            values=[{"name": m, "value": float(v)} for m, v in zip(self._metric_names, values)], **where
        )

    def _abandon(self, experiment: Any, suggestion_id: str) -> None:
        """Interrupted: close the open suggestion on a server (lite forgets it with the process)."""
        if self.driver != "http":
            return
        try:
            experiment.suggestions(suggestion_id).delete()
        except Exception as error:  # the interruption matters more than the clean-up
            logger.warning("Could not delete SigOpt suggestion %s: %s", suggestion_id, error)

    def _mark_best(self, session: SearchSession, conn: Any, experiment_id: str) -> None:
        """Mark the records SigOpt's best_assignments point at (matched by assignments: lite gives no id)."""
        settings = self.settings
        try:
            best = conn.experiments(experiment_id).best_assignments().fetch()
        except Exception as error:  # the best trial comes from our records anyway
            logger.warning("Could not fetch SigOpt's best assignments: %s", error)
            return
        finished = {r.trial_id: r for r in session.records if r.state is TrialState.COMPLETE}
        for record in finished.values():  # a resumed run's records carry the earlier experiment's marks
            record.extra.pop("sigopt_best", None)
        matched: list[str] = []
        for entry in best.iterate_pages():  # every page (a server may page a long Pareto front)
            assignments = dict(entry.assignments)
            for trial_id, record in finished.items():
                if trial_id not in matched and same_assignments(
                    self._assignments.get(trial_id, {}), assignments
                ):
                    record.extra["sigopt_best"] = True
                    matched.append(trial_id)
                    break
        ours = session.result.best_trial if settings.n_objectives == 1 else None
        if ours is not None and matched and ours.trial_id not in matched:
            # Ties, or a server that reports best assignments its own way: our records stay the truth.
            logger.info(
                "SigOpt's best assignment (trial %s) differs from the best record (%s).",
                matched[0],
                ours.trial_id,
            )
