"""The zk_model package's module structure, read from its source with `ast`.

No import cycle among its modules, counting every import statement wherever it stands (module
level, under `if TYPE_CHECKING:`, inside functions); the embedded client does not import the
embedded server at all; and the client and the server use only each other's public names,
through the contract in `kafkactor.zk_model.connection`.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

import kafkactor.zk_model

PACKAGE = kafkactor.zk_model.__name__
PACKAGE_DIR = Path(kafkactor.zk_model.__file__).parent


def _module_files() -> dict[str, Path]:
    """Every module of the package by dotted name (the package itself for `__init__.py`)."""
    modules: dict[str, Path] = {}
    for path in sorted(PACKAGE_DIR.glob("*.py")):
        name = PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"
        modules[name] = path
    return modules


MODULES = _module_files()


def _tree(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text(encoding="utf-8"), filename=str(MODULES[module]))


def _base_of(module: str, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` names, relative forms resolved."""
    if node.level == 0:
        return node.module or ""
    package = module if MODULES[module].stem == "__init__" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def imports_of(module: str) -> set[str]:
    """The package's modules that `module` imports, wherever the import statement stands.

    `from pkg import name` imports the submodule `pkg.name` when there is one, else (a name
    defined in `pkg/__init__.py`) the package itself. Importing a submodule also runs its
    package's `__init__`, but that implicit import is not counted: the `__init__` re-exports
    every module, so counting it would put each of them in a cycle with it.
    """
    found: set[str] = set()
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            base = _base_of(module, node)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in MODULES:
                    found.add(submodule)
                elif base in MODULES:
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


def test_the_cycle_finder_finds_cycles_and_only_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"b", "c"}}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"b"}}) == ["b", "c", "b"]


def test_the_import_walk_sees_imports_under_type_checking_and_in_functions() -> None:
    assert f"{PACKAGE}.client" in imports_of(f"{PACKAGE}.embedded")
    assert f"{PACKAGE}.paths" in imports_of(f"{PACKAGE}.model")  # `from pkg import module`
    assert f"{PACKAGE}.embedded" in imports_of(PACKAGE)
    # every import in the tree counts, however deeply nested
    nested = [
        node
        for node in ast.walk(_tree(PACKAGE))
        if isinstance(node, ast.ImportFrom) and node.module == "kazoo.client"
    ]
    assert nested, "connect() imports KazooClient inside the function"


def test_no_import_cycle_among_the_zk_model_modules() -> None:
    graph = {module: imports_of(module) for module in MODULES}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_client_does_not_import_the_server() -> None:
    assert f"{PACKAGE}.embedded" not in imports_of(f"{PACKAGE}.client")
    assert f"{PACKAGE}.connection" in imports_of(f"{PACKAGE}.client")
    assert f"{PACKAGE}.connection" in imports_of(f"{PACKAGE}.embedded")


@pytest.mark.parametrize("module", [f"{PACKAGE}.client", f"{PACKAGE}.embedded"])
def test_client_and_server_use_only_public_names_of_others(module: str) -> None:
    """`x._name` only for x = self / cls, and no `from kafkactor... import _name`."""
    private: list[str] = []
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            if not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}):
                private.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom) and _base_of(module, node).startswith("kafkactor"):
            private.extend(
                f"line {node.lineno}: import {alias.name}"
                for alias in node.names
                if _is_private(alias.name)
            )
    assert private == []


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_logging_goes_through_tracing_not_structlog(module: str) -> None:
    """A library prints nothing of its own accord: structlog's default configuration writes to
    stdout, so the package takes its loggers from `kafkactor.tracing`, which decides."""
    imported: set[str] = set()
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.Import):
            imported.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.partition(".")[0])
    assert "structlog" not in imported
    assert "logging" not in imported
