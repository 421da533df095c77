"""Portable hyperparameter search spaces: pure Python, no torch and no search backend.

Build a space from domains (bounds inclusive) and plain values (constants)::

    from spaces import Categorical, Float, Int, SearchSpace

    space = SearchSpace({
        "learning_rate": Float(1e-5, 1e-3, log=True),
        "num_train_epochs": Int(1, 5),
        "optimizer": Categorical(["adamw", "sgd"]),
        "momentum": Float(0.0, 0.99, when={"optimizer": "sgd"}),
        "warmup_ratio": 0.1,
    })

or load one from YAML with ``SearchSpace.from_yaml``. Each backend adapter converts a space to its
library's native form at its own edge.
"""

from __future__ import annotations

from ._defaults import default_space
from ._domains import Categorical, Domain, Fixed, Float, Int, same_value
from ._errors import ParameterError
from ._space import SearchSpace

__all__ = [
    "Domain",
    "Float",
    "Int",
    "Categorical",
    "Fixed",
    "ParameterError",
    "SearchSpace",
    "default_space",
    "same_value",
]
