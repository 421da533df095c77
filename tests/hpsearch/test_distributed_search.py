"""A search under `accelerate launch` with 2 CPU processes: rank 0 samples, every rank trains, pruning is shared."""

from __future__ import annotations

import json

import pytest

from tests._launch import accelerate_launch


def _search(tmp_path, *mode: str) -> list[dict]:
    result = tmp_path / "result.json"
    accelerate_launch("tests.hpsearch._ddp_search", str(tmp_path / "out"), str(result), *mode)
    return [json.loads((tmp_path / f"result.json.{r}").read_text()) for r in (0, 1)]


@pytest.mark.multiprocess
def test_two_process_search_with_pruning_completes(tmp_path):
    ranks = _search(tmp_path)
    assert [r["world"] for r in ranks] == [2, 2]
    main, other = ranks
    assert len(main["records"]) == 6
    # Rank 1 trained the same trials with the same values, including those suggested inside model_init...
    assert [r["params"] for r in other["records"]] == [r["params"] for r in main["records"]]
    assert all("hidden" in r["params"] for r in main["records"])
    # ...and stopped at the same step when rank 0's pruner said so.
    assert [r["last_step"] for r in other["records"]] == [r["last_step"] for r in main["records"]]
    states = {r["state"] for r in main["records"]}
    assert states <= {"COMPLETE", "PRUNED"}
    assert "PRUNED" in states, main["records"]


@pytest.mark.multiprocess
@pytest.mark.slow
def test_two_process_search_trains_every_trial_under_fsdp(tmp_path):
    main, other = _search(tmp_path, "fsdp")
    assert len(main["records"]) == 3
    assert (
        main["trained"] == other["trained"] == ["FSDPDigitsMLP"] * 3
    )  # each trial's model sharded on both ranks
    assert [r["params"] for r in other["records"]] == [r["params"] for r in main["records"]]
    assert [r["last_step"] for r in other["records"]] == [r["last_step"] for r in main["records"]]
    assert {r["state"] for r in main["records"]} <= {"COMPLETE", "PRUNED"}
    assert all(r["objective"] is not None for r in main["records"])
