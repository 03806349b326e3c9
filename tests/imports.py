"""Reading a package's import graph from its source with `ast` (for the layout tests).

Every import statement counts, wherever it stands (module level, under `if TYPE_CHECKING:`,
inside functions).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path


def module_files(package: str, package_dir: Path) -> dict[str, Path]:
    """Every module below `package_dir` by dotted name (a package by its `__init__.py`)."""
    modules: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = [package, *path.relative_to(package_dir).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def base_of(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` names, relative forms resolved."""
    if node.level == 0:
        return node.module or ""
    package = module if path.stem == "__init__" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def imports_of(module: str, modules: Mapping[str, Path]) -> set[str]:
    """The modules of `modules` that `module` imports, wherever the import statement stands.

    `from pkg import name` imports the submodule `pkg.name` when there is one, else (a name
    defined in `pkg/__init__.py`) the package itself. Importing a submodule also runs its
    package's `__init__`, but that implicit import is not counted: an `__init__` re-exports
    its modules, so counting it would put each of them in a cycle with it.
    """
    path = modules[module]
    found: set[str] = set()
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = base_of(module, path, node)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in modules:
                    found.add(submodule)
                elif base in modules:
                    found.add(base)
    found.discard(module)
    return found


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as [a, b, ..., a], or None when it has none (depth-first search)."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(node: str) -> list[str] | None:
        path.append(node)
        on_path.add(node)
        for target in sorted(graph.get(node, set())):
            if target in on_path:
                return [*path[path.index(target) :], target]
            if target not in done:
                cycle = visit(target)
                if cycle is not None:
                    return cycle
        path.pop()
        on_path.discard(node)
        done.add(node)
        return None

    for start in sorted(graph):
        if start not in done:
            cycle = visit(start)
            if cycle is not None:
                return cycle
    return None
