"""What a backend adapter is: convert the space, drive the engine's loop, translate its events into records.

Everything else (parameter application, objectives, the reporting callback, failure and budget rules, output
layout, results) is shared: an adapter hands each trial with the `TrialSettings` to ``run_trial`` where the
engine runs it, and gives the `TrialRecord` that comes back to the `SearchSession` unchanged.
"""

from __future__ import annotations

import abc
import dataclasses
import difflib
import functools
import importlib.metadata
import importlib.util
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from .._redact import redact
from ..errors import BackendNotAvailable, SearchConfigError
from ..settings import COMMON_OPTIONS, Option
from ..trial import NullReporter, TrialReporter

if TYPE_CHECKING:
    from spaces import SearchSpace

    from ..executor import Executor
    from ..session import SearchSession
    from ..settings import TrialSettings
    from ..trial import Trial, TrialRecord

__all__ = ["SEARCH_PARAMETERS", "NullReporter", "Option", "SearchBackend", "TrialReporter"]

#: `hyperparameter_search`'s own parameters (a misspelt one arrives among the backend's keyword arguments).
SEARCH_PARAMETERS = (
    "hp_space",
    "compute_objective",
    "n_trials",
    "direction",
    "backend",
    "hp_name",
    "dashboard",
    "dashboard_port",
    "on_trial_end",
)


