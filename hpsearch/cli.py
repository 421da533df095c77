"""The ``hpsearch`` command: ``hpsearch run SWEEP.yaml``, ``hpsearch report OUTPUT_DIR [OUTPUT_DIR ...]`` and
``hpsearch schema`` (the sweep file's reference).

The sweep file is described, parsed and checked in `hpsearch.sweep`. This module names no backend: the choices of
``--backend`` come from the registry, and what differs between backends (a stable run name, continuing with
``--resume``, an earlier run left in the engine's store) goes through the adapter's sweep hooks
(`SearchBackend.sweep_options`, `existing_run`, `discard_existing_run`).

Exit codes: 0 done, 1 the search (or a report) failed, 2 the command or the sweep file is wrong (the message
names the key and its line in the file, and the fix; no traceback), 130 interrupted (Ctrl-C: one line says what
finished and the command that continues).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shlex
import shutil
import sys
import time
import traceback
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, NoReturn

from ._files import EVENTS_FILE, RESULT_FILES, SEARCH_FILE
from ._interrupt import Interrupt
from ._option_flags import add_option_flags, option_flag_overrides
from ._sweep_trainer import build_trainer
from .backends import backend_names, get_backend
from .errors import BackendNotAvailable, HPSearchError, SearchConfigError
from .options import N_TRIALS
from .sweep import KEYS, ConfigError, SweepConfig, load_sweep

__all__ = ["ConfigError", "SweepConfig", "load_sweep", "main"]

logger = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_INTERRUPTED = 0, 1, 2, 130


# ---------------------------------------------------------------------------------------------- run
def _locate(error: SearchConfigError, config: SweepConfig) -> tuple[Any, ...]:
    """The sweep-file key a `SearchConfigError` of the search is about, from the argument it names (``about``)."""
    if not error.about:
        return ()
    argument, *rest = error.about
    if argument == "hp_space" and rest and config.space is not None and rest[0] in config.space:
        return ("space", rest[0])
    if argument in config.backend_options:
        return ("backend_options", argument)
    if argument in config.training_args:
        return ("training_args", argument)
    key = {"compute_objective": "objective", "hp_space": "space"}.get(argument, argument)
    return (key,) if key in KEYS else ()


def _prepare_store(config: SweepConfig, resume: bool, fresh: bool = False) -> str | None:
    """Deal with an earlier run of this sweep, left in the backend's own store or (a backend without one, or with
    nothing in it) in the output folder's search.json; returns a note for the user, or None.

    A resumed run goes on with it, and every option built with an integer seed (``{name: Class, seed: N}``, e.g. a
    sampler) is built again with ``seed + trials so far``: the same seed would replay the first trials' samples.
    Finished trials are never deleted implicitly: without ``--resume`` the run is refused, naming ``--resume`` and
    ``--fresh``; ``--fresh`` deletes the earlier run first, and only when the sweep owns the store (``{output_dir}``
    names it).
    """
    backend_cls = get_backend(config.backend)
    out = Path(config.output_dir)
    fix = "choose a folder that can be written (output_dir in the sweep file, or --output-dir)."
    if out.exists() and not out.is_dir():
        raise config.error(f"output_dir {str(out)!r} is a file, not a folder; {fix}", "output_dir")
    created = backend_cls.can_resume and not out.exists()
    if created:
        try:
            out.mkdir(parents=True)  # a store in the output folder needs the folder
        except OSError as error:
            raise config.error(
                f"output_dir {str(out)!r} cannot be created ({error.strerror or error}); {fix}", "output_dir"
            ) from None
    try:
        found = backend_cls.existing_run(config.backend_options)
    except SearchConfigError as error:
        raise config.error(str(error), *(_locate(error, config) or ("backend_options",))) from None
    finally:
        if created and not any(out.iterdir()):
            out.rmdir()
    earlier = None
    if found is None:
        # No store of the backend's own (or nothing in it): the folder's search.json is the earlier run's record.
        earlier = _earlier_results(config, fresh)
        if earlier is None:
            return None
        found = len(earlier.records)
    if resume:
        note = f"Resuming the earlier run of this sweep ({found} trials so far)"
        reseeded = config.reseed(found) if found else []
        if reseeded:
            note += f"; {', '.join(reseeded)} (seed + trials so far, so that no earlier sample is replayed)"
        return note + "."
    if not fresh:
        _refuse_earlier(config, found, from_folder=earlier is not None)
    return _delete_earlier(config, found, earlier)


def _refuse_earlier(config: SweepConfig, found: int, from_folder: bool) -> NoReturn:
    """Refuse to start over an earlier run (``found`` trials, recorded in the output folder or in the
    backend's store) that neither --resume nor --fresh names; the message says both fixes that apply."""
    backend_cls = get_backend(config.backend)
    where = (
        f"{Path(config.output_dir) / SEARCH_FILE}" if from_folder else f"the {config.backend} backend's store"
    )
    how = (
        "Pass --resume to continue it, or --fresh"
        if backend_cls.can_resume
        else (f"The {config.backend} backend cannot continue it; pass --fresh")
    )
    fixes = f"{how} to delete it and start over, or give this run another output_dir."
    if not from_folder and not config.owns_store:
        # The run is found by the options' names (e.g. a study named after the sweep file) in a store that does
        # not move with the output folder: another output_dir finds it again, and --fresh does not delete it.
        names = " or ".join(sorted(k for k, v in config.backend_options.items() if isinstance(v, str)))
        fixes = (
            f"{'Pass --resume to continue it, or give' if backend_cls.can_resume else 'Give'} this run "
            f"another {names or 'name or store'} in backend_options (the store is outside the output folder: "
            "another output_dir would find this run again, and --fresh does not delete it)."
        )
    raise config.error(
        f"an earlier run of this sweep has {found} trials in {where}; nothing was deleted. {fixes}",
        "output_dir" if from_folder else "backend_options",
    )


def _delete_earlier(config: SweepConfig, found: int, earlier: Any) -> str:
    """--fresh: delete the earlier run (from the folder's search.json when ``earlier`` is that result, else from
    the backend's store, which the sweep must own); returns the note for the user."""
    backend_cls = get_backend(config.backend)
    if earlier is not None:
        _discard_results(earlier, Path(config.output_dir))
        return f"Deleted the earlier run of this sweep ({found} trials) from {config.output_dir}, as --fresh asked."
    if not config.owns_store:
        raise config.error(
            f"--fresh: the earlier run of this sweep ({found} trials) is in a store outside the output folder, which "
            "this command does not delete; pass --resume to continue it, or give this run another name or store in "
            "backend_options.",
            "backend_options",
        )
    backend_cls.discard_existing_run(config.backend_options)
    in_folder = _earlier_results(
        config, fresh=True
    )  # and what that run wrote into the folder: its trials go too
    if in_folder is not None:
        _discard_results(in_folder, Path(config.output_dir))
    return (
        f"Deleted the earlier run of this sweep ({found} trials) from the backend's store, as --fresh asked."
    )


def _earlier_results(config: SweepConfig, fresh: bool) -> Any:
    """The `SearchResult` an earlier run of this sweep saved in its output folder (None: there is none). An
    unreadable one is an error, unless --fresh is to delete it anyway (then a result without records)."""
    from .results import SearchResult

    if not (Path(config.output_dir) / SEARCH_FILE).is_file():
        return None
    try:
        return SearchResult.load(config.output_dir)
    except (ValueError, OSError) as error:
        if fresh:
            return SearchResult(config.backend, ["minimize"], [])  # its files go; its trials cannot be named
        raise config.error(
            f"{error} An earlier run of this sweep left it; nothing was deleted. Pass --fresh to delete that run "
            "and start over, or give this run another output_dir.",
            "output_dir",
        ) from None


def _discard_results(earlier: Any, output_dir: Path) -> None:
    """--fresh for a run recorded only in its folder: its result files and its trials' folders go."""
    for name in RESULT_FILES:
        (output_dir / name).unlink(missing_ok=True)
    from .runner import OWNER_FILE

    root = output_dir.resolve()
    for record in earlier.records:
        folder = (output_dir / str(record.name)).resolve()
        # A trial's own folder (it holds the mark its trial left), never anything outside nor a folder of the user's
        # that a name in search.json happens to match.
        if folder.parent == root and (folder / OWNER_FILE).is_file():
            shutil.rmtree(folder)


def _quiet_trainer_bars(trainer: Any, show_trial_bars: bool) -> None:
    """Swap the trainer's bar (which also prints every log dict) for a transient per-trial bar, or none."""
    from trainer import PrinterCallback, ProgressCallback

    from ._progress import TrialProgressCallback

    trainer.remove_callback(ProgressCallback)
    trainer.remove_callback(PrinterCallback)
    if show_trial_bars:
        trainer.add_callback(TrialProgressCallback())


def _aware(moment: datetime) -> datetime:
    """A record's time as an aware UTC datetime (records written without a zone are UTC)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _print_summary(result: Any, started: float, report: str | None, out: Any) -> None:
    from .report._format import fmt_duration
    from .warmstart import is_warm, own_counts

    counts, warm = own_counts(result)
    detail = ", ".join(f"{n} {state.lower()}" for state, n in counts.items() if n) or "none finished"
    seconds = time.monotonic() - started
    elapsed = fmt_duration(seconds)
    told = f", plus {warm} earlier trial(s) told by warm start (not trained)" if warm else ""
    total = sum(counts.values())
    # A resumed sweep's trials that an earlier run started (and finished, or was killed in): this run's time is not
    # theirs, so the line says how many ran now.
    began = datetime.now(timezone.utc) - timedelta(seconds=seconds)
    earlier = sum(
        1 for r in result.records if not is_warm(r) and r.started is not None and _aware(r.started) < began
    )
    if earlier:
        timing = f"with {result.backend}: {total - earlier} run now in {elapsed}, {earlier} in an earlier run"
        print(f"Trials: {total} ({detail}){told} {timing}.", file=out)
    else:
        print(f"Trials: {total} ({detail}){told} in {elapsed} with {result.backend}.", file=out)
    best = result.best_trials
    if not best:
        print("No trial completed.", file=out)
    for record in best:
        values = result.objective_values(record) or []
        shown = ", ".join(f"{v:.6g}" for v in values)
        label = "Best trial" if len(best) == 1 else "Pareto-optimal trial"
        print(f"{label}: {record.name} (number {record.number}), {result.objective} = {shown}", file=out)
        for name, value in sorted(record.params.items()):
            print(f"  {name}: {value!r}", file=out)
        if record.checkpoint:
            print(f"  checkpoint: {record.checkpoint}", file=out)
    print(f"Results: {result.output_dir}", file=out)
    if report is not None:
        print(f"Report: {report}", file=out)


def run(args: argparse.Namespace) -> int:
    """``hpsearch run``: the whole sweep, then report.html; returns the exit code.

    Ctrl-C is answered with exit code 130 and one line in every phase: before the search (imports, the data factory,
    building the trainer: no trial ran), during it (`Interrupt`: what finished and the command that continues) and
    after it (the results are saved; the report is what was cut short)."""
    config = _load_run_config(args)
    argv = getattr(
        args, "argv", ["run", str(config.path)]
    )  # the command as typed, to say how to run it again
    try:
        prepared = _prepare_run(config, args)
    except KeyboardInterrupt:
        print(
            f"\nInterrupted before the search started: no trial ran. Run the same command again to start it: "
            f"{shlex.join(['hpsearch', *argv])}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if prepared is None:
        return EXIT_FAILED
    trainer, interactive, started = prepared
    interrupt = Interrupt()
    result, failure = _search(config, trainer, interrupt, interactive)
    if interrupt.interrupted:
        print(
            f"\n{interrupt.summary(config, argv)}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    try:
        if result is None:
            result = _load_if_any(config.output_dir)
        report = _write_report(result, config.output_dir) if result is not None else None
        if result is not None:
            _print_summary(result, started, report, sys.stdout)
    except KeyboardInterrupt:
        print(
            f"\nInterrupted after the search ended: its results are saved in {config.output_dir}; write its report "
            f"with: {shlex.join(['hpsearch', 'report', config.output_dir])}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if failure is not None:
        print(f"hpsearch: the search failed: {_shorten(str(failure))}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _prepare_run(config: SweepConfig, args: argparse.Namespace) -> tuple[Any, bool, float] | None:
    """What comes before the search: threads, an earlier run (--resume, --fresh), the datasets and the trainer;
    returns (the trainer, whether bars are shown, the start time), or None when the user's data factory or trainer
    factory raised (its traceback printed)."""
    started = time.monotonic()
    from trainer import TrainingArguments

    from ._progress import is_interactive

    if config.torch_threads is not None:
        import torch

        torch.set_num_threads(config.torch_threads)
    note = _prepare_store(config, args.resume, args.fresh)
    if note:
        print(note, file=sys.stderr)
    datasets = _datasets(config)
    if datasets is None:
        return None
    training_args = TrainingArguments(output_dir=config.output_dir, **config.training_args)
    trainer = build_trainer(config, training_args, *datasets)
    if trainer is None:
        return None
    interactive = is_interactive() if args.progress is None else args.progress
    _quiet_trainer_bars(trainer, interactive and not training_args.disable_tqdm)
    if interactive:
        # The bar says what the engine's per-trial INFO lines would (its logger is named after its module); keep
        # its warnings.
        logging.getLogger(get_backend(config.backend).requirement).setLevel(logging.WARNING)
    print(
        f"Sweep {config.path}: {config.n_trials} trials with {config.backend}, results in {config.output_dir}",
        file=sys.stderr,
    )
    return trainer, interactive, started


def _load_run_config(args: argparse.Namespace) -> SweepConfig:
    """The sweep file with the command line's overrides (--set, option flags, --warm-start) applied."""
    overrides: list[str | tuple[str, str]] = [
        *args.set,
        *option_flag_overrides(args),
    ]  # --set, --trial-workers
    for flag, value in (("--output-dir", args.output_dir), *(("--warm-start", d) for d in args.warm_start)):
        if value is not None and not value.strip():  # abspath('') is the current directory, whatever it holds
            raise ConfigError(f"{flag} {value!r} is empty; pass a folder path, e.g. {flag} out.")
    if args.warm_start:
        # --warm-start DIR: the earlier searches' folders, relative to the current directory.
        overrides.append(
            (
                "backend_options.warm_start=" + json.dumps([os.path.abspath(d) for d in args.warm_start]),
                "--warm-start",
            )
        )
    if args.n_trials is not None:
        overrides.append((f"n_trials={args.n_trials}", "--n-trials"))
    return load_sweep(
        args.config,
        backend=args.backend,
        output_dir=args.output_dir,
        resume=args.resume,
        overrides=overrides,
    )


def _datasets(config: SweepConfig) -> tuple[Any, Any] | None:
    """(train_dataset, eval_dataset) from the sweep's data factory; None when the factory raised (traceback
    printed). A factory that returns anything else is a sweep-file error."""
    try:
        datasets = config.data()
    except Exception:  # the user's data code: its traceback is the useful part
        traceback.print_exc()
        print(
            f"hpsearch: the data factory {config.lines.path}: data failed (traceback above).", file=sys.stderr
        )
        return None
    if not isinstance(datasets, tuple | list) or len(datasets) != 2:
        raise config.error(
            f"the data factory returned {type(datasets).__name__}; it must return (train_dataset, eval_dataset).",
            "data",
        )
    train_dataset, eval_dataset = datasets
    for role, dataset in (("train", train_dataset), ("eval", eval_dataset)):
        if (
            dataset is None
        ):  # the search would refuse it naming Trainer(...), which a sweep file has no line for
            raise config.error(
                f"the data factory returned None as the {role} dataset; every trial needs one, so "
                "return (train_dataset, eval_dataset) with both.",
                "data",
            )
    return train_dataset, eval_dataset


def _search(
    config: SweepConfig, trainer: Any, interrupt: Interrupt, interactive: bool
) -> tuple[Any, BaseException | None]:
    """Run the search; returns (its `SearchResult` or None, the error that failed it or None). A search-argument
    error is raised as the sweep-file error at the key it is about; Ctrl-C sets ``interrupt.interrupted``."""
    from . import hyperparameter_search
    from ._progress import SweepProgress

    try:
        with interrupt, SweepProgress(config.n_trials, enabled=interactive) as progress:
            best = hyperparameter_search(
                trainer,
                hp_space=config.space,
                compute_objective=config.objective,
                n_trials=config.n_trials,
                direction=config.direction,
                backend=config.backend,
                on_trial_end=progress.on_trial_end,
                **config.backend_options,
            )
        return (best[0] if isinstance(best, list) else best).run_summary if best else None, None
    except SearchConfigError as error:
        if isinstance(error, ConfigError):
            raise
        keys = _locate(error, config)
        if not keys:  # no key to point at: no line either (the document's first line would mislead)
            raise ConfigError(str(error), path=str(config.path)) from None
        raise config.error(str(error), *keys) from None
    except KeyboardInterrupt:
        interrupt.interrupted = True
    except HPSearchError as error:
        return None, error
    except Exception as error:  # the user's model/data code or a backend bug: keep the traceback
        traceback.print_exc()
        return None, error
    return None, None


#: Characters of a message the CLI prints: a huge value quoted in an error would otherwise fill the terminal.
MAX_MESSAGE = 4000


def _shorten(message: str) -> str:
    if len(message) <= MAX_MESSAGE:
        return message
    return f"{message[:MAX_MESSAGE]}... ({len(message) - MAX_MESSAGE:,} more characters)"


def _load_if_any(output_dir: str) -> Any:
    from .results import SearchResult

    try:
        return SearchResult.load(output_dir)
    except (FileNotFoundError, ValueError):
        return None


def _write_report(result: Any, output_dir: str) -> str | None:
    from .report import write_html

    try:
        return os.path.abspath(write_html(result, Path(output_dir) / "report.html"))
    except ImportError as error:  # plotly is optional: the results are written anyway
        print(f"hpsearch: no HTML report: {error}", file=sys.stderr)
        return None


# ---------------------------------------------------------------------------------------------- report
def report(args: argparse.Namespace) -> int:
    """``hpsearch report DIR [DIR ...]``: one report, or a comparison of several searches."""
    from .report import render_markdown, write_compare_html, write_html
    from .results import SearchResult

    _check_report_options(args)
    results = []
    for folder in args.dirs:
        _check_saved_search(folder)
        try:
            results.append(SearchResult.load(folder))
        except (FileNotFoundError, ValueError) as error:
            raise ConfigError(str(error)) from None
        results[-1].refresh_exports()  # a killed search's CSVs gain the trials its journal holds
    if args.markdown:
        for folder, result in zip(args.dirs, results):
            if len(results) > 1:
                print(f"## {folder}\n")
            print(render_markdown(result, max_rows=50 if args.max_rows is None else args.max_rows))
            if len(results) > 1:
                print()
        return EXIT_OK
    try:
        if len(results) == 1:
            path = write_html(results[0], args.output or Path(args.dirs[0]) / "report.html")
        else:
            path = write_compare_html(
                results, args.output or "compare.html", labels=_labels(args.dirs), target=args.target
            )
    except ImportError as error:
        raise ConfigError(str(error)) from None
    except ValueError as error:  # searches that cannot be compared (directions, several objectives)
        raise ConfigError(str(error)) from None
    except OSError as error:
        raise ConfigError(
            f"cannot write the report to {args.output or args.dirs[0]!r} ({error.strerror or error}); "
            "pass -o with a writable path."
        ) from None
    print(f"Report: {os.path.abspath(path)}")
    return EXIT_OK


def _check_saved_search(folder: str) -> None:
    """Refuse a folder that holds no saved search, saying what it is instead: missing, a file (a sweep file, often),
    a search that has not finished a trial yet (the dashboard shows it live), or no search at all."""
    path = Path(folder)
    if (path / SEARCH_FILE).is_file():
        return
    where = "pass the output folder of a search (the one `hpsearch run` printed after Results:)."
    if not path.exists():
        raise ConfigError(f"{folder!r} does not exist; {where}")
    if not path.is_dir():
        raise ConfigError(f"{folder!r} is a file, not a search's output folder; {where}")
    if (path / EVENTS_FILE).is_file():
        raise ConfigError(
            f"{folder!r} holds a search that has not finished a trial yet ({EVENTS_FILE}, no {SEARCH_FILE} so far); "
            f"run this again once one has, or watch it live: {shlex.join(['hpsearch', 'dashboard', folder])}"
        )
    raise ConfigError(f"{folder!r} holds no {SEARCH_FILE}, so it is not a search's output folder; {where}")


def _check_report_options(args: argparse.Namespace) -> None:
    """Every option given does something in this form of the command, or it is refused before anything is read."""
    problems = []
    if args.max_rows is not None and not args.markdown:
        problems.append(
            f"--max-rows {args.max_rows} sets the trials --markdown lists; add --markdown or drop it"
        )
    if args.max_rows is not None and args.max_rows < 0:
        problems.append(f"--max-rows must be 0 or more, got {args.max_rows}")
    if args.markdown and args.output is not None:
        problems.append(
            f"--markdown prints to stdout, so -o {args.output!r} would write nothing; redirect the output "
            "(> report.md) or drop --markdown"
        )
    if args.target is not None and (args.markdown or len(args.dirs) < 2):
        problems.append(
            f"--target {args.target:g} is the objective value an HTML comparison of several folders "
            "measures the time to; give two or more folders without --markdown, or drop it"
        )
    if args.target is not None and not math.isfinite(args.target):
        problems.append(f"--target must be a finite number, got {args.target}")
    if problems:
        raise ConfigError("; ".join(problems) + ".")


def _labels(dirs: Sequence[str]) -> list[str]:
    """Folder names, or the paths as given when two folders share a name."""
    names = [Path(d).resolve().name or str(d) for d in dirs]
    if len(set(names)) == len(names):
        return names
    return [str(d) for d in dirs]


# ---------------------------------------------------------------------------------------------- main
def _versions() -> str:
    """``hpsearch 0.1.0`` and a line per registered backend: its library's version, or how to install it (read
    from the installed distributions; no backend is imported)."""
    from . import __version__

    lines = [f"hpsearch {__version__}"]
    for name in backend_names():
        backend = get_backend(name)
        version = backend.version()
        lines.append(
            f"  {name}: {version}" if version else f"  {name}: not installed ({backend.install_command})"
        )
    return "\n".join(lines)


class _VersionAction(argparse.Action):  # --version: the versions, looked up only when asked for
    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option: str | None = None
    ) -> None:
        print(_versions())
        parser.exit()


