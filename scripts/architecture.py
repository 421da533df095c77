"""Prints the architecture rules of DESIGN.md and exits 1 when one is broken.

- no backend name and no backend-library import in hpsearch/*.py outside hpsearch/backends/;
- no import circle between modules (imports inside functions count), except the lazy
  ``Trainer.hyperparameter_search`` delegate from trainer/ to hpsearch/;
- a function fits on one screen (STYLE.md 11): none over `MAX_FUNCTION_LINES`.

It also prints the largest modules and the longest functions, for a reader's information. Modules have no line cap:
concepts choose the layout (STYLE.md 11).

Run: ``python scripts/architecture.py`` (``tests/test_architecture.py`` runs the same checks).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("hpsearch", "trainer", "spaces")
ENGINES = ("optuna", "ray", "sigopt", "sigoptlite")
#: The one allowed circle: Trainer.hyperparameter_search imports hpsearch lazily and delegates.
ALLOWED_EDGES = {("trainer._trainer", "hpsearch")}
#: A function longer than this does not fit on one screen: split it by concept (a state object, one function a step).
MAX_FUNCTION_LINES = 80


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            out[module_name(path)] = path
    return out


def longest_functions(mods: dict[str, Path], count: int = 8) -> list[tuple[int, str]]:
    """The ``count`` longest functions and methods as (lines, "module.qualname"), longest first."""
    found: list[tuple[int, str]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}.{child.name}"
                if not isinstance(child, ast.ClassDef):
                    found.append(((child.end_lineno or child.lineno) - child.lineno + 1, name))
                walk(child, name)

    for name, path in mods.items():
        walk(ast.parse(path.read_text(encoding="utf-8")), name)
    return sorted(found, reverse=True)[:count]


def long_functions(mods: dict[str, Path]) -> list[str]:
    """The functions over `MAX_FUNCTION_LINES` lines, as problems."""
    return [
        f"{name} has {lines} lines (at most {MAX_FUNCTION_LINES}): split it by concept"
        for lines, name in longest_functions(mods, count=sys.maxsize)
        if lines > MAX_FUNCTION_LINES
    ]


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """Ids of the import nodes under ``if TYPE_CHECKING:`` (never executed: not part of the import graph)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                out.update(id(n) for n in ast.walk(child))
    return out


def _imports(name: str, path: Path, known: dict[str, Path] | None = None) -> set[str]:
    """Modules ``name`` imports at run time (at the top or inside functions; not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:
                full = f"{prefix}.{alias.name}"
                # "from pkg import mod" imports the module; "from pkg import name" imports pkg itself.
                out.add(full if known is not None and full in known else prefix)
    return out


def engine_mentions(mods: dict[str, Path]) -> list[str]:
    problems = []
    word = re.compile(r"\b(" + "|".join(ENGINES) + r")\b", re.IGNORECASE)
    for name, path in mods.items():
        if not name.startswith("hpsearch.") or name.startswith("hpsearch.backends") or name.count(".") != 1:
            continue
        for module in _imports(name, path):
            if module.split(".")[0] in ENGINES:
                problems.append(f"{path.relative_to(ROOT)} imports {module}")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if word.search(line):
                problems.append(f"{path.relative_to(ROOT)}:{number} names an engine: {line.strip()[:80]}")
    return problems


def graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {name: set() for name in mods}
    for name, path in mods.items():
        for target in _imports(name, path, mods):
            # "from . import x" names a module or an attribute: take the longest known module.
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != name and (name, target) not in ALLOWED_EDGES:
                edges[name].add(target)
    # A module's package __init__ runs first: importing a.b imports a, which is not a circle of its own.
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    # Deep import chains recurse past the default limit; restored after, as a test may run in the same process.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in edges:
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def _package_cycle(component: list[str]) -> bool:
    """A package and the modules its __init__ re-exports import each other by construction (a facade)."""
    packages = [m for m in component if any(o.startswith(m + ".") for o in component)]
    return len(packages) == 1 and all(m == packages[0] or m.startswith(packages[0] + ".") for m in component)


def main() -> int:
    mods = modules()
    edges = graph(mods)
    circles = [c for c in cycles(edges) if not _package_cycle(c)]
    report = {
        "engine names outside hpsearch/backends": engine_mentions(mods),
        "import circles": [" <-> ".join(c) for c in circles],
        f"functions over {MAX_FUNCTION_LINES} lines": long_functions(mods),
    }
    failed = False
    for title, problems in report.items():
        print(f"{title}: {'ok' if not problems else f'{len(problems)} problem(s)'}")
        for problem in problems:
            print(f"  {problem}")
        failed |= bool(problems)
    largest = sorted(((len(p.read_text().splitlines()), n) for n, p in mods.items()), reverse=True)[:5]
    print("largest modules: " + ", ".join(f"{n} ({lines})" for lines, n in largest))
    print("longest functions: " + ", ".join(f"{n} ({lines})" for lines, n in longest_functions(mods)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
