"""Portable spaces as Optuna distributions, and a native ``hp_space(trial)`` checked before any trial.

Portable domains map to Optuna distributions with the same inclusive bounds (`FloatDistribution`,
`IntDistribution`, `CategoricalDistribution`); categorical choices Optuna cannot store (tuples, other
hashables) are suggested by index and mapped back. Conditional parameters are simply not suggested when
inactive (define-by-run).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..._params import check_argument_values, check_epochs_not_ignored, check_param_names
from ...errors import SearchConfigError
from ...trial import Trial

if TYPE_CHECKING:
    from spaces import SearchSpace
    from trainer import Trainer

_OPTUNA_SCALARS = (type(None), bool, int, float, str)


class OptunaSpace:
    """The distributions of a portable space, and the map back from index to value for unstorable choices."""

    def __init__(self, space: SearchSpace) -> None:
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

        from spaces import Categorical, Fixed, Float, Int

        self.space = space
        self.choice_maps: dict[str, list[Any]] = {}
        self.distributions: dict[str, Any] = {}
        for name in space.order:
            domain = space[name]
            if isinstance(domain, Float):
                self.distributions[name] = FloatDistribution(
                    domain.low, domain.high, log=domain.log, step=domain.step
                )
            elif isinstance(domain, Int):
                self.distributions[name] = IntDistribution(
                    domain.low, domain.high, log=domain.log, step=domain.step
                )
            elif isinstance(domain, Categorical):
                choices = list(domain.choices)
                if all(isinstance(c, _OPTUNA_SCALARS) for c in choices):
                    self.distributions[name] = CategoricalDistribution(choices)
                else:
                    # Optuna stores only scalars: suggest an index, map it back to the Python value.
                    self.choice_maps[name] = choices
                    self.distributions[name] = CategoricalDistribution(list(range(len(choices))))
            elif isinstance(domain, Fixed):
                continue
            else:
                raise SearchConfigError(
                    f"hp_space parameter {name!r}: Optuna cannot express {domain!r}.",
                    about=("hp_space", name),
                )

    def sample(self, optuna_trial: Any) -> dict[str, Any]:
        from optuna.distributions import CategoricalDistribution, FloatDistribution

        def suggest(name: str, domain: Any) -> Any:
            dist = self.distributions[name]
            if isinstance(dist, FloatDistribution):
                return optuna_trial.suggest_float(name, dist.low, dist.high, log=dist.log, step=dist.step)
            if isinstance(dist, CategoricalDistribution):
                value = optuna_trial.suggest_categorical(name, list(dist.choices))
                return self.choice_maps[name][value] if name in self.choice_maps else value
            return optuna_trial.suggest_int(name, dist.low, dist.high, log=dist.log, step=dist.step)

        return self.space.sample_with(suggest)

    def encode(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Parameters as the study stores them (choices Optuna cannot store as their index); fixed ones dropped."""
        from spaces import same_value

        out = {}
        for name, value in params.items():
            if name not in self.distributions:
                continue
            if name in self.choice_maps:
                value = next(i for i, c in enumerate(self.choice_maps[name]) if same_value(c, value))
            out[name] = value
        return out

    def decode(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """A stored trial's parameters as the Python values the trial was given."""
        return {k: self.choice_maps[k][v] if k in self.choice_maps else v for k, v in params.items()}


def native_params(trial: Trial, native_space: Any, trainer: Trainer) -> dict[str, Any]:
    """Call a native ``hp_space(trial)`` and check what it returns."""
    params = native_space(trial)
    if not isinstance(params, Mapping):
        raise SearchConfigError(
            f"hp_space(trial) must return a dict of parameter values, got {type(params).__name__}: {params!r}."
        )
    from spaces import Domain

    domains = sorted(name for name, value in params.items() if isinstance(value, Domain))
    if domains:
        raise SearchConfigError(
            f"hp_space(trial) returned spaces domains for {domains} (e.g. {params[domains[0]]!r}), not values: a "
            "callable hp_space suggests values itself (trial.suggest_float(...)); to search a dict of spaces domains, "
            "pass the dict itself as hp_space."
        )
    check_param_names(params, trainer)
    return {**trial.params, **params}


#: Where a trial of a native ``hp_space(trial)`` keeps the distributions it was drawn from (portable dict form).
SPACE_EXTRA = "space"


def native_space_spec(distributions: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A native trial's Optuna distributions in the portable dict form (``{"type": "categorical", "choices": [...]}``,
    ``{"type": "float", "low": ..., "high": ..., "log": ...}``), so that the report draws a categorical as categories
    and a log-scaled number on a log axis, as it does for a portable space."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    spec: dict[str, dict[str, Any]] = {}
    for name, dist in distributions.items():
        if isinstance(dist, CategoricalDistribution):
            spec[name] = {"type": "categorical", "choices": list(dist.choices)}
        elif isinstance(dist, FloatDistribution | IntDistribution):
            kind = "float" if isinstance(dist, FloatDistribution) else "int"
            spec[name] = {"type": kind, "low": dist.low, "high": dist.high, "log": dist.log}
            if dist.step is not None and (kind == "float" or dist.step != 1):
                spec[name]["step"] = dist.step
    return spec


def probe_native_space(
    native_space: Any, directions: list[Any], trainer: Trainer, default: bool = False
) -> None:
    """Call a native ``hp_space(trial)`` once on a throw-away trial, so a broken one fails before any storage or
    folder is created (it only suggests values; nothing is trained). The backend's own ``default`` space is not
    held to the user's choices (its epochs beside max_steps), as the portable default is not."""
    import optuna

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "new study created in memory" line
    try:
        probe = optuna.create_study(directions=directions).ask()
    finally:
        optuna.logging.set_verbosity(verbosity)
    trial = Trial("probe", 0, {}, "optuna", native=probe)
    try:
        params = native_params(trial, native_space, trainer)
    except SearchConfigError:
        raise
    except Exception as error:
        raise SearchConfigError(
            f"hp_space(trial) raised {type(error).__name__}: {error} when called with an Optuna trial; "
            "hp_space must only call trial.suggest_* and return a dict of the values."
        ) from error
    if not default:
        check_epochs_not_ignored(params, trainer)
    for name, value in params.items():
        check_argument_values(name, _values_to_check(probe.distributions.get(name), value), trainer)


def _values_to_check(distribution: Any, value: Any) -> list[Any]:
    """The values a native parameter is checked with: the one the probe returned, and every choice of the categorical
    it was drawn from when returned as drawn. A number's bounds are not checked: the value returned may be computed
    from the suggestion (``10 ** trial.suggest_float("lr", -5, -2)``), so the bounds need not be values of it."""
    from optuna.distributions import CategoricalDistribution

    if isinstance(distribution, CategoricalDistribution) and any(
        _same(value, c) for c in distribution.choices
    ):
        return [value, *(c for c in distribution.choices if not _same(value, c))]
    return [value]


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b
