"""Portable spaces as Ray Tune domains.

Ray's integer upper bounds are exclusive, so ``Int(low, high)`` is ``tune.randint(low, high + 1)``
(``lograndint`` likewise); a stepped domain is ``qrandint``/``quniform`` (whose bound is inclusive) when ``low``
is a multiple of the step, because Ray quantizes to multiples of ``q``, and otherwise ``tune.choice`` over the
grid. A conditional parameter is a ``tune.sample_from`` that draws only when its parents' values activate it and
gives ``None`` otherwise; trials keep only the active parameters (`TrialSettings.active_params`), so an inactive
parameter is absent from the trial while an active ``None`` choice stays.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...errors import SearchConfigError

if TYPE_CHECKING:
    from spaces import SearchSpace

__all__ = ["check_native_values", "convert_space"]

_MAX_GRID = 10_000


def convert_space(space: SearchSpace) -> dict[str, Any]:
    """Tune domains for the space (Ray's integer upper bounds are exclusive: ``high + 1``)."""
    from ray import tune

    out: dict[str, Any] = {}
    for name in space.order:
        domain = space[name]
        native = _domain(name, domain)
        if domain.is_conditional:
            native = tune.sample_from(_ConditionalSample(space, name, native))
        out[name] = native
    return out


def _domain(name: str, domain: Any) -> Any:
    """The Tune domain of one portable domain (conditions are handled by the caller)."""
    from ray import tune

    from spaces import Categorical, Fixed, Float, Int

    if isinstance(domain, Fixed):
        return domain.value
    if isinstance(domain, Categorical):
        return tune.choice(list(domain.choices))
    if isinstance(domain, Int):
        if domain.log:
            return tune.lograndint(domain.low, domain.high + 1)  # exclusive upper bound
        if domain.step == 1:
            return tune.randint(domain.low, domain.high + 1)  # exclusive upper bound
        if domain.low % domain.step == 0:
            return tune.qrandint(domain.low, domain.high, domain.step)  # inclusive for q > 1
        return tune.choice(list(range(domain.low, domain.high + 1, domain.step)))
    if isinstance(domain, Float):
        if domain.step is None:
            return (
                tune.loguniform(domain.low, domain.high)
                if domain.log
                else tune.uniform(domain.low, domain.high)
            )
        k = domain.low / domain.step
        if abs(k - round(k)) <= 1e-9 * max(1.0, abs(k)):
            return tune.quniform(domain.low, domain.high, domain.step)  # quantization: inclusive upper bound
        n = round((domain.high - domain.low) / domain.step)
        if n + 1 > _MAX_GRID:
            raise SearchConfigError(
                f"hp_space parameter {name!r}: Ray quantizes to multiples of the step, and low={domain.low} is not "
                f"one of step={domain.step}; the grid has {n + 1} values, too many for tune.choice. Make low a "
                "multiple of step.",
                about=("hp_space", name),
            )
        return tune.choice([min(domain.low + i * domain.step, domain.high) for i in range(n + 1)])
    raise SearchConfigError(
        f"hp_space parameter {name!r}: the ray backend cannot express {domain!r}.", about=("hp_space", name)
    )


class _ConditionalSample:
    """``tune.sample_from`` body: a draw when the parents activate the parameter, else None (dropped later)."""

    def __init__(self, space: SearchSpace, name: str, native: Any) -> None:
        self.space = space
        self.name = name
        self.native = native
        ancestors: list[str] = []
        todo = [name]
        while todo:
            for parent in space[todo.pop()].when or {}:
                if parent not in ancestors:
                    ancestors.append(parent)
                    todo.append(parent)
        self.ancestors = [n for n in space.order if n in ancestors]

    def __call__(self, spec: Any) -> Any:
        from ray.tune.search.sample import Domain

        # Only the ancestors are read: Tune resolves them first and retries while one is unresolved.
        values = {n: spec.config[n] for n in self.ancestors}
        active: dict[str, Any] = {}
        for n in self.ancestors:
            if self.space.is_active(n, active):
                active[n] = values[n]
        if not self.space.is_active(self.name, active):
            return None
        return self.native.sample() if isinstance(self.native, Domain) else self.native


def check_native_values(native: Mapping[str, Any]) -> None:
    """A Ray Tune space holds Tune domains, grids and plain constants: a spaces domain among them would reach the
    trials as the domain object itself (every trial failing), so it is refused, named."""
    from spaces import Domain as PortableDomain

    mixed = sorted(name for name, value in native.items() if isinstance(value, PortableDomain))
    if mixed:
        raise SearchConfigError(
            f"hp_space mixes Ray Tune domains with spaces domains ({', '.join(mixed)}): write every parameter in one "
            "form, Ray Tune's (tune.uniform(...), tune.choice([...])) or spaces' (spaces.Float(...), "
            "spaces.Categorical([...]))."
        )


def grid_combinations(native: Mapping[str, Any]) -> int:
    """How many configurations one Tune sample of ``native`` expands to: the product of the lengths of its
    ``tune.grid_search`` values, wherever they are nested, read as Tune's own variant generator reads them."""
    from ray.tune.search.variant_generator import parse_spec_vars

    _, _, grids = parse_spec_vars(dict(native))
    return math.prod(len(domain.categories) for _, domain in grids)
