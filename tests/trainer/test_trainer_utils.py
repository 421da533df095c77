"""The trainer utilities of the seed documentation: DistributedTensorGatherer, torch_distributed_zero_first,
get_last_checkpoint."""

from __future__ import annotations

import logging
import os
import socket
import time

import numpy as np
import pytest
import torch

import trainer
from trainer import DistributedTensorGatherer, get_last_checkpoint, torch_distributed_zero_first


def _shares(num_samples: int, world_size: int, multiple: int = 1) -> list[list[int]]:
    """What a sequential distributed sampler gives each process: contiguous shares of the indices, padded by
    repeating the first ones to a length every process has (a multiple of ``multiple``)."""
    unit = world_size * multiple
    total = -(-num_samples // unit) * unit
    indices = list(range(num_samples)) + list(range(total - num_samples))
    per = total // world_size
    return [indices[r * per : (r + 1) * per] for r in range(world_size)]


def _gathered_steps(shares: list[list[int]], batch: int) -> list[np.ndarray]:
    """What a gather across processes returns at each step: the processes' batches one after the other."""
    steps = []
    for start in range(0, len(shares[0]), batch):
        steps.append(np.concatenate([np.array(share[start : start + batch]) for share in shares]))
    return steps


def test_the_documented_example_comes_back_in_dataset_order():
    # 16 samples, batch size 2, 3 processes: the gathered order is [0, 1, 6, 7, 12, 13, 2, 3, ...].
    shares = _shares(16, 3)
    assert shares == [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11], [12, 13, 14, 15, 0, 1]]
    steps = _gathered_steps(shares, 2)
    assert steps[0].tolist() == [0, 1, 6, 7, 12, 13]
    gatherer = DistributedTensorGatherer(world_size=3, num_samples=16)
    for step in steps:
        gatherer.add_arrays(step)
    assert gatherer.finalize().tolist() == list(range(16))


@pytest.mark.parametrize(
    "num_samples,world_size,batch,multiple", [(21, 4, 3, None), (10, 2, 4, 4), (7, 1, 2, None)]
)
def test_nested_arrays_with_growing_sequences_are_placed_padded_and_truncated(
    num_samples, world_size, batch, multiple
):
    shares = _shares(num_samples, world_size, multiple or 1)
    gatherer = DistributedTensorGatherer(world_size, num_samples, make_multiple_of=multiple, padding_index=-7)
    for n, ids in enumerate(_gathered_steps(shares, batch)):
        width = 2 + n  # a second dimension that grows from step to step
        logits = np.repeat(ids[:, None], width, axis=1).astype(np.float32)
        gatherer.add_arrays((ids, {"logits": logits}))
    ids, nested = gatherer.finalize()
    assert isinstance(ids, np.ndarray) and ids.tolist() == list(range(num_samples))
    logits = nested["logits"]
    assert logits.shape[0] == num_samples and logits.dtype == np.float32
    per = len(shares[0])
    for row in range(num_samples):  # sample ``row`` is the (row % per)-th of process row // per
        width = 2 + (row % per) // batch
        assert logits[row, :width].tolist() == [row] * width
        assert (logits[row, width:] == -7).all()


def test_finalize_warns_when_samples_are_missing_and_none_without_arrays(caplog):
    assert DistributedTensorGatherer(2, 8).finalize() is None
    gatherer = DistributedTensorGatherer(2, 8)
    gatherer.add_arrays(None)  # ignored, as a step without predictions
    gatherer.add_arrays(np.array([0, 1, 4, 5]))
    with caplog.at_level(logging.WARNING, logger="trainer"):
        out = gatherer.finalize()
    assert out.tolist()[:2] == [0, 1] and out.tolist()[4:6] == [4, 5]
    assert "2 of the 4 samples" in caplog.text


def test_bad_arguments_and_arrays_are_refused_naming_them():
    with pytest.raises(ValueError, match="world_size"):
        DistributedTensorGatherer(0, 8)
    with pytest.raises(ValueError, match="num_samples"):
        DistributedTensorGatherer(2, -1)
    with pytest.raises(ValueError, match="make_multiple_of"):
        DistributedTensorGatherer(2, 8, make_multiple_of=0)
    gatherer = DistributedTensorGatherer(2, 4)
    with pytest.raises(ValueError, match="not a multiple of world_size=2"):
        gatherer.add_arrays(np.arange(3))
    gatherer.add_arrays(np.arange(4))
    with pytest.raises(ValueError, match="more samples than the 2 each process predicts"):
        gatherer.add_arrays(np.arange(2))


def test_get_last_checkpoint_is_the_highest_complete_step(tmp_path):
    assert get_last_checkpoint(str(tmp_path)) is None
    for step in (5, 40, 300):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-1000").mkdir()  # no trainer_state.json: a save a kill interrupted
    (tmp_path / "checkpoint-9x").mkdir()
    assert get_last_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-300")
    assert trainer.get_last_checkpoint is get_last_checkpoint


def test_zero_first_in_one_process_waits_for_nothing():
    with torch_distributed_zero_first(-1):
        pass
    with torch_distributed_zero_first(0):  # no process group: nothing to wait for
        pass
    with pytest.raises(ValueError, match="local_rank"), torch_distributed_zero_first(-2):
        pass


def _zero_first_worker(rank: int, port: int, folder: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=rank, world_size=2)
    try:
        with torch_distributed_zero_first(rank):
            if rank == 0:
                time.sleep(0.5)  # rank 1 would get here first without the barrier
                with open(os.path.join(folder, "prepared"), "w") as f:
                    f.write("done")
            else:
                with open(os.path.join(folder, "seen-by-1"), "w") as f:
                    f.write(str(os.path.exists(os.path.join(folder, "prepared"))))
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.multiprocess
def test_zero_first_makes_the_other_ranks_wait_for_rank_0(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(_zero_first_worker, args=(port, str(tmp_path)), nprocs=2, join=True)
    assert (tmp_path / "seen-by-1").read_text() == "True"
