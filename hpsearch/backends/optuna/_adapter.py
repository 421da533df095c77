"""The Optuna adapter: converts the space, drives ``study.optimize``, translates the study into records.

``n_trials`` is the study's budget: a study loaded from storage runs only the trials it still lacks, so a rerun
after a crash completes the search without repeating finished trials. The budget is claimed by trial number,
which the storage hands out in order: the trial numbered past the budget is not trained, so workers sharing one
study stop at exactly ``n_trials`` however they race (a worker that loses the race leaves one empty FAIL trial
marked ``hpsearch_over_budget``, which the budget and the results ignore).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, cast

from ... import _lockstep
from ...errors import SearchConfigError, TrialFailed
from ...options import Code, Option
from ...runner import failed_record
from ...trial import Evaluation, Trial, TrialRecord, TrialReporter, TrialState
from ..base import SearchBackend
from . import _storage
from ._space import SPACE_EXTRA, OptunaSpace, native_params, native_space_spec, probe_native_space
from ._study import continues_study, open_study, replay_trial, warm_start

if TYPE_CHECKING:
    from spaces import SearchSpace

    from ...session import SearchSession

__all__ = ["OptunaBackend"]

logger = logging.getLogger(__name__)


class _Failed(TrialFailed):
    pass


class _OverBudget(_Failed):
    """The trial was numbered past the budget because another worker claimed the last slot first."""


def _study_directions(directions: Any) -> list[Literal["minimize", "maximize"]]:
    # The API already normalised every entry to "minimize" or "maximize"; only the static type is narrowed.
    return cast('list[Literal["minimize", "maximize"]]', list(directions))


def _callables(value: Any) -> Any:
    if not all(map(callable, value)):
        raise SearchConfigError(f"callbacks must be a list of callables (study, trial), got {value!r}.")
    return value


def _exception_classes(value: Any) -> Any:
    if not all(
        isinstance(c, type) and issubclass(c, Exception)
        for c in (value if isinstance(value, tuple | list) else (value,))
    ):
        raise SearchConfigError(
            f"catch must be an Exception class or a tuple of them, got {value!r} (KeyboardInterrupt and other "
            "BaseExceptions stop a search and cannot be caught per trial)."
        )
    return value


class _OptunaReporter(TrialReporter):
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
    can_resume = True
    resume_hint = "storage=<the study's storage> with load_if_exists=True"
    warm_start_modes = ("inform", "evaluate")
    trial_api = ("suggest_",)
    replay_trial = replay_trial  # re-evaluation: a FixedTrial answering model_init's trial.suggest_*
    options = (
        Option(
            "sampler",
            (),
            "an optuna.samplers sampler",
            classes=("optuna.samplers:BaseSampler",),
            example=Code("optuna.samplers.TPESampler(seed=0)"),
            build_from=("optuna.samplers",),
        ),
        Option(
            "pruner",
            (),
            "an optuna.pruners pruner",
            classes=("optuna.pruners:BasePruner",),
            example=Code("optuna.pruners.MedianPruner()"),
            build_from=("optuna.pruners",),
        ),
        Option(
            "storage",
            (str,),
            "a database URL, a journal file path (*.log) or an Optuna storage",
            classes=("optuna.storages:BaseStorage",),
            example="sqlite:///study.db",
            path=True,
        ),
        Option("study_name", (str,), "the study's name in the storage", non_empty=True, example="my-study"),
        Option("load_if_exists", (bool,), "continue a study of that name found in the storage"),
        Option("timeout", (int, float), "seconds after which no new trial starts", above=0, example=3600),
        Option(
            "n_jobs",
            (int,),
            "trials run at once in threads (-1: one per CPU)",
            default=1,
            minimum=1,
            also=(-1,),
            concurrency=True,
        ),
        Option("gc_after_trial", (bool,), "run the garbage collector after every trial", default=False),
        Option(
            "callbacks",
            (list, tuple),
            "callables (study, frozen_trial) called after every trial",
            rule=_callables,
        ),
        Option(
            "catch",
            (type, tuple, list),
            "exception classes raised around a trial (e.g. by a storage) that fail "
            "it instead of the search; errors inside a trial always fail only that trial",
            rule=_exception_classes,
        ),
        Option("show_progress_bar", (bool,), "Optuna's own progress bar", default=False),
    )
    _OPTIMIZE = ("timeout", "n_jobs", "gc_after_trial", "show_progress_bar")

    def __init__(self, settings, options) -> None:
        super().__init__(settings, options)
        self._space: OptunaSpace | None = None
        self._interrupted: set[int] = set()

    # ------------------------------------------------------------------ class-level facts
    @staticmethod
    def default_space(trial: Any = None) -> dict[str, Any]:
        """The default space written with Optuna's ``trial.suggest_*`` (as transformers users write it)."""
        return {
            "learning_rate": trial.suggest_float("learning_rate", 1e-6, 1e-4, log=True),
            "num_train_epochs": trial.suggest_int("num_train_epochs", 1, 5),
            "seed": trial.suggest_int("seed", 1, 40),
            "per_device_train_batch_size": trial.suggest_categorical(
                "per_device_train_batch_size", [4, 8, 16, 32, 64]
            ),
        }

    @classmethod
    def sweep_options(cls, options: dict[str, Any], *, resume: bool, sweep_name: str) -> dict[str, Any]:
        storage = options.get("storage")
        if isinstance(storage, str):
            # A named study is what --resume finds again; the sweep file's name is a stable default.
            options.setdefault("study_name", sweep_name)
        if resume:
            if storage is None:
                raise SearchConfigError(
                    "--resume continues a study saved in storage, but backend_options has no storage; add "
                    "`storage: sqlite:///{output_dir}/study.db`.",
                    about="storage",
                )
            options["load_if_exists"] = True
        return options

    @classmethod
    def existing_run(cls, options: Mapping[str, Any]) -> int | None:
        storage = options.get("storage")
        if not isinstance(storage, str) or "://" not in storage or not options.get("study_name"):
            return None
        # Through the search's bounded engine (a server that never answers fails in CONNECT_TIMEOUT_S), creating nothing.
        return _storage.stored_trials(storage, options["study_name"])

    @classmethod
    def discard_existing_run(cls, options: Mapping[str, Any]) -> None:
        import optuna

        optuna.delete_study(
            study_name=options["study_name"], storage=_storage.build_storage(options["storage"])
        )

    def continues_earlier_run(self) -> bool:
        return continues_study(self.kwargs, self.settings.output_dir)

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        import optuna

        super().validate()
        kw = self.kwargs
        args = self.settings.trainer.args
        multi = self.settings.n_objectives > 1
        pruner = kw.get("pruner")
        if kw.get("load_if_exists") and kw.get("storage") is None:
            raise SearchConfigError(
                "load_if_exists=True continues a study kept in a storage, but no storage is given (a study in memory "
                "starts empty); pass storage='sqlite:///study.db' (or a journal file), or remove load_if_exists.",
                about="load_if_exists",
            )
        if pruner is not None and not isinstance(pruner, optuna.pruners.NopPruner):
            if multi:
                raise SearchConfigError(
                    f"pruner={type(pruner).__name__}: Optuna cannot prune trials of a multi-objective study "
                    f"(direction={list(self.settings.directions)}); remove the pruner or optimize one objective.",
                    about="pruner",
                )
            if str(args.eval_strategy) == "no":
                raise SearchConfigError(
                    f"pruner={type(pruner).__name__} needs intermediate results, but eval_strategy='no' never "
                    "evaluates during training; set eval_strategy='epoch' or 'steps' (or drop the pruner).",
                    about="pruner",
                )
        storage = kw.get("storage")
        if isinstance(storage, str):
            _storage.check_storage_url(storage, self.settings.output_dir)
        n_jobs = kw.get("n_jobs", 1)
        if n_jobs != 1 and args.gradient_accumulation_steps > 1:
            raise SearchConfigError(
                f"n_jobs={n_jobs} runs trials in threads, and accelerate keeps gradient-accumulation state per "
                f"process, so concurrent trials would corrupt each other with gradient_accumulation_steps="
                f"{args.gradient_accumulation_steps}; use n_jobs=1, or run several worker processes on one storage.",
                about="n_jobs",
            )

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        storage = self.kwargs.get("storage")
        if isinstance(storage, str):
            out["storage"] = _storage.redact_url(storage)
        for key in ("sampler", "pruner"):
            if key in self.kwargs:
                out[key] = type(self.kwargs[key]).__name__
        return out

    # ------------------------------------------------------------------ space
    def convert_space(self, space: SearchSpace) -> dict[str, Any]:
        """Optuna distributions for every non-fixed domain (same inclusive bounds)."""
        self._space = OptunaSpace(space)
        return self._space.distributions

    def resolve_space(self, hp_space: Any) -> tuple[SearchSpace | None, Any]:
        space, native_space = super().resolve_space(hp_space)
        if space is None:
            probe_native_space(
                native_space, _study_directions(self.settings.directions), self.settings.trainer
            )
        return space, native_space

    # ------------------------------------------------------------------ run
    def run(self, session: SearchSession, native_space: Any) -> None:
        import optuna

        settings = self.settings
        if _lockstep.is_follower():
            _lockstep.follow(settings, session)
            return
        n_trials = session.n_trials
        study = open_study(self.kwargs, settings, session)
        session.result.native = study
        _storage.recover_dead_drivers(study)
        if self.priors:
            warm_start(study, self.priors, self.warm_start_mode, self._space)
        self._adopt_previous(study, session)
        # Running trials count too (other workers' trials). Waiting ones (retries) do not: running one takes one of
        # this call's optimize iterations, like a new trial would.
        waiting = optuna.trial.TrialState.WAITING
        done = len(
            [t for t in _storage.budget_trials(study.get_trials(deepcopy=False)) if t.state != waiting]
        )
        remaining = max(n_trials - done, 0)
        if done > n_trials:
            # n_trials is the study's whole budget, not a number of trials to add: a smaller one runs nothing.
            logger.warning(
                "Study %r already has %d trials, more than n_trials=%d (the study's whole budget, earlier "
                "trials included), so none runs; pass n_trials=%d or more to run more.",
                study.study_name,
                done,
                n_trials,
                done + 1,
            )
        elif done:
            logger.info("Study %r already has %d trials; running %d more.", study.study_name, done, remaining)
        multi = settings.n_objectives > 1

        def within_budget(optuna_trial: Any) -> bool:
            # Trial numbers are handed out in order by the storage, so "the budget trials numbered below mine"
            # is the same answer for every worker: exactly n_trials trials pass, whatever the race.
            if optuna_trial.number < n_trials:
                return True  # fewer trials than that are numbered below it: no need to read them all
            trials = study.get_trials(deepcopy=False)
            return len(_storage.budget_trials(trials, below=optuna_trial.number)) < n_trials

        def stop_at_budget(study_: Any, frozen: Any) -> None:
            # Reading the study costs a storage round trip per trial, so only when the budget can be full.
            if frozen.number + 1 < n_trials:
                return
            if len(_storage.budget_trials(study_.get_trials(deepcopy=False))) >= n_trials:
                study_.stop()

        def attempt(optuna_trial: Any) -> TrialRecord:
            optuna_trial.set_user_attr(_storage.OWNER_ATTR, _storage.owner())
            if self._space is not None:
                params = self._space.sample(optuna_trial)
            else:
                # Only rank 0 calls hp_space: its suggestions reach the other ranks with the announced trial.
                asked = Trial(optuna_trial.number, optuna_trial.number, {}, self.name, native=optuna_trial)
                try:
                    params = native_params(asked, native_space, settings.trainer)
                except Exception as error:  # hp_space failed on this trial: it fails, the search goes on
                    record = failed_record(
                        settings, asked, f"hp_space(trial) raised {type(error).__name__}: {error}"
                    )
                    optuna_trial.set_user_attr(_storage.RECORD_ATTR, _storage.record_attr(record))
                    pending[optuna_trial.number] = record
                    raise _Failed(record.error or "hp_space failed") from error
            trial = _lockstep.lead(
                Trial(optuna_trial.number, optuna_trial.number, params, self.name, native=optuna_trial)
            )
            _lockstep.announce(trial)
            record = self.executor.run(settings, trial, _OptunaReporter(optuna_trial, multi))
            if self._space is None:  # a native hp_space: what each parameter was drawn from, for the report
                record.extra[SPACE_EXTRA] = native_space_spec(optuna_trial.distributions)
            # The whole record goes into the study before it is told: the study alone can rebuild search.json.
            optuna_trial.set_user_attr(_storage.RECORD_ATTR, _storage.record_attr(record))
            pending[optuna_trial.number] = record
            return record

        def objective(optuna_trial: Any) -> Any:
            if not within_budget(optuna_trial):
                optuna_trial.set_user_attr(_storage.OVER_BUDGET_ATTR, True)
                optuna_trial.study.stop()
                raise _OverBudget(f"the study already has its {n_trials} trials")
            try:
                record = attempt(optuna_trial)
            except KeyboardInterrupt:
                # Wherever Ctrl-C landed (sampling, training, storing the record), not a finished trial: it stays out
                # of the results (Optuna marks it FAIL), and its parameters are queued again for a rerun to train.
                pending.pop(optuna_trial.number, None)
                self._interrupted.add(optuna_trial.number)
                _storage.queue_interrupted(study, optuna_trial)
                raise
            if record.state is TrialState.FAIL:
                raise _Failed(record.error or "failed")
            if record.state is TrialState.PRUNED:
                raise optuna.TrialPruned(f"pruned at step {record.last_step}")
            return record.objective

        pending: dict[int, TrialRecord] = {}

        def after_tell(study_: Any, frozen: Any) -> None:
            # Called once Optuna has stored the trial's end: search.json never says more than the study. One callback
            # for both jobs: Optuna deep-copies the finished trial (its record included) for each callback.
            record = pending.pop(frozen.number, None)
            if record is not None:
                session.record(record)
            if session.stop_reason is not None:
                study_.stop()  # a compute budget is spent: running trials finish, no new one starts
            stop_at_budget(study_, frozen)

        catch = tuple(catch) if isinstance(catch := self.kwargs.get("catch", ()), list | tuple) else (catch,)
        with _storage.storage_errors(
            self.kwargs.get("storage")
        ):  # a database lost mid-search: its cause, named
            try:
                if remaining and session.stop_reason is None:  # a budget the earlier runs spent stays spent
                    study.optimize(
                        objective,
                        n_trials=remaining,
                        timeout=self.kwargs.get("timeout"),
                        n_jobs=self.executor.slots if self.trial_workers else self.kwargs.get("n_jobs", 1),
                        gc_after_trial=self.kwargs.get("gc_after_trial", False),
                        callbacks=[after_tell, *(self.kwargs.get("callbacks") or ())],
                        catch=(_Failed, *catch),
                        show_progress_bar=self.kwargs.get("show_progress_bar", False),
                    )
            finally:
                _lockstep.announce_end()
                session.replace_all(self._translate(study, session))

    def _adopt_previous(self, study: Any, session: SearchSession) -> None:
        """Keep the detailed records a previous run of this study saved in output_dir."""
        if not study.trials:
            return
        numbers = {str(t.number) for t in study.trials}
        session.adopt(r for r in session.saved_records() if r.trial_id in numbers)

    def _translate(self, study: Any, session: SearchSession) -> list[TrialRecord]:
        """Every trial of the study as a record: the records `run_trial` produced as they are, and records of
        trials other workers (or earlier runs) trained from what they stored in the study."""
        import optuna

        states = {
            optuna.trial.TrialState.COMPLETE: TrialState.COMPLETE,
            optuna.trial.TrialState.PRUNED: TrialState.PRUNED,
            optuna.trial.TrialState.FAIL: TrialState.FAIL,
            optuna.trial.TrialState.RUNNING: TrialState.RUNNING,
        }
        records: list[TrialRecord] = []
        trials = study.get_trials(deepcopy=False)
        retries: dict[int, int] = {}
        for t in trials:
            origin = t.user_attrs.get(_storage.RETRY_OF_ATTR, t.system_attrs.get("failed_trial"))
            if isinstance(origin, int):
                retries[origin] = t.number
        for frozen in trials:
            if (
                frozen.user_attrs.get(_storage.OVER_BUDGET_ATTR)
                or frozen.user_attrs.get(_storage.INTERRUPTED_ATTR)
                or frozen.number in self._interrupted
                or frozen.state == optuna.trial.TrialState.WAITING
            ):
                continue  # never finished here (queued trials have not started)
            state = states[frozen.state]
            record = session.known(str(frozen.number))
            if record is None or record.state is not state:
                # Recorded elsewhere (another worker, an earlier run), or the study's state differs from what an
                # earlier run saved (killed between the two): the study is the truth.
                record = self._stored_record(frozen, state)
                if record.state is TrialState.FAIL and frozen.number in retries:
                    record.error = (
                        f"its driver process died while it ran; re-enqueued with the same parameters "
                        f"as trial {retries[frozen.number]}"
                    )
            records.append(record)
        return records

    def _stored_record(self, frozen: Any, state: TrialState) -> TrialRecord:
        saved = _storage.saved_record(frozen.user_attrs)
        if saved is not None:
            saved.state = state
            return saved
        fields = _storage.saved_fields(frozen.user_attrs)
        values = frozen.values
        objective = (values[0] if len(values) == 1 else list(values)) if values else None
        params = self._space.decode(frozen.params) if self._space is not None else dict(frozen.params)
        return TrialRecord(
            trial_id=str(frozen.number),
            number=frozen.number,
            name=fields.get("name", f"run-{frozen.number}"),
            state=state,
            params=params,
            objective=objective,
            started=frozen.datetime_start,
            finished=frozen.datetime_complete,
            intermediates=[
                Evaluation(step=s, epoch=None, objective=v)
                for s, v in sorted(frozen.intermediate_values.items())
            ],
            last_step=fields.get("last_step"),
            checkpoint=fields.get("checkpoint"),
            node=fields.get("node"),
            error=fields.get("error"),
        )