def _add_run_parser(commands: Any) -> None:
    """``hpsearch run SWEEP.yaml`` and its flags (every backend option's flag comes from its declaration)."""
    run_parser = commands.add_parser(
        "run",
        help="run the sweep a YAML file describes",
        description="Run a sweep and write its results and report.html.",
    )
    run_parser.add_argument("config", help="the sweep file (YAML)")
    run_parser.add_argument("--backend", choices=backend_names(), help="override the file's backend")
    # Read as YAML and checked with the file's n_trials (one declaration, one message), naming the flag.
    run_parser.add_argument(
        "--n-trials", metavar="N", help=f"override the file's n_trials ({N_TRIALS.expected()})"
    )
    again = run_parser.add_mutually_exclusive_group()
    again.add_argument(
        "--resume",
        action="store_true",
        help="continue the earlier run of this sweep saved in the backend's store",
    )
    again.add_argument(
        "--fresh",
        action="store_true",
        help="delete the earlier run of this sweep from the backend's store first (never implicit)",
    )
    run_parser.add_argument(
        "--warm-start",
        action="append",
        default=[],
        metavar="DIR",
        help="start from the trials of an earlier search (its output folder; repeatable)",
    )
    run_parser.add_argument(
        "--output-dir", help="override the file's output_dir (relative to the current directory)"
    )
    add_option_flags(run_parser)  # --trial-workers N ..., --set KEY=VALUE
    bars = run_parser.add_mutually_exclusive_group()
    bars.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="show progress bars even when the output is not a terminal",
    )
    bars.add_argument("--no-progress", dest="progress", action="store_false", help="never show progress bars")
    run_parser.set_defaults(handler=run)


