"""Memory and speed features a search needs, measured side by side (printed, never asserted).

- gradient checkpointing: peak resident memory of the same training (a small BERT built from a config, long
  sequences) with and without ``gradient_checkpointing``, each in its own process (``ru_maxrss``); the ratio;
- ``torch_compile``: steps/s after warm-up with and without it, and the compile cost (first step's extra time);
- a sweep over batch sizes on a "device" with room for batches of ``--cap`` (a larger batch raises torch's
  out-of-memory error): trials completed with ``auto_find_batch_size`` vs without.

    python -m benchmarks.memory_features            # full
    python -m benchmarks.memory_features --quick    # small model, 1 step, no compile; a sweep of 4 trials x 2 steps
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import emit_json, print_table, result_row

ROOT = Path(__file__).resolve().parents[1]


def _bert_trainer(out: str, seq: int, hidden: int, layers: int, steps: int, **args: Any) -> Any:
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from trainer import Trainer, TrainingArguments

    class Random(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 256

        def __getitem__(self, i: int) -> dict:
            g = torch.Generator().manual_seed(i)
            return {"input_ids": torch.randint(5, 1000, (seq,), generator=g), "labels": torch.tensor(i % 2)}

    def model_init() -> Any:
        torch.manual_seed(0)
        return BertForSequenceClassification(
            BertConfig(
                vocab_size=1000,
                hidden_size=hidden,
                num_hidden_layers=layers,
                num_attention_heads=4,
                intermediate_size=hidden * 2,
                max_position_embeddings=seq,
            )
        )

    settings = dict(
        output_dir=out,
        max_steps=steps,
        per_device_train_batch_size=16,
        save_strategy="no",
        eval_strategy="no",
        logging_strategy="no",
        report_to="none",
        disable_tqdm=True,
        use_cpu=True,
    )
    settings.update(args)
    return Trainer(model_init=model_init, args=TrainingArguments(**settings), train_dataset=Random())


def _child(kind: str, quick: bool) -> None:
    import torch

    torch.set_num_threads(1)
    seq, hidden, layers = (128, 64, 2) if quick else (512, 256, 4)
    with tempfile.TemporaryDirectory() as tmp:
        if kind in ("gc", "nogc"):
            steps = 1 if quick else 3
            trainer = _bert_trainer(tmp, seq, hidden, layers, steps, gradient_checkpointing=kind == "gc")
            trainer.train()
            print(json.dumps({"peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
            return
        compiled = kind == "compile"
        trainer = _bert_trainer(tmp, seq, hidden, layers, 12, torch_compile=compiled)
        times: list[float] = []

        from trainer import TrainerCallback

        class Clock(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                self.t = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                times.append(time.perf_counter() - self.t)

        trainer.add_callback(Clock())
        trainer.train()
        steady = sorted(times[2:])[len(times[2:]) // 2]
        print(json.dumps({"first_s": times[0], "steady_s": steady}))


def _run_child(kind: str, quick: bool) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.memory_features", "--child", kind]
        + (["--quick"] if quick else []),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _capped_sweep(cap: int, rescue: bool, n_trials: int = 12, max_steps: int = -1) -> tuple[int, int]:
    import torch

    import hpsearch
    import spaces
    from benchmarks._digits import make_trainer
    from trainer import TrainerCallback

    class MemoryCap(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if args.per_device_train_batch_size > cap:
                raise torch.OutOfMemoryError(f"out of memory (benchmark cap: batches above {cap})")

    with tempfile.TemporaryDirectory() as tmp:
        trainer = make_trainer(tmp, num_train_epochs=1, max_steps=max_steps, auto_find_batch_size=rescue)
        trainer.add_callback(MemoryCap())
        best = hpsearch.hyperparameter_search(
            trainer,
            hp_space={"per_device_train_batch_size": spaces.Categorical([8, 16, 32, 64, 128, 256])},
            compute_objective="eval_accuracy",
            direction="maximize",
            n_trials=n_trials,
            backend="random",
            seed=0,
            max_failed_trials=100,
        )
        records = best.run_summary.records
    return sum(r.state.value == "COMPLETE" for r in records), len(records)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cap", type=int, default=32)
    parser.add_argument("--child")
    opts = parser.parse_args(argv)
    if opts.child:
        _child(opts.child, opts.quick)
        return {}
    rows = []
    gc, nogc = _run_child("gc", opts.quick), _run_child("nogc", opts.quick)
    rows.append(
        result_row(
            "peak resident memory, gradient_checkpointing vs not (same model and batch)",
            gc["peak_mb"],
            nogc["peak_mb"],
            nogc["peak_mb"] / gc["peak_mb"],
            "reported (>1 = saves)",
            None,
            unit="MB",
        )
    )
    if not opts.quick:
        compiled, plain = _run_child("compile", False), _run_child("plain", False)
        rows.append(
            result_row(
                "steps/s after warm-up, torch_compile vs eager",
                1 / compiled["steady_s"],
                1 / plain["steady_s"],
                plain["steady_s"] / compiled["steady_s"],
                "reported",
                None,
                unit="steps/s",
                note=f"compile cost {compiled['first_s'] - plain['first_s']:.1f} s",
            )
        )
    # A smoke run: 4 trials of 2 steps (and their evaluation), whose batch sizes (seed 0: 64, 64, 8, 32) are still
    # both within the cap and above it.
    n_trials, max_steps = (4, 2) if opts.quick else (12, -1)
    done_with, total = _capped_sweep(opts.cap, True, n_trials, max_steps)
    done_without, _ = _capped_sweep(opts.cap, False, n_trials, max_steps)
    rows.append(
        result_row(
            f"trials completed in a batch-size sweep with room for batches of {opts.cap}: "
            "auto_find_batch_size vs not",
            done_with,
            done_without,
            done_with / done_without if done_without else None,
            f"more than without ({total} trials)",
            done_with > done_without,
        )
    )
    print_table(
        "Memory and speed features",
        ["figure", "ours", "baseline", "ratio"],
        [[r["name"], r["ours"], r["baseline"], r["ratio"]] for r in rows],
    )
    emit_json("memory_features", rows)
    return {"rows": rows}


if __name__ == "__main__":
    main()
