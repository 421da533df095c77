"""Logging integrations chosen by ``TrainingArguments.report_to`` (filled in by the integrations work)."""

from __future__ import annotations

from typing import Any

__all__ = ["get_reporting_integration_callbacks"]


def get_reporting_integration_callbacks(report_to: Any) -> list[Any]:
    names = [] if report_to in (None, "none") else ([report_to] if isinstance(report_to, str) else list(report_to))
    if names:
        raise NotImplementedError(f"report_to={names!r}: logging integrations are not available yet.")
    return []
