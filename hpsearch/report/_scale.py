"""Aggregation for large searches: what the report draws when a person cannot read every trial."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpsearch.report._analysis import order_best_first

if TYPE_CHECKING:
    from hpsearch.results import SearchResult
    from hpsearch.trial import TrialRecord

__all__ = ["spread_sample"]


def spread_sample(result: SearchResult, records: list[TrialRecord], size: int) -> list[TrialRecord]:
    """At most ``size`` of ``records``, in their order: the best tenth of ``size`` (best first as `order_best_first`
    ranks them), then an even sample by trial number of the others."""
    if len(records) <= size:
        return list(records)
    ids = {id(r) for r in records}
    best = [r for r in order_best_first(result) if id(r) in ids][: size // 10]
    chosen = {id(r) for r in best}
    rest = sorted((r for r in records if id(r) not in chosen), key=lambda r: r.number)
    step = len(rest) / (size - len(best))
    chosen.update(id(rest[int(i * step)]) for i in range(size - len(best)))
    return [r for r in records if id(r) in chosen]
