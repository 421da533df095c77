"""Progress of a search: one line per finished trial (every search, every backend, from Python too), and the
sweep-level progress bar of `hpsearch run` (trials done/pruned/failed, best so far, elapsed).

`trial_line` is called by `SearchSession.record` after each recorded trial, in the process that records it,
whatever the backend: it logs ``[3/10] run-2 COMPLETE objective 0.9721 | best 0.9810 (run-1)`` on the
``hpsearch.progress`` logger (``[3/10 +6 warm]`` when 6 earlier trials were told by warm start: they are not among
the ``n_trials`` and never the best) (INFO, shown on stderr when the program configured no logging). Silence it with
``logging.getLogger("hpsearch.progress").setLevel(logging.WARNING)``; while the CLI's bar is shown, the bar says it.

It is a CLI feature, hooked in without touching any backend: the CLI hands `SweepProgress.on_trial_end` to the
search (``hyperparameter_search(on_trial_end=...)``), whose session calls it after every recorded trial (in the
driver process, whatever the backend), and it reads the counts and best so far from the session's `RunningTally`
(kept in O(1) per trial; it recounts from the records when a trial is recorded twice, a restart, so it is not
counted twice). `TrialProgressCallback` replaces the trainer's per-trial bar during a
sweep with a transient one (no log lines), so thirty trials do not leave thirty bars and hundreds of metric
dicts on the screen. Both are quiet when the output is not a terminal.
"""

from __future__ import annotations

import logging
import math
import sys
import threading
from typing import IO, TYPE_CHECKING, Any

from trainer import TrainerCallback

if TYPE_CHECKING:
    from ._tally import RunningTally
    from .session import SearchSession
    from .trial import TrialRecord

__all__ = ["PROGRESS_LOGGER", "SweepProgress", "TrialProgressCallback", "is_interactive", "trial_line"]

#: The logger of the per-trial progress lines.
PROGRESS_LOGGER = "hpsearch.progress"
_logger = logging.getLogger(PROGRESS_LOGGER)
if _logger.level == logging.NOTSET:  # a level the program set before importing hpsearch is kept
    _logger.setLevel(logging.INFO)
#: Bars drawing the progress now (`SweepProgress`): the lines would repeat them.
_bars = 0


