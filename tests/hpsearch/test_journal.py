"""The results journal beside search.json: torn lines, versions, the disagreement rule, old files, a killed search."""

from __future__ import annotations

import json
import logging
import os
from datetime import timedelta

import pytest

from hpsearch._files import JOURNAL_FILE, SEARCH_FILE
from hpsearch.results import SearchResult
from hpsearch.trial import TrialState
from tests.hpsearch.test_results import T0, make_record, single_records, single_result


def _running(tmp_path, n=3):
    """A search that recorded ``n`` trials the way a running search does: a snapshot at the first, then lines."""
    records = single_records()
    result = single_result(records=[])
    for record in records[:n]:
        result.records.append(record)
        result.record_trial(tmp_path, record)
    return result


def _journal_lines(tmp_path):
    return (tmp_path / JOURNAL_FILE).read_text(encoding="utf-8").splitlines()


def test_torn_last_line_is_skipped_with_a_warning_naming_the_file(tmp_path, caplog):
    result = _running(tmp_path, n=4)
    path = tmp_path / JOURNAL_FILE
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) - 40])  # killed in the middle of writing the last line
    with caplog.at_level(logging.WARNING):
        loaded = SearchResult.load(tmp_path)
    assert [r.trial_id for r in loaded.records] == [r.trial_id for r in result.records[:3]]  # the 4th is torn
    assert loaded.records == result.records[:3]
    assert f"{os.fspath(path)}: its last line (line 4" in caplog.text and "incomplete" in caplog.text
    # Read again in this process (a resume reads the results several times): said once; torn elsewhere: said again.
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert SearchResult.load(tmp_path).records == result.records[:3]
    assert "incomplete" not in caplog.text
    path.write_bytes(whole[: len(whole) - 20])
    with caplog.at_level(logging.WARNING):
        SearchResult.load(tmp_path)
    assert caplog.text.count("incomplete") == 1

    # A bad line before the last is no kill's doing: an error naming the file and the line, nothing dropped silently.
    lines = whole.decode().splitlines(keepends=True)
    path.write_text(lines[0] + lines[1] + "{garbage\n" + "".join(lines[2:]), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{JOURNAL_FILE}' line 3 is not a journal entry.*corrupt"):
        SearchResult.load(tmp_path)


def test_journal_of_a_newer_format_version_is_refused_naming_file_and_version(tmp_path):
    _running(tmp_path)
    path = tmp_path / JOURNAL_FILE
    lines = _journal_lines(tmp_path)
    header = json.loads(lines[0])
    header["format_version"] = 99
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(
        ValueError,
        match=rf"{JOURNAL_FILE}' has format_version 99 but this hpsearch reads journals up "
        r"to version 1; upgrade hpsearch",
    ):
        SearchResult.load(tmp_path)

    path.write_text('{"hello": 1}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="is not an hpsearch results journal"):
        SearchResult.load(tmp_path)


def test_snapshot_and_journal_disagree_journal_lines_newer_than_the_snapshot_win(tmp_path):
    result = _running(tmp_path, n=2)  # the snapshot was taken at the first trial
    snapshot = json.loads((tmp_path / SEARCH_FILE).read_text(encoding="utf-8"))
    assert [r["trial_id"] for r in snapshot["records"]] == ["id-0"]  # trial 1 is only in the journal
    # The same trial changed after the snapshot (a retried trial recorded again): its newer line wins.
    changed = make_record(
        0, TrialState.FAIL, None, dict(result.records[0].params), error="CUDA out of memory"
    )
    result.records[0] = changed
    result.finished = T0 + timedelta(hours=5)
    result.record_trial(tmp_path, changed)
    loaded = SearchResult.load(tmp_path)
    assert loaded.records[0].state is TrialState.FAIL and loaded.records[0].error == "CUDA out of memory"
    assert [r.trial_id for r in loaded.records] == ["id-0", "id-1"] and loaded.finished == result.finished

    # Lines the snapshot already holds (seq <= its journal seq) lose to it: search.json is newer than them.
    snapshot["journal"]["seq"] = 2  # as if the snapshot had been taken after the first two lines
    snapshot["records"][0]["error"] = "from the snapshot"
    (tmp_path / SEARCH_FILE).write_text(json.dumps(snapshot), encoding="utf-8")
    loaded = SearchResult.load(tmp_path)
    assert [r.trial_id for r in loaded.records] == ["id-0"]  # line 1 (trial 1) is covered; line 2 too
    assert loaded.records[0].error == "from the snapshot"
    snapshot["journal"]["seq"] = 1
    (tmp_path / SEARCH_FILE).write_text(json.dumps(snapshot), encoding="utf-8")
    assert SearchResult.load(tmp_path).records[0].error == "CUDA out of memory"  # line 2 is newer: it wins


def test_a_journal_the_snapshot_does_not_name_is_older_and_ignored_with_a_warning(tmp_path, caplog):
    result = _running(tmp_path, n=3)
    stale = (tmp_path / JOURNAL_FILE).read_bytes()
    result.save(tmp_path)  # a new snapshot (all 3 trials) naming a new journal ...
    (tmp_path / JOURNAL_FILE).write_bytes(
        stale
    )  # ... and the kill came before that journal replaced the old one
    with caplog.at_level(logging.WARNING):
        loaded = SearchResult.load(tmp_path)
    assert loaded.records == result.records
    assert "is not the journal the snapshot search.json names" in caplog.text and JOURNAL_FILE in caplog.text


def test_a_version_1_search_json_still_loads_and_ignores_a_journal_beside_it(tmp_path, caplog):
    records = single_records()
    old = {  # as hpsearch wrote it before the journal: format_version 1, no "journal" entry
        "format": "hpsearch.search",
        "format_version": 1,
        "backend": "optuna",
        "directions": ["maximize"],
        "objective": "eval_accuracy",
        "n_trials": 10,
        "space": None,
        "started": T0.isoformat(),
        "finished": None,
        "saved": T0.isoformat(),
        "counts": {},
        "settings": {"seed": 0},
        "versions": {},
        "records": [r.to_dict() for r in records],
    }
    (tmp_path / SEARCH_FILE).write_text(json.dumps(old), encoding="utf-8")
    loaded = SearchResult.load(tmp_path)
    assert loaded.records == records and loaded.settings == {"seed": 0}
    _running(tmp_path / "other", n=3)  # a journal that is not this file's (a v1 file names none)
    os.replace(tmp_path / "other" / JOURNAL_FILE, tmp_path / JOURNAL_FILE)
    with caplog.at_level(logging.WARNING):
        assert SearchResult.load(tmp_path).records == records
    assert "is not the journal the snapshot search.json names" in caplog.text


def test_another_writer_in_the_folder_makes_the_next_trial_take_a_snapshot(tmp_path):
    result = _running(tmp_path, n=2)
    other = single_result(records=[])
    other.save(tmp_path)  # someone else wrote this folder (a new snapshot and journal)
    record = single_records()[2]
    result.records.append(record)
    result.record_trial(
        tmp_path, record
    )  # ours: not appended to the other's journal, a snapshot of ours instead
    assert SearchResult.load(tmp_path).records == result.records
    assert len(_journal_lines(tmp_path)) == 1


def test_hpsearch_report_rewrites_the_csvs_of_a_killed_search_from_snapshot_and_journal(tmp_path):
    import pandas as pd

    from hpsearch.cli import main as cli_main

    result = _running(tmp_path, n=4)  # a snapshot at the first trial, then 3 journal lines: killed here
    assert list(pd.read_csv(tmp_path / "trials.csv")["trial_id"].astype(str)) == [result.records[0].trial_id]

    assert cli_main(["report", str(tmp_path), "--markdown"]) == 0
    rows = pd.read_csv(tmp_path / "trials.csv")
    assert list(rows["trial_id"].astype(str)) == [r.trial_id for r in result.records]
    evaluations = pd.read_csv(tmp_path / "intermediates.csv")
    assert len(evaluations) == sum(len(r.intermediates) for r in result.records)
    assert SearchResult.load(tmp_path).records == result.records  # search.json and the journal are untouched


def test_refresh_exports_writes_only_when_the_journal_added_trials_and_search_json_is_unchanged(tmp_path):
    result = _running(tmp_path, n=1)
    assert not SearchResult.load(tmp_path).refresh_exports()  # nothing beyond the snapshot: no write

    record = single_records()[1]
    result.records.append(record)
    result.record_trial(tmp_path, record)
    stale = SearchResult.load(tmp_path)
    result.save(tmp_path)  # a running search's newer snapshot after that load: its CSVs win
    (tmp_path / "trials.csv").write_text("newer\n", encoding="utf-8")
    assert not stale.refresh_exports()
    assert (tmp_path / "trials.csv").read_text(encoding="utf-8") == "newer\n"
    assert not single_result(records=result.records).refresh_exports()  # not loaded from a folder
