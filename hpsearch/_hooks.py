"""Hooks called after every recorded trial, in the process that records it.

`SearchSession.record` calls each ``hook(session, record)`` of `TRIAL_END_HOOKS` once the trial is recorded and
saved; the CLI's sweep progress bar registers here (`hpsearch._progress`). A hook that raises is logged and
ignored: a display must never stop a search. The list lives in its own module so that the session and the displays
registering with it do not import each other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .session import SearchSession
    from .trial import TrialRecord

__all__ = ["TRIAL_END_HOOKS"]

TRIAL_END_HOOKS: list[Callable[[SearchSession, TrialRecord], None]] = []
