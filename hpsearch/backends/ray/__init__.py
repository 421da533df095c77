"""Ray Tune backend: a `tune.Tuner` drives the trials, locally or on a Ray cluster.

The facade (`RayBackend`) converts the space (`_space`), drives ``Tuner.fit`` and hands the records its driver
receives (`_driver`) to the session. Each trial runs `run_trial` in a Tune trainable (`_worker`), or across a Ray
Train worker group with ``workers_per_trial`` (`_distributed`). The trial's own `TrialRecord` is the only message
back: sent with every report, and at the end (or in the error of a failed trial).
"""

from ._adapter import RayBackend

__all__ = ["RayBackend"]
