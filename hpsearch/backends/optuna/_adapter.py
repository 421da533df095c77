"""The Optuna adapter: converts the space, answers the search loop with ``study.ask``/``study.tell``, translates the
study into records.

``n_trials`` is the study's budget: a study loaded from storage runs only the trials it still lacks, so a rerun
after a crash completes the search without repeating finished trials. The budget is claimed by trial number,
which the storage hands out in order: the trial numbered past the budget is not trained, so workers sharing one
study stop at exactly ``n_trials`` however they race (a worker that loses the race leaves one empty FAIL trial
marked ``hpsearch_over_budget``, which the budget and the results ignore).
"""

from __future__ import annotations

import contextlib
import copy
import gc
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, cast

from ... import _interrupt
from ..._params import domain_values
from ..._search_loop import NotStarted
from ...errors import SearchConfigError
from ...options import Code, Option
from ...runner import failed_record
from ...trial import Evaluation, Trial, TrialRecord, TrialReporter, TrialState
from ..base import SearchBackend
from . import _storage
from ._optimize import ProgressBar, as_in_optimize, fail_stale, heartbeat
from ._space import SPACE_EXTRA, OptunaSpace, native_params, native_space_spec, probe_native_space
from ._study import continues_study, open_study, replay_trial, warm_start

if TYPE_CHECKING:
    from spaces import SearchSpace

    from ...executor import Executor
    from ...session import SearchSession

__all__ = ["OptunaBackend"]

