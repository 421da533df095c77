"""The portable default search space, used when the user passes no ``hp_space``."""

from __future__ import annotations

from ._domains import Categorical, Float, Int
from ._space import SearchSpace

__all__ = ["default_space"]


def default_space() -> SearchSpace:
    """The space searched when no ``hp_space`` is given; the same for every backend.

    It mirrors the classic Trainer defaults: ``learning_rate`` log-uniform in [1e-6, 1e-4],
    ``num_train_epochs`` in [1, 5], ``seed`` in [1, 40] (integer bounds inclusive) and
    ``per_device_train_batch_size`` one of 4, 8, 16, 32, 64.
    """
    return SearchSpace(
        {
            "learning_rate": Float(1e-6, 1e-4, log=True),
            "num_train_epochs": Int(1, 5),
            "seed": Int(1, 40),
            "per_device_train_batch_size": Categorical([4, 8, 16, 32, 64]),
        }
    )