class SearchBackend(abc.ABC):
    """Base of every backend adapter (registered by name in `hpsearch.backends`).

    `hyperparameter_search` calls, in order:

    - `is_available` (class): when picking a backend; `check_options` (class): before anything else, an
      unknown keyword argument is an error naming the accepted ones;
    - ``__init__(settings, options, trial_workers=...)``; `resolve_space` (a portable space is converted with
      `convert_space`, abstract, and kept in the adapter's settings; a native one is checked); `validate` (optional:
      backend-specific checks, before any trial); `prepare` (the warm start, once the settings are final);
      `describe` (the settings worth saving with the results, no secrets);
    - `run`: the shared loop (`hpsearch._search_loop`), which calls `start` once, then `ask` for each trial,
      `reporter` for its evaluations, `tell` with its record (then records it in the session), `abandon` for a
      trial stopped by Ctrl-C, and `finish` at the end; an engine that owns its loop (Ray Tune) overrides `run`.

    Class-level facts read without running anything: ``options`` (keyword arguments and their types, used by
    the API and the sweep file), `default_space` (the engine's native default space, as transformers spells
    it), `version`, and the sweep hooks `sweep_options` / `existing_run` / `discard_existing_run`.
    """

    #: The name users pass as ``backend=``.
    name: ClassVar[str]
    #: The module the engine is imported as, and what to run to install it.
    requirement: ClassVar[str]
    install_command: ClassVar[str]
    #: The distribution whose version is saved with the results (defaults to ``requirement``).
    distribution: ClassVar[str | None] = None
    #: Keyword arguments `hyperparameter_search` accepts for this backend (besides `COMMON_OPTIONS`).
    options: ClassVar[tuple[Option, ...]] = ()
    #: Whether ``backend=None`` may pick this backend when it is installed.
    auto_select: ClassVar[bool] = True
    #: Whether a rerun of the same search can continue it (``--resume``).
    can_resume: ClassVar[bool] = False
    #: How a call continues an earlier search in its output_dir (named when one is refused), if it can.
    resume_hint: ClassVar[str | None] = None
    #: The ``warm_start_mode`` values the adapter implements (see `hpsearch.warmstart`).
    warm_start_modes: ClassVar[tuple[str, ...]] = ()
    #: Prefixes of the attributes a native ``hp_space(trial)`` written for this backend calls on its trial (Optuna:
    #: ``suggest_``): such a function given to another backend is recognised and named (`call_native_space`).
    trial_api: ClassVar[tuple[str, ...]] = ()
    #: Why ``trial_workers`` cannot be used with this backend (None: its trials run in the driver, so they can run
    #: in worker processes instead).
    trial_workers_refusal: ClassVar[str | None] = None

    # ------------------------------------------------------------------ class-level facts
    @classmethod
    def is_available(cls) -> bool:
        return importlib.util.find_spec(cls.requirement) is not None

    @classmethod
    def ensure_available(cls) -> None:
        if not cls.is_available():
            raise BackendNotAvailable(
                f"The {cls.name} backend needs the {cls.requirement!r} package, which is not installed; run "
                f"`{cls.install_command}`."
            )

    @classmethod
    def option_names(cls) -> frozenset[str]:
        return frozenset(option.name for option in cls.options)

    @classmethod
    def all_options(cls) -> dict[str, Option]:
        """Every option this backend accepts, the common ones first."""
        out = dict(COMMON_OPTIONS)
        out.update({option.name: option for option in cls.options})
        return out

    @classmethod
    def check_options(cls, kwargs: Mapping[str, Any]) -> None:
        """Refuse an unknown keyword argument (naming a close match, or the backend it belongs to) and a value of
        another type than the option declares."""
        unknown = sorted(set(kwargs) - cls.option_names() - set(COMMON_OPTIONS))
        if unknown:
            hints = [hint for hint in map(cls._unknown_hint, unknown) if hint]
            raise SearchConfigError(
                f"Unknown keyword argument(s) {unknown} for backend={cls.name!r}"
                f"{' (' + '; '.join(hints) + ')' if hints else ''}; it accepts {sorted(cls.option_names())} plus "
                f"{', '.join(COMMON_OPTIONS)}.",
                about=unknown[0],
            )
        for option in cls.options:
            if option.name in kwargs:
                option.check(kwargs[option.name])

    @classmethod
    def _unknown_hint(cls, name: str) -> str | None:
        from . import backend_names, get_backend

        close = difflib.get_close_matches(
            name, [*cls.option_names(), *COMMON_OPTIONS, *SEARCH_PARAMETERS], n=1
        )
        if close:
            return f"did you mean {close[0]!r}?"
        owners = [
            other
            for other in backend_names()
            if other != cls.name and name in get_backend(other).option_names()
        ]
        return f"{name!r} is an option of backend={owners[0]!r}" if owners else None

    @classmethod
    def version(cls) -> str | None:
        return installed_version(cls.distribution or cls.requirement)

    @staticmethod
    def default_space(trial: Any = None) -> Any:
        """The engine's native default space, as transformers defines it (``hp_space=None`` means the portable
        default of `spaces` instead); exported as ``hpsearch.default_hp_space_<name>``."""
        raise NotImplementedError

    @classmethod
    def sweep_options(cls, options: dict[str, Any], *, resume: bool, sweep_name: str) -> dict[str, Any]:
        """A sweep file's options, adjusted for `hpsearch run` (e.g. a stable study name); `--resume` is refused
        by backends that cannot continue a search."""
        if resume and not cls.can_resume:
            raise SearchConfigError(
                f"--resume: the {cls.name} backend cannot resume a search; pass --fresh instead to start over, or use "
                "a backend that can (optuna with a storage, ray, sigopt)."
            )
        if resume and "resume" in cls.option_names():  # a backend whose own option says "continue the search"
            options["resume"] = True
        return options

    @classmethod
    def existing_run(cls, options: Mapping[str, Any]) -> int | None:
        """How many trials an earlier run of these options left in the engine's own store (None: none there)."""
        return None

    @classmethod
    def discard_existing_run(cls, options: Mapping[str, Any]) -> None:
        """Delete what `existing_run` found (only ever on the user's explicit request)."""
        return None

    # ------------------------------------------------------------------ one search
    def __init__(
        self, settings: TrialSettings, options: Mapping[str, Any], *, trial_workers: int | None = None
    ) -> None:
        #: The search's frozen settings; the adapter's own value gains the portable space (`resolve_space`) and what
        #: `validate` maps onto them (e.g. Ray's scope), and is what its trials run with.
        self.settings = settings
        self.kwargs = dict(options)
        #: ``trial_workers`` as given (None: trials run in this process); `validate` may refuse it.
        self.trial_workers = trial_workers
        #: Earlier trials to start from (`hpsearch.warmstart.Prior`), and how: set by `prepare`.
        self.priors: list[Any] = []
        self.warm_start_mode = "inform"

    def prepare(
        self,
        warm_start: Any = None,
        warm_start_mode: str = "inform",
        warm_start_top_k: int = 5,
        warm_start_defaults: Mapping[str, Any] | None = None,
    ) -> None:
        """Once, after `validate` (the settings are final) and before `run`: the earlier searches this one starts
        from (``warm_start``, None for none), loaded as priors; a mode the adapter cannot honour is refused first."""
        if warm_start is None:
            return
        from ..warmstart import load_priors

        self.check_warm_start(warm_start_mode)
        self.priors = load_priors(
            warm_start, warm_start_mode, warm_start_top_k, warm_start_defaults or {}, self.settings
        )
        self.warm_start_mode = warm_start_mode

    def replay_trial(self, params: Mapping[str, Any]) -> Any:
        """The native trial handed to ``model_init`` when a finished configuration trains again (re-evaluation,
        `hpsearch.reevaluate`): one whose ``suggest_*`` answer ``params``, for engines whose trials suggest values
        inside ``model_init``; None (the default) where the engine's trials do not."""
        return None

    def check_warm_start(self, mode: str) -> None:
        """Refuse a ``warm_start_mode`` this adapter cannot honour (before any trial)."""
        if mode not in self.warm_start_modes:
            raise SearchConfigError(
                f"warm_start_mode={mode!r} is not supported by backend={self.name!r} (it supports "
                f"{list(self.warm_start_modes) or 'none'}); use another mode or backend.",
                about="warm_start_mode",
            )

    def continues_earlier_run(self) -> bool:
        """Whether these options continue the earlier search whose results are in output_dir (a resume), which
        then adopts them; otherwise a search.json there belongs to another search and is not written over.
        By default, the backend's own ``resume`` option where it declares one."""
        return "resume" in self.option_names() and bool(self.kwargs.get("resume"))

    def processes_per_trial(self) -> int:
        """How many processes train one trial: this process's world size (a launched search) unless the engine
        starts its own per trial."""
        from .._dist import world_size

        return world_size()

    def validate(self) -> None:
        """Backend-specific checks that span several options or need the engine (e.g. a pruner needs evaluations);
        each option alone was checked by its declaration (`check_options`). An adapter that overrides it calls
        ``super().validate()`` first: an option given as None is dropped, so that it means its default."""
        self.kwargs = {name: value for name, value in self.kwargs.items() if value is not None}

    @abc.abstractmethod
    def convert_space(self, space: SearchSpace) -> Any:
        """The backend's native form of a portable space; `SearchConfigError` naming what it cannot express."""

    def resolve_space(self, hp_space: Any) -> tuple[SearchSpace | None, Any]:
        """(portable space or None, native space) for what the user passed (None = the portable default space)."""
        from spaces import SearchSpace, default_space

        if hp_space is None:
            hp_space = default_space()
        if self.is_native_space(hp_space):
            return None, hp_space
        try:
            space = SearchSpace.coerce(hp_space)
        except (TypeError, ValueError) as error:
            raise SearchConfigError(f"hp_space: {error}", about="hp_space") from error
        _check_savable(space)
        self.settings = dataclasses.replace(self.settings, space=space)  # the space is part of the search
        return space, self.convert_space(space)

    def is_native_space(self, hp_space: Any) -> bool:
        return callable(hp_space) and not isinstance(hp_space, Mapping)

    def run(self, session: SearchSession, native_space: Any, executor: Executor) -> None:
        """Run trials until ``session.n_trials`` are done (or the engine stops), recording each in ``session``: the
        shared loop (`hpsearch._search_loop`) asking and telling this adapter, ``executor`` running each trial. An
        engine that owns its loop (Ray Tune) overrides this and hands each trial to ``run_trial`` where it runs it."""
        from .._search_loop import run_search

        run_search(self, session, native_space, executor)

    # ------------------------------------------------------------------ the shared loop's questions
    def start(self, session: SearchSession, native_space: Any) -> int:
        """Open the engine for this search (resume it, warm start it) and return how many trials this run may
        start; called once, on rank 0, before the first `ask`. By default: ``session.n_trials``."""
        return session.n_trials

    def ask(self, session: SearchSession) -> Trial | None:
        """The next trial to train, or None when the engine has nothing more to run. A trial that fails before it
        can train (its ``hp_space`` raised) is told to the engine here, and `hpsearch._search_loop.NotStarted`
        raised with its record. Called on rank 0, one at a time, only while the budget and the session allow."""
        raise NotImplementedError(
            f"{type(self).__name__} runs its own loop (run), or must answer ask and tell"
        )

    def reporter(self, trial: Trial) -> TrialReporter:
        """What ``trial``'s evaluations are reported to (the engine's pruning decision); by default nothing."""
        return NullReporter()

    def tell(self, trial: Trial, record: TrialRecord) -> None:
        """The engine hears how ``trial`` ended (``record`` as `run_trial` produced it); the loop then records it in
        the session. Called on rank 0, one at a time, in the order trials end."""
        raise NotImplementedError(
            f"{type(self).__name__} runs its own loop (run), or must answer ask and tell"
        )

    def abandon(self, trial: Trial, error: BaseException) -> None:  # noqa: B027 - an optional hook
        """``trial`` stopped with ``error`` (Ctrl-C) before the engine was told its end (while it trained, or while
        telling); the error is raised after, and the trial is not recorded. A no-op by default."""

    def finish(self, session: SearchSession, completed: bool) -> None:  # noqa: B027 - an optional hook
        """The loop is over (``completed``), or stopped on an error: the adapter's last word (e.g. the engine's
        final list of trials); the loop saves the results after. A no-op by default."""

    def slots(self, executor: Executor) -> int:
        """How many trials run at once: the backend's own concurrency option where given (e.g. ``n_jobs``, -1:
        one per CPU), else the executor's slots (``trial_workers``)."""
        import os

        for option in self.options:
            if option.concurrency and self.kwargs.get(option.name) is not None:
                value = int(self.kwargs[option.name])
                return (os.cpu_count() or 1) if value == -1 else value
        return executor.slots

    def planned_trials(self, n_trials: int, native_space: Any) -> int:
        """How many trials a search of ``n_trials`` runs when nothing ends it early (what progress lines and
        reports count towards): ``n_trials``, unless the engine multiplies it (Ray Tune runs every
        ``tune.grid_search`` combination once per sample)."""
        return n_trials

    def describe(self) -> dict[str, Any]:
        """The backend settings worth keeping in the results (secrets in URLs masked)."""
        return {k: redact(_describe(v)) for k, v in self.kwargs.items()}


