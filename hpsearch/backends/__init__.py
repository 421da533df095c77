"""The backend registry: a name -> the adapter class that runs a search on that engine.

Adapters are named by import path and imported on first use, so listing the backends imports no engine.
Adding a backend is one module (a `SearchBackend` subclass) and one line here, or `register_backend` at run time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..errors import SearchConfigError

if TYPE_CHECKING:
    from .base import SearchBackend

__all__ = ["backend_names", "get_backend", "register_backend", "resolve_backend"]

# name -> "module:Class". The order is the order ``backend=None`` tries them in.
_REGISTRY: dict[str, Any] = {
    "optuna": "hpsearch.backends.optuna:OptunaBackend",
    "ray": "hpsearch.backends.ray:RayBackend",
    "sigopt": "hpsearch.backends.sigopt:SigOptBackend",
    "random": "hpsearch.backends.random:RandomBackend",
}


def register_backend(name: str, adapter: str | type[SearchBackend]) -> None:
    """Make ``backend=name`` use ``adapter`` (a `SearchBackend` subclass or its "module:Class" path)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"A backend name must be an identifier such as 'mybackend', got {name!r}.")
    _REGISTRY[name] = adapter


def backend_names() -> list[str]:
    """Every registered backend name, installed or not."""
    return list(_REGISTRY)


def get_backend(name: str) -> type[SearchBackend]:
    """The adapter class registered as ``name`` (its engine may still be missing: see ``ensure_available``)."""
    try:
        target = _REGISTRY[name]
    except (KeyError, TypeError):
        raise SearchConfigError(
            f"backend={name!r} is not a known backend; use one of {backend_names()} or None.", about="backend"
        ) from None
    if isinstance(target, str):
        module, _, attr = target.partition(":")
        target = getattr(importlib.import_module(module), attr)
        _REGISTRY[name] = target
    return target


def resolve_backend(backend: Any) -> type[SearchBackend]:
    """The adapter for ``backend`` (a name, an enum member with that value, or None for the first installed)."""
    if backend is None:
        for name in backend_names():
            cls = get_backend(name)
            if cls.auto_select and cls.is_available():
                return cls
        candidates = [n for n in backend_names() if get_backend(n).auto_select]
        raise SearchConfigError(
            f"No search backend is installed; install one, e.g. `{get_backend(candidates[0]).install_command}` "
            f"(backends: {', '.join(candidates)})."
        )
    cls = get_backend(str(getattr(backend, "value", backend)).lower())
    cls.ensure_available()
    return cls