class _CurrentStderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to sys.stderr as it is when a line is written (a test or a notebook may replace it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


_handler = _CurrentStderr()
_handler.setFormatter(logging.Formatter("%(message)s"))


def trial_line(session: SearchSession, record: TrialRecord) -> None:
    """Log one line for a finished trial: how many of the search's trials finished, its state and objective, and
    the best so far (skipped while a `SweepProgress` bar shows the same)."""
    if _bars or not _logger.isEnabledFor(logging.INFO):
        return
    result = session.result
    tally = session.tally  # kept up to date by the session: no pass over every record per trial
    finished = sum(tally.counts.get(state, 0) for state in ("COMPLETE", "PRUNED", "FAIL"))
    objective = record.objective
    shown = (
        "-"
        if objective is None
        else ", ".join(_format_value(v) for v in objective)
        if isinstance(objective, list)
        else _format_value(objective)
    )
    warm = f" +{tally.warm} warm" if tally.warm else ""  # told, not trained: not among the n_trials
    planned = result.planned_trials or session.n_trials  # a grid may run n_trials x its combinations
    text = f"[{finished}/{planned}{warm}] {record.name} {record.state.value} objective {shown} | "
    text += SweepProgress.best_text(result, tally)
    if record.error and record.state.value == "FAIL":
        text += f" | {record.error.splitlines()[-1][:200]}"
    if not logging.getLogger().handlers and _handler not in _logger.handlers:
        _logger.addHandler(_handler)  # the program configured no logging: show it on stderr all the same
    _logger.info(text)


def is_interactive(stream: IO[str] | None = None) -> bool:
    """True when both stdout and the bar's stream are terminals (``hpsearch run ... > log`` stays quiet)."""
    stream = sys.stderr if stream is None else stream
    return _isatty(sys.stdout) and _isatty(stream)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # replaced or closed streams
        return False


def _format_value(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else str(value)


class SweepProgress:
    """One tqdm bar for the whole sweep, updated after each trial; a context manager that hooks itself in.

    Args:
        total: the number of trials asked for (the bar's length).
        enabled: show the bar; None means "when stdout and ``file`` are terminals".
        file: where the bar is drawn (stderr, like the per-trial bars, so stdout keeps only the results).
    """

    def __init__(self, total: int | None, enabled: bool | None = None, file: IO[str] | None = None) -> None:
        self.total = total
        self.file = sys.stderr if file is None else file
        self.enabled = is_interactive(self.file) if enabled is None else enabled
        self.bar: Any = None
        self.postfix = ""
        self._lock = threading.Lock()

    def __enter__(self) -> SweepProgress:
        global _bars
        if self.enabled:
            _bars += 1
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=self.total,
                desc="sweep",
                unit="trial",
                file=self.file,
                dynamic_ncols=True,
                position=0,
                leave=True,
            )
        return self

    def __exit__(self, *exc: Any) -> None:
        global _bars
        if self.bar is not None:
            _bars -= 1
            self.bar.close()
            self.bar = None

    def on_trial_end(self, session: SearchSession, record: TrialRecord) -> None:
        result = session.result
        if result is None:
            return
        with self._lock:
            tally = session.tally  # kept up to date by the session: no pass over every record per trial
            counts = {
                state: tally.counts.get(state, 0) for state in ("COMPLETE", "PRUNED", "FAIL", "RUNNING")
            }
            finished = counts["COMPLETE"] + counts["PRUNED"] + counts["FAIL"]
            self.postfix = self.describe(result, counts, tally)
            if self.bar is None:
                return
            self.bar.n = finished
            if self.bar.total is not None:
                # A grid may run n_trials x its combinations (planned_trials); a resumed study may hold more trials.
                self.bar.total = max(self.bar.total, finished, result.planned_trials or 0)
            self.bar.set_postfix_str(self.postfix, refresh=False)
            self.bar.refresh()

    @staticmethod
    def describe(result: Any, counts: dict[str, int], tally: RunningTally | None = None) -> str:
        """``"done 5, pruned 3, failed 0, best 0.9721 (run-4)"`` (Pareto size for several objectives); ``tally``:
        the best trial / front kept up to date per trial (else computed from the records)."""
        text = f"done {counts['COMPLETE']}, pruned {counts['PRUNED']}, failed {counts['FAIL']}"
        if tally is not None and tally.warm:
            text += f", +{tally.warm} warm"
        return f"{text}, {SweepProgress.best_text(result, tally)}"

    @staticmethod
    def best_text(result: Any, tally: RunningTally | None = None) -> str:
        """``"best 0.9721 (run-4)"``, ``"best -"`` before a trial completed, ``"pareto 3"`` for several objectives."""
        if result.is_multi_objective:
            return f"pareto {tally.front_size if tally is not None else len(result.best_trials)}"
        best = tally.best_trial if tally is not None else result.best_trial
        if best is None:
            return "best -"
        return f"best {_format_value(result.objective_values(best)[0])} ({best.name})"


class TrialProgressCallback(TrainerCallback):
    """A transient per-trial bar (steps of the running trial, last objective), under the sweep bar.

    Unlike the trainer's `ProgressCallback` it writes no log lines and leaves nothing behind when the
    trial ends. It holds no bar between trials, so the search can deep-copy it into every trial's trainer.
    """

    def __init__(self, file: IO[str] | None = None) -> None:
        self.file = file
        self.bar: Any = None
        self._step = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> TrialProgressCallback:
        return TrialProgressCallback(self.file)

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        from tqdm.auto import tqdm

        self.bar = tqdm(
            total=state.max_steps,
            desc=state.trial_name or "trial",
            unit="step",
            leave=False,
            dynamic_ncols=True,
            file=self.file if self.file is not None else sys.stderr,
            position=1,
        )
        self._step = state.global_step
        if self._step:
            self.bar.update(self._step)

    def on_step_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.update(state.global_step - self._step)
            self._step = state.global_step

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if self.bar is not None and metrics:
            shown = {
                k: v
                for k, v in metrics.items()
                if isinstance(v, float) and k != "epoch" and not k.endswith(("_runtime", "_second", "_time"))
            }
            self.bar.set_postfix(
                {k.removeprefix("eval_"): f"{v:.4g}" for k, v in list(shown.items())[:3]}, refresh=False
            )

    def on_train_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.close()
            self.bar = None