def written_for(error: BaseException) -> tuple[str, str] | None:
    """(backend, attribute) when ``error`` is a native hp_space reaching for another backend's trial API (e.g. an
    AttributeError for ``suggest_float`` on the None that Ray's and SigOpt's native forms are called with)."""
    from . import backend_names, get_backend

    if not isinstance(error, AttributeError):
        return None
    attribute = getattr(error, "name", None) or ""
    for name in backend_names():
        if any(attribute.startswith(prefix) for prefix in get_backend(name).trial_api):
            return name, attribute
    return None


PORTABLE_HINT = (
    "or write the space in the portable form every backend takes: hp_space={'learning_rate': "
    "spaces.Float(1e-6, 1e-4, log=True), 'per_device_train_batch_size': spaces.Categorical([16, 32])} "
    "(spaces.Float, Int, Categorical; see the README's API overview)"
)


def foreign_space_message(error: BaseException, backend: str) -> str | None:
    """What to say when a native hp_space written for another backend fails on ``backend``, or None."""
    found = written_for(error)
    if found is None or found[0] == backend:
        return None
    other, attribute = found
    return (
        f"hp_space is a function written for backend={other!r} (it calls trial.{attribute}, {other}'s trial API), "
        f"but this search runs on backend={backend!r}, which has no such trial. Run it with backend={other!r}, "
        f"{PORTABLE_HINT}."
    )


