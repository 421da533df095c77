"""Metrics files and readable metrics for `Trainer` (checkpoints themselves live in `_checkpoint`)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import _checkpoint as ckpt

if TYPE_CHECKING:
    from ._trainer import Trainer


def metrics_format(metrics: Mapping[str, float]) -> dict[str, Any]:
    """Metrics made readable: runtimes as h:mm:ss, memory in MB, floats rounded."""
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        if "_mem_" in key:
            out[key] = f"{int(value) >> 20}MB"
        elif key.endswith("_runtime"):
            out[key] = format_runtime(value)
        elif key == "total_flos":
            out[key] = f"{int(value) >> 30}GF"
        elif isinstance(value, float):
            out[key] = round(value, 4)
        else:
            out[key] = value
    return out


def log_metrics(trainer: Trainer, split: str, metrics: Mapping[str, float]) -> None:
    """Print ``metrics`` of ``split`` as an aligned table (main process only)."""
    if not trainer.is_world_process_zero():
        return
    print(f"***** {split} metrics *****")
    formatted = trainer.metrics_format(metrics)
    width = max((len(k) for k in formatted), default=0)
    for key in sorted(formatted):
        print(f"  {key:<{width}} = {formatted[key]:>9}")


def save_metrics(trainer: Trainer, split: str, metrics: Mapping[str, float], combined: bool = True) -> None:
    """Write ``<split>_results.json`` in output_dir (and merge into ``all_results.json``)."""
    if not trainer.is_world_process_zero():
        return
    os.makedirs(trainer.args.output_dir, exist_ok=True)
    path = os.path.join(trainer.args.output_dir, f"{split}_results.json")
    write_json(path, dict(metrics))
    if combined:
        all_path = os.path.join(trainer.args.output_dir, "all_results.json")
        merged: dict[str, Any] = {}
        if os.path.exists(all_path):
            with open(all_path, encoding="utf-8") as f:
                merged = json.load(f)
        merged.update(metrics)
        write_json(all_path, merged)


def save_state(trainer: Trainer) -> None:
    """Write ``trainer_state.json`` to output_dir."""
    if trainer.is_world_process_zero():
        os.makedirs(trainer.args.output_dir, exist_ok=True)
        trainer.state.save_to_json(os.path.join(trainer.args.output_dir, ckpt.TRAINER_STATE_NAME))


def format_runtime(seconds: float) -> str:
    seconds = float(seconds)
    hours, rem = divmod(seconds, 3600)
    minutes, secs = divmod(rem, 60)
    return f"{int(hours)}:{int(minutes):02d}:{secs:05.2f}"


def write_json(path: str, data: Any) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, sort_keys=True, default=str)
        f.write("\n")
    os.replace(tmp, path)
