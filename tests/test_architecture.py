"""The architecture targets of DESIGN.md, checked by ``scripts/architecture.py``: module sizes, no engine named or
imported outside ``hpsearch/backends/``, and no import circle (but the lazy ``Trainer.hyperparameter_search``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _checks():
    spec = importlib.util.spec_from_file_location("architecture", ROOT / "scripts" / "architecture.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_no_module_is_too_large():
    checks = _checks()
    assert checks.sizes(checks.modules()) == []


def test_no_engine_is_named_outside_the_backends():
    checks = _checks()
    assert checks.engine_mentions(checks.modules()) == []


def test_there_is_no_import_circle():
    checks = _checks()
    modules = checks.modules()
    circles = [c for c in checks.cycles(checks.graph(modules)) if not checks._package_cycle(c)]
    assert circles == []


def test_the_circle_check_finds_a_circle():
    checks = _checks()
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert checks.cycles(edges) == [["a", "b", "c"]]


def test_a_fourth_backend_is_one_module_and_one_registry_line():
    registry = (ROOT / "hpsearch" / "backends" / "__init__.py").read_text()
    assert '"random": "hpsearch.backends.random:RandomBackend"' in registry
    import hpsearch

    assert "random" in hpsearch.backend_names()
    assert hpsearch.get_backend("random").name == "random"
