"""Run under `accelerate launch --num_processes 2`: a Seq2SeqTrainer evaluates with generation across processes."""

from __future__ import annotations

import json
import sys

from tests.trainer.test_seq2seq import CopyTask, make_trainer


def main(output_dir: str, result_path: str) -> None:
    from pathlib import Path

    trainer = make_trainer(Path(output_dir), max_steps=4)
    trainer.train()
    out = trainer.predict(CopyTask(13, seed=1))
    metrics = trainer.evaluate()
    if trainer.is_world_process_zero():
        with open(result_path, "w") as f:
            json.dump(
                {
                    "world": trainer.accelerator.num_processes,
                    "shape": list(out.predictions.shape),
                    "metrics": metrics,
                },
                f,
            )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
