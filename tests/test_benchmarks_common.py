"""The benchmarks' shared helpers: a benchmark's ``main`` called in-process leaves logging as it found it."""

from __future__ import annotations

import logging
import warnings

import pytest

from benchmarks._common import quiet_logs

NAMES = ("hpsearch", "trainer", "transformers", "optuna")


@pytest.fixture
def levels():
    """Each logger at a level of its own before the test, and as it was after it."""
    loggers = [logging.getLogger(name) for name in NAMES]
    before = [logger.level for logger in loggers]
    for level, logger in zip((logging.INFO, logging.DEBUG, logging.WARNING, logging.INFO), loggers):
        logger.setLevel(level)
    yield {name: logging.getLogger(name).level for name in NAMES}
    for logger, level in zip(loggers, before):
        logger.setLevel(level)


def test_quiet_logs_quiets_for_the_run_and_restores_after_an_error(levels):
    filters = list(warnings.filters)

    @quiet_logs("hpsearch", "trainer", ignore_warnings=True)
    def run():
        assert logging.getLogger("hpsearch").level == logging.ERROR
        assert logging.getLogger("trainer").level == logging.ERROR
        assert warnings.filters[0][0] == "ignore"
        raise RuntimeError("the benchmark failed")

    with pytest.raises(RuntimeError, match="the benchmark failed"):
        run()
    assert {name: logging.getLogger(name).level for name in NAMES} == levels
    assert warnings.filters == filters


def test_a_benchmark_main_leaves_the_loggers_as_it_found_them(monkeypatch, levels, capsys):
    """peer.main in-process (as a test calls it), its two sides replaced by stand-ins that train nothing."""
    from benchmarks import peer

    seen = []

    def side(n_trials, epochs, output_dir):
        seen.append({name: logging.getLogger(name).level for name in ("hpsearch", "trainer", "transformers")})
        return 1.0, 1.0, []

    monkeypatch.setattr(peer, "run_ours", side)
    monkeypatch.setattr(peer, "run_transformers", side)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # limit_threads sets it: restored after the test
    filters = list(warnings.filters)
    result = peer.main(["--quick"])
    assert result["speedup"] == pytest.approx(1.0)
    assert seen and all(set(levels_in_run.values()) == {logging.ERROR} for levels_in_run in seen)
    assert {name: logging.getLogger(name).level for name in NAMES} == levels
    assert warnings.filters == filters
