"""kafkactor's build: the metadata is in setup.cfg; this file adds only the compiled build.

With ``KAFKACTOR_MYPYC=1`` in the environment, a wheel or a regular install compiles the modules
of ``kafkactor.build_info.MYPYC_MODULES`` with mypyc (the build backend in ``build_backend/``
adds mypy to the build requirements then). Without a C compiler or without mypyc, it says so on
stderr and builds the pure package. Editable installs are always pure (the backend drops the
flag for them): the source tree is the reference the test suite runs.
"""

from __future__ import annotations

import ast
import os
import shlex
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

from setuptools import setup

FLAG = "KAFKACTOR_MYPYC"
HERE = Path(__file__).resolve().parent


def mypyc_modules() -> list[str]:
    """`MYPYC_MODULES` of kafkactor/build_info.py, read as a literal (nothing is imported)."""
    tree = ast.parse((HERE / "kafkactor" / "build_info.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == "MYPYC_MODULES"
            and node.value is not None
        ):
            return list(ast.literal_eval(node.value))
    raise RuntimeError("kafkactor/build_info.py has no MYPYC_MODULES")


def _pure(reason: str) -> list[Any]:
    print(f"kafkactor: {FLAG}=1 but {reason}; building the pure package", file=sys.stderr)
    return []


# the commands that only describe the package (pip's metadata step, an sdist): nothing to compile
DESCRIBING = frozenset({"egg_info", "dist_info", "sdist", "--name", "--version"})


def ext_modules() -> list[Any]:
    if os.environ.get(FLAG, "") != "1" or DESCRIBING.intersection(sys.argv[1:]):
        return []
    # the compiler setuptools would run: $CC, else the one Python was built with
    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")[:1]
    if not compiler or shutil.which(compiler[0]) is None:
        return _pure(f"no C compiler ({' '.join(compiler) or 'CC unset'})")
    try:
        from mypyc.build import mypycify
    except ImportError:
        return _pure("mypyc is not installed (pip install mypy)")
    paths = [str(Path(*name.split("."))) + ".py" for name in mypyc_modules()]
    return list(mypycify(paths, opt_level="3"))


setup(ext_modules=ext_modules())
