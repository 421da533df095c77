"""The checks of ``trial_workers``, made before any trial starts: cores, the backend, accelerate, pickling."""

from __future__ import annotations

import os
import pickle
from typing import TYPE_CHECKING, Any

from .. import _dist
from ..errors import SearchConfigError

if TYPE_CHECKING:
    from ..backends.base import SearchBackend
    from ..settings import TrialSettings

__all__ = ["check_trial_workers", "usable_cores"]


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def check_trial_workers(
    settings: TrialSettings, trial_workers: int | None, max_trials: int | None, adapter: SearchBackend
) -> None:
    """Refuse ``trial_workers`` where it cannot work (the backend's ``trial_workers_refusal``, its own option that
    sets how many trials run at once, too many workers, accelerate launch, settings that cannot be pickled)."""
    if trial_workers is None:
        if max_trials is not None:
            raise SearchConfigError(
                f"trial_worker_max_trials={max_trials} replaces worker processes after that many trials, but "
                "trial_workers is not set (trials run in this process); set trial_workers=N too, or drop "
                "trial_worker_max_trials.",
                about="trial_worker_max_trials",
            )
        return
    if adapter.trial_workers_refusal is not None:
        raise SearchConfigError(
            f"trial_workers={trial_workers} cannot be used with backend={settings.backend!r}: "
            f"{adapter.trial_workers_refusal}",
            about="trial_workers",
        )
    for concurrency in (o.name for o in adapter.options if o.concurrency and o.name in adapter.kwargs):
        raise SearchConfigError(
            f"{concurrency}={adapter.kwargs[concurrency]!r} and trial_workers={trial_workers} both set how many "
            f"trials run at once; trial_workers runs {trial_workers} at once in worker processes: drop {concurrency}.",
            about=concurrency,
        )
    cores = usable_cores()
    if trial_workers > cores:
        raise SearchConfigError(
            f"trial_workers={trial_workers} is more than the {cores} CPU core(s) this process may use: each worker "
            f"needs a core of its own for its threads; pass trial_workers={cores} or fewer.",
            about="trial_workers",
        )
    world = max(_dist.world_size(), int(os.environ.get("WORLD_SIZE", "1") or 1))
    if world > 1:
        raise SearchConfigError(
            f"trial_workers={trial_workers} cannot be combined with a search under accelerate launch ({world} "
            "processes that train each trial together): every rank would start its own workers; drop trial_workers "
            "(the launched processes already train each trial), or run without accelerate launch.",
            about="trial_workers",
        )
    _check_picklable(settings, trial_workers)


def _check_picklable(settings: TrialSettings, trial_workers: int) -> None:
    """The settings go to each worker by pickle: name the first object that cannot be pickled."""
    try:
        pickle.dumps(settings)
        return
    except Exception as error:  # pickle raises many kinds (PicklingError, TypeError, AttributeError)
        culprit, cause = _culprit(settings) or ("the search's settings", error)
    raise SearchConfigError(
        f"trial_workers={trial_workers} sends the trainer and its functions to worker processes by pickle, but "
        f"{culprit} cannot be pickled ({type(cause).__name__}: {cause}); define it at module level in an importable "
        "file (not a lambda, a nested function or an object holding an open resource), or leave trial_workers unset "
        "to run the trials in this process.",
        about="trial_workers",
    )


def _culprit(settings: TrialSettings) -> tuple[str, BaseException] | None:
    """The deepest named attribute that fails to pickle (e.g. ``trainer.model_init (<lambda>)``)."""
    fields: dict[str, Any] = {name: getattr(settings, name) for name in settings.__dataclass_fields__}
    trainer = fields.pop("trainer")
    named = [(f"{name} ({value!r:.60})", value) for name, value in fields.items()]
    named += [
        (f"trainer.{_public_name(trainer, name)} ({value!r:.60})", value)
        for name, value in vars(trainer).items()
    ]
    args = getattr(trainer, "args", None)
    if args is not None:
        named += [(f"trainer.args.{name} ({value!r:.60})", value) for name, value in vars(args).items()]
    for label, value in named:
        try:
            pickle.dumps(value)
        except Exception as error:
            if not label.startswith("trainer.args ("):
                return label, error
    return None


def _public_name(trainer: Any, name: str) -> str:
    """The name a user knows an attribute by: ``model_init`` for the ``_model_init`` its property keeps."""
    public = name.lstrip("_")
    return public if public != name and isinstance(getattr(type(trainer), public, None), property) else name
