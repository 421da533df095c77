"""A Tune experiment folder left by a driver killed while Tune wrote its snapshot: the torn run's files are set
aside before a restore, so Tune restores the run before it instead of starting the experiment over."""

from __future__ import annotations

import json
import pathlib
import pickle
from pathlib import Path

from hpsearch.backends.ray._state import TORN_SUFFIX, set_aside_torn_runs


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (self.marker,))


def test_the_snapshot_files_of_a_torn_run_are_set_aside_and_nothing_is_unpickled(tmp_path):
    folder = tmp_path / "experiment"
    folder.mkdir()
    marker = tmp_path / "unpickled"
    whole = {
        "experiment_state-2026-01-01_10-00-00.json": json.dumps({"trial_data": []}).encode(),
        # Tune's basic variant generator pickles its state under a .json name.
        "basic-variant-state-2026-01-01_10-00-00.json": pickle.dumps(_Payload(marker)),
        "searcher-state-2026-01-01_10-00-00.pkl": pickle.dumps({"n": 1}),
        "tuner.pkl": b"",  # not a run's snapshot: never touched
    }
    torn_state = {  # killed while Tune rewrote its experiment state in place
        "experiment_state-2026-01-01_11-00-00.json": b"",
        "basic-variant-state-2026-01-01_11-00-00.json": pickle.dumps({"n": 2}),
    }
    payload = pickle.dumps({"n": 3, "pad": "x" * 200})
    torn_pickle = {  # killed while its files were copied into the experiment folder
        "experiment_state-2026-01-01_12-00-00.json": json.dumps({"trial_data": [1]}).encode(),
        "callback-states-2026-01-01_12-00-00.pkl": payload[: len(payload) // 2],
    }
    missing = {  # killed after its experiment state was copied, before its searcher's
        "experiment_state-2026-01-01_13-00-00.json": json.dumps({"trial_data": [2]}).encode(),
    }
    torn_pickle["basic-variant-state-2026-01-01_12-00-00.json"] = pickle.dumps({"n": 4})
    for name, data in {**whole, **torn_state, **torn_pickle, **missing}.items():
        (folder / name).write_bytes(data)
    (folder / "run-0_00000").mkdir()

    renamed = set_aside_torn_runs(folder)

    assert sorted(renamed) == sorted([*torn_state, *torn_pickle, *missing])
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [*whole, *(name + TORN_SUFFIX for name in [*torn_state, *torn_pickle, *missing]), "run-0_00000"]
    )
    for name, data in {**torn_state, **torn_pickle}.items():
        assert (folder / (name + TORN_SUFFIX)).read_bytes() == data  # kept as it was
    assert not marker.exists()  # read as opcodes, never run
    assert set_aside_torn_runs(folder) == []  # nothing more to set aside
    assert set_aside_torn_runs(tmp_path / "missing") == []
