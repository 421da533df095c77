"""Several processes training one trial (a search under ``accelerate launch``), for any backend.

Rank 0 drives the engine. Before each trial it announces the trial (id, number, parameters, and for a
re-evaluation what its record repeats); the other ranks train the announced trial with the same parameters and
record it as rank 0 does. Values suggested inside ``model_init`` (``trial.suggest_*``) are asked of the engine on
rank 0 and broadcast, and prune decisions are broadcast by the reporting callback, so every rank trains the same
trial and stops with it. When rank 0 is done it announces the end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _dist
from ._repeats import mark
from .runner import run_trial
from .trial import NullReporter, Trial

if TYPE_CHECKING:
    from .session import SearchSession
    from .settings import TrialSettings

__all__ = ["announce", "announce_end", "follow", "is_follower", "lead"]


def is_follower() -> bool:
    """True on every rank but 0 of a multi-process search."""
    return not _dist.is_main_process()


def lead(trial: Trial) -> Trial:
    """On rank 0: make ``trial.suggest_*`` broadcast what the engine suggests (a no-op in one process)."""
    if _dist.world_size() > 1:
        trial._suggest_hook = _leader_suggest
    return trial


def announce(trial: Trial) -> None:
    """On rank 0, before training ``trial``: the other ranks receive it."""
    _dist.broadcast_object(
        ("trial", trial.id, trial.number, trial.params, getattr(trial, "record_extra", None))
    )


def announce_end() -> None:
    """On rank 0, when the search is over (also after an error): the other ranks stop following."""
    _dist.broadcast_object(("stop",))


def follow(settings: TrialSettings, session: SearchSession) -> None:
    """Ranks other than 0: train the trials rank 0 announces, with its values, until it announces the end."""
    while True:
        message = _dist.broadcast_object(None)
        if message[0] == "stop":
            return
        _, trial_id, number, params, extra = message
        trial = Trial(trial_id, number, params, settings.backend)
        trial._suggest_hook = _follower_suggest
        record = run_trial(settings, trial, NullReporter())
        if extra is not None:  # a re-evaluation: recorded as rank 0 records it
            record = mark(record, extra)
        session.record(record)


def _leader_suggest(trial: Trial, method: str, name: str, args: tuple, kwargs: dict) -> Any:
    return _dist.broadcast_object(getattr(trial.native, method)(name, *args, **kwargs))


def _follower_suggest(trial: Trial, method: str, name: str, args: tuple, kwargs: dict) -> Any:
    return _dist.broadcast_object(None)
