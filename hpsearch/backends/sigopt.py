"""SigOpt adapter: an experiment (in memory through the ``lite`` driver, or on a SigOpt server) drives the trials.

Drivers. ``driver="lite"`` runs SigOpt's own optimizer (``sigoptlite``) in this process, with no server and no
account; it is the default when ``SIGOPT_API_TOKEN`` is not set. ``driver="http"`` (the default when the token
is set) talks to the hosted API or to a self-hosted sigopt-server named by ``SIGOPT_API_URL``. The token is read
by the sigopt client itself from the environment: this module never reads, logs or saves it.

Space conversion (bounds inclusive on both sides, as in `spaces` and in SigOpt):

- ``Float`` -> ``double`` (``log=True`` -> ``"transformation": "log"``);
- ``Int`` -> ``int``; ``Int(log=True)`` is refused (SigOpt has no log transform for ints: use
  ``Float(log=True)`` and round it in ``model_init``);
- a ``step`` (``Float`` or ``Int``) is *emulated*: SigOpt searches the grid index ``k`` as an ``int`` in
  ``[0, n]`` and the trial gets ``low + k * step``; in SigOpt's own view that parameter shows the index;
- ``Categorical`` -> ``categorical`` with string labels (``str(value)``, or ``"i:repr(value)"`` where two
  values would print alike), mapped back to the original Python values; a single choice is a constant;
- ``Fixed`` is not sent to SigOpt; it is inserted into the trial's parameters;
- conditions: a ``Categorical`` that other parameters depend on becomes a SigOpt *conditional* (its value is
  still suggested and given to the trial) and each dependent parameter gets ``conditions``. SigOpt's
  conditionals cannot themselves be conditional and only take string values, so a parent must be an
  unconditional ``Categorical`` (a ``Fixed`` parent is resolved here, once).

A native ``hp_space`` is the Hugging Face form: a callable returning the list of SigOpt parameter dicts (or
that list itself). Its assignments are given to the trial as SigOpt returns them, except that a categorical
string naming an ``int``/``float`` field of ``TrainingArguments`` (``per_device_train_batch_size: "32"``) is
converted to that type, and transformers' misspelled ``"transformamtion"`` key is corrected.

SigOpt has no pruning: intermediate objectives are only recorded. The final objective of a trial is sent as
an observation; a failed trial is sent as ``failed=True``. One or two objectives (two are SigOpt's
multimetric mode, which needs ``observation_budget``); the best trial(s) come from our own records, marked
with ``extra["sigopt_best"]`` where SigOpt's ``best_assignments`` agree.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import logging
import math
import os
import threading
import types
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import HPSearchError, SearchConfigError
from ..runner import _field_types, check_param_names, run_trial
from ..trial import Trial, TrialRecord, TrialState
from .base import SearchBackend

if TYPE_CHECKING:
    from spaces import SearchSpace

    from ..results import SearchResult

__all__ = ["SigOptBackend"]

logger = logging.getLogger(__name__)

_DRIVERS = ("lite", "http")
_NATIVE_TYPES = ("double", "int", "categorical")
_MAX_NAME = 100  # SigOpt's limit on experiment, parameter and categorical value names
_MAX_OBJECTIVES = 2


# ---------------------------------------------------------------------------------------------- numpy 2
class _NumpyWithProduct(types.ModuleType):
    """numpy as seen by two sigoptlite/libsigopt modules: everything forwarded, plus the removed `product`."""

    def __getattr__(self, name: str) -> Any:
        import numpy

        if name == "product":
            return numpy.prod
        return getattr(numpy, name)


def _numpy2_compat() -> None:
    """Let sigoptlite 0.1.2 / libsigopt 1.0.0 (written for numpy<1.23) run on numpy 2.

    They call ``numpy.product``, removed in numpy 2.0: sigoptlite when it validates conditionals, libsigopt
    for failure probabilities. Only those two modules get a numpy view with ``product`` restored; numpy
    itself is left untouched.
    """
    import importlib

    for module_name in ("sigoptlite.validators", "libsigopt.compute.probabilistic_failures"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        numpy_ref = getattr(module, "numpy", None)
        stale = isinstance(numpy_ref, types.ModuleType) and not hasattr(numpy_ref, "product")
        if stale and not isinstance(numpy_ref, _NumpyWithProduct):
            # ModuleType declares no ``numpy`` attribute, but these modules do have one (checked above).
            module.numpy = _NumpyWithProduct("numpy")  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------- space
class _Encoding:
    """How one portable parameter travels through SigOpt and back."""

    def __init__(self, kind: str, labels: dict[str, Any] | None = None, low: float = 0.0,
                 step: float | None = None, high: float = 0.0, constant: Any = None) -> None:
        self.kind = kind  # "float", "int", "grid_float", "grid_int", "categorical", "constant"
        self.labels = labels or {}
        self.low = low
        self.step = step
        self.high = high
        self.constant = constant

    def decode(self, name: str, raw: Any) -> Any:
        if self.kind == "float":
            return float(raw)
        if self.kind == "int":
            return int(raw)
        if self.kind in ("grid_int", "grid_float"):
            k = int(raw)
            assert self.step is not None
            if self.kind == "grid_int":
                return int(self.low) + k * int(self.step)
            n = round((self.high - self.low) / self.step)
            # The last grid point is `high` itself: low + n * step can overshoot it by rounding.
            return self.high if k >= n else min(self.low + k * self.step, self.high)
        if self.kind == "categorical":
            try:
                return self.labels[str(raw)]
            except KeyError:
                raise HPSearchError(
                    f"SigOpt suggested {name}={raw!r}, which is not one of its categorical values "
                    f"{sorted(self.labels)}."
                ) from None
        return self.constant


def _labels(name: str, choices: Sequence[Any]) -> dict[str, Any]:
    """Unique, readable SigOpt strings for categorical choices -> the original Python values."""
    plain = [str(c) for c in choices]
    counts: dict[str, int] = {}
    for text in plain:
        counts[text] = counts.get(text, 0) + 1
    out: dict[str, Any] = {}
    for i, (text, choice) in enumerate(zip(plain, choices)):
        # 1 and "1" (or True and "True") print alike: give those the position as well.
        if counts[text] > 1 or not text or len(text) > _MAX_NAME:
            text = f"{i}:{choice!r}"[:_MAX_NAME]
        out[text] = choice
    if len(out) != len(choices):  # cannot happen with the position prefix, but never map two values to one
        raise SearchConfigError(f"hp_space parameter {name!r}: could not label its choices {list(choices)!r}.")
    return out


def _label_of(labels: Mapping[str, Any], value: Any) -> str:
    from spaces._domains import _same_value

    for text, choice in labels.items():
        if _same_value(choice, value):
            return text
    raise KeyError(value)


class _Converted:
    """The SigOpt form of a portable space: parameters, conditionals, and how to read an assignment back."""

    def __init__(self, parameters: list[dict[str, Any]], conditionals: list[dict[str, Any]],
                 encodings: dict[str, _Encoding]) -> None:
        self.parameters = parameters
        self.conditionals = conditionals
        self.encodings = encodings


def _portable_to_sigopt(space: SearchSpace) -> _Converted:
    from spaces import Categorical, Fixed, Float, Int

    encodings: dict[str, _Encoding] = {}
    parents = {parent for name in space for parent in (space[name].when or {})}

    # Parents first: a parent's labels are needed to write its children's conditions.
    conditionals: list[dict[str, Any]] = []
    for name in space.order:
        if name not in parents:
            continue
        domain = space[name]
        if isinstance(domain, Fixed):
            continue  # resolved below, once, for every child
        if not isinstance(domain, Categorical):
            raise SearchConfigError(
                f"hp_space parameter {name!r} ({domain!r}) has conditional parameters, but SigOpt conditionals "
                f"take only string values chosen from a list; make {name!r} a spaces.Categorical of its values."
            )
        if domain.when:
            raise SearchConfigError(
                f"hp_space parameter {name!r} is itself conditional ({dict(domain.when)!r}) and has conditional "
                "parameters; SigOpt conditionals cannot be nested. Flatten the conditions (e.g. one Categorical "
                "whose values combine both choices)."
            )
        labels = _labels(name, domain.choices)
        encodings[name] = _Encoding("categorical", labels)
        conditionals.append({"name": name, "values": list(labels)})

    parameters: list[dict[str, Any]] = []
    for name in space.order:
        domain = space[name]
        if name in parents and not isinstance(domain, Fixed):
            continue  # already a conditional
        conditions: dict[str, list[str]] = {}
        for parent, allowed in (domain.when or {}).items():
            parent_domain = space[parent]
            if isinstance(parent_domain, Fixed):
                continue  # the space only accepts the fixed value itself in `when`: always met
            labels = encodings[parent].labels
            conditions[parent] = [_label_of(labels, v) for v in allowed]
        spec: dict[str, Any] = {"name": name}
        if isinstance(domain, Fixed):
            encodings[name] = _Encoding("constant", constant=domain.value)
            continue
        if isinstance(domain, Categorical) and len(domain.choices) == 1:
            encodings[name] = _Encoding("constant", constant=domain.choices[0])
            continue
        if isinstance(domain, Float):
            if domain.step is not None:
                n = round((domain.high - domain.low) / domain.step)
                spec.update(type="int", bounds={"min": 0, "max": n})
                encodings[name] = _Encoding("grid_float", low=domain.low, step=domain.step, high=domain.high)
            else:
                spec.update(type="double", bounds={"min": domain.low, "max": domain.high})
                if domain.log:
                    spec["transformation"] = "log"
                encodings[name] = _Encoding("float")
        elif isinstance(domain, Int):
            if domain.log:
                raise SearchConfigError(
                    f"hp_space parameter {name!r} is {domain!r}, but SigOpt has no log scale for integers; use "
                    f"spaces.Float({domain.low}, {domain.high}, log=True) and round it in model_init "
                    "(int(round(trial[name]))), or drop log=True."
                )
            if domain.step != 1:
                n = (domain.high - domain.low) // domain.step
                spec.update(type="int", bounds={"min": 0, "max": n})
                encodings[name] = _Encoding("grid_int", low=domain.low, step=domain.step, high=domain.high)
            else:
                spec.update(type="int", bounds={"min": domain.low, "max": domain.high})
                encodings[name] = _Encoding("int")
        elif isinstance(domain, Categorical):
            labels = _labels(name, domain.choices)
            spec.update(type="categorical", categorical_values=[{"name": text} for text in labels])
            encodings[name] = _Encoding("categorical", labels)
        else:
            raise SearchConfigError(f"hp_space parameter {name!r}: SigOpt cannot express {domain!r}.")
        if conditions:
            spec["conditions"] = conditions
        if len(name) > _MAX_NAME:
            raise SearchConfigError(
                f"hp_space parameter name {name[:40]!r}... is {len(name)} characters; SigOpt accepts at most "
                f"{_MAX_NAME}; shorten it."
            )
        parameters.append(spec)

    if not parameters and not conditionals:
        raise SearchConfigError(
            "hp_space has nothing for SigOpt to search (every parameter is fixed); add at least one Float, Int "
            "or Categorical with two or more choices."
        )
    if not parameters:
        raise SearchConfigError(
            f"hp_space has only the categorical(s) {[c['name'] for c in conditionals]} that other parameters "
            "depend on, and SigOpt needs at least one parameter besides its conditionals; add one."
        )
    _check_conditionals_covered(parameters, conditionals)
    return _Converted(parameters, conditionals, encodings)


def _check_conditionals_covered(parameters: list[dict[str, Any]], conditionals: list[dict[str, Any]]) -> None:
    """SigOpt wants every combination of conditional values to leave at least one parameter active."""
    if not conditionals or any("conditions" not in p for p in parameters):
        return
    names = [c["name"] for c in conditionals]
    for combination in itertools.product(*(c["values"] for c in conditionals)):
        chosen = dict(zip(names, combination))
        if not any(all(chosen[k] in v for k, v in p["conditions"].items()) for p in parameters):
            raise SearchConfigError(
                f"hp_space: when {chosen} no parameter is active, which SigOpt refuses (every combination of "
                "conditional values needs at least one parameter); add an unconditional parameter or a "
                "parameter for that case."
            )


# ---------------------------------------------------------------------------------------------- reporter
class _RecordingReporter:
    """SigOpt has no pruning: evaluations are recorded (by the callback, in the trial's record) and go on."""

    def __init__(self) -> None:
        self.reports = 0

    def report(self, objective: Any, step: int, metrics: Mapping[str, float], checkpoint: str | None) -> bool:
        self.reports += 1
        return False


# ---------------------------------------------------------------------------------------------- backend
class SigOptBackend(SearchBackend):
    name = "sigopt"
    requirement = "sigopt"
    install_command = (
        "make setup (or: pip install 'hpsearch[sigopt]' && pip install --no-deps sigoptlite libsigopt qmcpy==1.2)"
    )
    accepted_kwargs = frozenset({"driver", "proxies", "name", "observation_budget", "parallel_bandwidth"})

    def __init__(self, ctx, kwargs) -> None:
        super().__init__(ctx, kwargs)
        self._converted: _Converted | None = None
        self._native_fields: dict[str, Any] = {}
        self._assignments: dict[str, dict[str, Any]] = {}
        self._metric_names: list[str] = ["objective"]
        self._random_state: Any = None
        driver = self.kwargs.get("driver")
        # The token decides the default, but its value is never read here: the sigopt client reads it.
        self.driver = driver if driver is not None else ("http" if os.environ.get("SIGOPT_API_TOKEN") else "lite")

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        kw = self.kwargs
        ctx = self.ctx
        if self.driver not in _DRIVERS:
            raise SearchConfigError(
                f"driver={self.driver!r} is not a SigOpt driver; use 'lite' (in-process, no account) or 'http' "
                "(the hosted API or a self-hosted server; needs SIGOPT_API_TOKEN)."
            )
        if ctx.n_objectives > _MAX_OBJECTIVES:
            raise SearchConfigError(
                f"direction={ctx.directions}: SigOpt optimizes at most {_MAX_OBJECTIVES} metrics at once (its "
                "multimetric mode gives a two-dimensional Pareto front); combine objectives in compute_objective "
                "so that it returns one or two values, or use backend='optuna' for more."
            )
        proxies = kw.get("proxies")
        if proxies is not None:
            if not isinstance(proxies, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in proxies.items()
            ):
                raise SearchConfigError(
                    "proxies must be a dict of scheme -> proxy URL such as {'https': 'http://proxy:3128'}, got "
                    f"{type(proxies).__name__}."
                )
            if self.driver == "lite":
                raise SearchConfigError(
                    "proxies are for driver='http' (a SigOpt server); the lite driver runs in this process and "
                    "makes no requests. Drop proxies or pass driver='http'."
                )
        name = kw.get("name")
        if name is not None and (not isinstance(name, str) or not name.strip() or len(name) > _MAX_NAME):
            raise SearchConfigError(f"name must be a non-empty string of at most {_MAX_NAME} characters, got {name!r}.")
        budget = kw.get("observation_budget")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise SearchConfigError(
                f"observation_budget must be a positive integer (default: n_trials), got {budget!r}."
            )
        bandwidth = kw.get("parallel_bandwidth", 1)
        if isinstance(bandwidth, bool) or not isinstance(bandwidth, int) or bandwidth < 1:
            raise SearchConfigError(f"parallel_bandwidth must be a positive integer, got {bandwidth!r}.")
        if bandwidth > 1 and self.driver == "lite":
            raise SearchConfigError(
                f"parallel_bandwidth={bandwidth}: the lite driver suggests one trial at a time; use "
                "parallel_bandwidth=1, or driver='http' with a SigOpt server to run trials concurrently."
            )
        accumulation = ctx.trainer.args.gradient_accumulation_steps
        if bandwidth > 1 and accumulation > 1:
            raise SearchConfigError(
                f"parallel_bandwidth={bandwidth} runs trials in threads, and accelerate keeps gradient-accumulation "
                f"state per process, so concurrent trials would corrupt each other with "
                f"gradient_accumulation_steps={accumulation}; use parallel_bandwidth=1."
            )
        # Building the connection checks the driver now (lite installed; http has its token) without any request.
        self._connect()

    def settings(self) -> dict[str, Any]:
        out = super().settings()  # proxies are saved as their type name only: a proxy URL may hold a password
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
                    f"driver='lite' needs sigoptlite, which is not installed ({error}); run `{self.install_command}`."
                ) from error
            _numpy2_compat()
            return sigopt.Connection(driver="lite")
        try:
            return sigopt.Connection(driver="http", proxies=self.kwargs.get("proxies"))
        except ValueError as error:
            # The client's own message names the missing token; it never contains one.
            raise SearchConfigError(
                f"driver='http' could not connect: {error}. Set SIGOPT_API_TOKEN (and SIGOPT_API_URL for a "
                "self-hosted sigopt-server) in the environment, or use driver='lite'."
            ) from error

    # ------------------------------------------------------------------ space
    def convert_space(self, space: SearchSpace) -> list[dict[str, Any]]:
        """SigOpt's parameter list for a portable space (conditionals kept for `run`)."""
        self._converted = _portable_to_sigopt(space)
        return self._converted.parameters

    def is_native_space(self, hp_space: Any) -> bool:
        if isinstance(hp_space, list | tuple):
            return True
        return super().is_native_space(hp_space)

    def resolve_space(self, hp_space: Any) -> tuple[SearchSpace | None, Any]:
        space, native = super().resolve_space(hp_space)
        if space is None:
            native = self._check_native(native)
        return space, native

    def _check_native(self, hp_space: Any) -> list[dict[str, Any]]:
        parameters = hp_space(None) if callable(hp_space) else hp_space
        if not isinstance(parameters, list | tuple) or not parameters:
            raise SearchConfigError(
                "a native SigOpt hp_space must be (a callable returning) a non-empty list of SigOpt parameter "
                "dicts such as {'name': 'learning_rate', 'type': 'double', 'bounds': {'min': 1e-6, 'max': 1e-4}}, "
                f"got {type(parameters).__name__}."
            )
        fields = _field_types()
        out: list[dict[str, Any]] = []
        for i, raw in enumerate(parameters):
            if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str) or not raw.get("name"):
                raise SearchConfigError(f"hp_space parameter #{i} must be a dict with a 'name' string, got {raw!r}.")
            spec = dict(raw)
            name = spec["name"]
            if spec.get("type") not in _NATIVE_TYPES:
                raise SearchConfigError(
                    f"hp_space parameter {name!r}: type={spec.get('type')!r} must be one of {list(_NATIVE_TYPES)}."
                )
            if "transformamtion" in spec:  # transformers' default space misspells the key; SigOpt rejects it
                logger.warning("hp_space parameter %r: reading the misspelled key 'transformamtion' as "
                               "'transformation'.", name)
                spec.setdefault("transformation", spec.pop("transformamtion"))
            check_param_names([name], self.ctx.trainer)
            if name in fields and spec["type"] == "categorical":
                target = _numeric_type(fields[name])
                if target is not None:
                    self._native_fields[name] = target
                    for value in spec.get("categorical_values") or []:
                        text = value.get("name") if isinstance(value, Mapping) else value
                        try:
                            target(text)
                        except (TypeError, ValueError):
                            raise SearchConfigError(
                                f"hp_space parameter {name!r} is a TrainingArguments field of type {target.__name__}, but "
                                f"its categorical value {text!r} cannot be read as {target.__name__}; list values "
                                "such as '32'."
                            ) from None
            out.append(spec)
        return out

    # ------------------------------------------------------------------ run
    def _experiment_body(self, n_trials: int, native_space: Any) -> dict[str, Any]:
        ctx = self.ctx
        if ctx.n_objectives == 1:
            metric_names = ["objective"]
        else:
            metric_names = [f"objective_{i}" for i in range(ctx.n_objectives)]
        self._metric_names = metric_names
        body: dict[str, Any] = {
            "name": self.kwargs.get("name") or f"hpsearch {ctx.objective_name}"[:_MAX_NAME],
            "parameters": list(native_space),
            "metrics": [{"name": m, "objective": d} for m, d in zip(metric_names, ctx.directions)],
            "observation_budget": self.kwargs.get("observation_budget") or n_trials,
            "parallel_bandwidth": self.kwargs.get("parallel_bandwidth", 1),
        }
        if self._converted is not None and self._converted.conditionals:
            body["conditionals"] = self._converted.conditionals
        return body

    def run(self, n_trials: int, space: SearchSpace | None, native_space: Any) -> SearchResult:
        from sigopt.exception import SigOptException

        ctx = self.ctx
        assert ctx.result is not None
        conn = self._connect()
        try:
            experiment = conn.experiments().create(**self._experiment_body(n_trials, native_space))
        except SigOptException as error:
            raise SearchConfigError(f"SigOpt refused the experiment: {error}") from error
        ctx.result.native = experiment
        ctx.result.settings["experiment_id"] = str(experiment.id)
        logger.info("SigOpt experiment %s (driver=%s): %d trials.", experiment.id, self.driver, n_trials)

        bandwidth = self.kwargs.get("parallel_bandwidth", 1)
        if bandwidth == 1:
            for number in range(n_trials):
                self._one_trial(conn, experiment.id, number, space)
        else:
            self._run_concurrently(conn, experiment.id, n_trials, bandwidth, space)
        self._mark_best(conn, experiment.id)
        return ctx.result

    def _run_concurrently(self, conn: Any, experiment_id: str, n_trials: int, bandwidth: int,
                          space: SearchSpace | None) -> None:
        """``bandwidth`` workers, each asking SigOpt for a trial as soon as its last one is told (http only)."""
        numbers = iter(range(n_trials))
        lock = threading.Lock()
        stop = threading.Event()

        def worker() -> None:
            while not stop.is_set():
                with lock:
                    number = next(numbers, None)
                if number is None:
                    return
                try:
                    self._one_trial(conn, experiment_id, number, space)
                except BaseException:
                    stop.set()  # the others finish their trial and stop; the error is raised below
                    raise

        with concurrent.futures.ThreadPoolExecutor(max_workers=bandwidth, thread_name_prefix="sigopt") as pool:
            futures = [pool.submit(worker) for _ in range(bandwidth)]
        for future in futures:
            future.result()

    def _one_trial(self, conn: Any, experiment_id: str, number: int, space: SearchSpace | None) -> None:
        ctx = self.ctx
        experiment = conn.experiments(experiment_id)
        with self._optimizer_random_state():
            suggestion = experiment.suggestions().create()
        assignments = dict(suggestion.assignments)
        trial_id = str(suggestion.id)
        self._assignments[trial_id] = assignments
        try:
            params = self._params(assignments, space)
            trial = Trial(trial_id, number, params, "sigopt", native=suggestion)
            record = run_trial(ctx, trial, _RecordingReporter())
        except BaseException:
            self._abandon(experiment, trial_id)
            raise
        try:
            self._observe(experiment, trial_id, record)
        finally:
            ctx.finish(record)

    @contextlib.contextmanager
    def _optimizer_random_state(self) -> Iterator[None]:
        """Run the lite optimizer on a random state of its own.

        sigoptlite draws from numpy's global generator, which every trial's ``set_seed(args.seed)`` resets:
        without this, each suggestion would start from the same state and lite would propose the same
        assignments again and again. The optimizer's state is seeded once from ``args.seed`` (a search is
        repeatable) and swapped in around each suggestion, leaving the trainer's state as it was.
        """
        if self.driver != "lite":
            yield
            return
        import numpy

        if self._random_state is None:
            numpy_state = numpy.random.get_state()
            numpy.random.seed(int(self.ctx.trainer.args.seed) % 2**32)
            self._random_state = numpy.random.get_state()
            numpy.random.set_state(numpy_state)
        trainer_state = numpy.random.get_state()
        numpy.random.set_state(self._random_state)
        try:
            yield
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

    def _observe(self, experiment: Any, trial_id: str, record: TrialRecord) -> None:
        objective = record.objective
        if record.state is TrialState.COMPLETE and objective is not None:
            values = objective if isinstance(objective, list) else [objective]
            experiment.observations().create(
                suggestion=trial_id,
                values=[{"name": m, "value": float(v)} for m, v in zip(self._metric_names, values)],
            )
        else:
            experiment.observations().create(suggestion=trial_id, failed=True)
        record.extra["sigopt_observation"] = "value" if record.state is TrialState.COMPLETE else "failed"

    def _abandon(self, experiment: Any, trial_id: str) -> None:
        """Interrupted: close the open suggestion on a server (lite forgets it with the process)."""
        if self.driver != "http":
            return
        try:
            experiment.suggestions(trial_id).delete()
        except Exception as error:  # the interruption matters more than the clean-up
            logger.warning("Could not delete SigOpt suggestion %s: %s", trial_id, error)

    def _mark_best(self, conn: Any, experiment_id: str) -> None:
        """Mark the records SigOpt's best_assignments point at (matched by assignments: lite gives no id)."""
        ctx = self.ctx
        assert ctx.result is not None
        try:
            best = conn.experiments(experiment_id).best_assignments().fetch()
        except Exception as error:  # the best trial comes from our records anyway
            logger.warning("Could not fetch SigOpt's best assignments: %s", error)
            return
        finished = {r.trial_id: r for r in ctx.result.records if r.state is TrialState.COMPLETE}
        matched: list[str] = []
        for entry in best.iterate_pages():  # every page (a server may page a long Pareto front)
            assignments = dict(entry.assignments)
            for trial_id, record in finished.items():
                if trial_id not in matched and _same_assignments(self._assignments.get(trial_id, {}), assignments):
                    record.extra["sigopt_best"] = True
                    matched.append(trial_id)
                    break
        if matched:
            ctx.result.save(ctx.output_dir)
        ours = ctx.result.best_trial if ctx.n_objectives == 1 else None
        if ours is not None and matched and ours.trial_id not in matched:
            # Ties, or a server that reports best assignments its own way: our records stay the truth.
            logger.info("SigOpt's best assignment (trial %s) differs from the best record (%s).",
                        matched[0], ours.trial_id)


def _same_assignments(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    if set(a) != set(b):
        return False
    for key, x in a.items():
        y = b[key]
        if isinstance(x, float) or isinstance(y, float):
            try:
                if not math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=1e-12):
                    return False
            except (TypeError, ValueError):
                return False
        elif x != y:
            return False
    return True


def _numeric_type(hint: Any) -> type | None:
    """int or float when a TrainingArguments field takes exactly that number type (Optional allowed)."""
    import typing

    args = typing.get_args(hint) or (hint,)
    base = {t for t in args if t is not type(None)}
    if base == {int}:
        return int
    if base == {float} or base == {int, float}:
        return float
    return None
