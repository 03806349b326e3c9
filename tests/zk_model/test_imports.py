"""The zk_model package's module structure, read from its source with `ast`.

No import cycle among its modules, counting every import statement wherever it stands (module
level, under `if TYPE_CHECKING:`, inside functions); the embedded client does not import the
embedded server at all; and the client and the server use only each other's public names,
through the contract in `kafkactor.zk_model.connection`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kafkactor.zk_model
from tests.imports import base_of, find_cycle, module_files, parse
from tests.imports import imports_of as package_imports

PACKAGE = kafkactor.zk_model.__name__
PACKAGE_DIR = Path(kafkactor.zk_model.__file__).parent


MODULES = module_files(PACKAGE, PACKAGE_DIR)


def _tree(module: str) -> ast.Module:
    return parse(MODULES[module])


def imports_of(module: str) -> set[str]:
    """The package's modules that `module` imports (tests.imports.imports_of)."""
    return package_imports(module, MODULES)


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
        elif isinstance(node, ast.ImportFrom) and base_of(module, MODULES[module], node).startswith(
            "kafkactor"
        ):
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
