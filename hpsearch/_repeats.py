"""What makes a trial's record a re-evaluation's: the seeds it sets and how its record is marked.

A leaf module, so that the re-evaluations (`reevaluate`) and a launched search's other processes (`_lockstep`)
mark a re-evaluation's record the same way without importing each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .trial import TrialRecord

#: The arguments a re-evaluation sets (a space may not search them when re-evaluation is on).
SEED_ARGS = ("seed", "data_seed")


def mark(record: TrialRecord, extra: dict[str, Any]) -> TrialRecord:
    """``record`` as a re-evaluation's: ``extra`` (source, config_id, seed, fold) added, and its parameters those of
    the configuration it repeats (without the seeds the re-evaluation set)."""
    record.params = {k: v for k, v in record.params.items() if k not in SEED_ARGS}
    record.extra.update(extra)
    return record
