"""Secrets out of everything a search writes: the one masking rule lives in `trainer.redact` (the trainer's
trackers use it too, and the trainer may not import hpsearch); this module only names it for hpsearch.

The rule is imported on first use: importing the `trainer` package loads torch, and `import hpsearch` must not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MASK", "is_secret_name", "redact", "redact_url", "safe_params"]

#: What a secret is replaced with (`trainer.redact.MASK`; a test checks the two agree).
MASK = "***"


def is_secret_name(key: Any) -> bool:
    from trainer.redact import is_secret_name as rule

    return rule(key)


def redact(value: Any) -> Any:
    from trainer.redact import redact as rule

    return rule(value)


def redact_url(url: str) -> str:
    from trainer.redact import redact_url as rule

    return rule(url)


def safe_params(params: Mapping[str, Any]) -> dict[str, Any]:
    from trainer.redact import safe_params as rule

    return rule(params)