def call_native_space(hp_space: Any, backend: str) -> Any:
    """``hp_space(None)``: a native space in the form of Ray or SigOpt; one written for another backend's trial
    (``trial.suggest_float`` of Optuna's) is refused naming that backend and the portable form, not with the
    AttributeError the user's function raised."""
    try:
        return hp_space(None)
    except Exception as error:
        message = foreign_space_message(error, backend)
        if message is not None:
            raise SearchConfigError(message) from error
        raise


def _check_savable(space: SearchSpace) -> None:
    """Every parameter of a portable space must be plain data: the space is saved with the results (search.json),
    so one that cannot be written is refused now, before the output folder is created."""
    from spaces import Fixed

    from . import backend_names, get_backend

    for name in space:
        domain = space[name]
        try:
            domain.to_dict()
        except TypeError as error:
            value = domain.value if isinstance(domain, Fixed) else None
            engine = type(value).__module__.split(".")[0]
            if engine in {get_backend(other).requirement for other in backend_names()}:
                # An engine's own object (e.g. a distribution) in a portable dict is read as a fixed value.
                raise SearchConfigError(
                    f"hp_space[{name!r}]={value!r} is a native {engine} object ({type(value).__name__}), not a "
                    "spaces domain, so a portable hp_space would hold it as one fixed value; write it as a spaces "
                    f"domain (spaces.Float, Int or Categorical), or give the whole hp_space in {engine}'s own form "
                    "(e.g. a callable hp_space(trial)).",
                    about=("hp_space", name),
                ) from None
            raise SearchConfigError(
                f"hp_space[{name!r}] cannot be saved with the results (search.json): {error}",
                about=("hp_space", name),
            ) from None


def _describe(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_describe(v) for v in value]
    return type(value).__name__


@functools.cache
def installed_version(distribution: str) -> str | None:
    """The installed version of ``distribution``, None when it is not installed; looked up once per process.

    Every search records the versions it ran with, and ``importlib.metadata.version`` searches sys.path and parses the
    package's metadata at each call (~1 ms a package).
    """
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
