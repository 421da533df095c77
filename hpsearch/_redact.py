"""Secrets out of everything a search writes: the one masking rule lives in `trainer.redact` (the trainer's
trackers use it too, and the trainer may not import hpsearch); this module only names it for hpsearch."""

from __future__ import annotations

from trainer.redact import MASK, is_secret_name, redact, redact_url, safe_params

__all__ = ["MASK", "is_secret_name", "redact", "redact_url", "safe_params"]
