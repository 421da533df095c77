"""A new user's first hour, as the README tells it, run for real on a fresh copy of the repository.

Each step is the README's own command in a new process (``python -m examples.digits``, ``hpsearch run`` of the
example sweep on another backend, ``hpsearch report`` of one search and of two, ``hpsearch dashboard``, and the
*API overview* code block), in a copy of the tracked files only: nothing an earlier run or a developer left in the
checkout can help. Only the sizes change (a few trials of one epoch, via the flags the README names); the checks
are what the user reads: exit codes, the files written, and the printed summary against ``trials.csv``.
"""

from __future__ import annotations

import csv
import os
import re
import select
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--set", "training_args.num_train_epochs=1"]  # the demo's 10 epochs cut to 1: 23 steps a trial

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """The tracked files of this checkout (as a fresh clone has them) in a new folder."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], check=True, capture_output=True, text=True
    ).stdout
    target = tmp_path_factory.mktemp("clone")
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is not part of the copy
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def run(clone: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in the clone, importing the clone's packages, as a user's shell would."""
    env = {**os.environ, "PYTHONPATH": str(clone), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, *args], cwd=clone, env=env, capture_output=True, text=True, timeout=timeout
    )


def read_trials(folder: Path) -> list[dict[str, str]]:
    with open(folder / "trials.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def check_summary(stdout: str, folder: Path) -> None:
    """The summary `hpsearch run` prints says what trials.csv holds: the count, the states and the best trial."""
    rows = read_trials(folder)
    found = re.search(r"^Trials: (\d+) \(([^)]*)\)", stdout, re.MULTILINE)
    assert found, stdout
    assert int(found.group(1)) == len(rows)
    states = {s.split()[1].upper(): int(s.split()[0]) for s in found.group(2).split(", ")}
    assert states == {s: sum(r["state"] == s for r in rows) for s in {r["state"] for r in rows}}
    best = re.search(r"^Best trial: (\S+) \(number (\d+)\), eval_accuracy = (\S+)$", stdout, re.MULTILINE)
    assert best, stdout
    complete = [r for r in rows if r["state"] == "COMPLETE"]
    top = max(complete, key=lambda r: float(r["objective"]))
    assert (best.group(1), int(best.group(2))) == (top["name"], int(top["number"]))
    assert float(best.group(3)) == pytest.approx(float(top["objective"]), rel=1e-5)
    assert f"Results: {folder}" in stdout


def test_the_demo_then_its_resume(clone):
    # README quick start: `make demo` is `python -m examples.digits --fresh`; `--resume` continues one.
    out = clone / "examples" / "digits" / "output"  # the sweep's output_dir, relative to the sweep file
    first = run(clone, "-m", "examples.digits", "--fresh", "--n-trials", "3", *SMALL)
    assert first.returncode == 0, first.stderr
    for name in ("search.json", "trials.csv", "intermediates.csv", "report.html", "study.db"):
        assert (out / name).is_file(), name
    assert len(read_trials(out)) == 3
    check_summary(first.stdout, out)
    assert f"Report: {out / 'report.html'}" in first.stdout

    again = run(clone, "-m", "examples.digits", "--resume", "--n-trials", "4", *SMALL)
    assert again.returncode == 0, again.stderr
    assert "Resuming the earlier run of this sweep (3 trials so far)" in again.stderr
    assert len(read_trials(out)) == 4
    check_summary(again.stdout, out)


def test_the_sweep_file_on_another_backend_and_the_reports(clone):
    demo = clone / "examples" / "digits" / "output"
    if not (demo / "search.json").is_file():  # this test alone: the demo's search first
        assert run(clone, "-m", "examples.digits", "--fresh", "--n-trials", "3", *SMALL).returncode == 0
    sweep = Path("examples") / "digits" / "sweep.yaml"
    other = clone / "random_out"
    done = run(
        clone, "-m", "hpsearch", "run", str(sweep), "--backend", "random", "--n-trials", "2",
        "--output-dir", str(other), *SMALL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(read_trials(other)) == 2
    check_summary(done.stdout, other)

    (demo / "report.html").unlink()  # written by the run: the command must write it again
    report = run(clone, "-m", "hpsearch", "report", str(demo))
    assert report.returncode == 0, report.stderr
    html = (demo / "report.html").read_text(encoding="utf-8")
    assert "Optimization history" in html and read_trials(demo)[0]["name"] in html

    compare = clone / "compare.html"
    both = run(clone, "-m", "hpsearch", "report", str(demo), str(other), "-o", str(compare))
    assert both.returncode == 0, both.stderr
    page = compare.read_text(encoding="utf-8")
    assert "optuna" in page and "random" in page


def test_the_dashboard_serves_the_demo(clone):
    demo = clone / "examples" / "digits" / "output"
    if not (demo / "search.json").is_file():
        assert run(clone, "-m", "examples.digits", "--fresh", "--n-trials", "3", *SMALL).returncode == 0
    env = {**os.environ, "PYTHONPATH": str(clone)}
    server = subprocess.Popen(
        [sys.executable, "-m", "hpsearch", "dashboard", str(demo), "--port", "0"],
        cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        # "hpsearch dashboard: http://127.0.0.1:PORT/ (Ctrl+C to stop)", within a minute
        ready, _, _ = select.select([server.stdout], [], [], 60)
        line = server.stdout.readline() if ready else ""
        url = re.search(r"http://\S+", line)
        assert url, line + (server.stderr.read() if server.poll() is not None and server.stderr else "")
        with urllib.request.urlopen(url.group(0).rstrip("/") + "/", timeout=30) as response:
            assert response.status == 200
            page = response.read().decode("utf-8")
        # The first state is rendered by the server: the demo's trials are in the page itself.
        assert all(row["name"] in page for row in read_trials(demo))
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_api_overview_code_runs(clone):
    # The README's Python example, as written, with the names it leaves to the reader taken from the demo (its
    # model, data and metric) and its sizes made small: 2 trials of 1 epoch instead of 30 of 5.
    readme = (clone / "README.md").read_text(encoding="utf-8")
    section = readme.split("## API overview", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert "n_trials=30" in code and "num_train_epochs=5" in code, (
        "the README example changed: update this test"
    )
    code = code.replace("n_trials=30", "n_trials=2").replace("num_train_epochs=5", "num_train_epochs=1")
    prelude = (
        "from examples.digits.model import DigitsMLP as MyModel, compute_metrics as accuracy, datasets\n"
        "train, valid = datasets()\n"
    )
    script = clone / "api_example.py"
    script.write_text(prelude + code + "\nprint('best', best.run_id, best.objective)\n", encoding="utf-8")
    done = run(clone, str(script))
    assert done.returncode == 0, done.stderr
    out = clone / "out"
    for name in ("search.json", "trials.csv", "report.html", "study.db"):
        assert (out / name).is_file(), name
    rows = read_trials(out)
    assert len(rows) == 2
    best = re.search(r"^best (\S+) (\S+)$", done.stdout, re.MULTILINE)
    assert best, done.stdout
    top = max((r for r in rows if r["state"] == "COMPLETE"), key=lambda r: float(r["objective"]))
    assert float(best.group(2)) == pytest.approx(float(top["objective"]), rel=1e-6)
