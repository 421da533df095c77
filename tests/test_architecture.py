"""The architecture rules of DESIGN.md, checked by ``scripts/architecture.py``: no engine named or imported outside ``hpsearch/backends/``, no import circle (but the lazy ``Trainer.hyperparameter_search``), and no function over a screen (but the few named)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _checks():
    spec = importlib.util.spec_from_file_location("architecture", ROOT / "scripts" / "architecture.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_no_engine_is_named_outside_the_backends():
    checks = _checks()
    assert checks.engine_mentions(checks.modules()) == []


@pytest.mark.slow
def test_there_is_no_import_circle():
    checks = _checks()
    modules = checks.modules()
    circles = [c for c in checks.cycles(checks.graph(modules)) if not checks._package_cycle(c)]
    assert circles == []


def test_the_longest_functions_are_measured_from_the_syntax_tree():
    checks = _checks()
    import inspect

    from hpsearch.backends.base import installed_version

    longest = {name: lines for lines, name in checks.longest_functions(checks.modules(), count=100_000)}
    source, _ = inspect.getsourcelines(installed_version.__wrapped__)
    decorators = sum(line.lstrip().startswith("@") for line in source)
    assert longest["hpsearch.backends.base.installed_version"] == len(source) - decorators


def test_no_function_is_longer_than_a_screen():
    checks = _checks()
    assert checks.long_functions(checks.modules()) == []


def test_the_function_length_check_finds_a_long_function(tmp_path):
    checks = _checks()
    body = "".join(f"        x{i} = {i}\n" for i in range(checks.MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def short():\n    pass\n\n\nclass C:\n    def long(self):\n{body}")
    (problem,) = checks.long_functions({"pkg.long": tmp_path / "long.py"})
    assert problem.startswith(f"pkg.long.C.long has {checks.MAX_FUNCTION_LINES + 1} lines")


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
