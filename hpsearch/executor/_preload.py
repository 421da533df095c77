"""What the forkserver imports once for every worker it forks, and its start (`start_server`).

Each worker needs torch, ``torch._dynamo`` and the trial's code (`PRELOAD`), then whatever its search's settings
refer to (the module of ``model_init``, the datasets' classes, the user's libraries) and what the user's main module
imports (each worker imports that module again, as spawn does). Imported in every worker, the last two cost each
worker as much as torch did; imported once in the server, a worker finds them loaded. `modules_to_preload` reads
them from the pickled settings (the modules a pickle names are the ones loading it imports) and from the main
module's source; the main module itself is never among them (a script without a main guard would run its search
inside the server).

The server imports `PRELOAD` (multiprocessing's preload), and `_server_imports` among them imports the rest, named
in `VARIABLE` of the environment the server starts with: one that fails to import is skipped there (multiprocessing
would let the server die of anything but an ImportError), and the worker that needs it reports the error.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import pickletools
import sys
import threading
import tokenize
from collections.abc import Iterator
from typing import Any

__all__ = ["PRELOAD", "VARIABLE", "modules_to_preload", "start_server"]

_PACKAGE = __name__.split(".")[0]

#: Imported by the server for every search: torch, ``torch._dynamo`` (which torch's optimizers import at their first
#: construction), the trial's code (`_child` imports these again: no-ops once loaded) and `_server_imports`, which
#: imports the search's own modules.
PRELOAD = (
    "torch",
    "torch._dynamo",
    f"{_PACKAGE}.callback",
    f"{_PACKAGE}.runner",
    f"{_PACKAGE}.executor._child",
    f"{_PACKAGE}.executor._server_imports",
)

#: The environment variable that names the modules of the search (comma-separated) to the server at its start.
VARIABLE = "HPSEARCH_FORKSERVER_PRELOAD"

#: Pickle opcodes read by `_pickled_modules` at most: a settings pickle of many small objects (a dataset held as a
#: list of dicts) is not read to its end; its module references come first in practice (the trainer, model_init).
_MAX_OPCODES = 200_000

_MAIN = ("__main__", "__mp_main__")
_STRINGS = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE"})
_GETS = frozenset({"BINGET", "LONG_BINGET", "GET"})
_PUTS = frozenset({"BINPUT", "LONG_BINPUT", "PUT"})
_NO_STACK_CHANGE = frozenset({"PROTO", "FRAME", "MEMOIZE", *_PUTS})

_start_lock = threading.Lock()


def modules_to_preload(blob: bytes) -> list[str]:
    """The modules loading the pickle ``blob`` imports, then those the main module imports, in that order: only
    modules this process has loaded (nothing it failed or never tried to import), without the main module, those
    loaded for every search (`PRELOAD`) and duplicates."""
    found = dict.fromkeys([*_pickled_modules(blob), *_main_imports()])
    skip = {*_MAIN, *PRELOAD, "builtins"}
    return [name for name in found if name in sys.modules and name not in skip]


def _pickled_modules(blob: bytes) -> list[str]:
    """The modules a pickle's GLOBAL and STACK_GLOBAL opcodes name (the module string pushed, directly or from the
    memo, just before the qualified name)."""
    modules: dict[str, None] = {}
    memo: dict[Any, Any] = {}
    pushed: list[Any] = [None, None]  # the values of the last two pushes (None: not a string)
    try:
        for count, (opcode, arg, _) in enumerate(pickletools.genops(blob)):
            name = opcode.name
            if count >= _MAX_OPCODES or name == "STOP":
                break
            if name == "GLOBAL":  # protocols 0-3: "module qualname"
                modules[str(arg).split(" ", 1)[0]] = None
            elif name == "STACK_GLOBAL":
                if isinstance(pushed[-2], str):
                    modules[pushed[-2]] = None
                pushed.append(None)
            elif name == "MEMOIZE":
                memo[len(memo)] = pushed[-1]
            elif name in _PUTS:
                memo[arg] = pushed[-1]
            elif name in _STRINGS:
                pushed.append(arg)
            elif name in _GETS:
                pushed.append(memo.get(arg))
            elif name not in _NO_STACK_CHANGE:
                pushed.append(None)
            del pushed[:-2]
    except Exception:  # a pickle this reader does not follow: the modules found so far
        pass
    return list(modules)


def _main_imports() -> list[str]:
    """The modules the main module's top-level statements import (read from its source, not run): those an
    ``if __name__ == "__main__":`` block imports are left out, as a worker never runs that block."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not isinstance(path, str) or not path.endswith(".py"):
        return []  # an interactive session or a notebook: nothing a worker re-imports
    try:
        with tokenize.open(path) as source:
            tree = ast.parse(source.read(), path)
    except (OSError, SyntaxError, ValueError):
        return []
    package = getattr(main, "__package__", None) or ""
    names: list[str] = []
    for node in _top_level(tree.body):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            try:
                base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            except (ImportError, ValueError):
                continue
            names += [base, *(f"{base}.{alias.name}" for alias in node.names)]  # a name may be a submodule
    return names


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of ``body`` a module's import runs, those under ``if``/``try``/``with`` too, but not inside
    functions or classes, nor an ``if __name__ == "__main__":`` block."""
    for node in body:
        if isinstance(node, ast.If) and _is_main_guard(node.test):
            yield from _top_level(node.orelse)
        elif isinstance(node, (ast.If, ast.For, ast.While, ast.With)):
            yield from _top_level(node.body + node.orelse if not isinstance(node, ast.With) else node.body)
        elif isinstance(node, ast.Try):
            handlers = [stmt for handler in node.handlers for stmt in handler.body]
            yield from _top_level(node.body + handlers + node.orelse + node.finalbody)
        else:
            yield node


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and {ast.dump(test.left), ast.dump(test.comparators[0])}
        == {ast.dump(ast.Name("__name__", ast.Load())), ast.dump(ast.Constant("__main__"))}
    )


def start_server(context: Any, blob: bytes) -> None:
    """Start ``context``'s forkserver (if it is one and none runs yet; `_pool.start_context` set its `PRELOAD`) with
    the modules of the settings pickled in ``blob`` too. A running server keeps what it has loaded: its workers import the rest themselves. A server
    that cannot start here is left to the first worker's start, which reports why (the pool's error path)."""
    if context.get_start_method() != "forkserver":
        return
    from multiprocessing import forkserver

    with _start_lock:
        os.environ[VARIABLE] = ",".join(modules_to_preload(blob))
        try:
            forkserver.ensure_running()
        # e.g. spawn's refusal inside an unguarded script's own import: the first worker's start says why
        except Exception:
            pass
        finally:
            os.environ.pop(VARIABLE, None)
