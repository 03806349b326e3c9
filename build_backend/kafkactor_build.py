"""kafkactor's build backend: setuptools', with the compiled build's two rules added.

- ``KAFKACTOR_MYPYC=1``: mypy (which carries mypyc) joins the wheel's build requirements, so an
  isolated build (plain ``pip install .``) has the compiler of setup.py at hand; and so do
  kafkactor's own dependencies (setup.cfg's install_requires), because mypyc type-checks the
  compiled modules with everything they import, as mypy does in development.
- An editable install is always the pure build: the flag is dropped while it is built, so the
  source tree stays what runs.
"""

from __future__ import annotations

import configparser
import os
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (
    build_sdist,
    build_wheel,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

__all__ = [
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_editable",
    "prepare_metadata_for_build_wheel",
]

FLAG = "KAFKACTOR_MYPYC"
MYPYC_REQUIREMENT = "mypy>=1.10"


def install_requires(setup_cfg: Path = Path("setup.cfg")) -> list[str]:
    """setup.cfg's install_requires (its comment lines left out)."""
    parser = configparser.ConfigParser()
    parser.read(setup_cfg, encoding="utf-8")
    lines = parser.get("options", "install_requires", fallback="").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def get_requires_for_build_wheel(
    config_settings: dict[str, str | list[str]] | None = None,
) -> list[str]:
    requires: list[str] = _setuptools.get_requires_for_build_wheel(config_settings)
    if os.environ.get(FLAG, "") == "1":
        requires = [*requires, MYPYC_REQUIREMENT, *install_requires()]
    return requires


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, str | list[str]] | None = None,
    metadata_directory: str | None = None,
) -> str:
    saved = os.environ.pop(FLAG, None)
    try:
        built: str = _setuptools.build_editable(
            wheel_directory, config_settings, metadata_directory
        )
        return built
    finally:
        if saved is not None:
            os.environ[FLAG] = saved