def _add_report_parser(commands: Any) -> None:
    """``hpsearch report OUTPUT_DIR [OUTPUT_DIR ...]``."""
    report_parser = commands.add_parser(
        "report",
        help="write the HTML report of a search, or compare several",
        description="One folder: its report (default OUTPUT_DIR/report.html). Several: a comparison "
        "(default ./compare.html).",
    )
    report_parser.add_argument("dirs", nargs="+", metavar="OUTPUT_DIR", help="output folder(s) of searches")
    report_parser.add_argument("-o", "--output", help="where to write the HTML file")
    report_parser.add_argument(
        "--markdown", action="store_true", help="print Markdown to stdout instead of HTML"
    )
    report_parser.add_argument("--max-rows", type=int, help="trials listed by --markdown (default 50)")
    report_parser.add_argument(
        "--target", type=float, help="objective value for 'time to reach target' when comparing"
    )
    report_parser.set_defaults(handler=report)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hpsearch",
        description="Hyperparameter sweeps from a YAML file, and HTML/Markdown reports of their results.",
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        help="print the versions of hpsearch and of each backend's library, and exit",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="{run,report,schema,dashboard}")
    _add_run_parser(commands)
    _add_report_parser(commands)

    schema_parser = commands.add_parser(
        "schema",
        help="print the sweep file's reference (Markdown)",
        description="Print every key of a sweep file and every backend's options, from their one declaration.",
    )
    from ._sweep_schema import print_schema

    schema_parser.set_defaults(handler=print_schema)

    from .dashboard._cli import add_parser as add_dashboard_parser

    add_dashboard_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hpsearch`` console script and of ``python -m hpsearch``; returns the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # usage errors (2) and --help (0), as an exit code rather than an exception
        return int(exit_.code or 0) if not isinstance(exit_.code, str) else EXIT_CONFIG
    args.argv = (
        list(argv) if argv is not None else sys.argv[1:]
    )  # the command as given, to say how to continue
    try:
        code = int(args.handler(args))
        sys.stdout.flush()  # a closed pipe shows here, where it is handled below, not at the interpreter's exit
        return code
    except (SearchConfigError, BackendNotAvailable) as error:  # SearchConfigError includes ConfigError
        print(f"hpsearch: error: {_shorten(str(error))}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        # Ctrl-C where no phase of the command says more (`run` does; the files it writes are written atomically).
        print("\nhpsearch: interrupted (Ctrl-C).", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of the output went away (`hpsearch report ... --markdown | head`): stop quietly, and keep the
        # interpreter's own flush at exit from failing on the same closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
