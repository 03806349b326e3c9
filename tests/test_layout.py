"""The package's shape, read from its source: what the wheel and the layout rules rely on.

- every directory of the package is a package (an `__init__.py`), so `packages = find:` puts
  it in the wheel;
- no import cycle among kafkactor's modules, counting every import statement wherever it
  stands (module level, under `if TYPE_CHECKING:`, inside functions);
- a module over 500 lines is one that docs/architecture.md names, with its reason.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import kafkactor
from tests.imports import find_cycle, imports_of, module_files

pytestmark = pytest.mark.timeout(30)

PACKAGE_DIR = Path(kafkactor.__file__).parent
MODULES = module_files("kafkactor", PACKAGE_DIR)
ARCHITECTURE = PACKAGE_DIR.parent / "docs" / "architecture.md"
LONG = 500


def test_every_directory_of_the_package_is_a_package() -> None:
    directories = {
        path.parent for path in PACKAGE_DIR.rglob("*.py") if "__pycache__" not in path.parts
    }
    missing = sorted(
        str(d.relative_to(PACKAGE_DIR)) for d in directories if not (d / "__init__.py").exists()
    )
    assert not missing, f"directories without __init__.py (left out of the wheel): {missing}"


def test_no_import_cycle_among_kafkactors_modules() -> None:
    graph = {module: imports_of(module, MODULES) for module in MODULES}
    assert (
        "kafkactor.actors.replication.config"
        in graph["kafkactor.actors.replication.replica_manager"]
    )
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_long_modules_are_the_ones_the_architecture_page_explains() -> None:
    long = {
        str(path.relative_to(PACKAGE_DIR))
        for path in MODULES.values()
        if len(path.read_text(encoding="utf-8").splitlines()) > LONG
    }
    section = ARCHITECTURE.read_text(encoding="utf-8").split("## Module sizes", 1)[1]
    section = section.split("\n## ", 1)[0]
    explained = set(re.findall(r"^\| `([\w/]+\.py)` \|", section, flags=re.MULTILINE))
    assert long <= explained, f"over {LONG} lines with no reason given: {sorted(long - explained)}"
    assert explained <= long, f"explained but no longer long: {sorted(explained - long)}"
