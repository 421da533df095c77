"""Keeping several processes of one trial in step (a search under ``accelerate launch``).

Rank 0 talks to the backend; the other ranks receive what it decided (suggested values, prune decisions), so
every process trains the same trial and all of them stop together.
"""

from __future__ import annotations

from typing import Any

__all__ = ["broadcast_object", "is_main_process", "world_size"]


def _initialized() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def world_size() -> int:
    if not _initialized():
        return 1
    import torch.distributed as dist

    return dist.get_world_size()


def is_main_process() -> bool:
    if not _initialized():
        return True
    import torch.distributed as dist

    return dist.get_rank() == 0


def broadcast_object(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank (identity in a single process)."""
    if world_size() <= 1:
        return obj
    import torch.distributed as dist

    box = [obj if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]
