"""What signing Tune's experiment state costs the Ray driver per step of Tune's loop, by trial folders beside it.

The driver signs the pickles of Tune's experiment folder after every step (`hpsearch._trust.FolderSigner`), and that
folder holds one folder per trial. Measured on a folder like Tune's (``tuner.pkl``, a searcher's pickle, the JSON
state, N trial folders), per step: nothing changed, Tune rewrote its JSON state, a new trial folder appeared; and,
for reference, signing the whole folder again (``sign_folder``, what each step cost when the state changed before
the signer kept what it had signed). Printed with the ratio of 10,000 to 100 folders (flat: about 1). Numbers
only, never asserted.

    python -m benchmarks.state_signing [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from benchmarks._common import emit_json, median, print_table, result_row  # noqa: E402


def _folder(root: str, n: int) -> Path:
    folder = Path(tempfile.mkdtemp(dir=root))
    for i in range(n):
        (folder / f"trainable_{i:05d}").mkdir()
    (folder / "tuner.pkl").write_bytes(os.urandom(20_000))
    (folder / "searcher-state-1.pkl").write_bytes(os.urandom(20_000))
    (folder / "experiment_state-1.json").write_text("{}")
    return folder


def _ms(step: Callable[[], object], before: Callable[[int], None], k: int) -> float:
    """Median milliseconds of ``step()`` over ``k`` calls, ``before(i)`` run untimed before each."""
    times = []
    for i in range(k):
        before(i)
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return median(times) * 1e3


def measure(folder: Path, k: int) -> dict[str, float]:
    from hpsearch import _trust

    signer = _trust.FolderSigner(folder)
    signer.update()
    signer.update()

    def rewrite_json(i: int) -> None:
        (folder / "experiment_state-1.json").write_text(json.dumps({"step": i}))

    def new_trial(i: int) -> None:
        (folder / f"new_{i}").mkdir()
        time.sleep(0.01)  # past the folder mtime's clock tick, so the signer sees the folder changed

    return {
        "step, nothing changed": _ms(signer.update, lambda i: None, k),
        "step after a JSON rewrite": _ms(signer.update, rewrite_json, k),
        "step after a new trial folder": _ms(signer.update, new_trial, k),
        "whole folder signed again": _ms(lambda: _trust.sign_folder(folder), lambda i: None, k),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 folders instead of 10,000; fewer steps")
    options = parser.parse_args()
    large, k = (1_000, 10) if options.quick else (10_000, 30)
    with tempfile.TemporaryDirectory() as root:
        os.environ["HPSEARCH_STATE_KEY_FILE"] = os.path.join(root, "key")
        small_figures = measure(_folder(root, 100), k)
        large_figures = measure(_folder(root, large), k)
    print_table(
        f"Signing Tune's experiment state: ms per step of Tune's loop (median of {k}), by trial folders",
        ["", "100 folders", f"{large:,} folders", "ratio"],
        [[name, small_figures[name], large_figures[name], large_figures[name] / small_figures[name]]
         for name in small_figures],
    )  # fmt: skip
    flat = large_figures["step, nothing changed"] / small_figures["step, nothing changed"]
    emit_json(
        "state_signing",
        [
            result_row(
                f"state signing per step, {large:,} vs 100 trial folders",
                large_figures["step, nothing changed"],
                small_figures["step, nothing changed"],
                flat,
                "<= 2 (flat)",
                flat <= 2,
                unit="ms/step",
            )
        ],
    )


if __name__ == "__main__":
    main()
