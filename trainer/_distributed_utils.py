"""The distributed helpers the seed documentation lists among the trainer utilities.

- `torch_distributed_zero_first`: the local main process does something first (a download, a cache), the other
  processes of its node wait for it and then find it done.
- `DistributedTensorGatherer`: puts the per-step gathered predictions of several processes, each working through
  its own contiguous share of the dataset, back in dataset order on the CPU.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

logger = logging.getLogger(__name__)

__all__ = ["DistributedTensorGatherer", "torch_distributed_zero_first"]


def _barrier() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()


@contextmanager
def torch_distributed_zero_first(local_rank: int) -> Iterator[None]:
    """``with torch_distributed_zero_first(args.local_rank): ...``: local rank 0 runs the block first; the other
    ranks of the node wait at a barrier until it is done, then run it. ``local_rank=-1`` (one process) waits for
    nothing, and neither does a process where torch.distributed is not initialized."""
    if not isinstance(local_rank, int) or isinstance(local_rank, bool) or local_rank < -1:
        raise ValueError(
            f"local_rank must be -1 (no distributed run) or a process's rank >= 0, got {local_rank!r}."
        )
    if local_rank > 0:
        _barrier()  # wait for rank 0 to finish the block
    yield
    if local_rank == 0:
        _barrier()  # release the ranks waiting above


class DistributedTensorGatherer:
    """Gathered predictions back in dataset order, chunk by chunk, on the CPU.

    Each of ``world_size`` processes predicts a contiguous share of the dataset (its length rounded up so that
    every process has as many samples, a multiple of ``make_multiple_of`` if given, the extra samples repeating
    the first ones). A gather at each step yields the processes' batches one after the other
    (``[P0's batch, P1's batch, ...]``); `add_arrays` writes each process's part at that process's place in the
    full-size storage, and `finalize` returns the storage truncated to ``num_samples``.

    Arrays are numpy arrays, or nested lists, tuples or dicts of them; a second dimension that grows from one
    step to the next (sequences of several lengths) is padded with ``padding_index``.
    """

    def __init__(
        self,
        world_size: int,
        num_samples: int,
        make_multiple_of: int | None = None,
        padding_index: int = -100,
    ) -> None:
        for name, value in (("world_size", world_size), ("num_samples", num_samples)):
            if (
                not isinstance(value, int)
                or isinstance(value, bool)
                or value < (1 if name == "world_size" else 0)
            ):
                raise ValueError(
                    f"{name} must be an int >= {1 if name == 'world_size' else 0}, got {value!r}."
                )
        if make_multiple_of is not None and (not isinstance(make_multiple_of, int) or make_multiple_of < 1):
            raise ValueError(f"make_multiple_of must be None or an int >= 1, got {make_multiple_of!r}.")
        self.world_size = world_size
        self.num_samples = num_samples
        unit = world_size * (make_multiple_of or 1)
        self.total_samples = math.ceil(num_samples / unit) * unit
        self.process_length = self.total_samples // world_size
        self.padding_index = padding_index
        self._storage: Any = None
        self._offsets: list[int] | None = None

    def add_arrays(self, arrays: Any) -> None:
        """Place one step's gathered ``arrays`` (None is ignored). The storage is allocated in full at the first
        call, so that running out of memory shows at the start of the loop, not at its end."""
        if arrays is None:
            return
        if self._storage is None:
            self._storage = self._allocate(arrays)
            self._offsets = list(range(0, self.total_samples, self.process_length))
        assert self._offsets is not None
        length, self._storage = self._place(self._storage, arrays)
        self._offsets = [offset + length for offset in self._offsets]

    def finalize(self) -> Any:
        """The arrays in dataset order, truncated to ``num_samples`` (None when nothing was added); warns when fewer
        samples were added than each process was to predict."""
        if self._storage is None:
            return None
        assert self._offsets is not None
        if self._offsets[0] != self.process_length:
            logger.warning(
                "DistributedTensorGatherer.finalize: %d of the %d samples of each process were added; the rest of "
                "the result is padding (%s). Pass every step's arrays to add_arrays.",
                self._offsets[0],
                self.process_length,
                self.padding_index,
            )
        return self._truncate(self._storage)

    # ------------------------------------------------------------------ nested arrays
    def _allocate(self, arrays: Any) -> Any:
        if isinstance(arrays, list | tuple):
            return type(arrays)(self._allocate(a) for a in arrays)
        if isinstance(arrays, Mapping):
            return {k: self._allocate(v) for k, v in arrays.items()}
        arrays = np.asarray(arrays)
        return np.full((self.total_samples, *arrays.shape[1:]), self.padding_index, dtype=arrays.dtype)

    def _place(self, storage: Any, arrays: Any) -> tuple[int, Any]:
        """(samples each process contributed, the storage with them written in; a new one if it had to widen)."""
        if isinstance(arrays, list | tuple):
            placed = [self._place(s, a) for s, a in zip(storage, arrays)]
            return placed[0][0], type(arrays)(p[1] for p in placed)
        if isinstance(arrays, Mapping):
            placed_items = {k: self._place(storage[k], v) for k, v in arrays.items()}
            first = next(iter(placed_items.values()))
            return first[0], {k: p[1] for k, p in placed_items.items()}
        arrays = np.asarray(arrays)
        if arrays.shape[0] % self.world_size:
            raise ValueError(
                f"add_arrays got {arrays.shape[0]} rows, which is not a multiple of world_size={self.world_size}: "
                "pass what a gather across all processes returns (each process's batch, padded to the same size)."
            )
        length = arrays.shape[0] // self.world_size
        if arrays.ndim > 1 and storage.ndim > 1 and storage.shape[1] < arrays.shape[1]:
            wider = np.full(
                (storage.shape[0], arrays.shape[1], *storage.shape[2:]),
                self.padding_index,
                dtype=storage.dtype,
            )
            wider[:, : storage.shape[1]] = storage
            storage = wider
        assert self._offsets is not None
        if self._offsets[0] + length > self.process_length:
            raise ValueError(
                f"add_arrays got more samples than the {self.process_length} each process predicts "
                f"(num_samples={self.num_samples}, world_size={self.world_size}); build the gatherer with the "
                "dataset's length."
            )
        for rank, offset in enumerate(self._offsets):
            part = arrays[rank * length : (rank + 1) * length]
            if arrays.ndim > 1:
                storage[offset : offset + length, : arrays.shape[1]] = part
            else:
                storage[offset : offset + length] = part
        return length, storage

    def _truncate(self, storage: Any) -> Any:
        if isinstance(storage, list | tuple):
            return type(storage)(self._truncate(s) for s in storage)
        if isinstance(storage, Mapping):
            return {k: self._truncate(v) for k, v in storage.items()}
        return storage[: self.num_samples]
