"""Optuna adapter: a study (in memory, SQLite/PostgreSQL or a journal file) drives the trials.

Portable domains map to Optuna distributions with the same inclusive bounds (`FloatDistribution`,
`IntDistribution`, `CategoricalDistribution`); categorical choices Optuna cannot store (tuples, other
hashables) are suggested by index and mapped back. Conditional parameters are simply not suggested when
inactive (define-by-run). ``n_trials`` is the study's budget: a study loaded from storage runs only the
trials it still lacks, so a rerun after a crash completes the search without repeating finished trials.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import SearchConfigError, TrialFailed
from ..runner import RESERVED_PARAMS, argument_fields, run_trial
from ..trial import Trial, TrialRecord, TrialState
from .base import SearchBackend

if TYPE_CHECKING:
    from spaces import SearchSpace

    from ..results import SearchResult

__all__ = ["OptunaBackend"]

logger = logging.getLogger(__name__)

_CREATE_KWARGS = ("sampler", "pruner", "storage", "study_name", "load_if_exists")
_OPTIMIZE_KWARGS = ("timeout", "n_jobs", "gc_after_trial", "callbacks", "catch", "show_progress_bar")
_OPTUNA_SCALARS = (type(None), bool, int, float, str)
_JOURNAL_SUFFIXES = (".log", ".journal", ".jsonl")
_RDB_SCHEMES = ("sqlite", "postgresql", "postgres", "mysql", "oracle", "mssql")


class _Failed(TrialFailed):
    pass


def redact_url(url: str) -> str:
    """A storage URL without its password (never printed or saved)."""
    if "://" not in url or "@" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"


class _OptunaReporter:
    def __init__(self, trial: Any, multi_objective: bool) -> None:
        self.trial = trial
        self.multi_objective = multi_objective
        self._steps: set[int] = set()

    def report(self, objective: Any, step: int, metrics: Mapping[str, float], checkpoint: str | None) -> bool:
        if self.multi_objective or step in self._steps:
            return False  # Optuna cannot prune multi-objective trials; one report per step
        self._steps.add(step)
        self.trial.report(float(objective), step)
        return bool(self.trial.should_prune())


class OptunaBackend(SearchBackend):
    name = "optuna"
    requirement = "optuna"
    install_command = "pip install 'hpsearch[optuna]'"
    accepted_kwargs = frozenset(_CREATE_KWARGS + _OPTIMIZE_KWARGS)

    def __init__(self, ctx, kwargs) -> None:
        super().__init__(ctx, kwargs)
        self._choice_maps: dict[str, list[Any]] = {}

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        import optuna

        kw = self.kwargs
        args = self.ctx.trainer.args
        multi = self.ctx.n_objectives > 1
        pruner = kw.get("pruner")
        if pruner is not None and not isinstance(pruner, optuna.pruners.BasePruner):
            raise SearchConfigError(f"pruner must be an optuna.pruners.BasePruner, got {pruner!r}.")
        sampler = kw.get("sampler")
        if sampler is not None and not isinstance(sampler, optuna.samplers.BaseSampler):
            raise SearchConfigError(f"sampler must be an optuna.samplers.BaseSampler, got {sampler!r}.")
        if pruner is not None and not isinstance(pruner, optuna.pruners.NopPruner):
            if multi:
                raise SearchConfigError(
                    f"pruner={type(pruner).__name__}: Optuna cannot prune trials of a multi-objective study "
                    f"(direction={self.ctx.directions}); remove the pruner or optimize one objective."
                )
            if str(args.eval_strategy) == "no":
                raise SearchConfigError(
                    f"pruner={type(pruner).__name__} needs intermediate results, but eval_strategy='no' never "
                    "evaluates during training; set eval_strategy='epoch' or 'steps' (or drop the pruner)."
                )
        storage = kw.get("storage")
        if isinstance(storage, str):
            self._check_storage_url(storage)
        elif storage is not None and not isinstance(storage, optuna.storages.BaseStorage):
            raise SearchConfigError(
                f"storage must be a URL such as 'sqlite:///study.db', a journal file path ending in .log, or an "
                f"optuna storage object; got {type(storage).__name__}."
            )
        n_jobs = kw.get("n_jobs", 1)
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0 or n_jobs < -1:
            raise SearchConfigError(f"n_jobs must be a positive integer or -1, got {n_jobs!r}.")
        if n_jobs != 1 and args.gradient_accumulation_steps > 1:
            raise SearchConfigError(
                f"n_jobs={n_jobs} runs trials in threads, and accelerate keeps gradient-accumulation state per "
                f"process, so concurrent trials would corrupt each other with gradient_accumulation_steps="
                f"{args.gradient_accumulation_steps}; use n_jobs=1, or run several worker processes on one storage."
            )
        timeout = kw.get("timeout")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
            raise SearchConfigError(f"timeout must be a positive number of seconds or None, got {timeout!r}.")
        study_name = kw.get("study_name")
        if study_name is not None and (not isinstance(study_name, str) or not study_name):
            raise SearchConfigError(f"study_name must be a non-empty string, got {study_name!r}.")
        callbacks = kw.get("callbacks")
        if callbacks is not None and (not isinstance(callbacks, list | tuple) or not all(map(callable, callbacks))):
            raise SearchConfigError(f"callbacks must be a list of callables (study, trial), got {callbacks!r}.")
        catch = kw.get("catch", ())
        catch_items = catch if isinstance(catch, tuple | list) else (catch,)
        if not all(isinstance(c, type) and issubclass(c, BaseException) for c in catch_items):
            raise SearchConfigError(f"catch must be an exception class or a tuple of them, got {catch!r}.")

    @staticmethod
    def _check_storage_url(url: str) -> None:
        if url.endswith(_JOURNAL_SUFFIXES) and "://" not in url:
            parent = os.path.dirname(os.path.abspath(url))
            if not os.path.isdir(parent):
                raise SearchConfigError(f"storage journal file {url!r}: folder {parent!r} does not exist; create it.")
            return
        scheme = url.split("://", 1)[0].split("+", 1)[0] if "://" in url else ""
        if scheme not in _RDB_SCHEMES:
            raise SearchConfigError(
                f"storage={redact_url(url)!r} is not a database URL or journal file; use e.g. "
                "'sqlite:///study.db', 'postgresql://user@host/db' or a path ending in .log."
            )

    def settings(self) -> dict[str, Any]:
        out = super().settings()
        storage = self.kwargs.get("storage")
        if isinstance(storage, str):
            out["storage"] = redact_url(storage)
        for key in ("sampler", "pruner"):
            if key in self.kwargs:
                out[key] = type(self.kwargs[key]).__name__
        return out

    # ------------------------------------------------------------------ space
    def convert_space(self, space: SearchSpace) -> dict[str, Any]:
        """Optuna distributions for every non-fixed domain (same inclusive bounds)."""
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

        from spaces import Categorical, Fixed, Float, Int

        out: dict[str, Any] = {}
        for name in space.order:
            domain = space[name]
            if isinstance(domain, Float):
                out[name] = FloatDistribution(domain.low, domain.high, log=domain.log, step=domain.step)
            elif isinstance(domain, Int):
                out[name] = IntDistribution(domain.low, domain.high, log=domain.log, step=domain.step)
            elif isinstance(domain, Categorical):
                choices = list(domain.choices)
                if all(isinstance(c, _OPTUNA_SCALARS) for c in choices):
                    out[name] = CategoricalDistribution(choices)
                else:
                    # Optuna stores only scalars: suggest an index, map it back to the Python value.
                    self._choice_maps[name] = choices
                    out[name] = CategoricalDistribution(list(range(len(choices))))
            elif isinstance(domain, Fixed):
                continue
            else:
                raise SearchConfigError(f"hp_space parameter {name!r}: Optuna cannot express {domain!r}.")
        return out

    def _sample(self, optuna_trial: Any, space: SearchSpace, distributions: dict[str, Any]) -> dict[str, Any]:
        from optuna.distributions import CategoricalDistribution, FloatDistribution

        def suggest(name: str, domain: Any) -> Any:
            dist = distributions[name]
            if isinstance(dist, FloatDistribution):
                return optuna_trial.suggest_float(name, dist.low, dist.high, log=dist.log, step=dist.step)
            if isinstance(dist, CategoricalDistribution):
                value = optuna_trial.suggest_categorical(name, list(dist.choices))
                return self._choice_maps[name][value] if name in self._choice_maps else value
            return optuna_trial.suggest_int(name, dist.low, dist.high, log=dist.log, step=dist.step)

        return space.sample_with(suggest)

    def _native_params(self, trial: Trial, native_space: Any) -> dict[str, Any]:
        params = native_space(trial)
        if not isinstance(params, Mapping):
            raise SearchConfigError(
                f"hp_space(trial) must return a dict of parameter values, got {type(params).__name__}: {params!r}."
            )
        fields = argument_fields()
        takes_trial = getattr(self.ctx.trainer, "_model_init_arity", 0) == 1
        for name in params:
            if name in RESERVED_PARAMS:
                raise SearchConfigError(f"hp_space returned the reserved parameter {name!r}; rename it.")
            if name not in fields and not takes_trial:
                raise SearchConfigError(
                    f"hp_space returned {name!r}, which is not a TrainingArguments field, and model_init takes no "
                    "trial; give model_init a `trial` parameter or remove it."
                )
        return {**trial.params, **params}

    # ------------------------------------------------------------------ run
    def _storage(self) -> Any:
        import optuna

        storage = self.kwargs.get("storage")
        if isinstance(storage, str) and "://" not in storage:
            from optuna.storages.journal import JournalFileBackend

            return optuna.storages.JournalStorage(JournalFileBackend(storage))
        return storage

    def run(self, n_trials: int, space: SearchSpace | None, native_space: Any) -> SearchResult:
        import optuna

        from .. import _dist

        ctx = self.ctx
        if not _dist.is_main_process():
            return self._follow(space)
        directions = ctx.directions
        study = optuna.create_study(
            directions=directions,
            sampler=self.kwargs.get("sampler"),
            pruner=self.kwargs.get("pruner"),
            storage=self._storage(),
            study_name=self.kwargs.get("study_name"),
            load_if_exists=bool(self.kwargs.get("load_if_exists", False)),
        )
        assert ctx.result is not None
        ctx.result.native = study
        self._adopt_previous(study)
        finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED, optuna.trial.TrialState.FAIL)
        done = len(study.get_trials(deepcopy=False, states=finished))
        remaining = max(n_trials - done, 0)
        if done:
            logger.info("Study %r already has %d finished trials; running %d more.", study.study_name, done, remaining)
        multi = len(directions) > 1

        def objective(optuna_trial: Any) -> Any:
            trial = Trial(optuna_trial.number, optuna_trial.number, {}, "optuna", native=optuna_trial)
            if _dist.world_size() > 1:
                trial._suggest_hook = _leader_suggest
            if space is not None:
                trial.params = self._sample(optuna_trial, space, native_space)
            else:
                trial.params = self._native_params(trial, native_space)
            _dist.broadcast_object(("trial", trial.id, trial.number, trial.params))
            record = run_trial(ctx, trial, _OptunaReporter(optuna_trial, multi))
            for key, value in (("name", record.name), ("checkpoint", record.checkpoint), ("node", record.node),
                               ("error", record.error), ("last_step", record.last_step)):
                if value is not None:
                    optuna_trial.set_user_attr(f"hpsearch_{key}", value)
            ctx.finish(record)
            if record.state is TrialState.FAIL:
                raise _Failed(record.error or "failed")
            if record.state is TrialState.PRUNED:
                raise optuna.TrialPruned(f"pruned at step {record.last_step}")
            return record.objective

        catch = self.kwargs.get("catch", ())
        catch = tuple(catch) if isinstance(catch, list | tuple) else (catch,)
        try:
            if remaining:
                study.optimize(
                    objective,
                    n_trials=remaining,
                    timeout=self.kwargs.get("timeout"),
                    n_jobs=self.kwargs.get("n_jobs", 1),
                    gc_after_trial=self.kwargs.get("gc_after_trial", False),
                    callbacks=self.kwargs.get("callbacks"),
                    catch=(_Failed, *catch),
                    show_progress_bar=self.kwargs.get("show_progress_bar", False),
                )
        finally:
            _dist.broadcast_object(("stop",))
            self._translate(study)
        return ctx.result

    def _follow(self, space: SearchSpace | None) -> SearchResult:
        """Ranks other than 0: train the trials rank 0 announces, with its values, until it says stop."""
        from .. import _dist

        ctx = self.ctx
        while True:
            message = _dist.broadcast_object(None)
            if message[0] == "stop":
                break
            _, trial_id, number, params = message
            trial = Trial(trial_id, number, params, "optuna")
            trial._suggest_hook = _follower_suggest
            ctx.finish(run_trial(ctx, trial, _NullReporter()))
        assert ctx.result is not None
        return ctx.result

    def _adopt_previous(self, study: Any) -> None:
        """Keep the detailed records a previous run of this study saved in output_dir."""
        from ..results import SearchResult

        ctx = self.ctx
        assert ctx.result is not None
        if not study.trials or not os.path.isfile(os.path.join(ctx.output_dir, "search.json")):
            return
        try:
            previous = SearchResult.load(ctx.output_dir)
        except Exception as error:  # an unreadable old record must not stop a resume
            logger.warning("Could not read the previous results in %s: %s", ctx.output_dir, error)
            return
        numbers = {str(t.number) for t in study.trials}
        ctx.result.records.extend(r for r in previous.records if r.trial_id in numbers)

    def _translate(self, study: Any) -> None:
        """Every trial of the study as a TrialRecord (detailed ones from this process are kept as they are)."""
        import optuna

        ctx = self.ctx
        assert ctx.result is not None
        known = {r.trial_id: r for r in ctx.result.records}
        states = {
            optuna.trial.TrialState.COMPLETE: TrialState.COMPLETE,
            optuna.trial.TrialState.PRUNED: TrialState.PRUNED,
            optuna.trial.TrialState.FAIL: TrialState.FAIL,
            optuna.trial.TrialState.RUNNING: TrialState.RUNNING,
            optuna.trial.TrialState.WAITING: TrialState.RUNNING,
        }
        records: list[TrialRecord] = []
        for frozen in study.get_trials(deepcopy=False):
            trial_id = str(frozen.number)
            record = known.get(trial_id)
            if record is None:
                from ..trial import Evaluation

                attrs = frozen.user_attrs
                values = frozen.values
                objective = (values[0] if len(values) == 1 else list(values)) if values else None
                record = TrialRecord(
                    trial_id=trial_id,
                    number=frozen.number,
                    name=attrs.get("hpsearch_name", f"run-{trial_id}"),
                    state=states[frozen.state],
                    params={k: self._choice_maps[k][v] if k in self._choice_maps else v
                            for k, v in frozen.params.items()},
                    objective=objective,
                    started=frozen.datetime_start,
                    finished=frozen.datetime_complete,
                    intermediates=[Evaluation(step=s, epoch=None, objective=v)
                                   for s, v in sorted(frozen.intermediate_values.items())],
                    last_step=attrs.get("hpsearch_last_step"),
                    checkpoint=attrs.get("hpsearch_checkpoint"),
                    node=attrs.get("hpsearch_node"),
                    error=attrs.get("hpsearch_error"),
                )
            records.append(record)
        ctx.result.records[:] = records
        if records:
            ctx.result.save(ctx.output_dir)


class _NullReporter:
    def report(self, objective: Any, step: int, metrics: Mapping[str, float], checkpoint: str | None) -> bool:
        return False  # only rank 0 reports; its decision is broadcast


def _leader_suggest(trial: Trial, method: str, name: str, args: tuple, kwargs: dict) -> Any:
    from .. import _dist

    return _dist.broadcast_object(getattr(trial.native, method)(name, *args, **kwargs))


def _follower_suggest(trial: Trial, method: str, name: str, args: tuple, kwargs: dict) -> Any:
    from .. import _dist

    return _dist.broadcast_object(None)
