"""What the `Trainer` costs over a hand-written Accelerate loop: throughput ratio and fixed setup cost.

Both train the same model on the same data with the same collator, DataLoader settings, optimizer (the
Trainer's default AdamW groups), scheduler, gradient clipping and number of steps; the Trainer runs with its
defaults minus logging, evaluation, saving and progress bars. The two are alternated several times after a
warm-up so that machine noise hits both alike.

    python -m benchmarks.trainer_overhead           # full
    python -m benchmarks.trainer_overhead --quick   # 10 steps, 2 runs each, 2 setups, no warm-up (seconds)

Targets (issue 2): throughput >= 0.95x the hand-written loop; one ``Trainer(...)`` + ``train()`` setup < 50 ms.
Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
import time
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, RandomSampler

from benchmarks._common import median, print_table, quiet_logs
from trainer import Trainer, TrainerCallback, TrainingArguments, default_data_collator
from trainer._optimization import create_optimizer, get_scheduler

IN_DIM, HIDDEN, CLASSES = 256, 512, 10


class SyntheticDataset(Dataset):
    """Dict examples, as the Trainer's users write them: collation is part of what both loops pay for."""

    def __init__(self, n: int, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, IN_DIM, generator=g)
        self.y = torch.randint(0, CLASSES, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "labels": self.y[i]}


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(IN_DIM, HIDDEN),
            nn.ReLU(),
            nn.Linear(HIDDEN, HIDDEN),
            nn.ReLU(),
            nn.Linear(HIDDEN, CLASSES),
        )

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        logits = self.net(x)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = nn.functional.cross_entropy(logits, labels)
        return out


def make_args(output_dir: str, steps: int, batch_size: int) -> TrainingArguments:
    return TrainingArguments(
        output_dir=output_dir,
        per_device_train_batch_size=batch_size,
        max_steps=steps,
        learning_rate=1e-3,
        logging_strategy="no",
        save_strategy="no",
        eval_strategy="no",
        disable_tqdm=True,
        report_to="none",
        use_cpu=not torch.cuda.is_available(),
        seed=0,
    )


class _LoopClock(TrainerCallback):
    """Times the training loop proper: from on_train_begin to on_train_end (setup excluded on both sides)."""

    def on_train_begin(self, args, state, control, **kwargs):
        self.begin = time.perf_counter()
        self.cpu_begin = time.thread_time()

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == 0:
            self.first_step = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 1:
            self.first_step_end = time.perf_counter()

    def on_train_end(self, args, state, control, **kwargs):
        self.end = time.perf_counter()
        self.cpu_end = time.thread_time()


def run_trainer(data: Dataset, args: TrainingArguments) -> tuple[float, float]:
    """(wall, CPU) seconds the Trainer's loop took (on_train_begin -> on_train_end)."""
    clock = _LoopClock()
    trainer = Trainer(model=MLP(), args=args, train_dataset=data, callbacks=[clock])
    trainer.train()
    return clock.end - clock.begin, clock.cpu_end - clock.cpu_begin


def run_handwritten(data: Dataset, args: TrainingArguments) -> tuple[float, float]:
    """The same training, written directly against accelerate; (wall, CPU) seconds the loop took."""
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration

    from trainer import set_seed

    set_seed(args.seed)
    accelerator = Accelerator(
        cpu=args.use_cpu,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True, data_seed=args.seed),
        step_scheduler_with_optimizer=False,
    )
    model = MLP()
    optimizer = create_optimizer(model, args)
    scheduler = get_scheduler(
        args.lr_scheduler_type, optimizer=optimizer, num_warmup_steps=0, num_training_steps=args.max_steps
    )
    loader = DataLoader(
        data,
        batch_size=args.per_device_train_batch_size,
        sampler=RandomSampler(data),
        collate_fn=default_data_collator,
    )
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    model.train()
    step, epoch = 0, 0
    begin, cpu_begin = time.perf_counter(), time.thread_time()
    while step < args.max_steps:
        loader.set_epoch(epoch)
        for batch in loader:
            with accelerator.accumulate(model):
                loss = model(**batch)["loss"]
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad(set_to_none=True)
                    step += 1
            if step >= args.max_steps:
                break
        epoch += 1
    return time.perf_counter() - begin, time.thread_time() - cpu_begin