logger = logging.getLogger(__name__)


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

    def __init__(self, settings, options, *, trial_workers=None) -> None:
        super().__init__(settings, options, trial_workers=trial_workers)
        self._space: OptunaSpace | None = None
        self._interrupted: set[int] = set()
        # One search's state, set by `start`.
        self._study: Any = None
        self._native_space: Any = None
        self._n_trials = 0
        #: Trials asked and not yet told: number -> (Optuna's trial, what stops its heartbeat).
        self._asked: dict[int, tuple[Any, Callable[[], None]]] = {}
        self._catch: tuple[type[BaseException], ...] = ()
        self._deadline: float | None = None
        self._full = False  # the study holds its n_trials (other workers' included), or a callback stopped it
        self._bar: ProgressBar | None = None
        self._marks_asking = True  # see `_storage.outlives_driver`

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
        space, steps = self.settings.space, args.gradient_accumulation_steps
        if (
            space is not None and "gradient_accumulation_steps" in space
        ):  # the most a trial of the space takes
            values = domain_values(space["gradient_accumulation_steps"])
            steps = max([steps, *(v for v in values if isinstance(v, int) and not isinstance(v, bool))])
        if n_jobs != 1 and steps > 1:
            where = (
                " (a value of hp_space['gradient_accumulation_steps'])"
                if steps != args.gradient_accumulation_steps
                else ""
            )
            raise SearchConfigError(
                f"n_jobs={n_jobs} runs trials in threads, and accelerate keeps gradient-accumulation state per "
                f"process, so concurrent trials would corrupt each other with gradient_accumulation_steps="
                f"{steps}{where}; use n_jobs=1, or run several worker processes on one storage.",
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
                native_space,
                _study_directions(self.settings.directions),
                self.settings.trainer,
                default=native_space == self.default_space,
            )
        return space, native_space

    # ------------------------------------------------------------------ the search loop's questions
    def run(self, session: SearchSession, native_space: Any, executor: Executor) -> None:
        # A database lost mid-search stops it naming its cause.
        with _storage.storage_errors(self.kwargs.get("storage")):
            super().run(session, native_space, executor)

    def start(self, session: SearchSession, native_space: Any) -> int:
        import optuna

        n_trials = self._n_trials = session.n_trials
        study = self._study = open_study(self.kwargs, self.settings, session)
        self._native_space = native_space
        session.result.native = study
        self._marks_asking = _storage.outlives_driver(study)
        _storage.recover_dead_drivers(study, self.settings.output_dir)
        if self.priors:
            warm_start(study, self.priors, self.warm_start_mode, self._space)
        self._adopt_previous(study, session)
        # Running trials count too (other workers' trials). Waiting ones (retries) do not: running one takes one of
        # this run's trials, like a new trial would.
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
        catch = self.kwargs.get("catch", ())
        self._catch = tuple(catch) if isinstance(catch, list | tuple) else (catch,)
        timeout = self.kwargs.get("timeout")
        self._deadline = time.monotonic() + timeout if timeout is not None else None
        if self.kwargs.get("show_progress_bar") and remaining:
            self._bar = ProgressBar(remaining, single=self.settings.n_objectives == 1)
        return remaining

    def ask(self, session: SearchSession) -> Trial | None:
        import optuna

        if self._full or (self._deadline is not None and time.monotonic() >= self._deadline):
            # The study has its n_trials (other workers' included), a callback stopped it, or timeout: no new trial.
            return None
        study = self._study
        fail_stale(study)
        # Ctrl-C is held from the trial's creation in the storage (RUNNING) until it is in `_asked`; from then on it
        # interrupts it as anywhere else (failed in the study, its parameters queued again), never leaving it RUNNING.
        # A kill before the owner attr is written leaves the asking marker that names this driver to a rerun. An
        # in-memory study dies with this process, so no rerun reads one: no file is written and removed per trial.
        marker = (
            _storage.asking(self.settings.output_dir, study.study_name)
            if self._marks_asking
            else contextlib.nullcontext()
        )
        with marker:
            try:
                with (
                    _interrupt.held(),
                    as_in_optimize(study),
                ):  # the heartbeat Optuna expects optimize to keep
                    optuna_trial = study.ask()
                    self._asked[optuna_trial.number] = (optuna_trial, heartbeat(study, optuna_trial))
            except KeyboardInterrupt:  # the Ctrl-C held until the trial was ours
                self._interrupt(optuna_trial.number)
                raise
            number = optuna_trial.number
            try:
                optuna_trial.set_user_attr(_storage.OWNER_ATTR, _storage.owner())
                if not self._within_budget(number):
                    # Another worker claimed the last trial first: an empty FAIL that no count includes.
                    optuna_trial.set_user_attr(_storage.OVER_BUDGET_ATTR, True)
                    self._tell(number, state=optuna.trial.TrialState.FAIL)
                    return None
                params = self._params(optuna_trial)
            except KeyboardInterrupt:
                if number in self._asked:  # not told yet
                    self._interrupt(number)
                raise
            except NotStarted:
                raise
            except self._catch as error:
                # e.g. a storage error while sampling: the trial fails, the search goes on.
                logger.warning("Trial %d failed before training (caught by catch=...): %r", number, error)
                self._tell(number, state=optuna.trial.TrialState.FAIL)
                raise NotStarted(None) from error
            except BaseException:
                self._tell(number, state=optuna.trial.TrialState.FAIL)
                raise
        return Trial(number, number, params, self.name, native=optuna_trial)

    def reporter(self, trial: Trial) -> TrialReporter:
        return _OptunaReporter(trial.native, self.settings.n_objectives > 1)

    def tell(self, trial: Trial, record: TrialRecord) -> None:
        import optuna

        optuna_trial = trial.native
        if self._space is None:  # a native hp_space: what each parameter was drawn from, for the report
            record.extra[SPACE_EXTRA] = native_space_spec(optuna_trial.distributions)
        # The whole record goes into the study before it is told: the study alone can rebuild search.json.
        try:
            optuna_trial.set_user_attr(_storage.RECORD_ATTR, _storage.record_attr(record))
        except self._catch as error:
            logger.warning(
                "Trial %d's record could not be stored (caught by catch=...): %r", trial.number, error
            )
            self._tell(trial.number, state=optuna.trial.TrialState.FAIL)
            return
        states = {
            TrialState.PRUNED: optuna.trial.TrialState.PRUNED,
            TrialState.FAIL: optuna.trial.TrialState.FAIL,
        }
        if record.state in states:
            self._tell(trial.number, state=states[record.state])
        else:
            self._tell(trial.number, values=record.objective)

    def abandon(self, trial: Trial, error: BaseException) -> None:
        import optuna

        if trial.number not in self._asked:
            return  # told already (Ctrl-C landed after the tell)
        if isinstance(error, KeyboardInterrupt):
            self._interrupt(trial.number)
        else:
            self._tell(trial.number, state=optuna.trial.TrialState.FAIL)

    def finish(self, session: SearchSession, completed: bool) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._study is not None:
            session.replace_all(self._translate(self._study, session), save=False)  # the loop saves

    def _params(self, optuna_trial: Any) -> dict[str, Any]:
        """The asked trial's parameters: sampled from the portable space, or what the native hp_space suggests (a
        hp_space that raises fails the trial, told here, and the search goes on)."""
        import optuna

        if self._space is not None:
            return self._space.sample(optuna_trial)
        # Only rank 0 calls hp_space: its suggestions reach the other ranks with the announced trial.
        asked = Trial(optuna_trial.number, optuna_trial.number, {}, self.name, native=optuna_trial)
        try:
            return native_params(asked, self._native_space, self.settings.trainer)
        except Exception as error:
            record = failed_record(
                self.settings, asked, f"hp_space(trial) raised {type(error).__name__}: {error}"
            )
            optuna_trial.set_user_attr(_storage.RECORD_ATTR, _storage.record_attr(record))
            self._tell(optuna_trial.number, state=optuna.trial.TrialState.FAIL)
            raise NotStarted(record) from error

    def _within_budget(self, number: int) -> bool:
        # Trial numbers are handed out in order by the storage, so "the budget trials numbered below mine" is the
        # same answer for every worker: exactly n_trials trials pass, whatever the race.
        n_trials = self._n_trials
        if number < n_trials:
            return True  # fewer trials than that are numbered below it: no need to read them all
        trials = self._study.get_trials(deepcopy=False)
        return len(_storage.budget_trials(trials, below=number)) < n_trials

    def _tell(self, number: int, **outcome: Any) -> None:
        """Tell the study how the trial numbered ``number`` ended, then what ``study.optimize`` does after each
        trial: garbage collection (``gc_after_trial``), the user's ``callbacks(study, frozen_trial)``, the progress
        bar, and whether the study is full (other workers' trials included: no new trial is asked for)."""
        study = self._study
        optuna_trial, stop_heartbeat = self._asked.pop(number)
        # A sampler (BruteForceSampler, GridSampler once its grid is done) or a callback may call study.stop(), which
        # Optuna allows only inside optimize: no new trial is asked for after it.
        with as_in_optimize(study):
            try:
                frozen = study.tell(optuna_trial, **outcome)
            finally:
                stop_heartbeat()
                if self.kwargs.get("gc_after_trial"):
                    gc.collect()
            for callback in self.kwargs.get("callbacks") or ():
                callback(study, copy.deepcopy(frozen))  # each its own copy, as Optuna gives it
        self._full = self._full or study._stop_flag
        if self._bar is not None:
            self._bar.update(self._study)
        # Reading the study costs a storage round trip per trial, so only when the budget can be full.
        n_trials = self._n_trials
        if number + 1 >= n_trials and not self._full:
            self._full = len(_storage.budget_trials(self._study.get_trials(deepcopy=False))) >= n_trials

    def _interrupt(self, number: int) -> None:
        """Wherever Ctrl-C landed (sampling, training, storing the record), not a finished trial: it stays out of
        the results (failed in the study), and its parameters are queued again for a rerun to train."""
        import optuna

        self._interrupted.add(number)
        _storage.queue_interrupted(self._study, self._asked[number][0])
        self._tell(number, state=optuna.trial.TrialState.FAIL)

    def _adopt_previous(self, study: Any, session: SearchSession) -> None:
        """Keep the detailed records a previous run of this study saved in output_dir."""
        trials = study.get_trials(deepcopy=False)  # study.trials deep-copies every trial at each read
        if not trials:
            return
        numbers = {str(t.number) for t in trials}
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
