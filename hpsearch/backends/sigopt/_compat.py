"""numpy 2 for SigOpt's lite optimizer (sigoptlite 0.1.2 / libsigopt 1.0.0 were written for numpy<1.23)."""

from __future__ import annotations

import types
from typing import Any

__all__ = ["numpy2_compat"]


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
