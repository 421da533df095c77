"""Optuna adapter: a study (in memory, SQLite/PostgreSQL or a journal file) drives the trials.

Portable domains map to Optuna distributions with the same inclusive bounds (`FloatDistribution`,
`IntDistribution`, `CategoricalDistribution`); categorical choices Optuna cannot store (tuples, other
hashables) are suggested by index and mapped back. Conditional parameters are simply not suggested when
inactive (define-by-run). ``n_trials`` is the study's budget: a study loaded from storage runs only the
trials it still lacks, so a rerun after a crash completes the search without repeating finished trials.

Crashes and several workers. A storage URL gets an `RDBStorage` with Optuna's heartbeat: a trial whose driver
stopped beating for `GRACE_PERIOD` seconds is failed and its parameters are re-enqueued once. Every trial also
carries its driver's ``host:pid`` (user attr ``hpsearch_owner``), so a rerun on the same machine fails and
re-enqueues a dead driver's trial at once, on any storage (journal files have no heartbeat). The budget counts
every trial of the study except a failed trial that was re-enqueued (its retry takes its place) and is claimed
by trial number, which the storage hands out in order: the trial numbered past the budget is not trained, so
workers sharing one study stop at exactly ``n_trials`` however they race (a worker that loses the race leaves
one empty FAIL trial marked ``hpsearch_over_budget``, which the budget and the results ignore).
"""

from __future__ import annotations

import logging
import os
import socket
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, cast

from ..errors import SearchConfigError, TrialFailed
from ..runner import check_param_names, run_trial
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

#: Optuna heartbeat of storages built from a URL (seconds): a trial whose driver has not beaten for
#: GRACE_PERIOD is failed by the next driver that starts a trial, and re-enqueued once.
HEARTBEAT_INTERVAL = 10
GRACE_PERIOD = 20
_OWNER_ATTR = "hpsearch_owner"
_OVER_BUDGET_ATTR = "hpsearch_over_budget"
#: What a finished trial leaves for `_translate` (name, checkpoint, node, error, last_step), as one JSON user
#: attr: one storage transaction per trial instead of one per field. Studies written before this kept each
#: field in its own ``hpsearch_<field>`` attr; `_translate` reads both.
_RECORD_ATTR = "hpsearch"
_RECORD_FIELDS = ("name", "checkpoint", "node", "error", "last_step")


class _Failed(TrialFailed):
    pass


class _OverBudget(_Failed):
    """The trial was numbered past the budget because another worker claimed the last slot first."""


def _study_directions(directions: list[str]) -> list[Literal["minimize", "maximize"]]:
    """``directions`` typed the way ``optuna.create_study`` declares them.

    api._directions already normalised every entry to "minimize" or "maximize"; only the static type is narrowed.
    """
    return cast('list[Literal["minimize", "maximize"]]', directions)


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _owner_is_dead(owner: Any) -> bool:
    """True only for a driver process of this machine that no longer exists (other hosts: unknown)."""
    if not isinstance(owner, str) or ":" not in owner:
        return False
    host, _, pid_text = owner.rpartition(":")
    if host != socket.gethostname() or not pid_text.isdigit() or int(pid_text) == os.getpid():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists but belongs to someone else
        return False
    return False


