"""The placement decisions of `trial_workers` (`hpsearch.executor._placement`), without a GPU: which device each
worker gets, when a trial may join others on a GPU (by measured memory), and where a trial out of CUDA memory trains
again."""

from __future__ import annotations

import pytest

from hpsearch.executor._placement import MARGIN, DeviceLedger, assign_devices, is_cuda_oom, visible_devices
from hpsearch.trial import TrialRecord, TrialState


@pytest.mark.parametrize(
    ("env", "count", "expected"),
    [
        (None, 2, ["0", "1"]),
        ("", 2, ["0", "1"]),
        ("3,5", 2, ["3", "5"]),
        (" 3 , 5 ", 2, ["3", "5"]),
        ("GPU-aa,GPU-bb", 1, ["GPU-aa"]),  # CUDA stopped at an entry it could not use: the count says so
        ("0,1", 0, []),
        (None, 0, []),
    ],
)
def test_visible_devices_follow_cuda_visible_devices(env, count, expected):
    assert visible_devices(env, count) == expected


@pytest.mark.parametrize(
    ("workers", "devices", "expected"),
    [
        (2, ["0", "1"], ["0", "1"]),
        (4, ["0", "1"], ["0", "1", "0", "1"]),  # more workers than GPUs: two on each
        (3, ["0", "1"], ["0", "1", "0"]),
        (2, ["0", "1", "2", "3"], ["0", "1"]),  # fewer: the first ones
        (3, ["7"], ["7", "7", "7"]),
        (2, [], [None, None]),  # a CPU machine: no worker gets a GPU
    ],
)
def test_each_worker_gets_a_device_round_robin(workers, devices, expected):
    assert assign_devices(workers, devices) == expected


def test_a_cpu_worker_is_always_admitted_and_never_counted():
    ledger = DeviceLedger()
    for _ in range(3):
        assert ledger.admits(None)
        assert ledger.enter(None) == 0
    assert ledger.devices == {}


def test_a_gpu_runs_one_trial_until_a_peak_is_measured():
    ledger = DeviceLedger()
    ledger.set_total("0", 16000)
    assert ledger.admits("0")
    assert ledger.enter("0") == 0
    assert not ledger.admits("0")  # no peak known: nothing is packed on a guess
    ledger.leave("0", peak_mb=None)  # it failed: no measure
    assert ledger.peak_mb is None and ledger.admits("0")


def test_trials_are_packed_within_the_device_memory_by_the_largest_measured_peak():
    ledger = DeviceLedger(margin=0.15)
    ledger.set_total("0", 10000)
    ledger.enter("0")
    ledger.leave("0", peak_mb=2000)
    running = 0
    while ledger.admits("0"):
        assert ledger.enter("0") == running  # its co-tenants
        running += 1
    assert running == 4  # 4 x 2000 x 1.15 = 9200 fits in 10000; 5 x 2300 = 11500 does not
    ledger.leave("0", peak_mb=3000)  # a larger peak: 3 running + 1 new at 3000 x 1.15 = 13800
    assert ledger.peak_mb == 3000 and not ledger.admits("0")
    ledger.leave("0", peak_mb=1000)  # a smaller one does not lower the estimate: (2 + 1) x 3450 = 10350
    assert ledger.peak_mb == 3000 and not ledger.admits("0")
    ledger.leave("0", peak_mb=None)
    assert ledger.admits("0")  # (1 + 1) x 3450 = 6900


def test_the_margin_is_kept():
    ledger = DeviceLedger()
    ledger.set_total("0", 2000)
    ledger.enter("0")
    ledger.leave("0", peak_mb=1000)
    ledger.enter("0")
    assert not ledger.admits("0")  # 2 x 1000 fits 2000 exactly, but not with the margin
    assert DeviceLedger(margin=0.0, peak_mb=1000, devices=ledger.devices).admits("0")
    assert MARGIN > 0


def test_an_unknown_device_size_packs_nothing():
    ledger = DeviceLedger()
    ledger.enter("0")
    ledger.leave("0", peak_mb=10)
    ledger.enter("0")
    assert not ledger.admits("0")


def test_a_retry_waits_for_its_device_alone_and_nothing_starts_there_meanwhile():
    ledger = DeviceLedger()
    ledger.set_total("0", 10000)
    ledger.set_total("1", 10000)
    ledger.enter("0")
    ledger.leave("0", peak_mb=100)
    ledger.enter("0")
    ledger.enter("0")  # two running on 0, none on 1
    assert ledger.retry_device("0", ["0", "1", "0", "1"]) == "1"  # the GPU with the fewest trials now
    ledger.enter("1")
    ledger.enter("1")
    ledger.enter("1")
    assert ledger.retry_device("0", ["0", "1"]) == "0"  # 0 runs fewer now
    ledger.reserve("0")
    assert not ledger.admits("0") and ledger.admits("1")  # reserved: no new trial on 0
    assert not ledger.free_for_alone("0")
    ledger.leave("0")
    ledger.leave("0")
    assert ledger.free_for_alone("0")
    assert ledger.enter("0", alone=True) == 0
    assert not ledger.admits("0")  # it has the device to itself
    ledger.leave("0", alone=True)
    assert ledger.admits("0")


def test_a_retry_on_a_tie_stays_on_its_device():
    ledger = DeviceLedger()
    assert ledger.retry_device("1", ["0", "1"]) == "1"
    assert ledger.retry_device("1", [None, None]) == "1"


def _failed(error: str, state: TrialState = TrialState.FAIL) -> TrialRecord:
    return TrialRecord("0", 0, "run-0", state, {}, error=error)


@pytest.mark.parametrize(
    ("record", "oom"),
    [
        (_failed("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"), True),
        (_failed("OutOfMemoryError: CUDA out of memory."), True),
        (_failed("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB"), True),  # older torch
        (_failed("MemoryError"), False),  # the host's memory: a retry alone on a GPU would not help
        (_failed("its worker process died: killed by SIGKILL (signal 9)"), False),
        (_failed("", TrialState.COMPLETE), False),
    ],
)
def test_cuda_out_of_memory_is_told_from_other_failures(record, oom):
    assert is_cuda_oom(record) is oom


def test_a_peak_heard_at_a_running_trials_evaluation_lets_the_next_trial_join_it():
    ledger = DeviceLedger()
    ledger.set_total("0", 10000)
    ledger.enter("0")
    assert not ledger.admits("0")
    ledger.observe(1000)  # its first evaluation: 2 x 1000 x 1.15 fits
    assert ledger.admits("0")
    ledger.observe(500)  # a smaller reading does not lower the estimate
    assert ledger.peak_mb == 1000
    ledger.observe(5000)  # it grew: 2 x 5000 x 1.15 no longer fits
    assert not ledger.admits("0")


def test_a_retry_alone_is_tried_only_where_it_can_fit():
    from hpsearch.executor._placement import retry_alone_helps

    assert retry_alone_helps("0", "0", shared=True)  # the others on its GPU took the memory
    assert retry_alone_helps("0", "1", shared=False)  # another GPU, maybe larger or emptier
    # Alone on the only GPU: the same batch would run out again, so the retry takes a smaller micro-batch.
    assert not retry_alone_helps("0", "0", shared=False)
