"""Which build the suite runs, and what the compiled one must be.

The default run tests the source tree, the pure build: no module may load compiled (a stray
extension module in the tree would shadow its source). `./dev test` then runs this file with the
unit tests of the compiled modules against the compiled build (KAFKACTOR_EXPECT_COMPILED=1, the
wheel built with KAFKACTOR_MYPYC=1 on PYTHONPATH): there, every module of MYPYC_MODULES must be
an extension module, or those tests would pass on Python source and prove nothing.
"""

from __future__ import annotations

import ast
import importlib
import os
from pathlib import Path

import pytest

from kafkactor import build_info
from kafkactor.actors.purgatory.purgatory import DelayedOperation
from kafkactor.timer import TimerTask

EXPECT_COMPILED = os.environ.get("KAFKACTOR_EXPECT_COMPILED") == "1"
REPO = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(30)
def test_the_build_is_the_one_expected() -> None:
    if EXPECT_COMPILED:
        assert build_info.compiled_modules() == list(build_info.MYPYC_MODULES)
        wanted = f"compiled build: {len(build_info.MYPYC_MODULES)} modules by mypyc"
        assert build_info.describe() == wanted
    else:
        assert build_info.compiled_modules() == []
        assert build_info.describe() == "pure build"


@pytest.mark.timeout(30)
def test_setup_py_reads_the_same_modules_and_each_exists() -> None:
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))
    namespace: dict[str, object] = {}
    kept = ast.FunctionDef | ast.Import | ast.ImportFrom
    functions: list[ast.stmt] = [n for n in tree.body if isinstance(n, kept)]
    module = ast.Module(body=functions, type_ignores=[])
    exec(compile(module, "setup.py", "exec"), namespace)  # its imports and functions, no setup()
    namespace["HERE"] = REPO
    read = namespace["mypyc_modules"]
    assert callable(read)
    assert read() == list(build_info.MYPYC_MODULES)
    for name in build_info.MYPYC_MODULES:
        importlib.import_module(name)
        assert (REPO / Path(*name.split("."))).with_suffix(".py").is_file(), name


@pytest.mark.timeout(30)
def test_python_subclasses_of_the_compiled_classes_run() -> None:
    """TimerTask and DelayedOperation are subclassed in Python (mypyc_attr allows it)."""

    class Task(TimerTask):
        def __init__(self) -> None:
            super().__init__(5)
            self.ran = False

        def run(self) -> None:
            self.ran = True

    class Operation(DelayedOperation):
        def try_complete(self) -> bool:
            return self.force_complete()

        def on_complete(self) -> None:
            self.done = True

    task = Task()
    task.run()
    assert task.ran and task.delay_ms == 5
    operation = Operation(10)
    assert operation.try_complete() and operation.done and operation.is_completed()
