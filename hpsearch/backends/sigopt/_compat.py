"""SigOpt's lite optimizer as it is: numpy 2 (sigoptlite 0.1.2 / libsigopt 1.0.0 were written for numpy<1.23), and
the suggestion it cannot make once a discrete space is sampled through."""

from __future__ import annotations

import traceback
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...session import SearchSession

__all__ = ["create_suggestion", "numpy2_compat"]


class _NumpyWithProduct(types.ModuleType):
    """numpy as seen by two sigoptlite/libsigopt modules: everything forwarded, plus the removed `product`."""

    def __getattr__(self, name: str) -> Any:
        import numpy

        if name == "product":
            return numpy.prod
        return getattr(numpy, name)


def numpy2_compat() -> None:
    """Let sigoptlite 0.1.2 / libsigopt 1.0.0 (written for numpy<1.23) run on numpy 2.

    They call ``numpy.product``, removed in numpy 2.0: sigoptlite when it validates conditionals, libsigopt
    for failure probabilities. Only those two modules get a numpy view with ``product`` restored; numpy
    itself is left untouched.
    """
    import importlib

    for module_name in ("sigoptlite.validators", "libsigopt.compute.probabilistic_failures"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        numpy_ref = getattr(module, "numpy", None)
        stale = isinstance(numpy_ref, types.ModuleType) and not hasattr(numpy_ref, "product")
        if stale and not isinstance(numpy_ref, _NumpyWithProduct):
            # ModuleType declares no ``numpy`` attribute, but these modules do have one (checked above).
            module.numpy = _NumpyWithProduct("numpy")  # type: ignore[attr-defined]


def create_suggestion(experiment: Any, session: SearchSession, driver: str) -> Any | None:
    """The experiment's next suggestion; None when the lite optimizer has no point left to suggest, and then the
    session starts no more trials (the search ends with the trials it has, as a spent budget ends it).

    sigoptlite's optimizer for a space of Int and Categorical parameters only proposes points it has not sampled;
    once every combination was tried its list of candidates is empty and it fails with an IndexError in
    ``next_point``, which would otherwise end the whole search with SigOpt's raw error.
    """
    from sigopt.exception import SigOptException

    try:
        return experiment.suggestions().create()
    except SigOptException as error:
        cause = error.__cause__
        frames = traceback.extract_tb(cause.__traceback__) if isinstance(cause, IndexError) else []
        if driver != "lite" or not frames or frames[-1].name != "next_point":
            raise
    done = len(session.records)
    session.stop_starting(
        f"SigOpt's lite optimizer has no new point to suggest after {done} trial(s): every combination of the "
        f"discrete space (Int and Categorical values) was sampled, so the search stops with {done} of "
        f"{session.n_trials} trials; widen the space, add a Float parameter, or ask for fewer n_trials"
    )
    return None
