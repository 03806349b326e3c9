"""`pip install .` (not editable) gives a working kafkactor: every package, the data files, the
command.

The wheel is built from a copy of the checkout (a build in the checkout would write `build/`
and `*.egg-info` there, and a stale `build/lib` can carry deleted modules into the wheel),
offline, with the build backend this environment has (the `test` extra installs it). It is
installed into a fresh virtual environment that has no pip and no network: the wheel goes in
with `--no-deps`, and the runtime dependencies come from this environment's site-packages,
appended to the new one's `sys.path` by a `.pth` line. A plain path line adds the directory
only: the `.pth` files in it, this checkout's editable install among them, are not run, so
kafkactor itself can only come from the wheel, which the tests check module by module. Every
command runs with its working directory outside the checkout and no PYTHONPATH.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# What the build reads: the metadata (README.md is the long description), setup.py and the
# build backend (build_backend/, named by pyproject.toml), and the package.
BUILD_INPUTS = ("setup.cfg", "pyproject.toml", "README.md", "setup.py")
DATA_FILES = (
    "kafkactor/events.schema.json",
    "kafkactor/py.typed",
    "kafkactor/analytics/log4j2.properties",
)
BUILD_S = 120  # bound on each subprocess; the whole module takes ~15 s


@dataclass(frozen=True)
class Installed:
    source: Path  # the copy of the checkout the wheel was built from
    wheel: Path
    venv: Path
    python: Path
    scripts: Path
    workdir: Path  # outside the checkout: the working directory of every command


def _run(command: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=BUILD_S, check=False
    )
    assert done.returncode == 0, (
        f"{' '.join(command)} exited {done.returncode}\n"
        f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"
    )
    return done.stdout


def _clean_env() -> dict[str, str]:
    """This process's environment without what would put the checkout on the new venv's path."""
    drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH"}
    drop.add("KAFKACTOR_MYPYC")  # the wheel tested here is the pure build
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _require_build_backend() -> None:
    missing = [name for name in ("setuptools", "wheel") if importlib.util.find_spec(name) is None]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} missing from {sys.prefix}: the `test` extra installs the build "
            "backend this test builds with offline (./dev test reinstalls it)"
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    _require_build_backend()
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    source.mkdir()
    for name in BUILD_INPUTS:
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(
        REPO / "build_backend",
        source / "build_backend",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    shutil.copytree(
        REPO / "kafkactor",
        source / "kafkactor",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"),
    )
    dist = root / "dist"
    env = _clean_env()
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--wheel-dir",
            str(dist),
            str(source),
        ],
        cwd=root,
        env=env,
    )
    (wheel,) = dist.glob("kafkactor-*.whl")

    target = root / "venv"
    venv.create(target, with_pip=False, symlinks=True)  # pip runs from here: see below
    python = target / "bin" / "python"
    # The dev environment's pip installs into the new one (`--python`), from the wheel alone.
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        cwd=root,
        env=env,
    )
    paths = json.loads(
        _run(
            [str(python), "-c", "import json, sysconfig; print(json.dumps(sysconfig.get_paths()))"],
            cwd=root,
            env=env,
        )
    )
    ours = sysconfig.get_paths()
    dependencies = dict.fromkeys([ours["purelib"], ours["platlib"]])  # in order, once each
    (Path(paths["purelib"]) / "kafkactor_test_dependencies.pth").write_text(
        "".join(f"{path}\n" for path in dependencies), encoding="utf-8"
    )
    workdir = root / "work"
    workdir.mkdir()
    return Installed(source, wheel, target, python, Path(paths["scripts"]), workdir)


@pytest.mark.timeout(BUILD_S)
def test_the_wheel_holds_every_package_module_and_data_file(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    modules = sorted(
        path.relative_to(installed.source).as_posix()
        for path in (installed.source / "kafkactor").rglob("*.py")
    )
    packages = [name for name in modules if name.endswith("/__init__.py")]
    # the subpackages of the layout, each a package of its own
    for package in ("actors/runtime", "actors/purgatory", "actors/replication", "clients"):
        assert f"kafkactor/{package}/__init__.py" in packages
    assert "kafkactor/actors/controller/__init__.py" in packages
    assert "kafkactor/testing/__init__.py" in packages
    assert [name for name in modules if name not in names] == []
    assert [name for name in DATA_FILES if name not in names] == []
    # nothing but the package and its metadata: no tests, no stray top-level modules
    assert {name.split("/")[0] for name in names} == {
        "kafkactor",
        installed.wheel.name.split("-py3")[0] + ".dist-info",
    }


# Run by the new venv's python: every kafkactor module imports from the wheel, and the data
# files are readable through importlib.resources as a program would read them.
IMPORT_CHECK = textwrap.dedent(
    """
    import importlib, json, pkgutil, sys
    from importlib.metadata import version
    from importlib.resources import files

    import kafkactor
    from kafkactor import Cluster

    modules = ["kafkactor"] + [
        info.name for info in pkgutil.walk_packages(kafkactor.__path__, "kafkactor.")
    ]
    files_of = {name: importlib.import_module(name).__file__ for name in modules}
    root = files("kafkactor")
    print(json.dumps({
        "prefix": sys.prefix,
        "cluster": f"{Cluster.__module__}.{Cluster.__qualname__}",
        "version": kafkactor.__version__,
        "installed_version": version("kafkactor"),
        "files": files_of,
        "data": {
            name: (root.joinpath(*name.split("/")[1:])).read_text(encoding="utf-8")
            for name in sys.argv[1:]
        },
    }))
    """
)


@pytest.mark.timeout(BUILD_S)
def test_kafkactor_imports_from_the_installed_wheel_with_its_data_files(
    installed: Installed,
) -> None:
    command = [str(installed.python), "-c", IMPORT_CHECK, *DATA_FILES]
    report = json.loads(_run(command, cwd=installed.workdir, env=_clean_env()))
    venv_dir = installed.venv.resolve()
    assert Path(report["prefix"]).resolve() == venv_dir
    assert report["cluster"] == "kafkactor.testing.cluster.Cluster"
    assert report["version"] == report["installed_version"] != "0+unknown"
    files_of: dict[str, str] = report["files"]
    assert {"kafkactor.actors.replication", "kafkactor.clients", "kafkactor.testing"} <= set(
        files_of
    )
    outside = {
        name: path
        for name, path in files_of.items()
        if venv_dir not in Path(path).resolve().parents
    }
    assert outside == {}, "imported from outside the new venv (the checkout or its editable pth)"
    for name in DATA_FILES:  # as built, byte for byte (py.typed is empty)
        assert report["data"][name] == (installed.source / name).read_text(encoding="utf-8")


@pytest.mark.timeout(BUILD_S)
def test_the_installed_command_runs_a_short_demo(installed: Installed) -> None:
    events = installed.workdir / "events.jsonl"
    out = _run(
        [
            str(installed.scripts / "kafkactor"),
            "demo",
            "--seconds",
            "2",
            "--no-analyze",
            "--events",
            str(events),
        ],
        cwd=installed.workdir,
        env=_clean_env(),
    )
    assert "acks=all records acked" in out
    assert events.stat().st_size > 0


@pytest.mark.timeout(BUILD_S)
def test_the_compiled_build_without_a_c_compiler_is_the_pure_one(
    installed: Installed, tmp_path: Path
) -> None:
    env = _clean_env() | {"KAFKACTOR_MYPYC": "1", "CC": str(tmp_path / "no-such-cc")}
    command = [sys.executable, "-m", "pip", "wheel", "--verbose", "--no-deps"]
    command += ["--no-build-isolation", "--no-index", "--wheel-dir", str(tmp_path / "dist")]
    done = subprocess.run(
        [*command, str(installed.source)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_S,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    (wheel,) = (tmp_path / "dist").glob("kafkactor-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl"), wheel.name  # no extension module in it
    assert "KAFKACTOR_MYPYC=1 but no C compiler" in output, output[-4000:]