def _saved_fields(user_attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The record fields a trial's driver saved: the one ``hpsearch`` attr, or the older one-attr-per-field form."""
    saved = user_attrs.get(_RECORD_ATTR)
    out = {key: user_attrs[f"hpsearch_{key}"] for key in _RECORD_FIELDS if f"hpsearch_{key}" in user_attrs}
    if isinstance(saved, dict):
        out.update(saved)
    return out


def _retried_numbers(trials: list[Any]) -> set[int]:
    """Numbers of failed trials that were re-enqueued (by the heartbeat or by `_recover_dead_drivers`)."""
    out: set[int] = set()
    for t in trials:
        out.update(t.system_attrs.get("retry_history", ()))
    return out


def _budget_trials(trials: list[Any]) -> list[Any]:
    """The trials that use the budget: all but re-enqueued failures and the empty over-budget ones."""
    import optuna

    retried = _retried_numbers(trials)
    return [
        t for t in trials
        if not t.user_attrs.get(_OVER_BUDGET_ATTR)
        and not (t.state == optuna.trial.TrialState.FAIL and t.number in retried)
    ]


def _retry_callback() -> Any:
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=1)


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
        self._interrupted: set[int] = set()

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
            self._check_storage_url(storage, self.ctx.output_dir)
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
    def _check_storage_url(url: str, output_dir: str) -> None:
        def missing(folder: str) -> bool:
            # output_dir itself is created before the storage is opened.
            return not os.path.isdir(folder) and os.path.abspath(folder) != os.path.abspath(output_dir)

        if url.endswith(_JOURNAL_SUFFIXES) and "://" not in url:
            parent = os.path.dirname(os.path.abspath(url))
            if missing(parent):
                raise SearchConfigError(f"storage journal file {url!r}: folder {parent!r} does not exist; create it.")
            return
        scheme = url.split("://", 1)[0].split("+", 1)[0] if "://" in url else ""
        if scheme not in _RDB_SCHEMES:
            raise SearchConfigError(
                f"storage={redact_url(url)!r} is not a database URL or journal file; use e.g. "
                "'sqlite:///study.db', 'postgresql://user@host/db' or a path ending in .log."
            )
        # Parse it now: a malformed URL (a port that is not a number, ...) must fail before anything is written.
        import sqlalchemy.engine

        try:
            parsed = sqlalchemy.engine.make_url(url)
            parsed.port  # noqa: B018 - parsing the port is lazy in some versions
        except Exception as error:
            raise SearchConfigError(
                f"storage={redact_url(url)!r} is not a valid database URL ({type(error).__name__}); write it as "
                "'dialect+driver://user:password@host:port/database', e.g. 'postgresql+psycopg2://me:pw@127.0.0.1:5432/db'."
            ) from None
        if scheme == "sqlite" and parsed.database not in (None, "", ":memory:"):
            parent = os.path.dirname(os.path.abspath(parsed.database))
            if missing(parent):
                raise SearchConfigError(
                    f"storage={url!r}: folder {parent!r} of the SQLite file does not exist; create it or use another path."
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

    def resolve_space(self, hp_space: Any) -> tuple[SearchSpace | None, Any]:
        space, native_space = super().resolve_space(hp_space)
        if space is None:
            self._probe_native_space(native_space)
        return space, native_space

    def _probe_native_space(self, native_space: Any) -> None:
        """Call a native ``hp_space(trial)`` once on a throw-away trial, so a broken one fails before any storage
        or folder is created (it only suggests values; nothing is trained)."""
        import optuna

        verbosity = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "new study created in memory" line
        try:
            probe = optuna.create_study(directions=_study_directions(self.ctx.directions)).ask()
        finally:
            optuna.logging.set_verbosity(verbosity)
        trial = Trial("probe", 0, {}, "optuna", native=probe)
        try:
            self._native_params(trial, native_space)
        except SearchConfigError:
            raise
        except Exception as error:
            raise SearchConfigError(
                f"hp_space(trial) raised {type(error).__name__}: {error} when called with an Optuna trial; "
                "hp_space must only call trial.suggest_* and return a dict of the values."
            ) from error

    def _native_params(self, trial: Trial, native_space: Any) -> dict[str, Any]:
        params = native_space(trial)
        if not isinstance(params, Mapping):
            raise SearchConfigError(
                f"hp_space(trial) must return a dict of parameter values, got {type(params).__name__}: {params!r}."
            )
        check_param_names(params, self.ctx.trainer)
        return {**trial.params, **params}

    # ------------------------------------------------------------------ run
    def _storage(self) -> Any:
        import optuna

        storage = self.kwargs.get("storage")
        if isinstance(storage, str) and "://" not in storage:
            from optuna.storages.journal import JournalFileBackend

            return optuna.storages.JournalStorage(JournalFileBackend(storage))
        if isinstance(storage, str):
            # Optuna marks heartbeat_interval experimental; the warning would repeat in every run.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    storage,
                    heartbeat_interval=HEARTBEAT_INTERVAL,
                    grace_period=GRACE_PERIOD,
                    heartbeat_stale_trial_callback=_retry_callback(),
                )
        return storage

    @staticmethod
    def _recover_dead_drivers(study: Any) -> None:
        """Fail the RUNNING trials of drivers that died, and re-enqueue their parameters once.

        Heartbeat storages do this themselves once GRACE_PERIOD has passed; a driver of this machine whose
        process is gone is certainly dead, so its trials are recovered now, on every storage.
        """
        import optuna

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(study)
        retry = _retry_callback()
        for frozen in study.get_trials(deepcopy=True, states=(optuna.trial.TrialState.RUNNING,)):
            if not _owner_is_dead(frozen.user_attrs.get(_OWNER_ATTR)):
                continue
            try:
                study.tell(frozen.number, state=optuna.trial.TrialState.FAIL)
            except (ValueError, RuntimeError, optuna.exceptions.UpdateFinishedTrialError):
                continue  # another driver recovered it first
            logger.warning("Trial %d was left RUNNING by a driver that died (%s); marked FAIL and re-enqueued.",
                           frozen.number, frozen.user_attrs[_OWNER_ATTR])
            retry(study, frozen)

    def run(self, n_trials: int, space: SearchSpace | None, native_space: Any) -> SearchResult:
        import optuna

        from .. import _dist

        ctx = self.ctx
        if not _dist.is_main_process():
            return self._follow(space)
        directions = ctx.directions
        study = optuna.create_study(
            directions=_study_directions(directions),
            sampler=self.kwargs.get("sampler"),
            pruner=self.kwargs.get("pruner"),
            storage=self._storage(),
            study_name=self.kwargs.get("study_name"),
            load_if_exists=bool(self.kwargs.get("load_if_exists", False)),
        )
        assert ctx.result is not None
        ctx.result.native = study
        self._recover_dead_drivers(study)
        self._adopt_previous(study)
        # Running trials count too (other workers' trials). Waiting ones (retries) do not: running one takes one of
        # this call's optimize iterations, like a new trial would.
        waiting = optuna.trial.TrialState.WAITING
        done = len([t for t in _budget_trials(study.get_trials(deepcopy=False)) if t.state != waiting])
        remaining = max(n_trials - done, 0)
        if done:
            logger.info("Study %r already has %d trials; running %d more.", study.study_name, done, remaining)
        multi = len(directions) > 1

        def within_budget(optuna_trial: Any) -> bool:
            # Trial numbers are handed out in order by the storage, so "the budget trials numbered below mine"
            # is the same answer for every worker: exactly n_trials trials pass, whatever the race.
            if optuna_trial.number < n_trials:
                return True  # fewer trials than that are numbered below it: no need to read them all
            below = [t for t in study.get_trials(deepcopy=False) if t.number < optuna_trial.number]
            return len(_budget_trials(below)) < n_trials

        def stop_at_budget(study_: Any, frozen: Any) -> None:
            # Reading the study costs a storage round trip per trial, so only when the budget can be full: the
            # trials numbered up to this one are fewer than n_trials otherwise. Trials numbered above it (other
            # workers') may still fill it; then this worker's next trial is numbered past the budget and
            # `within_budget` stops it untrained (one empty over-budget trial instead of a read per trial).
            if frozen.number + 1 < n_trials:
                return
            if len(_budget_trials(study_.get_trials(deepcopy=False))) >= n_trials:
                study_.stop()

        def objective(optuna_trial: Any) -> Any:
            if not within_budget(optuna_trial):
                optuna_trial.set_user_attr(_OVER_BUDGET_ATTR, True)
                optuna_trial.study.stop()
                raise _OverBudget(f"the study already has its {n_trials} trials")
            optuna_trial.set_user_attr(_OWNER_ATTR, _owner())
            trial = Trial(optuna_trial.number, optuna_trial.number, {}, "optuna", native=optuna_trial)
            if _dist.world_size() > 1:
                trial._suggest_hook = _leader_suggest
            if space is not None:
                trial.params = self._sample(optuna_trial, space, native_space)
            else:
                trial.params = self._native_params(trial, native_space)
            _dist.broadcast_object(("trial", trial.id, trial.number, trial.params))
            try:
                record = run_trial(ctx, trial, _OptunaReporter(optuna_trial, multi))
            except KeyboardInterrupt:
                # Not a finished trial: it stays out of the results (Optuna itself marks it FAIL).
                self._interrupted.add(optuna_trial.number)
                raise
            fields = {key: getattr(record, key) for key in _RECORD_FIELDS}
            optuna_trial.set_user_attr(_RECORD_ATTR, {k: v for k, v in fields.items() if v is not None})
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
                    callbacks=[*(self.kwargs.get("callbacks") or ()), stop_at_budget],
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
        trials = study.get_trials(deepcopy=False)
        retries = {t.system_attrs["failed_trial"]: t.number for t in trials if "failed_trial" in t.system_attrs}
        for frozen in trials:
            if frozen.user_attrs.get(_OVER_BUDGET_ATTR) or frozen.number in self._interrupted:
                continue
            trial_id = str(frozen.number)
            record = known.get(trial_id)
            if record is None:
                from ..trial import Evaluation

                attrs = frozen.user_attrs
                saved = _saved_fields(attrs)
                values = frozen.values
                objective = (values[0] if len(values) == 1 else list(values)) if values else None
                record = TrialRecord(
                    trial_id=trial_id,
                    number=frozen.number,
                    name=saved.get("name", f"run-{trial_id}"),
                    state=states[frozen.state],
                    params={k: self._choice_maps[k][v] if k in self._choice_maps else v
                            for k, v in frozen.params.items()},
                    objective=objective,
                    started=frozen.datetime_start,
                    finished=frozen.datetime_complete,
                    intermediates=[Evaluation(step=s, epoch=None, objective=v)
                                   for s, v in sorted(frozen.intermediate_values.items())],
                    last_step=saved.get("last_step"),
                    checkpoint=saved.get("checkpoint"),
                    node=saved.get("node"),
                    error=saved.get("error"),
                )
                if record.state is TrialState.FAIL and record.error is None and frozen.number in retries:
                    record.error = (f"its driver process died while it ran; re-enqueued with the same parameters "
                                    f"as trial {retries[frozen.number]}")
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