def measure_setup(data: Dataset, output_dir: str, batch_size: int, repeats: int) -> dict[str, float]:
    """Fixed cost of ``Trainer(...)`` + ``train()`` with one step: everything but the step itself (ms)."""
    init_ms, until_begin_ms, total_fixed_ms = [], [], []
    for _ in range(repeats):
        clock = _LoopClock()
        args = make_args(output_dir, steps=1, batch_size=batch_size)
        start = time.perf_counter()
        trainer = Trainer(model=MLP(), args=args, train_dataset=data, callbacks=[clock])
        constructed = time.perf_counter()
        trainer.train()
        done = time.perf_counter()
        one_step = clock.first_step_end - clock.first_step
        init_ms.append((constructed - start) * 1e3)
        until_begin_ms.append((clock.begin - constructed) * 1e3)
        total_fixed_ms.append((done - start - one_step) * 1e3)
    return {
        "Trainer(...)": median(init_ms),
        "train() until on_train_begin": median(until_begin_ms),
        "Trainer(...) + train(), minus the step": median(total_fixed_ms),
    }


@quiet_logs("trainer")
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 steps, 2 runs each, no warm-up (seconds)")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps per run")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs of each loop, alternated")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--threads", type=int, default=1,
        help="torch intra-op threads (1 by default: on a shared machine, spinning thread pools make noise)",
    )  # fmt: skip
    opts = parser.parse_args(argv)
    torch.set_num_threads(opts.threads)
    steps = opts.steps or (10 if opts.quick else 400)
    repeats = opts.repeats or (2 if opts.quick else 7)  # 2: both orders

    data = SyntheticDataset(4096)
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
        args = make_args(tmp, steps, opts.batch_size)
        # Warm-up: imports, allocator, thread pools (a smoke run's figures are not read: it has none).
        if not opts.quick:
            run_handwritten(data, make_args(tmp, 10, opts.batch_size))
            run_trainer(data, make_args(tmp, 10, opts.batch_size))
        times: dict[str, list[tuple[float, float]]] = {"hand-written accelerate loop": [], "Trainer": []}
        for i in range(repeats):
            # Alternate which goes first so drift (thermal, other processes) does not favour one side.
            order = [("hand-written accelerate loop", run_handwritten), ("Trainer", run_trainer)]
            for name, fn in order if i % 2 == 0 else order[::-1]:
                times[name].append(fn(data, args))
        setup = measure_setup(data, tmp, opts.batch_size, repeats=2 if opts.quick else max(repeats, 5))

    samples = steps * opts.batch_size
    hand_name = "hand-written accelerate loop"
    print(f"trainer_overhead: {steps} steps x batch {opts.batch_size}, {repeats} alternated runs each, "
          f"MLP {IN_DIM}-{HIDDEN}-{HIDDEN}-{CLASSES}, ~{median([w for w, _ in times[hand_name]]) / steps * 1e3:.2f} "
          f"ms/step, torch threads {torch.get_num_threads()}")  # fmt: skip
    rows: list[list[Any]] = []
    ratios = {}
    for clock, index in (("wall", 0), ("CPU", 1)):
        # CPU time (of the one training thread) is what the loop itself costs; wall time adds whatever else
        # the machine was doing, so on a shared machine the CPU ratio is the steadier of the two.
        per_loop = {name: [t[index] for t in ts] for name, ts in times.items()}
        for name, ts in per_loop.items():
            rows.append([name, clock, samples / median(ts), samples / min(ts), samples / max(ts)])
        ratios[clock] = median(per_loop[hand_name]) / median(per_loop["Trainer"])
    print_table("Throughput (samples/s)", ["loop", "clock", "median", "best", "worst"], rows)
    print(f"\nratio Trainer / hand-written (median): wall {ratios['wall']:.3f}, CPU {ratios['CPU']:.3f}"
          "   (target >= 0.95)")  # fmt: skip
    print_table("Fixed cost (ms, median)", ["what", "ms"], [[k, v] for k, v in setup.items()])
    print("(target: Trainer(...) + train() setup < 50 ms)")


if __name__ == "__main__":
    main()
