"""Checks only a CUDA machine can make: mixed precision, checkpoints and resume on the GPU, memory and cost metrics,
and several Optuna trials sharing one GPU. Prints one line per check (PASS/FAIL with what it measured) and writes
them as JSON to ``--out``; exits 1 if any failed. Not part of the test suite (CI has no GPU).

    python scripts/gpu_checks.py --out gpu_checks.json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trainer import Trainer, TrainingArguments

RESULTS: list[dict[str, Any]] = []
DRY_RUN = False  # --dry-run: the CPU checks of the script itself (no fp16, no GPU metrics)


class Regression(Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 32, generator=g)
        self.y = self.x @ torch.linspace(-1, 1, 32) + 0.1 * torch.randn(n, generator=g)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "labels": self.y[i]}


class Model(nn.Module):
    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        out = self.net(x).squeeze(-1)
        result = {"logits": out}
        if labels is not None:
            result["loss"] = nn.functional.mse_loss(out.float(), labels.float())
        return result


def check(name: str):
    def wrap(fn):
        def run(*args: Any) -> None:
            start = time.perf_counter()
            try:
                detail = fn(*args)
                ok = True
            except Exception as error:  # a check that raised failed; the others still run
                detail = {
                    "error": f"{type(error).__name__}: {error}",
                    "trace": traceback.format_exc()[-2000:],
                }
                ok = False
            row = {
                "check": name,
                "ok": ok,
                "seconds": round(time.perf_counter() - start, 2),
                **(detail or {}),
            }
            RESULTS.append(row)
            print(
                ("PASS " if ok else "FAIL ") + json.dumps({k: v for k, v in row.items() if k != "trace"}),
                flush=True,
            )
            if not ok:
                print(row["trace"], flush=True)

        return run

    return wrap


def args(out: str, **kw: Any) -> TrainingArguments:
    base: dict[str, Any] = dict(
        output_dir=out,
        per_device_train_batch_size=32,
        per_device_eval_batch_size=64,
        num_train_epochs=3,
        learning_rate=1e-2,
        disable_tqdm=True,
        report_to="none",
        eval_strategy="epoch",
        save_strategy="epoch",
        logging_steps=5,
        seed=7,
    )
    base.update(kw)
    return TrainingArguments(**base)


def trainer(out: str, **kw: Any) -> Trainer:
    return Trainer(
        model_init=lambda: Model(),
        args=args(out, **kw),
        train_dataset=Regression(512, 0),
        eval_dataset=Regression(128, 1),
    )


def weights(t: Trainer) -> torch.Tensor:
    return torch.cat([p.detach().float().flatten().cpu() for p in t.model.parameters()])


@check("precision")
def precision(mode: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        kw = {mode: True} if mode != "fp32" else {}
        t = trainer(tmp, **kw)
        out = t.train()
        device = next(t.model.parameters()).device
        assert device.type == "cuda" or DRY_RUN, f"model trained on {device}"
        losses = [h["loss"] for h in t.state.log_history if "loss" in h]
        assert all(math.isfinite(x) for x in losses), losses
        assert losses[-1] < losses[0], f"the loss did not fall: {losses[0]} -> {losses[-1]}"
        metrics = t.evaluate()
        assert math.isfinite(metrics["eval_loss"]), metrics
        pred = t.predict(Regression(64, 2))
        assert pred.predictions.shape == (64,), pred.predictions.shape
        ckpt = Path(t.state.best_model_checkpoint or sorted(Path(tmp).glob("checkpoint-*"))[-1])
        files = sorted(p.name for p in ckpt.iterdir())
        # Resume from the first checkpoint and finish: the same weights as the run straight through.
        first = sorted(Path(tmp).glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))[0]
        again = trainer(tmp, **kw)
        again.train(resume_from_checkpoint=str(first))
        diff = float((weights(t) - weights(again)).abs().max())
        return {
            "mode": mode,
            "first_loss": losses[0],
            "last_loss": losses[-1],
            "eval_loss": metrics["eval_loss"],
            "train_runtime": out.metrics["train_runtime"],
            "checkpoint_files": files,
            "resume_max_abs_weight_diff": diff,
        }


@check("full_eval")
def full_eval(mode: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        t = trainer(tmp, save_strategy="no", **{f"{mode}_full_eval": True})
        t.train()
        metrics = t.evaluate()
        dtype = next(t.model.parameters()).dtype
        expected = torch.float16 if mode == "fp16" else torch.bfloat16
        assert dtype == expected, f"{mode}_full_eval evaluated in {dtype}"
        assert math.isfinite(metrics["eval_loss"]), metrics
        return {"mode": mode, "eval_dtype": str(dtype), "eval_loss": metrics["eval_loss"]}


@check("memory_metrics")
def memory_metrics() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        t = trainer(tmp, save_strategy="no", skip_memory_metrics=False)
        out = t.train()
        gpu = {k: v for k, v in out.metrics.items() if "mem_gpu" in k or (DRY_RUN and "mem_cpu" in k)}
        assert gpu, f"no GPU memory metrics among {sorted(out.metrics)}"
        assert DRY_RUN or out.metrics.get("train_mem_gpu_alloc_delta", -1) >= 0, gpu
        return {"gpu_metrics": gpu}


@check("optuna_trials_sharing_one_gpu")
def sharing(n_jobs: int) -> dict[str, Any]:
    import optuna

    from hpsearch import hyperparameter_search
    from spaces import Float, Int

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        t = Trainer(
            model_init=lambda trial: Model(int(trial["hidden"]) if trial else 64),
            args=args(tmp, save_strategy="epoch", num_train_epochs=2),
            train_dataset=Regression(2048, 0),
            eval_dataset=Regression(256, 1),
        )
        start = time.perf_counter()
        with contextlib.redirect_stderr(io.StringIO()):
            best = hyperparameter_search(
                t,
                hp_space={"learning_rate": Float(1e-4, 1e-1, log=True), "hidden": Int(16, 256)},
                n_trials=8,
                backend="optuna",
                n_jobs=n_jobs,
                storage=f"sqlite:///{tmp}/study.db",
            )
        wall = time.perf_counter() - start
        frame = best.run_summary.trials_dataframe()
        states = frame["state"].value_counts().to_dict()
        assert sum(states.values()) == 8 and set(states) <= {"COMPLETE", "PRUNED"}, states
        cost = best.run_summary.total_cost()
        peaks = frame["peak_memory_mb"].tolist()
        assert all(p > 0 for p in peaks), peaks
        assert best.checkpoint is not None and Path(best.checkpoint).is_dir(), best.checkpoint
        return {
            "n_jobs": n_jobs,
            "wall_s": round(wall, 2),
            "states": states,
            "total_cost": cost,
            "peak_memory_mb": peaks,
            "device_s": frame["device_s"].tolist(),
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="gpu_checks.json")
    parser.add_argument("--dry-run", action="store_true", help="check the script on a CPU (fp16 left out)")
    ns = parser.parse_args()
    global DRY_RUN
    DRY_RUN = ns.dry_run
    if not torch.cuda.is_available() and not DRY_RUN:
        print("no CUDA device: nothing to check")
        return 1
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0) if not DRY_RUN else 'cpu'}", flush=True)
    modes = ("fp32", "bf16") if DRY_RUN else ("fp32", "fp16", "bf16")
    for mode in modes:
        precision(mode)
    for mode in modes[1:]:
        full_eval(mode)
    memory_metrics()
    for n_jobs in (1, 4):
        sharing(n_jobs)
    Path(ns.out).write_text(json.dumps(RESULTS, indent=1, default=str))
    failed = [r["check"] for r in RESULTS if not r["ok"]]
    print(f"{len(RESULTS) - len(failed)} passed, {len(failed)} failed {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
